package linkemu

import (
	"errors"
	"math"
	"net"
	"slices"
	"testing"
	"time"
)

// fastLink is a direction with a rate high enough not to matter for
// small datagrams, and a queue that does not overflow in these tests.
func fastLink(delay time.Duration) Params {
	return Params{Rate: 1e9, Delay: delay, QueueBytes: 4 << 20}
}

// The round trip over a link of 2 × 50 ms takes 100 ms more than over the
// same link without delay, measured in the same run: the reference
// leaves out what the hosts' stacks and the echo program take, which is
// no emulator's doing. No round trip is shorter than the delays (a frame
// that left early), and the median is within half of them: idle, it is
// within a millisecond (the echo's ends also wake from 10 ms of
// idleness); a loaded machine wakes the echo later; an emulator that
// applied the delay twice, or once, misses. How close it comes is
// BenchmarkDelay's measurement, as the lab's fidelity check measures and
// flags it end to end.
func TestRoundTripTimeMatchesTheDelay(t *testing.T) {
	// Long enough that a busy machine's late wakes (milliseconds) stay
	// well inside the half it may add.
	want := 100 * time.Millisecond
	r := newRig(t, fastLink(0))
	got, added := delayedRTTs(t, r, want/2)
	if got[0] < want {
		t.Fatalf("min RTT %v is shorter than the configured %v: frames left early", got[0], want)
	}
	if added < want-time.Millisecond || added >= want+want/2 {
		t.Fatalf("median RTT %v more than without delay, want %v (up to %v more)", added, want, want/2)
	}
	s, err := r.link.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.AB.Delivered < 81 || s.BA.Delivered < 81 {
		t.Fatalf("link delivered %d and %d frames, want at least 81 each way", s.AB.Delivered, s.BA.Delivered)
	}
}

// delayedRTTs measures 40 round trips over r's link without delay, sets
// delay in both directions and measures 40 more: it returns the latter,
// sorted, and their median less the former's. The link must start
// without delay.
func delayedRTTs(t testing.TB, r *rig, delay time.Duration) (got []time.Duration, added time.Duration) {
	t.Helper()
	cli, srv := r.udpPair(t)
	go echo(srv)
	rtts(t, cli, srv.LocalAddr(), 1) // resolves ARP, through the link too
	base := rtts(t, cli, srv.LocalAddr(), 40)
	for _, d := range []Direction{AToB, BToA} {
		if err := r.link.Update(d, func(p *Params) { p.Delay = delay }); err != nil {
			t.Fatal(err)
		}
	}
	got = rtts(t, cli, srv.LocalAddr(), 40)
	added = got[len(got)/2] - base[len(base)/2]
	s, err := r.link.Stats()
	if err != nil {
		t.Fatal(err)
	}
	h := &s.AB.Lateness
	t.Logf("RTT without delay: median %v; for 2 x %v: min %v, median %v (%v more than without delay), max %v; lateness a-to-b mean %v, p99 <= %v, max %v",
		base[len(base)/2], delay, got[0], got[len(got)/2], added, got[len(got)-1], h.Mean(), h.Quantile(0.99), h.Max)
	return got, added
}

// A TCP flow over a 50 Mbit/s link gets the link's rate less the headers:
// never more (a serializer that let frames through early), and more than
// half of it (one that took twice a frame's time, or a machine so loaded
// that the sender starved). How close it comes is BenchmarkRate's
// measurement.
func TestTCPRateMatchesTheLink(t *testing.T) {
	const rate = 50e6
	r := newRig(t, Params{Rate: rate, Delay: 5 * time.Millisecond, QueueBytes: 100 << 10})
	goodput, want := tcpGoodput(t, r, rate)
	if goodput > 1.03*want || goodput < want/2 {
		t.Fatalf("TCP goodput %.2f Mbit/s, want %.2f (and more than half of it)", goodput/1e6, want/1e6)
	}
}

// tcpGoodput measures a TCP flow's goodput over r's link of rate bit/s,
// and returns it with the most it can be: a full-size segment (1448 bytes
// with timestamps) travels in a frame of 1514 bytes.
func tcpGoodput(t testing.TB, r *rig, rate float64) (goodput, want float64) {
	t.Helper()
	want = rate * 1448 / 1514
	goodput = r.iperf3(t, 3)
	s, err := r.link.Stats()
	if err != nil {
		t.Fatal(err)
	}
	h := &s.AB.Lateness
	t.Logf("link of %.0f Mbit/s: TCP goodput %.2f Mbit/s, want %.2f; %d frames dropped by the queue; lateness mean %v, p99 <= %v, max %v",
		rate/1e6, goodput/1e6, want/1e6, s.AB.DroppedQueue, h.Mean(), h.Quantile(0.99), h.Max)
	if s.AB.TooLong != 0 || s.AB.WriteErrors != 0 {
		t.Fatalf("%d frames too long, %d write errors", s.AB.TooLong, s.AB.WriteErrors)
	}
	return goodput, want
}

func TestBernoulliLossOnTheWire(t *testing.T) {
	r := newRig(t, fastLink(0))
	cli, srv := r.udpPair(t)
	rc := receive(t, srv)
	send(t, cli, srv.LocalAddr(), 1, 100, 0, 0) // ARP, without loss
	rc.await(t, 1)
	before, _ := r.link.Stats()
	const p, n = 0.1, 4000
	if err := r.link.Update(AToB, func(q *Params) { q.Loss = Loss{P: p} }); err != nil {
		t.Fatal(err)
	}
	send(t, cli, srv.LocalAddr(), n, 100, 200, time.Millisecond)
	lost := n - (rc.settle() - 1)
	after, _ := r.link.Stats()
	// Five standard deviations of a binomial count: a false alarm once
	// in millions of runs.
	sd := math.Sqrt(n * p * (1 - p))
	t.Logf("lost %d of %d datagrams, want %.0f ± %.0f", lost, n, n*p, 5*sd)
	if math.Abs(float64(lost)-n*p) > 5*sd {
		t.Errorf("lost %d of %d datagrams, want %.0f ± %.0f", lost, n, n*p, 5*sd)
	}
	counted := int64(after.AB.DroppedLoss - before.AB.DroppedLoss)
	// An ARP frame may be among the losses too.
	if counted < lost || counted > lost+2 || after.AB.DroppedQueue != 0 {
		t.Errorf("counters: %d lost, %d dropped by the queue; the receiver missed %d", counted, after.AB.DroppedQueue, lost)
	}
}

func TestDownDropsEverythingAndUpRestores(t *testing.T) {
	r := newRig(t, fastLink(time.Millisecond))
	cli, srv := r.udpPair(t)
	rc := receive(t, srv)
	send(t, cli, srv.LocalAddr(), 1, 100, 0, 0)
	rc.await(t, 1)
	for _, d := range []Direction{AToB, BToA} {
		if err := r.link.SetDown(d, true); err != nil {
			t.Fatal(err)
		}
	}
	send(t, cli, srv.LocalAddr(), 50, 100, 0, 0)
	if got := rc.settle(); got != 1 {
		t.Fatalf("%d datagrams crossed a link that is down", got-1)
	}
	s, _ := r.link.Stats()
	if s.AB.DroppedDown < 50 {
		t.Errorf("%d frames counted as dropped while down, want at least 50", s.AB.DroppedDown)
	}
	for _, d := range []Direction{AToB, BToA} {
		r.link.SetDown(d, false)
	}
	send(t, cli, srv.LocalAddr(), 50, 100, 0, 0)
	rc.await(t, 51)
	if got := rc.settle() - 1; got != 50 {
		t.Fatalf("%d of 50 datagrams arrived after up", got)
	}
}

// A burst of 100 frames of 1042 bytes (1000 bytes of payload) leaves the
// serializer one frame time apart; at 20 Mbit/s half as far apart as at
// 10: the rate change takes effect. The spacing is the Theil-Sen slope of
// the kernel's receive times: a few frames bunched by a late wake of the
// loop (the serializer catches up after it) do not move it. Each rate's
// spacing is within a quarter of its frame time, which a loaded machine
// keeps and a wrong rate misses; how close it comes is
// BenchmarkFrameSpacing's measurement.
func TestRateChangeTakesEffect(t *testing.T) {
	r := newRig(t, Params{Rate: 10e6, QueueBytes: 1 << 20})
	sp := newSpacer(t, r)
	var times []time.Duration
	for _, rate := range []float64{10e6, 20e6} {
		got, want := sp.frameTime(t, rate)
		t.Logf("rate %.0f Mbit/s: frame time %v, want %v", rate/1e6, got, want)
		if d := got - want; d.Abs() > want/4 {
			t.Errorf("rate %.0f Mbit/s: frames %v apart, want %v", rate/1e6, got, want)
		}
		times = append(times, got)
	}
	if ratio := float64(times[1]) / float64(times[0]); ratio < 0.4 || ratio > 0.6 {
		t.Errorf("frames %v apart at 20 Mbit/s, %v at 10: the change took no effect", times[1], times[0])
	}
}

// spacer sends bursts over a rig's link and times their frames.
type spacer struct {
	r   *rig
	cli *net.UDPConn
	to  net.Addr
	rc  *receiver
}

func newSpacer(t testing.TB, r *rig) *spacer {
	cli, srv := r.udpPair(t)
	sp := &spacer{r: r, cli: cli, to: srv.LocalAddr(), rc: receive(t, srv)}
	send(t, cli, sp.to, 1, 100, 0, 0)
	sp.rc.await(t, 1)
	sp.rc.drain()
	return sp
}

// frameTime sets the link's rate a to b, sends a burst of 100 frames and
// returns the spacing of their arrivals, and a frame's time at the rate.
func (sp *spacer) frameTime(t testing.TB, rate float64) (got, want time.Duration) {
	t.Helper()
	if err := sp.r.link.Update(AToB, func(p *Params) { p.Rate = rate }); err != nil {
		t.Fatal(err)
	}
	n := sp.rc.count.Load() + 100
	send(t, sp.cli, sp.to, 100, 1000, 0, 0)
	sp.rc.await(t, n)
	sp.rc.settle()
	ts := sp.rc.drain()
	if len(ts) != 100 {
		t.Fatalf("%d of 100 datagrams arrived", len(ts))
	}
	return slope(ts), time.Duration(1042 * 8 / rate * 1e9)
}

// slope is the Theil-Sen slope of ts over their index: the median of the
// slopes between all pairs, which a few frames bunched by a late wake of
// the loop (the serializer catches up after it) do not move.
func slope(ts []time.Time) time.Duration {
	var slopes []float64
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			slopes = append(slopes, float64(ts[j].Sub(ts[i]))/float64(j-i))
		}
	}
	slices.Sort(slopes)
	return time.Duration(slopes[len(slopes)/2])
}

func TestRuntimeControlRejectsBadParams(t *testing.T) {
	r := newRig(t, fastLink(0))
	err := r.link.Update(BToA, func(p *Params) { p.Rate = -1 })
	if err == nil {
		t.Fatal("a negative rate was accepted")
	}
	c, _ := r.link.Config()
	if c.BA.Rate != 1e9 {
		t.Fatalf("rate %g after a rejected update, want it unchanged", c.BA.Rate)
	}
}

func TestCloseRemovesTheDevices(t *testing.T) {
	r := newRig(t, fastLink(0))
	c, _ := r.link.Config()
	if err := r.link.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.link.Stats(); !errors.Is(err, ErrClosed) {
		t.Errorf("Stats on a closed link: %v, want ErrClosed", err)
	}
	// The device goes with its last descriptor, asynchronously.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := r.a.Netlink().LinkByName(c.A.Name)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tap %s still in %s after Close", c.A.Name, r.a.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.em.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.em.AddLink(c); !errors.Is(err, ErrClosed) {
		t.Errorf("AddLink on a closed emulator: %v, want ErrClosed", err)
	}
}
