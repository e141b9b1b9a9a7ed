package traffic

import (
	"context"
	"math"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/mptcp"
)

// rig is a client c and a server s joined by two links, 10.1.1.0/24 and
// 10.1.2.0/24, with the in-kernel path manager: the server announces its
// second address, so that an MPTCP connection to 10.1.1.2 gets a second
// subflow 10.1.2.1 -> 10.1.2.2. The client's ends are shaped to 40 Mbit/s
// by tbf, so that an 8 MiB upload lasts long enough to be sampled.
type rig struct {
	c, s *testnet.Node
}

func newRig(t *testing.T) *rig {
	n := testnet.New(t)
	c, s := n.Node("c"), n.Node("s")
	l1 := n.Link(c, s, "10.1.1.1/24", "10.1.1.2/24")
	l2 := n.Link(c, s, "10.1.2.1/24", "10.1.2.2/24")
	for _, l := range []*testnet.Link{l1, l2} {
		run(t, "ip", "netns", "exec", c.Name(), "tc", "qdisc", "add", "dev", l.Iface(c),
			"root", "tbf", "rate", "40mbit", "burst", "32kb", "latency", "50ms")
	}
	for _, nd := range []*testnet.Node{c, s} {
		err := nd.Do(func() error {
			if err := mptcp.SetPathManager("kernel"); err != nil {
				return err
			}
			pm, err := mptcp.Dial()
			if err != nil {
				return err
			}
			defer pm.Close()
			if err := pm.SetLimits(mptcp.Limits{Subflows: 2, AddAddrAccepted: 2}); err != nil {
				return err
			}
			if nd != s {
				return nil
			}
			return pm.AddEndpoint(mptcp.Addr{ID: 2, IP: netip.MustParseAddr("10.1.2.2"), Flags: mptcp.FlagSignal})
		})
		if err != nil {
			t.Fatalf("path manager in %s: %v", nd.Name(), err)
		}
	}
	return &rig{c: c, s: s}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serve starts a Server in nd and returns it with its collected records;
// stop closes it and waits for its flows to end; cleanup cancels them.
func serve(t *testing.T, nd *testnet.Node, addr string, opts ListenOptions) (*Server, *Collector, func()) {
	t.Helper()
	var srv *Server
	if err := nd.Do(func() (err error) { srv, err = Listen(addr, opts); return err }); err != nil {
		t.Fatal(err)
	}
	col := &Collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, col) }()
	stop := sync.OnceFunc(func() {
		srv.Close() // the flows under way end on their own
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		cancel()
	})
	t.Cleanup(func() {
		cancel() // ends the flows a failed test left
		stop()
	})
	return srv, col, stop
}

func dial(t *testing.T, nd *testnet.Node, f Flow, addr string) *Stream {
	t.Helper()
	var st *Stream
	if err := nd.Do(func() (err error) { st, err = Dial(context.Background(), f, addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ofKind(recs []Record, k RecordKind) []Record {
	return slices.DeleteFunc(slices.Clone(recs), func(r Record) bool { return r.Kind != k })
}

func TestTraffic(t *testing.T) {
	r := newRig(t)
	t.Run("MPTCPTransfer", r.testMPTCPTransfer)
	t.Run("TCPSaturateCubic", r.testTCPSaturateCubic)
	t.Run("Background", r.testBackground)
}

// testMPTCPTransfer uploads 8 MiB over MPTCP with reno and checks the
// count, the completion time and the two subflows in the samples. The
// server listens on the wildcard address: the join to its announced
// address 10.1.2.2 needs a listener there too.
func (r *rig) testMPTCPTransfer(t *testing.T) {
	srv, srvRecs, stop := serve(t, r.s, "0.0.0.0:5001", ListenOptions{Protocol: MPTCP})
	f := Flow{ID: "mp8", Kind: Transfer, Protocol: MPTCP, CongestionControl: "reno", Bytes: 8 << 20}
	cli := &Collector{}
	res, err := dial(t, r.c, f, "10.1.1.2:5001").Run(context.Background(), cli)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	stop()
	if res.Bytes != 8<<20 || res.Protocol != MPTCP || res.CongestionControl != "reno" {
		t.Errorf("client result: %d bytes over %s with %q; want %d over mptcp with reno", res.Bytes, res.Protocol, res.CongestionControl, 8<<20)
	}
	// 8 MiB over 2 x 40 Mbit/s takes about 0.85 s, never less than the
	// shaping allows; ten times that is a transfer that stalled.
	if res.Completion < 700*time.Millisecond || res.Completion > 10*time.Second {
		t.Errorf("completion time %v; want about 0.85 s", res.Completion)
	}
	if res.Subflows != 2 {
		t.Errorf("result: %d subflows; want 2", res.Subflows)
	}
	got := srv.Results()
	if len(got) != 1 || got[0].Err != nil || got[0].Bytes != 8<<20 || got[0].Role != Receiver || got[0].CongestionControl != "reno" {
		t.Fatalf("server results %+v; want one receiver of %d bytes with reno", got, 8<<20)
	}
	if len(ofKind(srvRecs.Records(), KindReceiver)) < 3 {
		t.Errorf("server recorded %d receiver samples in %v; want one per 100 ms", len(ofKind(srvRecs.Records(), KindReceiver)), got[0].Completion)
	}

	// Per subflow: its addresses, and bytes acked that grow.
	bySubflow := map[uint8][]Record{}
	for _, rec := range ofKind(cli.Records(), KindSubflow) {
		bySubflow[rec.Subflow] = append(bySubflow[rec.Subflow], rec)
	}
	locals := map[string]bool{}
	for id, recs := range bySubflow {
		first, last := recs[0], recs[len(recs)-1]
		locals[first.Local.Addr().String()+">"+first.Remote.Addr().String()] = true
		if len(recs) < 2 || last.BytesAcked <= first.BytesAcked || last.BytesAcked < 1<<20 {
			t.Errorf("subflow %d: %d samples, bytes acked %d to %d; want growing to over 1 MiB", id, len(recs), first.BytesAcked, last.BytesAcked)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].BytesAcked < recs[i-1].BytesAcked || !recs[i].Time.After(recs[i-1].Time) {
				t.Errorf("subflow %d: sample %d goes back: %+v after %+v", id, i, recs[i], recs[i-1])
			}
		}
		if last.RTT <= 0 || last.Cwnd == 0 || last.MSS == 0 {
			t.Errorf("subflow %d: last sample has rtt %v, cwnd %d, mss %d", id, last.RTT, last.Cwnd, last.MSS)
		}
	}
	want := map[string]bool{"10.1.1.1>10.1.1.2": true, "10.1.2.1>10.1.2.2": true}
	if len(bySubflow) != 2 || !maps2Equal(locals, want) {
		t.Errorf("subflows %v with addresses %v; want 2: %v", len(bySubflow), locals, want)
	}
	conns := ofKind(cli.Records(), KindConnection)
	if len(conns) == 0 || conns[len(conns)-1].BytesAcked < 8<<20 {
		t.Errorf("connection samples %d, last %+v; want the last to have all 8 MiB acked", len(conns), conns)
	}
}

func maps2Equal(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// testTCPSaturateCubic downloads for 1 s over TCP with cubic: both ends
// and `ss -ti` report cubic, and the receiver samples every ~100 ms.
func (r *rig) testTCPSaturateCubic(t *testing.T) {
	srv, srvRecs, stop := serve(t, r.s, "10.1.1.2:5002", ListenOptions{Protocol: TCP})
	f := Flow{ID: "tcp1s", Kind: Saturate, Protocol: TCP, CongestionControl: "cubic", Direction: Download, Duration: time.Second}
	st := dial(t, r.c, f, "10.1.1.2:5002")
	cli := &Collector{}
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() { res, err := st.Run(context.Background(), cli); done <- out{res, err} }()
	// ss sees the connection once it is up, which a busy machine delays:
	// it is asked until it shows cubic or the flow ends.
	var ss string
	var o out
	ended := false
	for !ended && !strings.Contains(ss, " cubic ") {
		select {
		case o = <-done:
			ended = true
		case <-time.After(100 * time.Millisecond):
			ss = run(t, "ip", "netns", "exec", r.s.Name(), "ss", "-tin", "sport", "= :5002")
		}
	}
	if !strings.Contains(ss, " cubic ") || strings.Contains(ss, "bbr") {
		t.Errorf("ss -tin on the server shows no cubic:\n%s", ss)
	}
	if !ended {
		o = <-done
	}
	stop()
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	res := o.res
	if res.Protocol != TCP || res.CongestionControl != "cubic" || res.Role != Receiver {
		t.Errorf("client result %s %q %s; want a tcp receiver with cubic", res.Protocol, res.CongestionControl, res.Role)
	}
	sres := srv.Results()
	if len(sres) != 1 || sres[0].Err != nil || sres[0].CongestionControl != "cubic" || sres[0].Bytes != res.Bytes || sres[0].Role != Sender {
		t.Fatalf("server results %+v; want one sender with cubic that sent the %d bytes received", sres, res.Bytes)
	}
	// Never less than its duration; its last writes drain and are
	// acknowledged within milliseconds (far more on a loaded machine); a
	// sender that kept going for ten times its duration is broken.
	if sres[0].Completion < time.Second || sres[0].Completion >= 10*time.Second {
		t.Errorf("server sent for %v; want 1 s", sres[0].Completion)
	}
	// The receiver's samples, about one per 100 ms of the flow (a tick
	// the sampler could not take in time is skipped), and the final one.
	recv := ofKind(cli.Records(), KindReceiver)
	if most := int(res.Completion/DefaultInterval) + 2; len(recv) < 3 || len(recv) > most {
		t.Fatalf("%d receiver samples in %v; want one per 100 ms, at most %d", len(recv), res.Completion, most)
	}
	// The ticker may fire late on a busy machine; what must hold is that
	// each sample says the real interval it covers, and that they come
	// every 100 ms in the main.
	var gaps []time.Duration
	for i, rec := range recv[:len(recv)-1] { // the last is the final one, off the ticks
		gap := rec.Interval // the first is timed from the dial
		if i > 0 {
			gap = rec.Time.Sub(recv[i-1].Time)
			gaps = append(gaps, gap)
		}
		if rec.Interval != gap {
			t.Errorf("sample %d: interval %v; want the real gap %v", i, rec.Interval, gap)
		}
		if rec.Goodput <= 0 {
			t.Errorf("sample %d: goodput %v", i, rec.Goodput)
		}
	}
	// A late tick makes one gap longer and the next shorter; a busy
	// machine makes many late. A sampler at another interval (every read,
	// or every second) is off by ten times.
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < DefaultInterval/10 || med >= 10*DefaultInterval {
		t.Errorf("samples %v apart in the median (gaps %v); want 100 ms", med, gaps)
	}
	// The sender's samples are plain TCP: subflow 0, with cwnd and RTT.
	snd := ofKind(srvRecs.Records(), KindSubflow)
	if len(snd) < 3 || snd[len(snd)-1].Subflow != 0 || snd[len(snd)-1].Cwnd == 0 || snd[len(snd)-1].BytesAcked < res.Bytes {
		t.Errorf("sender samples: %d, last %+v; want ~10 of subflow 0 with all bytes acked at the end", len(snd), snd)
	}
}

// testBackground sends UDP at 50 Mbit/s for 1 s from the server (whose
// ends are not shaped) to the client.
func (r *rig) testBackground(t *testing.T) {
	var sink *UDPSink
	if err := r.c.Do(func() (err error) { sink, err = ListenUDP("10.1.2.1:6001", 0); return err }); err != nil {
		t.Fatal(err)
	}
	col := &Collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sink.Serve(ctx, col) }()
	defer func() {
		cancel()
		<-done
	}()
	f := Flow{ID: "bg", Kind: Background, Rate: 50e6, Duration: time.Second}
	var snd *UDPSender
	if err := r.s.Do(func() (err error) { snd, err = DialUDP(f, "10.1.2.1:6001"); return err }); err != nil {
		t.Fatal(err)
	}
	res, err := snd.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := float64(res.Bytes) * 8 / f.Duration.Seconds()
	if math.Abs(sent-f.Rate)/f.Rate > 0.02 {
		t.Errorf("sent %.2f Mbit/s; want 50 within 2 %%", sent/1e6)
	}
	// The pacer sends the last datagram when it is due, at 1 s less one
	// datagram's time, or on the first tick after that: never sooner, and
	// on a busy machine later (a pacer ten times late is broken).
	if res.Completion < 990*time.Millisecond || res.Completion >= 10*time.Second {
		t.Errorf("sending took %v; want 1 s", res.Completion)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.Results()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Every datagram is counted, received or lost. Over veth nothing is
	// lost but what the sink's socket drops while its reader waits for
	// a CPU: on a loaded machine, some.
	got := sink.Results()
	if len(got) != 1 || got[0].Datagrams+got[0].Lost != res.Datagrams || float64(got[0].Datagrams) < 0.5*float64(res.Datagrams) {
		t.Fatalf("sink results %+v; want one flow with the %d datagrams sent counted, most received", got, res.Datagrams)
	}
	// The samples count up to the result, each one's goodput is its
	// bytes over its interval, and together they say about the rate sent
	// (a late read makes one sample smaller and the next larger, and a
	// busy machine slows the sender: a tenth of the rate is broken).
	samples := ofKind(col.Records(), KindReceiver)
	if len(samples) < 3 {
		t.Fatalf("%d sink samples; want about 10", len(samples))
	}
	for i, s := range samples {
		if i > 0 && (s.Datagrams < samples[i-1].Datagrams || !s.Time.After(samples[i-1].Time)) {
			t.Errorf("sample %d goes back: %+v after %+v", i, s, samples[i-1])
		}
		if s.Datagrams+s.Lost > res.Datagrams {
			t.Errorf("sample %d counts %d datagrams received and %d lost of %d", i, s.Datagrams, s.Lost, res.Datagrams)
		}
		prev := uint64(0)
		if i > 0 {
			prev = samples[i-1].BytesReceived
		}
		if want := float64(s.BytesReceived-prev) * 8 / s.Interval.Seconds(); math.Abs(s.Goodput-want) > 1e-6*want+1 {
			t.Errorf("sample %d: goodput %.0f bit/s, but %d bytes in %v make %.0f", i, s.Goodput, s.BytesReceived-prev, s.Interval, want)
		}
	}
	first, last := samples[0], samples[len(samples)-1]
	span := last.Time.Sub(first.Time) + first.Interval
	if mean := float64(last.BytesReceived) * 8 / span.Seconds(); mean < f.Rate/10 || mean > 1.1*f.Rate {
		t.Errorf("samples say %.1f Mbit/s over %v; want about 50", mean/1e6, span)
	}
	if sink.Malformed() != 0 {
		t.Errorf("%d malformed datagrams", sink.Malformed())
	}
}
