package dataplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/internal/nsnet"
)

// Run builds every variant's network, measures them in turns, removes
// everything it created (also when ctx is cancelled or a step fails) and
// returns the result. A variant that does not come up is reported in the
// result, with its reason, and the others are measured. An error of the
// final cleanup is returned together with the result.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: it builds network namespaces")
	}
	iperf3, err := findIperf3(opts.Iperf3)
	if err != nil {
		return nil, err
	}
	if err := congestionAvailable(opts.Congestion); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "amptcp-bench-dataplane-")
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	r := &run{opts: opts, dir: dir, iperf3: iperf3, began: time.Now(), pin: pinning{-1, -1},
		ifaces: &nsnet.IfNames{Prefix: opts.LinkPrefix}}
	if opts.Pin {
		r.pin = cpus()
	}
	r.softirqd = softirqThreads()
	if opts.BPFStats {
		stats, err := enableBPFStats()
		if err != nil {
			return nil, err
		}
		defer stats.Close()
	}
	if opts.Keep {
		r.progress("keeping configurations, logs and iperf3's output in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	defer func() {
		if cerr := r.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
	}()
	// The programs are started from threads that inherit this one's
	// priority: raise it on a locked thread, which ends with Run.
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		raisePriority()
		res, err = r.phases(ctx)
	}()
	<-done
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return res, err
}

// run is the state of one Run.
type run struct {
	opts   Options
	dir    string
	iperf3 string
	began  time.Time
	pin    pinning
	ifaces *nsnet.IfNames
	paths  []*path // every path built, up or not, for cleanup
	// softirqd are the ksoftirqd threads, whose CPU time counts as the
	// runs' own.
	softirqd []int
	res      Result
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		r.opts.Progress(fmt.Sprintf("%6.1fs  ", time.Since(r.began).Seconds()) + fmt.Sprintf(format, args...))
	}
}

func (r *run) phases(ctx context.Context) (*Result, error) {
	o := r.opts
	res := &r.res
	*res = Result{Seconds: o.Duration.Seconds(), Rate: o.Rate, Repetitions: o.Repetitions, Streams: o.Streams, Congestion: o.Congestion}
	for _, name := range o.Profiles {
		res.Profiles = append(res.Profiles, *profileByName(name))
	}
	res.Environment = r.environment()
	var lispd string
	var lispdErr error
	if slices.ContainsFunc(o.Variants, func(v string) bool { return variantByName(v).lispd() }) {
		if lispd, lispdErr = buildinfo.Program("lispd", o.Lispd, "--lispd"); lispdErr == nil {
			res.Environment.Lispd, res.Environment.LispdVersion = lispd, version(lispd, "-version")
		}
	}
	streams := make([]string, len(o.Streams))
	for i, n := range o.Streams {
		streams[i] = strconv.Itoa(n)
	}
	r.progress("%d iperf3 runs of %s (variants %s × profiles %s × streams %s × %d repetition%s): about %s",
		o.Runs(), o.Duration, strings.Join(o.Variants, ","), strings.Join(o.Profiles, ","), strings.Join(streams, ","),
		o.Repetitions, plural(o.Repetitions), estimate(&o).Round(time.Second))

	var up []*path
	for _, name := range o.Variants {
		v := variantByName(name)
		r.progress("setting up %s: %s", v.Name, v.Description)
		began := time.Now()
		p, took, err := r.setUp(ctx, v, lispd, lispdErr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		vr := VariantResult{Variant: *v, Up: err == nil, SetupSeconds: time.Since(began).Seconds()}
		if err != nil {
			vr.Error = err.Error()
			r.progress("%s did not come up: %s", v.Name, firstLine(vr.Error))
			if cerr := p.close(); cerr != nil {
				return nil, cerr
			}
		} else {
			up = append(up, p)
			r.progress("%s is up after %.1fs: %d MiB crossed it in %v", v.Name, vr.SetupSeconds, checkBytes>>20, took.Round(time.Millisecond))
			if res.Environment.VethDefaults == (Offloads{}) {
				res.Environment.VethDefaults = p.defaults
			}
		}
		res.Variants = append(res.Variants, vr)
	}

	var measured []*Variant
	for _, p := range up {
		measured = append(measured, p.variant)
	}
	total, n := o.runsOf(measured), 0
	for rep := 1; rep <= o.Repetitions; rep++ {
		for _, pname := range o.Profiles {
			prof := profileByName(pname)
			for _, p := range up {
				if !p.variant.in(pname) {
					continue
				}
				applyErr := p.apply(prof)
				for _, st := range o.Streams {
					n++
					run := Measurement{Repetition: rep, Profile: prof.Name, Variant: p.variant.Name, Streams: st}
					if applyErr != nil {
						run.Error = applyErr.Error()
					} else {
						run = r.measure(ctx, p, prof.Name, st, rep)
					}
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					res.Runs = append(res.Runs, run)
					if run.Error != "" {
						r.progress("[%d/%d] repetition %d, %s, %s, %d stream%s: failed: %s", n, total, rep, prof.Name, p.variant.Name, st, plural(st), firstLine(run.Error))
					} else {
						r.progress("[%d/%d] repetition %d, %s, %s, %d stream%s: %s Gbit/s, %.3f Mpps, %.3f CPU/Gbit/s",
							n, total, rep, prof.Name, p.variant.Name, st, plural(st), gbps(run.Gbps), run.Mpps, run.CPUPerGbps)
					}
				}
			}
		}
	}
	res.summarize()
	return res, nil
}

// setUp builds a variant's network and starts its programs; it returns
// once traffic passes from the client to the server, with the time the
// check's transfer took.
func (r *run) setUp(ctx context.Context, v *Variant, lispd string, lispdErr error) (*path, time.Duration, error) {
	p := &path{variant: v, net: nsnet.New(r.opts.Prefix+v.Name+"-", r.ifaces)}
	r.paths = append(r.paths, p) // cleanup closes it, even half-built
	deadline := time.Now().Add(r.opts.SetupTimeout)
	if err := p.build(); err != nil {
		return p, 0, err
	}
	var err error
	switch v.kind {
	case kindPlain:
		err = p.routePlain()
	case kindPlainXDP:
		if err = p.routePlain(); err == nil {
			err = p.attachPassXDP()
		}
	case kindVXLAN:
		err = p.routeVXLAN()
	case kindLISP, kindLISPRTR, kindLISPXDP:
		if lispdErr != nil {
			return p, 0, lispdErr
		}
		err = p.setUpLISP(ctx, lispd, r.dir, deadline, r.opts.Started)
	}
	if err != nil {
		return p, 0, err
	}
	if err := p.startIperfServer(ctx, r.iperf3, r.dir, r.pin.server, deadline, r.opts.Started); err != nil {
		return p, 0, err
	}
	took, err := p.waitTraffic(ctx, deadline)
	return p, took, err
}

// cleanup stops every program and removes every namespace and link of
// the run by name, then checks that none is left, in the namespaces'
// directory or (for links) in the root namespace.
func (r *run) cleanup() error {
	var errs []error
	for _, p := range r.paths {
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
	}
	r.paths = nil
	errs = append(errs, nsnet.Sweep(r.opts.Prefix, r.opts.LinkPrefix))
	return errors.Join(errs...)
}

// estimate is how long a run of opts takes when every variant comes up:
// each iperf3 run, plus about a second to start and end it, plus about
// two seconds to set up each variant.
func estimate(o *Options) time.Duration {
	return time.Duration(o.Runs())*(o.Duration+time.Second) + time.Duration(len(o.Variants))*2*time.Second
}

// Estimate is how long a run of opts takes, for the usage text.
func Estimate(o Options) time.Duration {
	if err := o.Validate(); err != nil {
		return 0
	}
	return estimate(&o)
}

// congestionAvailable checks that the kernel offers the congestion
// control (there are no modules to load on our kernels).
func congestionAvailable(cc string) error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return fmt.Errorf("read the congestion controls: %w", err)
	}
	avail := strings.Fields(string(b))
	if !slices.Contains(avail, cc) {
		return fmt.Errorf("congestion control %q is not available (this kernel has %s)", cc, strings.Join(avail, ", "))
	}
	return nil
}

// environment describes the machine and the tools.
func (r *run) environment() Environment {
	e := Environment{
		CPUs: runtime.NumCPU(), Iperf3: r.iperf3, Iperf3Version: version(r.iperf3, "--version"),
		Go: runtime.Version(), Pinning: r.pin.String(), Priority: priority(), Prefix: r.opts.Prefix,
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil {
		e.DefaultCongestion = strings.TrimSpace(string(b))
	}
	return e
}

// priority describes the nice value of the calling thread, which the
// programs it starts inherit.
func priority() string {
	v, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return "unknown"
	}
	nice := 20 - v // the raw system call returns 20 - nice
	if nice > topNice {
		return fmt.Sprintf("nice %d (not permitted to raise to %d)", nice, topNice)
	}
	return fmt.Sprintf("nice %d", nice)
}
