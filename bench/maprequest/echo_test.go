package maprequest

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

func TestServeEchoAnswersWithTheNonce(t *testing.T) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ServeEcho(conn, EchoSizes{Reply: 40, Notify: 50}) }()
	client, err := net.DialUDP("udp4", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reqs, err := newRequests(1, newPrefixes(1), client.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	req := bytes.Clone(reqs.msg(0))
	putNonce(req, 0x0102030405060708)
	regs, err := newRegisters(newPrefixes(3))
	if err != nil {
		t.Fatal(err)
	}
	// A datagram too short to hold a nonce, or of another type, gets no
	// answer; the Map-Request and the Map-Register do.
	for _, b := range [][]byte{{0x80}, make([]byte, 100), req, regs.msg(2)} {
		if _, err := client.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply := make([]byte, 100)
	n, err := client.Read(reply)
	if err != nil {
		t.Fatal(err)
	}
	nonce, negative, ok := readReply(reply[:n])
	if n != 40 || !ok || negative || nonce != 0x0102030405060708 {
		t.Errorf("reply %x: nonce %#x, negative %v, ok %v", reply[:n], nonce, negative, ok)
	}
	if n, err = client.Read(reply); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x40, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3}; n != 50 || !bytes.Equal(reply[:12], want) {
		t.Errorf("notify %x, want 50 bytes starting %x (Map-Notify, nonce 3)", reply[:n], want)
	}
	conn.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeEcho after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("ServeEcho did not return after Close")
	}
	if err := ServeEcho(conn, EchoSizes{Reply: 3, Notify: 50}); err == nil || !strings.Contains(err.Error(), "reply sizes 3 and 50") {
		t.Errorf("ServeEcho with 3-byte replies: %v", err)
	}
}

func TestOptionsDefaultsAndErrors(t *testing.T) {
	o := Options{Reference: []string{"echo"}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Prefixes != DefaultPrefixes || o.Duration != DefaultDuration || o.Window != DefaultWindow || o.ServerCPUs != 1 || o.flows() != 1 {
		t.Errorf("defaults: %+v", o)
	}
	if o := (Options{ServerCPUs: 3}); o.flows() != 3*FlowsPerCPU {
		t.Errorf("%d flows for 3 CPUs", o.flows())
	}
	bad := Options{Prefixes: -1, Duration: time.Millisecond, Window: ringSize, ServerCPUs: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"prefixes: -1", "duration: 1ms", "window: 2097152", "server CPUs: -1", "reference: no command"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestWriteText(t *testing.T) {
	r := &Result{Prefixes: 1000, Seconds: 5, Window: 128}
	r.MapRegister = RegisterResult{Count: 1000, PerSecond: 150_000, ReferencePerSecond: 160_000, RatioToReference: 0.9375,
		TargetRatio: TargetRegisterRatio, Met: true}
	r.MapRequest = RequestResult{MaxPerSecond: 123_456.4, ReferencePerSecond: 246_912.8, RatioToReference: 0.5,
		TargetRatio: TargetRequestRatio}
	r.Latency = LatencyResult{Rate: 61_728, P99Ratio: 1.5, TargetP99Ratio: TargetP99Ratio, Met: true}
	r.Latency.P99, r.Latency.Reference.P99 = 850.5, 567
	r.Environment = EnvironmentInfo{ServerCPUs: 2, Flows: 2048, SharedCPUs: true}
	r.Memory = MemoryResult{HeapBytesPerPrefix: 600.4, RSSBytesPerPrefix: 1200}
	var b strings.Builder
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Map-Register (HMAC-SHA-256)         150,000/s    160,000/s    0.94   ≥ 0.80  MET\n",
		"Map-Request, maximum                123,456/s    246,913/s    0.50   ≥ 0.90  MISSED\n",
		"Map-Request p99 at 61,728/s          850.5 µs       567 µs    1.50   ≤ 2.00  MET\n",
		"memory per prefix, heap                 600 B\n",
		"in 10 turns with lispd on the same 2 CPUs, from 2048 source addresses", "The generator shares the servers' CPUs",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if got := thousands(-1234567); got != "-1,234,567" {
		t.Errorf("thousands = %s", got)
	}
}
