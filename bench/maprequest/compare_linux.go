package maprequest

import (
	"context"
	"fmt"
	"time"
)

// server is a server under measurement, lispd or the reference, with the
// generator's socket and state for it.
type server struct {
	name string
	pid  int
	conn *udpConn
	load *load // once the Map-Requests are built
	// failed explains an error by the server's death, if it died.
	failed func(err error) error
}

// newReference starts the reference server, answering with sizes, and
// connects to it. stop stops it.
func (r *run) newReference(sizes EchoSizes) (ref *server, stop func(), err error) {
	p, addr, err := startReference(r.opts.Reference, sizes, r.where, r.dir)
	if err != nil {
		return nil, nil, err
	}
	conn, err := dialUDP(addr, r.opts.flows())
	if err != nil {
		p.stop()
		return nil, nil, err
	}
	r.res.Environment.ReferencePinning = pinning(p.pid()) + fmt.Sprintf(", GOMAXPROCS=%d", r.where.n)
	if r.where.n > 1 {
		r.res.Environment.ReferencePinning += fmt.Sprintf(", %d workers", r.where.n)
	}
	ref = &server{name: "the reference", pid: p.pid(), conn: conn, failed: func(err error) error {
		if p.exited() {
			err = p.failure()
		}
		return fmt.Errorf("measure the reference: %w", err)
	}}
	return ref, func() { conn.close(); p.stop() }, nil
}

// registration sends every Map-Register to lispd, and the same ones to
// the reference, a tenth at a time in turns, and returns the ratio of
// their rates in each turn. phase names it in the profiles: register, the
// first time, refresh when lispd holds the prefixes already.
func (r *run) registration(ctx context.Context, phase string, lispd, ref *server, regs *registers) (ls, rs registerStats, ratios []float64, err error) {
	err = r.profiled(phase, func() error {
		ls, rs, ratios, err = r.registerInTurns(ctx, lispd, ref, regs)
		return err
	})
	return ls, rs, ratios, err
}

func (r *run) registerInTurns(ctx context.Context, lispd, ref *server, regs *registers) (ls, rs registerStats, ratios []float64, err error) {
	n := regs.len()
	for t := range turns {
		lo, hi := n*t/turns, n*(t+1)/turns
		var lt, rt registerStats
		if err := register(ctx, lispd.conn, regs, lo, hi, lispd.pid, r.opts.Window, &lt); err != nil {
			return ls, rs, nil, lispd.failed(err)
		}
		if err := register(ctx, ref.conn, regs, lo, hi, ref.pid, r.opts.Window, &rt); err != nil {
			return ls, rs, nil, ref.failed(err)
		}
		ls.add(&lt)
		rs.add(&rt)
		ratios = append(ratios, rt.elapsed.Seconds()/lt.elapsed.Seconds()) // the same Map-Registers
		r.progress("  %d registered: lispd %s, reference %s", hi,
			rate(float64(ls.acked)/ls.elapsed.Seconds()), rate(float64(rs.acked)/rs.elapsed.Seconds()))
	}
	return ls, rs, ratios, nil
}

// compare measures lispd and the reference server alike: first each at
// its maximum rate, with the same requests and window, in turns after a
// warm-up of both; then each at half lispd's maximum rate, for latency.
func (r *run) compare(ctx context.Context, lispd, ref *server) error {
	o := r.opts
	r.progress("Map-Requests to lispd and the reference, warming up for %s each", warmup(o.Duration))
	for _, s := range []*server{lispd, ref} {
		var warm phaseStats
		if err := s.load.closedLoop(ctx, o.Window, warmup(o.Duration), &warm); err != nil {
			return s.failed(err)
		}
		if warm.replies == 0 {
			return s.failed(fmt.Errorf("no answer to %d Map-Requests", warm.sent))
		}
	}
	r.progress("Map-Requests at the maximum rate for %s each, lispd and the reference in %d turns", o.Duration, turns)
	var ls, rs phaseStats
	var ratios []float64
	if err := r.profiled("request-max", func() error {
		return inTurns(lispd, ref, func(s *server, st *phaseStats) error {
			return s.load.closedLoop(ctx, o.Window, o.Duration/turns, st)
		}, &ls, &rs, func(l, r *phaseStats) {
			if r.replies > 0 { // else the turn says nothing
				ratios = append(ratios, l.perSecond()/r.perSecond())
			}
		})
	}); err != nil {
		return err
	}
	req := &r.res.MapRequest
	req.Lispd, req.Reference = loadResult(&ls), loadResult(&rs)
	req.MaxPerSecond, req.Lost = req.Lispd.PerSecond, req.Lispd.Lost
	req.ReferencePerSecond = req.Reference.PerSecond
	req.TurnRatios, req.RatioToReference = ratios, median(ratios)
	req.TargetRatio, req.Met = TargetRequestRatio, req.RatioToReference >= TargetRequestRatio
	r.progress("  lispd %s, reference %s", rate(req.MaxPerSecond), rate(req.ReferencePerSecond))
	if req.MaxPerSecond == 0 || req.ReferencePerSecond == 0 {
		return fmt.Errorf("measure Map-Requests: lispd answered %d, the reference %d", ls.replies, rs.replies)
	}
	return r.latency(ctx, lispd, ref, req.MaxPerSecond/2)
}

// latency measures lispd and the reference at perSecond, open loop, in turns
// after a warm-up of each.
func (r *run) latency(ctx context.Context, lispd, ref *server, perSecond float64) error {
	o := r.opts
	r.progress("Map-Requests at %s for %s each, open loop, lispd and the reference in %d turns", rate(perSecond), o.Duration, turns)
	for _, s := range []*server{lispd, ref} {
		if err := s.load.openLoop(ctx, perSecond, warmup(o.Duration), &phaseStats{}); err != nil {
			return s.failed(err)
		}
		s.load.latencies = s.load.latencies[:0]
	}
	var ls, rs phaseStats
	var lispdTurns, refTurns [][]time.Duration
	lispdFrom, refFrom := 0, 0 // where the turn's latencies begin
	if err := r.profiled("request-latency", func() error {
		return inTurns(lispd, ref, func(s *server, st *phaseStats) error {
			return s.load.openLoop(ctx, perSecond, o.Duration/turns, st)
		}, &ls, &rs, func(_, _ *phaseStats) {
			lispdTurns = append(lispdTurns, lispd.load.latencies[lispdFrom:])
			refTurns = append(refTurns, ref.load.latencies[refFrom:])
			lispdFrom, refFrom = len(lispd.load.latencies), len(ref.load.latencies)
		})
	}); err != nil {
		return err
	}
	// Before open sorts each server's samples: the turns are parts of them.
	tails := compareTails(lispdTurns, refTurns)
	open := func(s *server, st *phaseStats) OpenLoad {
		return OpenLoad{
			PerSecond: float64(st.sent) / st.seconds(), Distribution: Summarize(s.load.latencies),
			Lost: st.lost, Skipped: st.skipped, ScheduleLagUS: micros(st.lag), ServerCPU: st.server.Seconds() / st.seconds(),
			ServerWait:  st.waited.Seconds() / st.seconds(),
			KernelDrops: st.drops,
		}
	}
	lat := &r.res.Latency
	*lat = LatencyResult{Rate: perSecond, OpenLoad: open(lispd, &ls), Reference: open(ref, &rs), TargetP99Ratio: TargetP99Ratio}
	lat.P99Ratio, lat.MedianTurnRatio, lat.TurnRatios = tails.pooled, tails.medianTurn, tails.turnRatios
	lat.TurnP99, lat.Reference.TurnP99 = tails.lispdTurnP99, tails.refTurnP99
	lat.Met = tails.pooled > 0 && tails.pooled <= TargetP99Ratio
	return nil
}

// inTurns runs measure on lispd and the reference in turns, adding to ls
// and rs, and gives each turn's pair of measurements to turn.
func inTurns(lispd, ref *server, measure func(*server, *phaseStats) error, ls, rs *phaseStats, turn func(l, r *phaseStats)) error {
	for range turns {
		var l, r phaseStats
		if err := measure(lispd, &l); err != nil {
			return lispd.failed(err)
		}
		if err := measure(ref, &r); err != nil {
			return ref.failed(err)
		}
		ls.add(&l)
		rs.add(&r)
		turn(&l, &r)
	}
	return nil
}
