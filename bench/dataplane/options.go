// Package dataplane measures data paths on chains of network namespaces,
// for `amptcp bench dataplane`: how fast TCP crosses plain IP
// routing, kernel VXLAN, lispd's eBPF ITR and ETR, and lispd with one
// RTR hop, on the same machine in the same run.
//
// Every variant is its own chain of namespaces joined by veth links,
//
//	client — r1 — [r2] — r3 — server
//
// built by the bench, named with the run's prefix and removed by name at
// the end (also on an error or Ctrl-C), its programs stopped by PID. The
// routers r1 and r3 are the edges (ITR and ETR, VXLAN endpoints), r2 is
// the middle router (RTR) of the three-router variants. iperf3 runs from
// the client to the server, TCP with an explicit congestion control, with
// 1 and 4 streams. The variants take turns: the first repetition of every
// variant, then the second, so that the noise of a shared machine falls
// on all of them alike, and each variant is compared with its reference
// in the same repetition.
//
// Two offload profiles are measured (see Profile): veth's defaults, where
// 64 KB TSO/GSO super-packets cross the whole chain, and a NIC-like
// underlay, where the links between routers carry MTU-sized frames and
// the receiving end aggregates them with GRO.
//
// The package also holds `amptcp bench first-packet` (RunFirstPacket):
// how long a new connection to an EID the ITR has not resolved takes,
// against the map-resolver's and the path's round trips.
package dataplane

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a run. The zero value of a field means its default.
type Options struct {
	// Variants to measure, in this order (default: all of Variants).
	Variants []string
	// Profiles of offloads (default: gso, wire).
	Profiles []string
	// Streams are the numbers of parallel TCP streams (default 1 and 4).
	Streams []int
	// Duration of each iperf3 run (default 10s).
	Duration time.Duration
	// Repetitions of every measurement, interleaved (default 3).
	Repetitions int
	// Rate caps what iperf3 sends, in Gbit/s over all streams (0: as fast
	// as it can). At a rate every variant carries, the throughputs say
	// nothing, but the CPU each spends per Gbit/s compares the paths'
	// costs on a machine too busy for their top speeds to.
	Rate float64
	// Congestion is the TCP congestion control (default cubic; the
	// kernel's default here is bbr, so it is always set explicitly).
	Congestion string
	// SetupTimeout bounds how long a variant may take to come up: lispd
	// answering, the mapping system resolving the EIDs, traffic passing
	// (default 30s).
	SetupTimeout time.Duration
	// Lispd is the lispd binary, for the lisp variants: by default the
	// one next to the running executable, else the one in $PATH.
	Lispd string
	// Iperf3 is the iperf3 binary (default: the one in $PATH).
	Iperf3 string
	// Prefix starts the names of the namespaces (default
	// "amptcp-bench-<pid>-"); LinkPrefix those of the interfaces, at most
	// 8 bytes since interface names have 15 (default "ab<pid in base
	// 36>-").
	Prefix, LinkPrefix string
	// Pin pins iperf3's client and server to two CPUs (the command's
	// default). Placed by the scheduler, the ends of one variant's runs
	// land on one CPU or on two from run to run, and the variants alike
	// only by chance: on an idle two-CPU machine the runs of plain-3
	// spread from 12.9 to 28.7 Gbit/s unpinned, within a tenth pinned,
	// and the unpinned references ran slower than the LISP variants,
	// which flattered their ratios. On a machine other work loads, a
	// pinned client cannot move away from it.
	Pin bool
	// BPFStats turns the kernel's BPF run-time statistics on and reports
	// what lispd's programs took per run, on each router: what the
	// paths' costs come from. They add a little to each run.
	BPFStats bool
	// Keep keeps the temporary directory with lispd's configurations,
	// every program's log and iperf3's JSON output.
	Keep bool
	// Progress, if not nil, receives a line on each phase and each run.
	Progress func(line string)
	// Started, if not nil, is told of each program the bench starts, by
	// its PID (tests check that none is left).
	Started func(name string, pid int)
}

// Defaults.
const (
	DefaultDuration     = 10 * time.Second
	DefaultRepetitions  = 3
	DefaultCongestion   = "cubic"
	DefaultSetupTimeout = 30 * time.Second
)

// DefaultStreams are the default numbers of parallel streams.
var DefaultStreams = []int{1, 4}

// maxLinkPrefix leaves room for a link number and an end in 15 bytes.
const maxLinkPrefix = 8

// Validate fills in the defaults and returns every problem of the
// options at once.
func (o *Options) Validate() error {
	if len(o.Variants) == 0 {
		o.Variants = VariantNames()
	}
	if len(o.Profiles) == 0 {
		o.Profiles = ProfileNames()
	}
	if len(o.Streams) == 0 {
		o.Streams = slices.Clone(DefaultStreams)
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Repetitions == 0 {
		o.Repetitions = DefaultRepetitions
	}
	if o.Congestion == "" {
		o.Congestion = DefaultCongestion
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("amptcp-bench-%d-", os.Getpid())
	}
	if o.LinkPrefix == "" {
		o.LinkPrefix = "ab" + strconv.FormatInt(int64(os.Getpid())%(36*36*36*36), 36) + "-"
	}
	var errs []error
	for i, v := range o.Variants {
		switch {
		case variantByName(v) == nil:
			errs = append(errs, fmt.Errorf("variants: unknown variant %q (want some of %s)", v, strings.Join(allVariantNames(), ", ")))
		case slices.Index(o.Variants, v) != i:
			errs = append(errs, fmt.Errorf("variants: %s named twice", v))
		}
	}
	for i, p := range o.Profiles {
		switch {
		case profileByName(p) == nil:
			errs = append(errs, fmt.Errorf("profiles: unknown profile %q (want some of %s)", p, strings.Join(ProfileNames(), ", ")))
		case slices.Index(o.Profiles, p) != i:
			errs = append(errs, fmt.Errorf("profiles: %s named twice", p))
		}
	}
	for _, name := range o.Variants {
		if v := variantByName(name); v != nil && !slices.ContainsFunc(o.Profiles, v.in) && profilesKnown(o.Profiles) {
			errs = append(errs, fmt.Errorf("variants: %s is measured in the %s profile only, which --profiles leaves out",
				name, strings.Join(v.Profiles, ", ")))
		}
	}
	for i, s := range o.Streams {
		switch {
		case s < 1 || s > 128:
			errs = append(errs, fmt.Errorf("streams: %d is not between 1 and 128", s))
		case slices.Index(o.Streams, s) != i:
			errs = append(errs, fmt.Errorf("streams: %d named twice", s))
		}
	}
	if o.Duration < time.Second || o.Duration > time.Hour || o.Duration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("duration: %s is not a whole number of seconds between 1s and 1h (iperf3 counts seconds)", o.Duration))
	}
	if o.Rate < 0 || o.Rate > 1000 {
		errs = append(errs, fmt.Errorf("rate: %g Gbit/s is not between 0 (no cap) and 1000", o.Rate))
	}
	if o.Repetitions < 1 || o.Repetitions > 100 {
		errs = append(errs, fmt.Errorf("repetitions: %d is not between 1 and 100", o.Repetitions))
	}
	if strings.ContainsAny(o.Congestion, " /\n") {
		errs = append(errs, fmt.Errorf("congestion: %q is no congestion control's name", o.Congestion))
	}
	if o.SetupTimeout < time.Second {
		errs = append(errs, fmt.Errorf("setup-timeout: %s is shorter than 1s", o.SetupTimeout))
	}
	if strings.ContainsRune(o.Prefix, '/') {
		errs = append(errs, fmt.Errorf("prefix: %q holds a slash", o.Prefix))
	}
	if len(o.LinkPrefix) > maxLinkPrefix || strings.ContainsAny(o.LinkPrefix, "/ :") {
		errs = append(errs, fmt.Errorf("link prefix: %q is longer than %d bytes or holds a slash, space or colon", o.LinkPrefix, maxLinkPrefix))
	}
	return errors.Join(errs...)
}

func profilesKnown(names []string) bool {
	for _, n := range names {
		if profileByName(n) == nil {
			return false
		}
	}
	return true
}

// Runs is how many iperf3 runs the options make with every variant up,
// for the estimate of a run's length.
func (o *Options) Runs() int {
	var vs []*Variant
	for _, name := range o.Variants {
		if v := variantByName(name); v != nil {
			vs = append(vs, v)
		}
	}
	return o.runsOf(vs)
}

// runsOf is how many iperf3 runs the options make of these variants,
// each in the profiles it is measured in.
func (o *Options) runsOf(vs []*Variant) int {
	n := 0
	for _, v := range vs {
		for _, p := range o.Profiles {
			if v.in(p) {
				n++
			}
		}
	}
	return n * len(o.Streams) * o.Repetitions
}
