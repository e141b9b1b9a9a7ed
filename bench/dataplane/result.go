package dataplane

import (
	"slices"
)

// The data plane's performance targets, as ratios of median throughputs.
const (
	// TargetRatio is the least share of its reference's throughput that
	// lispd's paths must reach: lisp of plain, lisp-rtr of plain-3.
	TargetRatio = 0.95
	// TargetCPURatio is the most CPU per Gbit/s (the bench's own) that
	// lispd's paths may spend, as a share of their reference's.
	TargetCPURatio = 1.1
)

// Result is what `amptcp bench dataplane` measured; its JSON is the
// --json output.
type Result struct {
	Seconds     float64         `json:"duration_seconds"`    // of each iperf3 run
	Rate        float64         `json:"rate_gbps,omitempty"` // iperf3's cap, over all streams; 0: none
	Repetitions int             `json:"repetitions"`
	Streams     []int           `json:"streams"`
	Congestion  string          `json:"congestion"`
	Profiles    []Profile       `json:"profiles"`
	Variants    []VariantResult `json:"variants"`
	Runs        []Measurement   `json:"runs"` // every repetition, in the order run
	Summaries   []Summary       `json:"summaries"`
	Targets     []Target        `json:"targets"`
	Environment Environment     `json:"environment"`
}

// VariantResult is a variant and whether it came up.
type VariantResult struct {
	Variant
	Up           bool    `json:"up"`
	Error        string  `json:"error,omitempty"` // why it did not come up
	SetupSeconds float64 `json:"setup_seconds"`
}

// Measurement is one iperf3 run.
type Measurement struct {
	Repetition int    `json:"repetition"` // from 1
	Profile    string `json:"profile"`
	Variant    string `json:"variant"`
	Streams    int    `json:"streams"`
	Error      string `json:"error,omitempty"`
	Iperf      *Iperf `json:"iperf3,omitempty"`
	// Gbps is the receiver's goodput, iperf3's end.sum_received.
	Gbps float64 `json:"gbps"`
	// Packets (and their bytes) crossed the server's link toward the
	// server during the run, as its receiving end counts them: with GSO
	// and GRO a packet is a super-packet, so BytesPerPacket says how much
	// the path aggregated. Mpps is Packets over iperf3's seconds.
	Packets        uint64  `json:"packets"`
	PacketBytes    uint64  `json:"packet_bytes"`
	Mpps           float64 `json:"mpps"`
	BytesPerPacket float64 `json:"bytes_per_packet"`
	// The same on the underlay: what r3 received from the last
	// router-to-router link, encapsulated or not. In the wire profile
	// these are MTU-sized frames, before GRO.
	UnderlayPackets        uint64  `json:"underlay_packets"`
	UnderlayPacketBytes    uint64  `json:"underlay_packet_bytes"`
	UnderlayMpps           float64 `json:"underlay_mpps"`
	UnderlayBytesPerPacket float64 `json:"underlay_bytes_per_packet"`
	// CPU is the machine's, from /proc/stat, over the whole iperf3 run.
	CPU CPUUse `json:"cpu"`
	// CPUPerGbps is CPU.Busy over the gigabits received: cores busy per
	// Gbit/s of goodput, the endpoints' TCP work included. OwnCPUPerGbps
	// is the same of CPU.Own.
	CPUPerGbps    float64 `json:"cpu_per_gbps"`
	OwnCPUPerGbps float64 `json:"own_cpu_per_gbps"`
	WallSeconds   float64 `json:"wall_seconds"`
	// Programs are lispd's programs' runs during the run, by router
	// (Options.BPFStats).
	Programs []ProgramRuns `json:"programs,omitempty"`
}

// CPUUse is CPU time spent during a run, in seconds, summed over CPUs.
type CPUUse struct {
	// Busy is the CPUs' time less their idle time. User, System and
	// Softirq are its split as the timer tick samples it, which can miss
	// ticks: they may sum to less or more than Busy.
	Busy    float64 `json:"busy"`
	User    float64 `json:"user"` // with nice
	System  float64 `json:"system"`
	Softirq float64 `json:"softirq"` // with irq
	Idle    float64 `json:"idle"`    // with iowait
	// Steal is time the hypervisor gave to others: a noisy host. What
	// it took from busy CPUs is part of Busy too.
	Steal float64 `json:"steal"`
	// Own is the CPU time of what the bench ran and the kernel's softirq
	// threads: iperf3's client and server and the path's lispds (user and
	// system time, which includes the softirqs that ran in their context)
	// and the ksoftirqd threads. Unlike Busy it leaves out what other
	// processes of a shared machine did, but also softirqs that ran while
	// they were interrupted.
	Own          float64 `json:"own"`
	Iperf3Client float64 `json:"iperf3_client"` // part of Own
}

// Summary is the medians of the repetitions of one measurement.
type Summary struct {
	Profile string `json:"profile"`
	Variant string `json:"variant"`
	Streams int    `json:"streams"`
	Runs    int    `json:"runs"` // that measured something
	// Error is why there are no runs (the variant did not come up) or
	// the first run's error.
	Error          string  `json:"error,omitempty"`
	Gbps           float64 `json:"gbps"`
	GbpsMin        float64 `json:"gbps_min"`
	GbpsMax        float64 `json:"gbps_max"`
	Mpps           float64 `json:"mpps"`
	BytesPerPacket float64 `json:"bytes_per_packet"`
	// UnderlayMpps and UnderlayBytesPerPacket are Measurement's.
	UnderlayMpps           float64 `json:"underlay_mpps"`
	UnderlayBytesPerPacket float64 `json:"underlay_bytes_per_packet"`
	CPUPerGbps             float64 `json:"cpu_per_gbps"`
	OwnCPUPerGbps          float64 `json:"own_cpu_per_gbps"`
	Retransmits            float64 `json:"retransmits"`
	// Reference is the variant compared with; Ratio the median over the
	// repetitions of this variant's goodput over the reference's in the
	// same repetition (nil when no repetition measured both).
	Reference string   `json:"reference,omitempty"`
	Ratio     *float64 `json:"ratio_to_reference,omitempty"`
	// Programs are the medians of the runs' Programs, by router and
	// program.
	Programs []ProgramRuns `json:"programs,omitempty"`
}

// Target is one performance target in one profile and stream count.
type Target struct {
	Name    string `json:"name"` // "ITR/ETR", "RTR"; "CPU" for CPU per Gbit/s
	Profile string `json:"profile"`
	Streams int    `json:"streams"`
	Variant string `json:"variant"`
	Want    string `json:"want"`
	Status  string `json:"status"` // MET, MISSED, NOT MEASURED
	Reason  string `json:"reason,omitempty"`
	// Ratio is of the goodputs, or of the CPU per Gbit/s for "CPU".
	Ratio   *float64 `json:"ratio_to_reference,omitempty"`
	VsVXLAN *float64 `json:"ratio_to_vxlan,omitempty"` // ITR/ETR only
}

// Target statuses.
const (
	Met         = "MET"
	Missed      = "MISSED"
	NotMeasured = "NOT MEASURED"
)

// Environment says where the numbers come from.
type Environment struct {
	Kernel        string `json:"kernel"`
	CPUs          int    `json:"cpus"`
	Iperf3        string `json:"iperf3"`
	Iperf3Version string `json:"iperf3_version"`
	Lispd         string `json:"lispd,omitempty"`
	LispdVersion  string `json:"lispd_version,omitempty"`
	Go            string `json:"go"`
	// Pinning says where iperf3's ends ran; Priority at what nice value.
	Pinning  string `json:"pinning"`
	Priority string `json:"priority"`
	// DefaultCongestion is what a new namespace would have used.
	DefaultCongestion string `json:"default_congestion"`
	// Offloads are veth's defaults on this kernel, what the gso profile
	// keeps.
	VethDefaults Offloads `json:"veth_defaults"`
	Prefix       string   `json:"prefix"`
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

type key struct {
	profile, variant string
	streams          int
}

// summarize computes the summaries and the targets from the runs.
func (r *Result) summarize() {
	runs := map[key][]Measurement{}
	for _, run := range r.Runs {
		k := key{run.Profile, run.Variant, run.Streams}
		runs[k] = append(runs[k], run)
	}
	failed := map[string]string{}
	for _, v := range r.Variants {
		if !v.Up {
			failed[v.Name] = v.Error
		}
	}
	r.Summaries = nil
	for _, p := range r.Profiles {
		for _, v := range r.Variants {
			if !v.in(p.Name) {
				continue
			}
			for _, st := range r.Streams {
				k := key{p.Name, v.Name, st}
				s := summary(k, runs[k])
				if s.Runs == 0 && failed[v.Name] != "" {
					s.Error = "did not come up: " + failed[v.Name]
				}
				if v.Reference != "" {
					s.Reference = v.Reference
					s.Ratio = pairedRatio(runs[k], runs[key{p.Name, v.Reference, st}])
				}
				r.Summaries = append(r.Summaries, s)
			}
		}
	}
	r.Targets = nil
	for _, p := range r.Profiles {
		for _, st := range r.Streams {
			if t, ok := r.target(runs, p.Name, st, "lisp"); ok {
				r.Targets = append(r.Targets, t)
			}
			if t, ok := r.target(runs, p.Name, st, "lisp-rtr"); ok {
				r.Targets = append(r.Targets, t)
			}
			for _, v := range []string{"lisp", "lisp-rtr"} {
				if t, ok := r.cpuTarget(runs, p.Name, st, v); ok {
					r.Targets = append(r.Targets, t)
				}
			}
		}
	}
}

func summary(k key, runs []Measurement) Summary {
	s := Summary{Profile: k.profile, Variant: k.variant, Streams: k.streams}
	var gbps, mpps, bpp, umpps, ubpp, cpu, own, retr []float64
	for _, run := range runs {
		if run.Error != "" {
			if s.Error == "" {
				s.Error = run.Error
			}
			continue
		}
		gbps = append(gbps, run.Gbps)
		mpps = append(mpps, run.Mpps)
		bpp = append(bpp, run.BytesPerPacket)
		umpps = append(umpps, run.UnderlayMpps)
		ubpp = append(ubpp, run.UnderlayBytesPerPacket)
		cpu = append(cpu, run.CPUPerGbps)
		own = append(own, run.OwnCPUPerGbps)
		if run.Iperf != nil {
			retr = append(retr, float64(run.Iperf.Retransmits))
		}
	}
	s.Runs = len(gbps)
	if s.Runs == 0 {
		return s
	}
	s.Gbps, s.GbpsMin, s.GbpsMax = median(gbps), slices.Min(gbps), slices.Max(gbps)
	s.Mpps, s.BytesPerPacket = median(mpps), median(bpp)
	s.UnderlayMpps, s.UnderlayBytesPerPacket = median(umpps), median(ubpp)
	s.CPUPerGbps, s.OwnCPUPerGbps, s.Retransmits = median(cpu), median(own), median(retr)
	s.Programs = programMedians(runs)
	return s
}

// programMedians are the medians over runs of each program's runs and
// time per run.
func programMedians(runs []Measurement) []ProgramRuns {
	var order []string
	by := map[string][]ProgramRuns{}
	for _, run := range runs {
		for _, p := range run.Programs {
			k := p.Router + " " + p.Program
			if by[k] == nil {
				order = append(order, k)
			}
			by[k] = append(by[k], p)
		}
	}
	var out []ProgramRuns
	for _, k := range order {
		ps := by[k]
		var n, ns []float64
		for _, p := range ps {
			n, ns = append(n, float64(p.Runs)), append(ns, p.NsPerRun)
		}
		out = append(out, ProgramRuns{Router: ps[0].Router, Program: ps[0].Program, Runs: uint64(median(n)), NsPerRun: median(ns)})
	}
	return out
}

// pairedRatio is the median over repetitions of runs' goodput over the
// reference's in the same repetition, or nil without a pair.
func pairedRatio(runs, refs []Measurement) *float64 {
	return pairedRatioOf(runs, refs, func(m Measurement) float64 { return m.Gbps })
}

// pairedRatioOf is pairedRatio of another measure.
func pairedRatioOf(runs, refs []Measurement, of func(Measurement) float64) *float64 {
	byRep := map[int]float64{}
	for _, ref := range refs {
		if ref.Error == "" && of(ref) > 0 {
			byRep[ref.Repetition] = of(ref)
		}
	}
	var ratios []float64
	for _, run := range runs {
		if ref, ok := byRep[run.Repetition]; ok && run.Error == "" {
			ratios = append(ratios, of(run)/ref)
		}
	}
	if len(ratios) == 0 {
		return nil
	}
	m := median(ratios)
	return &m
}

// target evaluates the target of variant (lisp or lisp-rtr) in one
// profile and stream count; ok is false when the variant was not in the
// run at all.
func (r *Result) target(runs map[key][]Measurement, profile string, streams int, variant string) (Target, bool) {
	v := r.variant(variant)
	if v == nil {
		return Target{}, false
	}
	t := Target{Name: "RTR", Profile: profile, Streams: streams, Variant: variant}
	if variant == "lisp" {
		t.Name = "ITR/ETR"
	}
	t.Want = "≥ " + ratioText(TargetRatio) + " × " + v.Reference
	if variant == "lisp" {
		t.Want += " and > vxlan"
	}
	own := runs[key{profile, variant, streams}]
	t.Ratio = pairedRatio(own, runs[key{profile, v.Reference, streams}])
	if variant == "lisp" {
		t.VsVXLAN = pairedRatio(own, runs[key{profile, "vxlan", streams}])
	}
	switch {
	case !v.Up:
		t.Status, t.Reason = NotMeasured, variant+" did not come up"
	case r.Rate > 0:
		t.Status, t.Reason = NotMeasured, "--rate caps the goodputs: compare CPU per Gbit/s"
	case t.Ratio == nil && r.variant(v.Reference) == nil:
		t.Status, t.Reason = NotMeasured, v.Reference+" was not measured (add it to --variants)"
	case t.Ratio == nil:
		t.Status, t.Reason = NotMeasured, "no repetition measured both "+variant+" and "+v.Reference
	case *t.Ratio < TargetRatio:
		t.Status = Missed
	case variant != "lisp":
		t.Status = Met
	case t.VsVXLAN == nil:
		t.Status, t.Reason = NotMeasured, "vxlan was not measured with it"
	case *t.VsVXLAN <= 1:
		t.Status = Missed
	default:
		t.Status = Met
	}
	return t, true
}

// cpuTarget evaluates the CPU target of variant in one profile and
// stream count: its own CPU per Gbit/s over its reference's in the same
// repetitions.
func (r *Result) cpuTarget(runs map[key][]Measurement, profile string, streams int, variant string) (Target, bool) {
	v := r.variant(variant)
	if v == nil {
		return Target{}, false
	}
	t := Target{Name: "CPU", Profile: profile, Streams: streams, Variant: variant,
		Want: "≤ " + ratioText(TargetCPURatio) + " × " + v.Reference + "'s CPU/Gbit/s"}
	t.Ratio = pairedRatioOf(runs[key{profile, variant, streams}], runs[key{profile, v.Reference, streams}],
		func(m Measurement) float64 { return m.OwnCPUPerGbps })
	switch {
	case !v.Up:
		t.Status, t.Reason = NotMeasured, variant+" did not come up"
	case t.Ratio == nil:
		t.Status, t.Reason = NotMeasured, "no repetition measured both "+variant+" and "+v.Reference
	case *t.Ratio > TargetCPURatio:
		t.Status = Missed
	default:
		t.Status = Met
	}
	return t, true
}

func (r *Result) variant(name string) *VariantResult {
	for i := range r.Variants {
		if r.Variants[i].Name == name {
			return &r.Variants[i]
		}
	}
	return nil
}
