package pm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/internal/nsnet"
)

// Run builds every variant's network, measures the repairs in turns,
// removes everything it created (also when ctx is cancelled or a step
// fails) and returns the result. A repetition that could not be measured
// is reported in the result with its reason; a failure of the rig itself
// ends the run. An error of the final cleanup is returned together with
// the result.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: it builds network namespaces")
	}
	dir, err := os.MkdirTemp("", "amptcp-bench-pm-")
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	began := time.Now()
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("%6.1fs  ", time.Since(began).Seconds()) + fmt.Sprintf(format, args...))
		}
	}
	var rigs []*rig
	defer func() {
		if cerr := cleanup(rigs, opts); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
	}()
	progress("%d repairs (variants %s × failures %s × %d repetition%s, outages of %v): about %s",
		opts.Measurements(), strings.Join(opts.Variants, ","), strings.Join(opts.Failures, ","), opts.Repetitions, plural(opts.Repetitions),
		opts.Outage, Estimate(opts).Round(time.Second))
	ifaces := &nsnet.IfNames{Prefix: opts.LinkPrefix}
	for _, v := range opts.Variants {
		progress("setting up %s", v)
		r, err := newRig(ctx, v, opts.Prefix, ifaces, dir)
		if err != nil {
			return nil, fmt.Errorf("set up %s: %w", v, err)
		}
		rigs = append(rigs, r)
	}

	res = &Result{Repetitions: opts.Repetitions, OutageSeconds: opts.Outage.Seconds(), TimeoutSeconds: opts.Timeout.Seconds(),
		RateMbps: rate * 8 / 1e6, Environment: environment(opts)}
	for _, v := range opts.Variants {
		res.Variants = append(res.Variants, variantByName(v))
	}
	for _, f := range opts.Failures {
		res.Failures = append(res.Failures, failureByName(f))
	}
	n := 0
	for rep := 1; rep <= opts.Repetitions; rep++ {
		for _, f := range opts.Failures {
			for _, r := range rigs {
				n++
				s, err := r.measure(ctx, f, opts.Outage, opts.Timeout)
				if err != nil {
					if ctx.Err() != nil {
						return nil, fmt.Errorf("interrupted: %w", ctx.Err())
					}
					return nil, fmt.Errorf("%s, %s, repetition %d: %w", f, r.variant, rep, err)
				}
				s.Variant, s.Failure, s.Repetition = r.variant, f, rep
				res.Samples = append(res.Samples, s)
				progress("[%d/%d] repetition %d, %s, %s: %s", n, opts.Measurements(), rep, f, r.variant, sampleText(s, opts.Timeout))
			}
		}
	}
	res.Summaries = summarize(res.Samples, opts)
	res.Targets = judge(res.Summaries, opts)
	return res, nil
}

func sampleText(s Sample, timeout time.Duration) string {
	switch {
	case s.Error != "":
		return "not measured: " + s.Error
	case s.Recovered:
		return "subflows carry data again after " + msText(s.RepairMS)
	}
	return fmt.Sprintf("not recovered within %v", timeout)
}

// cleanup closes the rigs and removes whatever of the run's names is
// left, saying what was.
func cleanup(rigs []*rig, opts Options) error {
	var errs []error
	for _, r := range rigs {
		errs = append(errs, r.close())
	}
	errs = append(errs, nsnet.Sweep(opts.Prefix, opts.LinkPrefix))
	return errors.Join(errs...)
}

func environment(opts Options) Environment {
	e := Environment{Version: buildinfo.String("amptcp"), Go: runtime.Version(), CPUs: runtime.NumCPU(), Prefix: opts.Prefix}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return e
}
