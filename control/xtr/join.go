package xtr

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/te"
)

// Join is the overlay join of [SDN-MPTCP] in LISP terms: a site joins the
// overlay through the RTRs closest to it. Given a list of RTRs, which
// RLOC probing measures, it registers, before each mapping's configured
// locators, an ELP through each of the Count closest that ends at the
// mapping's first plain RLOC: traffic to the site enters it through the
// RTRs nearest the site. It chooses again as the RTTs change, with the
// te role's hysteresis: at once when a chosen RTR goes down, otherwise
// when a closer set (in total RTT, by 10 % and 2 ms) has been found
// Confirm times in a row, and HoldDown after the last change.
type Join struct {
	x    *XTR
	cfg  config.Join
	rtrs []netip.Addr
	base []config.DatabaseMapping

	mu      sync.Mutex
	tracker *te.Tracker
	chosen  []netip.Addr
	rtts    map[netip.Addr]time.Duration
}

// NewJoin returns the join of a validated xtr configuration that has one,
// which registers through x.
func NewJoin(cfg *config.XTR, x *XTR) *Join {
	j := &Join{x: x, cfg: *cfg.Join, base: cfg.DatabaseMappings}
	for _, s := range cfg.Join.RTRs {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(j.rtrs, a.Unmap()) {
			j.rtrs = append(j.rtrs, a.Unmap())
		}
	}
	j.tracker = te.NewTracker(te.Hysteresis{Confirm: cfg.Join.Confirm, HoldDown: cfg.Join.HoldDown.Duration,
		Gain: config.DefaultTEHysteresisGain, MinGain: config.DefaultTEMinGain.Seconds()})
	return j
}

// Evaluate chooses the RTRs again from their RTTs (rtt: the smoothed RTT
// of those that answered; up: whether probing finds one up) and, when the
// choice changes, registers the mappings with the new ELPs. It reports
// whether it changed them.
func (j *Join) Evaluate(now time.Time, rtt func(netip.Addr) (time.Duration, bool), up func(netip.Addr) bool) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rtts = map[netip.Addr]time.Duration{}
	var cands []netip.Addr
	for _, a := range j.rtrs {
		if d, ok := rtt(a); ok && up(a) {
			j.rtts[a] = d
			cands = append(cands, a)
		}
	}
	slices.SortStableFunc(cands, func(a, b netip.Addr) int { return cmp.Compare(j.rtts[a], j.rtts[b]) })
	cands = cands[:min(len(cands), j.cfg.Count)]
	cur := te.Current{Fits: true, Score: te.Score{Paths: len(j.chosen)}}
	for _, a := range j.chosen {
		d, ok := j.rtts[a]
		if !ok {
			cur.Gone, cur.Why = true, a.String()+" is down"
			break
		}
		cur.Total += d.Seconds()
	}
	cand := te.Score{Paths: len(cands)}
	for _, a := range cands {
		cand.Total += j.rtts[a].Seconds()
	}
	same := len(cands) == len(j.chosen)
	for _, a := range cands {
		same = same && slices.Contains(j.chosen, a)
	}
	v := j.tracker.Evaluate(now, cur, cand, same)
	if !v.Adopt {
		return false, nil
	}
	j.chosen = cands
	j.x.log.Info("overlay join", "rtrs", j.chosen, "reason", v.Reason)
	if _, err := j.x.Update(j.mappings()); err != nil { // built from a validated configuration
		j.x.log.Error("overlay join: cannot register", "error", err)
		return false, fmt.Errorf("overlay join: %w", err)
	}
	return true, nil
}

// mappings are the configured mappings with an ELP through each chosen
// RTR first.
func (j *Join) mappings() []config.DatabaseMapping {
	out := make([]config.DatabaseMapping, len(j.base))
	for i, m := range j.base {
		var rloc string
		for _, l := range m.Locators {
			if l.Address != "" {
				rloc = l.Address
				break
			}
		}
		m.Locators = slices.Clone(m.Locators)
		var elps []config.LocatorConfig
		for _, r := range j.chosen {
			elps = append(elps, config.LocatorConfig{
				ELP:      []config.ELPHop{{Address: r.String(), Probe: true, Strict: true}, {Address: rloc}},
				Priority: j.cfg.Priority, Weight: j.cfg.Weight,
			})
		}
		m.Locators = append(elps, m.Locators...)
		out[i] = m
	}
	return out
}

// JoinStatus is what `lispd status` shows of the join: each RTR's RTT,
// the chosen ones, since when and why.
type JoinStatus struct {
	RTRs    []JoinRTR `json:"rtrs"`
	Changed time.Time `json:"changed,omitzero"`
	Reason  string    `json:"reason,omitempty"`
	Changes int       `json:"changes"`
}

// JoinRTR is an RTR of the join.
type JoinRTR struct {
	Address string  `json:"address"`
	RTT     float64 `json:"rtt_ms"` // 0: down, or not measured yet
	Chosen  bool    `json:"chosen"`
}

// Status returns the join's state.
func (j *Join) Status() JoinStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	var st JoinStatus
	for _, a := range j.rtrs {
		st.RTRs = append(st.RTRs, JoinRTR{Address: a.String(), RTT: float64(j.rtts[a]) / float64(time.Millisecond), Chosen: slices.Contains(j.chosen, a)})
	}
	if st.Changes = j.tracker.Changes(); st.Changes > 0 {
		st.Changed, st.Reason = j.tracker.Changed()
	}
	return st
}

func (s JoinStatus) String() string {
	var chosen []string
	for _, r := range s.RTRs {
		if r.Chosen {
			chosen = append(chosen, r.Address)
		}
	}
	return strings.Join(chosen, ", ")
}
