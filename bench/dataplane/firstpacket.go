package dataplane

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The first-packet bench (`amptcp bench first-packet`): how long a new
// TCP connection takes to an EID the ITR has no mapping for yet, against
// the same connection with the mapping cached, and against the
// map-resolver's round trip, in the same run. Its chain
//
//	client — r1 ~~ r3 — server,   r1 ~~ ms
//
// has lispd xTRs on r1 and r3 and lispd's mapping system on ms; the
// links marked ~~ are emulated WAN links (lab/linkemu) with the path's
// and the map-resolver's round-trip times. The server has EIDs of their
// own (a /32 each, registered by r3), so that every one is a fresh
// resolution for r1. Each trial connects to a fresh EID (cold), asks the
// map-resolver about it as r1's ITR would (its round trip), and connects
// again (warm: the path's round trip).

// FirstPacketTarget is the most a cold connection may take above the
// map-resolver's round trip and the path's, at the median.
const FirstPacketTarget = 2 * time.Millisecond

// FirstPacketOptions configure a first-packet run. The zero value of a
// field means its default.
type FirstPacketOptions struct {
	// EIDs is how many fresh EIDs are connected to, one trial each
	// (default 100, at most 250).
	EIDs int
	// ResolverRTT is the round-trip time of the emulated link between r1
	// and the map-resolver (default 10ms); PathRTT that of the link
	// between the xTRs (default 20ms).
	ResolverRTT, PathRTT time.Duration
	// Miss is r1's dataplane.miss: "hold" (the default) or "drop", to
	// see what holding saves.
	Miss string
	// ConnectTimeout bounds each connection (default 5s: a SYN lost to a
	// miss is retransmitted after a second, then two more).
	ConnectTimeout time.Duration
	// SetupTimeout, Lispd, Prefix, LinkPrefix, Keep, Progress and Started
	// are Options'.
	SetupTimeout       time.Duration
	Lispd              string
	Prefix, LinkPrefix string
	Keep               bool
	Progress           func(line string)
	Started            func(name string, pid int)
}

// Defaults of the first-packet bench.
const (
	DefaultEIDs           = 100
	DefaultResolverRTT    = 10 * time.Millisecond
	DefaultPathRTT        = 20 * time.Millisecond
	DefaultConnectTimeout = 5 * time.Second
	maxEIDs               = 250
)

// Validate fills in the defaults and returns every problem at once.
func (o *FirstPacketOptions) Validate() error {
	if o.EIDs == 0 {
		o.EIDs = DefaultEIDs
	}
	if o.ResolverRTT == 0 {
		o.ResolverRTT = DefaultResolverRTT
	}
	if o.PathRTT == 0 {
		o.PathRTT = DefaultPathRTT
	}
	if o.Miss == "" {
		o.Miss = "hold"
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	// The settings it shares with the dataplane bench, checked alike.
	dp := Options{SetupTimeout: o.SetupTimeout, Prefix: o.Prefix, LinkPrefix: o.LinkPrefix}
	var errs []error
	if err := dp.Validate(); err != nil {
		errs = append(errs, err)
	}
	o.SetupTimeout, o.Prefix, o.LinkPrefix = dp.SetupTimeout, dp.Prefix, dp.LinkPrefix
	if o.EIDs < 1 || o.EIDs > maxEIDs {
		errs = append(errs, fmt.Errorf("eids: %d is not between 1 and %d", o.EIDs, maxEIDs))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"resolver-rtt", o.ResolverRTT}, {"path-rtt", o.PathRTT}} {
		if f.d < 0 || f.d > 10*time.Second {
			errs = append(errs, fmt.Errorf("%s: %s is not between 0 and 10s", f.name, f.d))
		}
	}
	if o.Miss != "hold" && o.Miss != "drop" {
		errs = append(errs, fmt.Errorf("miss: %q is not hold or drop", o.Miss))
	}
	if o.ConnectTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("connect-timeout: %s is shorter than 100ms", o.ConnectTimeout))
	}
	return errors.Join(errs...)
}

// Trial is one fresh EID: its cold and warm connections and the
// map-resolver's round trip, in milliseconds.
type Trial struct {
	EID string `json:"eid"`
	// ColdMs is the cold connection's time to establish; Retransmits
	// counts the segments it retransmitted (its SYN's: any is a SYN the
	// ITR lost).
	ColdMs      float64 `json:"cold_ms"`
	Retransmits uint32  `json:"retransmits"`
	// ResolverMs is a Map-Request's round trip from r1 for the EID,
	// WarmMs the second connection's time to establish.
	ResolverMs float64 `json:"resolver_ms"`
	WarmMs     float64 `json:"warm_ms"`
	Error      string  `json:"error,omitempty"`
}

// Over is what the cold connection took above the map-resolver's and the
// path's round trips.
func (t Trial) Over() float64 { return t.ColdMs - t.ResolverMs - t.WarmMs }

// Quantiles are the median and the 95th percentile of a measure, in ms.
type Quantiles struct {
	Median float64 `json:"median_ms"`
	P95    float64 `json:"p95_ms"`
}

func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	s := slices.Sorted(slices.Values(xs))
	return Quantiles{Median: median(s), P95: s[min(len(s)-1, (len(s)*95+99)/100-1)]}
}

// FirstPacketResult is what a first-packet run measured; its JSON is the
// --json output.
type FirstPacketResult struct {
	EIDs        int     `json:"eids"`
	ResolverRTT float64 `json:"resolver_rtt_ms"` // configured, of the emulated links
	PathRTT     float64 `json:"path_rtt_ms"`
	Miss        string  `json:"miss"`
	Trials      []Trial `json:"trials"`
	// Cold, Warm, Resolver and Over summarize the trials that measured
	// everything; Retransmitted counts the cold connections that
	// retransmitted their SYN, Failed the trials that failed.
	Cold          Quantiles `json:"cold"`
	Warm          Quantiles `json:"warm"`
	Resolver      Quantiles `json:"map_request"`
	Over          Quantiles `json:"over"`
	Retransmitted int       `json:"retransmitted"`
	Failed        int       `json:"failed"`
	// Target says whether the median cold connection took at most
	// FirstPacketTarget above the medians of the map-resolver's and the
	// path's round trips, without a SYN retransmitted: MET or MISSED.
	Target      string  `json:"target"`
	TargetLimit float64 `json:"target_limit_ms"` // resolver + warm medians + FirstPacketTarget
	// Counters are r1's lispd's: its held packets.
	Counters    map[string]uint64 `json:"held_packets,omitempty"`
	Environment Environment       `json:"environment"`
}

func (r *FirstPacketResult) summarize() {
	var cold, warm, res, over []float64
	r.Retransmitted, r.Failed = 0, 0
	for _, t := range r.Trials {
		if t.Error != "" {
			r.Failed++
			continue
		}
		if t.Retransmits > 0 {
			r.Retransmitted++
		}
		cold, warm, res, over = append(cold, t.ColdMs), append(warm, t.WarmMs), append(res, t.ResolverMs), append(over, t.Over())
	}
	r.Cold, r.Warm, r.Resolver, r.Over = quantiles(cold), quantiles(warm), quantiles(res), quantiles(over)
	r.TargetLimit = r.Resolver.Median + r.Warm.Median + float64(FirstPacketTarget)/float64(time.Millisecond)
	switch {
	case len(cold) == 0:
		r.Target = NotMeasured
	case r.Failed == 0 && r.Retransmitted == 0 && r.Cold.Median <= r.TargetLimit:
		r.Target = Met
	default:
		r.Target = Missed
	}
}

// WriteFirstPacketText prints a first-packet result.
func WriteFirstPacketText(w io.Writer, r *FirstPacketResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "New TCP connections to %d fresh EIDs through lispd's xTRs (miss: %s), emulated WAN links:\n", r.EIDs, r.Miss)
	fmt.Fprintf(&b, "  map-resolver round trip %s ms, path round trip %s ms (configured)\n\n", ms(r.ResolverRTT), ms(r.PathRTT))
	row := func(cells ...string) { fmt.Fprintf(&b, "  %-40s %9s %9s\n", cells[0], cells[1], cells[2]) }
	row("", "median", "p95")
	row("cold: to an EID not in the map-cache", ms(r.Cold.Median), ms(r.Cold.P95))
	row("warm: again, the mapping cached", ms(r.Warm.Median), ms(r.Warm.P95))
	row("a Map-Request's round trip from r1", ms(r.Resolver.Median), ms(r.Resolver.P95))
	row("cold - warm - Map-Request, per EID", ms(r.Over.Median), ms(r.Over.P95))
	syn := "s retransmitted their SYN"
	if r.Retransmitted == 1 {
		syn = " retransmitted its SYN"
	}
	fmt.Fprintf(&b, "  (ms; %d trials measured, %d failed; %d cold connection%s)\n", len(r.Trials)-r.Failed, r.Failed, r.Retransmitted, syn)
	if len(r.Counters) > 0 {
		fmt.Fprintf(&b, "r1's held packets: %s\n", joinNonZero(r.Counters))
	}
	fmt.Fprintf(&b, "\ntarget: cold ≤ Map-Request + warm + %s ms (medians, = %s ms), no SYN retransmitted: %s\n",
		ms(float64(FirstPacketTarget)/float64(time.Millisecond)), ms(r.TargetLimit), r.Target)
	for _, t := range r.Trials {
		if t.Error != "" {
			fmt.Fprintf(&b, "  %s: %s\n", t.EID, firstLine(t.Error))
		}
	}
	e := r.Environment
	fmt.Fprintf(&b, "Linux %s, %d CPUs, %s", e.Kernel, e.CPUs, e.Go)
	if e.Lispd != "" {
		fmt.Fprintf(&b, ", %s (%s)", e.LispdVersion, e.Lispd)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func joinNonZero(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// estimateFirstPacket is how long a run takes: setting up, then per
// trial two connections and a Map-Request.
func estimateFirstPacket(o *FirstPacketOptions) time.Duration {
	return 10*time.Second + time.Duration(o.EIDs)*(2*o.PathRTT+2*o.ResolverRTT+50*time.Millisecond)
}

// EstimateFirstPacket is how long a run of opts takes, for the usage
// text.
func EstimateFirstPacket(o FirstPacketOptions) time.Duration {
	if err := o.Validate(); err != nil {
		return 0
	}
	return estimateFirstPacket(&o)
}
