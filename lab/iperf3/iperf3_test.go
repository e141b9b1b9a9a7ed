package iperf3

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// The files in testdata are iperf3 3.12's reports (-J), captured on this
// project's machines (Linux 6.18): a 2 s MPTCP upload and download through
// `mptcpize run` between two namespaces joined by a veth pair, a client
// whose server does not listen, and one given an unknown congestion
// control.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCommandLines(t *testing.T) {
	server := netip.MustParseAddrPort("10.2.0.2:5002")
	up := traffic.Flow{ID: "x", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "cubic", Duration: 4 * time.Second}
	down := up
	down.Protocol, down.Direction, down.CongestionControl = traffic.TCP, traffic.Download, "reno"
	for _, c := range []struct {
		got  []string
		want string
	}{
		{ClientArgs(up, server), "mptcpize run iperf3 -c 10.2.0.2 -p 5002 -C cubic -t 4 -J"},
		{ServerArgs(up, 5002), "mptcpize run iperf3 -s -1 -p 5002 -J"},
		{ClientArgs(down, server), "iperf3 -c 10.2.0.2 -p 5002 -C reno -t 4 -J -R"},
		{ServerArgs(down, 5002), "iperf3 -s -1 -p 5002 -J"},
	} {
		if got := strings.Join(c.got, " "); got != c.want {
			t.Errorf("command line %q, want %q", got, c.want)
		}
	}
}

// An upload's records: the client's (sender's) first, with iperf3's
// bytes, seconds, retransmits and congestion control; the receiver's
// goodput is iperf3's bits_per_second.
func TestRecordsUpload(t *testing.T) {
	o, err := Decode(readTestdata(t, "upload-mptcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if o.DataPort() != 53200 {
		t.Errorf("data port %d, want 53200 (start.connected[0].local_port)", o.DataPort())
	}
	f := traffic.Flow{ID: "cross", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "cubic", Duration: 2 * time.Second}
	start := time.Date(2026, 11, 22, 12, 55, 59, 0, time.UTC)
	recs := o.Records(f, start, traffic.MPTCP, 2)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	snd, rcv := recs[0], recs[1]
	wantSnd := traffic.Record{Time: start.Add(2000130 * time.Microsecond), Flow: "cross", Kind: traffic.KindResult, Role: traffic.Sender,
		Protocol: traffic.MPTCP, CongestionControl: "cubic", FlowKind: traffic.Iperf3, Start: start,
		Completion: 2000130 * time.Microsecond, BytesSent: 343176064, Retransmits: 435, Subflows: 2}
	if snd != wantSnd {
		t.Errorf("sender's record\n%+v, want\n%+v", snd, wantSnd)
	}
	if rcv.Role != traffic.Receiver || rcv.BytesReceived != 343176064 || rcv.Completion != 2000255*time.Microsecond ||
		rcv.CongestionControl != "cubic" || rcv.FlowKind != traffic.Iperf3 || rcv.Protocol != traffic.MPTCP {
		t.Errorf("receiver's record %+v", rcv)
	}
	goodput := float64(rcv.BytesReceived) * 8 / rcv.Completion.Seconds()
	if want := 1372529258.5195386; goodput < want*(1-1e-6) || goodput > want*(1+1e-6) {
		t.Errorf("the receiver's goodput is %.0f bit/s, iperf3 says %.0f", goodput, want)
	}
}

// A download's (-R): the client is the receiver, its record first; the
// sender's retransmits are the server's, which iperf3 reports back.
func TestRecordsDownload(t *testing.T) {
	o, err := Decode(readTestdata(t, "download-mptcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := traffic.Flow{ID: "d", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "cubic", Direction: traffic.Download, Duration: 2 * time.Second}
	recs := o.Records(f, time.Now(), traffic.MPTCP, 1)
	if len(recs) != 2 || recs[0].Role != traffic.Receiver || recs[1].Role != traffic.Sender {
		t.Fatalf("records %+v: want the receiver's (the client's) first", recs)
	}
	if recs[0].BytesReceived != 1649735248 || recs[1].BytesSent != 1649735248 || recs[1].Retransmits != 46 {
		t.Errorf("records %+v", recs)
	}
}

// iperf3's own errors fail the flow with its message.
func TestDecodeIperf3Errors(t *testing.T) {
	for file, msg := range map[string]string{
		"refused.json": "unable to connect to server: Connection refused",
		"bad-cc.json":  "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host",
	} {
		_, err := Decode(readTestdata(t, file))
		var ie *Error
		if !errors.As(err, &ie) || ie.Msg != msg || err.Error() != "iperf3: "+msg {
			t.Errorf("%s: %v, want iperf3's error %q", file, err, msg)
		}
	}
}

// Output that is not a finished test's report names what is wrong.
func TestDecodeMalformed(t *testing.T) {
	upload := string(readTestdata(t, "upload-mptcp.json"))
	for _, c := range []struct {
		in, field string
	}{
		{"", ""},
		{"iperf3: error - some text, not JSON", ""},
		{`{"start": {"connected": []}, "end": {}}`, "start.connected"},
		{strings.Replace(upload, `"sum_sent":`, `"sum_sent_":`, 1), "end.sum_sent.seconds"},
		{strings.Replace(upload, `"sum_received":`, `"sum_received_":`, 1), "end.sum_received.seconds"},
	} {
		_, err := Decode([]byte(c.in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != c.field {
			t.Errorf("Decode(%.40q) = %v, want a DecodeError of field %q", c.in, err, c.field)
		}
	}
}

func TestFailed(t *testing.T) {
	f := traffic.Flow{ID: "f", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "cubic", Direction: traffic.Download}
	start := time.Now()
	r := Failed(f, start, start.Add(time.Second), errors.New("boom"))
	if r.Role != traffic.Receiver || r.Error != "boom" || r.Completion != time.Second || r.FlowKind != traffic.Iperf3 || r.Kind != traffic.KindResult {
		t.Errorf("failed record %+v", r)
	}
	// It is one a results file can hold and give back.
	var b strings.Builder
	w := traffic.NewWriter(&b)
	w.Record(r)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := traffic.ReadRecords(strings.NewReader(b.String()))
	if err != nil || len(back) != 1 || !slices.ContainsFunc(back, func(x traffic.Record) bool { return x.FlowKind == traffic.Iperf3 }) {
		t.Errorf("read back %+v, %v from %s", back, err, b.String())
	}
}
