package maprequest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/buildinfo"
)

// Run starts lispd, measures it and the reference server, stops both by
// PID (also when ctx is cancelled or a phase fails) and returns the
// result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	lispdPath, err := buildinfo.Program("lispd", opts.Lispd, "--lispd")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "amptcp-bench-")
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	if opts.Profile != "" {
		if opts.Profile, err = filepath.Abs(opts.Profile); err == nil {
			err = os.MkdirAll(opts.Profile, 0o755)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("profile directory: %w", err)
		}
	}
	where, err := place(opts.ServerCPUs)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &run{opts: opts, dir: dir, began: time.Now(), where: where}
	if opts.Keep {
		r.progress("keeping lispd's configuration and log in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	r.res.Environment = environment(lispdPath)
	r.res.Environment.ServerCPUs, r.res.Environment.Flows = where.n, opts.flows()
	if where.generator >= 0 {
		restore, err := pinProcess(where.generator)
		if err != nil {
			return nil, err
		}
		defer restore()
		r.res.Environment.GeneratorPinning = fmt.Sprintf("all threads on cpu %d, sending and receiving on one locked thread", where.generator)
	}
	r.res.Environment.SharedCPUs = where.shared
	// The phases run on one locked thread, which ends with them: the
	// measurements of its CPU time are then of the generator alone.
	done := make(chan error, 1)
	go func() {
		if err := lockThreadTo(oneCPU(r.where.generator)); err != nil {
			done <- err
			return
		}
		r.res.Environment.Priority = priority()
		done <- r.phases(ctx, lispdPath)
	}()
	if err := <-done; err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return nil, err
	}
	return &r.res, nil
}

// run is the state of one Run.
type run struct {
	opts  Options
	dir   string
	began time.Time
	where placement
	sock  string // lispd's control socket
	res   Result
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		r.opts.Progress(fmt.Sprintf("%6.1fs  ", time.Since(r.began).Seconds()) + fmt.Sprintf(format, args...))
	}
}

func (r *run) phases(ctx context.Context, lispdPath string) error {
	o := r.opts
	res := &r.res
	res.Prefixes, res.Seconds, res.Window = o.Prefixes, o.Duration.Seconds(), o.Window
	r.progress("building %d signed Map-Registers", o.Prefixes)
	prefixes := newPrefixes(o.Prefixes)
	regs, err := newRegisters(prefixes)
	if err != nil {
		return err
	}
	r.progress("starting %s and the reference server", lispdPath)
	l, err := startLispd(ctx, lispdPath, r.dir, r.where, o.Profile)
	if err != nil {
		return err
	}
	defer l.stop()
	r.sock = l.sock
	res.Environment.LispdPinning = pinning(l.pid()) + fmt.Sprintf(", GOMAXPROCS=%d", r.where.n)
	if st, err := daemon.QueryStatus(l.sock); err == nil {
		res.Environment.LispdVersion = st.Version
	}
	conn, err := dialUDP(l.addr, r.opts.flows())
	if err != nil {
		return err
	}
	defer conn.close()
	lispd := &server{name: "lispd", pid: l.pid(), conn: conn, failed: func(err error) error {
		return r.failed(l, "measure lispd", err)
	}}
	ref, stopRef, err := r.newReference(answerSizes(regs))
	if err != nil {
		return err
	}
	defer stopRef()

	memBefore, err := daemon.QueryMemory(l.sock)
	if err != nil {
		return fmt.Errorf("query lispd's memory: %w", err)
	}
	rssBefore, err := rss(l.pid())
	if err != nil {
		return err
	}
	r.progress("registering %d prefixes with lispd at %s and the reference, in %d turns, window %d", o.Prefixes, l.addr, turns, o.Window)
	if err := r.register(ctx, "register", l, lispd, ref, regs, &res.MapRegister); err != nil {
		return err
	}
	r.progress("registered %d prefixes in %.2fs: %s", o.Prefixes, res.MapRegister.Seconds, rate(res.MapRegister.PerSecond))
	if err := r.memory(l, memBefore, rssBefore); err != nil {
		return err
	}
	r.progress("refreshing the %d registrations, as their ETRs do every minute, in %d turns", o.Prefixes, turns)
	if err := r.register(ctx, "refresh", l, lispd, ref, regs, &res.MapRefresh); err != nil {
		return err
	}
	r.progress("refreshed %d registrations in %.2fs: %s", o.Prefixes, res.MapRefresh.Seconds, rate(res.MapRefresh.PerSecond))
	regs = nil // about 80 bytes a prefix: let the generator's collector have them

	reqs, err := newRequests(min(o.Prefixes, 1<<18), prefixes, conn.local)
	if err != nil {
		return err
	}
	lispd.load = newLoad(lispd.conn, reqs, lispd.pid)
	ref.load = newLoad(ref.conn, reqs, ref.pid)
	if err := r.compare(ctx, lispd, ref); err != nil {
		return err
	}
	if l.exited() {
		return l.failure()
	}
	return nil
}

// register measures a registration phase (registration) into res: the
// first, which creates every registration, or a refresh of them all.
func (r *run) register(ctx context.Context, phase string, l *lispd, lispd, ref *server, regs *registers, res *RegisterResult) error {
	before, err := daemon.QueryCounters(l.sock)
	if err != nil {
		return fmt.Errorf("query lispd's counters: %w", err)
	}
	ls, rs, ratios, err := r.registration(ctx, phase, lispd, ref, regs)
	if err != nil {
		if c, cerr := daemon.QueryCounters(l.sock); cerr == nil && !l.exited() {
			err = fmt.Errorf("%w; lispd counted Map-Registers %v", err, c.MapRegisters)
		}
		return err
	}
	counters, err := daemon.QueryCounters(l.sock)
	if err != nil {
		return fmt.Errorf("query lispd's counters: %w", err)
	}
	n := regs.len()
	*res = RegisterResult{
		Count: n, Accepted: counters.MapRegisters["accepted"] - before.MapRegisters["accepted"], Registered: counters.Registrations,
		Resent: ls.resent, Seconds: ls.elapsed.Seconds(), PerSecond: float64(n) / ls.elapsed.Seconds(),
		ServerCPU: ls.server.Seconds() / ls.elapsed.Seconds(), ServerWait: ls.waited.Seconds() / ls.elapsed.Seconds(),
		NotifyBytes:        ls.notifySize,
		ReferencePerSecond: float64(n) / rs.elapsed.Seconds(), ReferenceNotifyBytes: rs.notifySize,
		ReferenceServerCPU: rs.server.Seconds() / rs.elapsed.Seconds(), ReferenceServerWait: rs.waited.Seconds() / rs.elapsed.Seconds(),
		TurnRatios: ratios, RatioToReference: median(ratios), TargetRatio: TargetRegisterRatio,
	}
	res.Met = res.RatioToReference >= TargetRegisterRatio
	if counters.Registrations != n {
		return fmt.Errorf("lispd holds %d registrations after %d Map-Registers were acknowledged (%v)",
			counters.Registrations, n, counters.MapRegisters)
	}
	return nil
}

// failed explains an error of a phase by lispd's death, if it died.
func (r *run) failed(l *lispd, phase string, err error) error {
	if l.exited() {
		return fmt.Errorf("%s: %w", phase, l.failure())
	}
	return fmt.Errorf("%s: %w", phase, err)
}

// memory measures lispd's memory after registering, against before.
func (r *run) memory(l *lispd, before *daemon.Memory, rssBefore uint64) error {
	after, err := daemon.QueryMemory(l.sock)
	if err != nil {
		return fmt.Errorf("query lispd's memory: %w", err)
	}
	rssAfter, err := rss(l.pid())
	if err != nil {
		return err
	}
	n := float64(r.opts.Prefixes)
	r.res.Memory = MemoryResult{
		HeapBytesPerPrefix: (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n,
		RSSBytesPerPrefix:  (float64(rssAfter) - float64(rssBefore)) / n,
		HeapBefore:         before.HeapAlloc, HeapAfter: after.HeapAlloc,
		RSSBefore: rssBefore, RSSAfter: rssAfter,
	}
	return nil
}

func loadResult(st *phaseStats) Load {
	secs := st.seconds()
	return Load{
		PerSecond: st.perSecond(), Replies: st.replies, Lost: st.lost,
		Negative: st.negative, Unmatched: st.unmatched, ReplyBytes: st.replySize,
		ServerCPU: st.server.Seconds() / secs, ServerWait: st.waited.Seconds() / secs, GeneratorCPU: st.generator.Seconds() / secs,
		GeneratorBusy: 1 - st.idle.Seconds()/secs, KernelDrops: st.drops,
	}
}

func environment(lispdPath string) EnvironmentInfo {
	e := EnvironmentInfo{
		Lispd: lispdPath, Go: runtime.Version(), CPUs: runtime.NumCPU(),
		LispdPinning: "none", ReferencePinning: "none", GeneratorPinning: "none (fewer than 2 CPUs)",
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return e
}
