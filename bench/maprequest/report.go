package maprequest

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The mapping system's performance targets, against the reference server
// measured in the same run on the same CPUs: lispd's rates at least these
// shares of the reference's, and its p99 latency at half its maximum rate
// at most TargetP99Ratio times the reference's at that rate.
const (
	TargetRegisterRatio = 0.8 // Map-Registers with HMAC-SHA-256
	TargetRequestRatio  = 0.9 // Map-Requests
	TargetP99Ratio      = 2.0
)

// Result is what `amptcp bench map-request` measured; its JSON is the
// --json output.
type Result struct {
	Prefixes    int             `json:"prefixes"`
	Seconds     float64         `json:"duration_seconds"` // of each measurement
	Window      int             `json:"window"`
	MapRegister RegisterResult  `json:"map_register"`
	MapRefresh  RegisterResult  `json:"map_register_refresh"`
	MapRequest  RequestResult   `json:"map_request"`
	Latency     LatencyResult   `json:"latency"`
	Memory      MemoryResult    `json:"memory"`
	Environment EnvironmentInfo `json:"environment"`
	Profiles    []ProfileFiles  `json:"profiles,omitempty"` // with Options.Profile
}

// ProfileFiles are lispd's profiles of one phase of the bench (register,
// refresh, request-max, request-latency): its CPU profile, its execution trace
// (go tool trace), and its allocation profiles (cumulative) before and
// after, for
//
//	go tool pprof -sample_index alloc_space -diff_base AllocsBefore Allocs
type ProfileFiles struct {
	Phase        string `json:"phase"`
	CPU          string `json:"cpu"`
	Trace        string `json:"trace"`
	AllocsBefore string `json:"allocs_before"`
	Allocs       string `json:"allocs"`
}

// RegisterResult is a Map-Register phase: every prefix registered once,
// with HMAC-SHA-256, acknowledged by Map-Notify; the first time
// (Result.MapRegister), lispd creates every registration, the second
// (MapRefresh) it refreshes them, as it does most of the time once its
// ETRs have registered (RFC 9301: every minute).
type RegisterResult struct {
	Count       int     `json:"count"`
	Accepted    uint64  `json:"accepted"`   // lispd's counter, resent ones included
	Registered  int     `json:"registered"` // prefixes lispd holds afterwards
	Resent      int     `json:"resent"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"per_second"`
	ServerCPU   float64 `json:"server_cpu"`  // cores lispd used
	ServerWait  float64 `json:"server_wait"` // cores' worth of time lispd's threads waited for a CPU
	NotifyBytes int     `json:"notify_bytes"`
	// The reference server answered the same Map-Registers, in turns
	// with lispd, with datagrams of the Map-Notify's size.
	ReferencePerSecond   float64   `json:"reference_per_second"`
	ReferenceServerCPU   float64   `json:"reference_server_cpu"`
	ReferenceServerWait  float64   `json:"reference_server_wait"`
	ReferenceNotifyBytes int       `json:"reference_notify_bytes"`
	RatioToReference     float64   `json:"ratio_to_reference"` // the median of TurnRatios
	TurnRatios           []float64 `json:"turn_ratios"`        // lispd's rate over the reference's, turn by turn
	TargetRatio          float64   `json:"target_ratio"`
	Met                  bool      `json:"met"`
}

// RequestResult is the maximum rate of Map-Requests, lispd's and the
// reference server's, measured the same way in the same run.
type RequestResult struct {
	MaxPerSecond       float64   `json:"max_per_second"`
	Lost               uint64    `json:"lost"`
	ReferencePerSecond float64   `json:"reference_per_second"`
	RatioToReference   float64   `json:"ratio_to_reference"` // the median of TurnRatios
	TurnRatios         []float64 `json:"turn_ratios"`        // lispd's rate over the reference's, turn by turn
	TargetRatio        float64   `json:"target_ratio"`
	Met                bool      `json:"met"`
	Lispd              Load      `json:"lispd"`
	Reference          Load      `json:"reference"`
}

// Load is one closed-loop measurement.
type Load struct {
	PerSecond    float64 `json:"per_second"`
	Replies      uint64  `json:"replies"` // during the measurement
	Lost         uint64  `json:"lost"`    // no reply within 250 ms
	Negative     uint64  `json:"negative"`
	Unmatched    uint64  `json:"unmatched"`
	ReplyBytes   int     `json:"reply_bytes"`
	ServerCPU    float64 `json:"server_cpu"`    // cores the server used
	ServerWait   float64 `json:"server_wait"`   // the server's threads' time runnable but not running, in cores
	GeneratorCPU float64 `json:"generator_cpu"` // cores the generator's thread used, polling included
	// GeneratorBusy is the share of the time the generator had something
	// to send or receive: well under 1, the generator kept up and the
	// rate is the server's.
	GeneratorBusy float64 `json:"generator_busy"`
	KernelDrops   uint64  `json:"kernel_drops"` // UDP receive-buffer drops, host-wide
}

// LatencyResult is the open-loop phase at half lispd's maximum rate:
// lispd's latencies, and the reference's at the same rate, which are
// those of the kernel and the machine alone.
type LatencyResult struct {
	Rate     float64 `json:"rate"`
	OpenLoad         // lispd's: per_second, p50_us ... max_us, lost
	// P99Ratio is lispd's p99 over the reference's, each the p99 of all
	// the server's samples, its turns taken together: the verdict.
	P99Ratio float64 `json:"p99_ratio"`
	// MedianTurnRatio is the median of TurnRatios, the verdict before:
	// steadier between runs on a busy machine, blind to what delays
	// lispd in fewer than half of its turns.
	MedianTurnRatio float64   `json:"median_turn_p99_ratio"`
	TurnRatios      []float64 `json:"turn_ratios"` // lispd's p99 over the reference's, turn by turn
	TargetP99Ratio  float64   `json:"target_p99_ratio"`
	Met             bool      `json:"met"`
	Reference       OpenLoad  `json:"reference"`
}

// OpenLoad is one open-loop measurement.
type OpenLoad struct {
	PerSecond    float64 `json:"per_second"` // achieved
	Distribution         // p50_us ... max_us
	Lost         uint64  `json:"lost"`
	// Skipped are requests not sent because the generator fell more than
	// a millisecond behind its schedule: sent late in a burst, they would
	// overflow the server's socket buffer and measure the generator.
	Skipped       uint64  `json:"skipped"`
	ScheduleLagUS float64 `json:"schedule_lag_max_us"`
	ServerCPU     float64 `json:"server_cpu"`
	ServerWait    float64 `json:"server_wait"`  // the server's threads' time runnable but not running, in cores
	KernelDrops   uint64  `json:"kernel_drops"` // UDP receive-buffer drops, host-wide
	// TurnP99 is the p99 of each turn's samples, in microseconds.
	TurnP99 []float64 `json:"turn_p99_us"`
}

// MemoryResult is lispd's memory for the registrations: the live heap
// after a garbage collection, and the resident set, before and after
// registering.
type MemoryResult struct {
	HeapBytesPerPrefix float64 `json:"heap_bytes_per_prefix"`
	RSSBytesPerPrefix  float64 `json:"rss_bytes_per_prefix"`
	HeapBefore         uint64  `json:"heap_before"`
	HeapAfter          uint64  `json:"heap_after"`
	RSSBefore          uint64  `json:"rss_before"`
	RSSAfter           uint64  `json:"rss_after"`
}

// EnvironmentInfo says where the numbers come from.
type EnvironmentInfo struct {
	Lispd            string `json:"lispd"`
	LispdVersion     string `json:"lispd_version"`
	LispdPinning     string `json:"lispd_pinning"`
	ReferencePinning string `json:"reference_pinning"`
	GeneratorPinning string `json:"generator_pinning"`
	ServerCPUs       int    `json:"server_cpus"` // lispd's and the reference's, each
	SharedCPUs       bool   `json:"shared_cpus"` // the generator runs on one of the servers' CPUs
	Flows            int    `json:"flows"`       // source addresses the generator sends from
	Priority         string `json:"priority"`    // of the generator's thread and the servers
	Go               string `json:"go"`
	Kernel           string `json:"kernel"`
	CPUs             int    `json:"cpus"`
}

// WriteText prints the result as a table of the targets, then the details.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	reg, req, lat := r.MapRegister, r.MapRequest, r.Latency
	fmt.Fprintf(&b, "lispd as map-server and map-resolver on loopback UDP, %d registered prefixes\n\n", r.Prefixes)
	row := func(metric, measured, reference, ratio, target, verdict string) {
		line := fmt.Sprintf("%-32s %12s %12s %7s %8s  %s", metric, measured, reference, ratio, target, verdict)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	met := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "MISSED"
	}
	ratio := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	row("", "lispd", "reference", "ratio", "target", "")
	row("Map-Register (HMAC-SHA-256)", rate(reg.PerSecond), rate(reg.ReferencePerSecond), ratio(reg.RatioToReference),
		"≥ "+ratio(reg.TargetRatio), met(reg.Met))
	if ref := r.MapRefresh; ref.Count > 0 {
		row("Map-Register, refreshing", rate(ref.PerSecond), rate(ref.ReferencePerSecond), ratio(ref.RatioToReference),
			"≥ "+ratio(ref.TargetRatio), met(ref.Met))
	}
	row("Map-Request, maximum", rate(req.MaxPerSecond), rate(req.ReferencePerSecond), ratio(req.RatioToReference),
		"≥ "+ratio(req.TargetRatio), met(req.Met))
	row("Map-Request p99 at "+rate(lat.Rate), us(lat.P99), us(lat.Reference.P99), ratio(lat.P99Ratio),
		"≤ "+ratio(lat.TargetP99Ratio), met(lat.Met))
	row("memory per prefix, heap", byteCount(r.Memory.HeapBytesPerPrefix), "", "", "", "")
	row("memory per prefix, RSS", byteCount(r.Memory.RSSBytesPerPrefix), "", "", "", "")

	e := r.Environment
	cpus := "one CPU"
	if e.ServerCPUs > 1 {
		cpus = fmt.Sprintf("%d CPUs, from %d source addresses", e.ServerCPUs, e.Flows)
	}
	fmt.Fprintf(&b, "\nThe reference is a UDP server doing lispd's batched I/O and nothing else, measured\n"+
		"in %d turns with lispd on the same %s. A rate's ratio is the median over the turns of\n"+
		"lispd's rate over the reference's in the turn next to it; the p99 ratio is that of the\n"+
		"p99s of all each server's samples (the median of the turns' p99 ratios: %s).\n", turns, cpus, ratio(lat.MedianTurnRatio))
	if e.SharedCPUs {
		fmt.Fprintf(&b, "The generator shares the servers' CPUs (the machine has no %d for them and one for it):\n"+
			"both rates are lower than %d CPUs of their own would give, and the ratio compares them alike.\n", e.ServerCPUs, e.ServerCPUs)
	}
	if req.Reference.GeneratorBusy > 0.95 {
		fmt.Fprintf(&b, "The generator was busy %.0f%% of the time: the reference's rate is a lower bound.\n", 100*req.Reference.GeneratorBusy)
	}
	fmt.Fprintf(&b, "\nMap-Register: %d in %.2fs in %d turns, %d accepted, %d registered, %d resent; lispd used %.2f cores, waited %.2f for them, "+
		"the reference %.2f and %.2f; Map-Notify %d bytes, the reference's %d\n",
		reg.Count, reg.Seconds, turns, reg.Accepted, reg.Registered, reg.Resent, reg.ServerCPU, reg.ServerWait,
		reg.ReferenceServerCPU, reg.ReferenceServerWait, reg.NotifyBytes, reg.ReferenceNotifyBytes)
	if ref := r.MapRefresh; ref.Count > 0 {
		fmt.Fprintf(&b, "refreshing them: %d in %.2fs, %d accepted, %d resent; lispd used %.2f cores, waited %.2f, the reference %.2f and %.2f\n",
			ref.Count, ref.Seconds, ref.Accepted, ref.Resent, ref.ServerCPU, ref.ServerWait, ref.ReferenceServerCPU, ref.ReferenceServerWait)
	}
	fmt.Fprintf(&b, "maximum rate, window %d, %gs each in turns:\n", r.Window, r.Seconds)
	for _, l := range []struct {
		name string
		Load
	}{{"lispd", req.Lispd}, {"reference", req.Reference}} {
		fmt.Fprintf(&b, "  %-9s %s: %d replies of %d bytes, %d lost, %d negative; server used %.2f cores, waited %.2f for them; generator busy %.0f%%; kernel drops %d\n",
			l.name, rate(l.PerSecond), l.Replies, l.ReplyBytes, l.Lost, l.Negative, l.ServerCPU, l.ServerWait, 100*l.GeneratorBusy, l.KernelDrops)
	}
	fmt.Fprintf(&b, "latency at %s, open loop, %gs each:\n", rate(lat.Rate), r.Seconds)
	for _, l := range []struct {
		name string
		OpenLoad
	}{{"lispd", lat.OpenLoad}, {"reference", lat.Reference}} {
		fmt.Fprintf(&b, "  %-9s %s: p50 %s, p90 %s, p99 %s, p99.9 %s, max %s; %d lost (kernel drops %d), %d skipped, lag ≤ %s; server used %.2f cores, waited %.2f for them\n",
			l.name, rate(l.PerSecond), us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max),
			l.Lost, l.KernelDrops, l.Skipped, us(l.ScheduleLagUS), l.ServerCPU, l.ServerWait)
	}
	m := r.Memory
	fmt.Fprintf(&b, "memory: heap %s -> %s, RSS %s -> %s\n", mib(m.HeapBefore), mib(m.HeapAfter), mib(m.RSSBefore), mib(m.RSSAfter))
	fmt.Fprintf(&b, "pinning: lispd %s; reference %s; generator %s\n", e.LispdPinning, e.ReferencePinning, e.GeneratorPinning)
	fmt.Fprintf(&b, "priority: %s, for lispd, the reference and the generator's thread\n", e.Priority)
	fmt.Fprintf(&b, "lispd %s (%s), %s, Linux %s, %d CPUs\n", e.LispdVersion, e.Lispd, e.Go, e.Kernel, e.CPUs)
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "lispd, %s: go tool pprof %s; go tool trace %s; allocations: go tool pprof -sample_index alloc_space -diff_base %s %s\n",
			p.Phase, p.CPU, p.Trace, p.AllocsBefore, p.Allocs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rate writes a rate per second with thousands separated: 512,345/s.
func rate(v float64) string { return thousands(int64(v+0.5)) + "/s" }

func us(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + " µs" }

func byteCount(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " B" }

func mib(v uint64) string { return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) + " MiB" }

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
