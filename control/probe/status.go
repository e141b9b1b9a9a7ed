package probe

import (
	"slices"
	"sync/atomic"
	"time"
)

type counters struct {
	sent, answered, missed, unmatched atomic.Uint64
	downs, ups, noRLOC, sendErrors    atomic.Uint64
}

// Counters is a snapshot of the prober's counters.
type Counters struct {
	// Sent probes; Answered those answered in time, Missed those not;
	// Unmatched the probe replies for no probe in flight (late or forged).
	Sent, Answered, Missed, Unmatched uint64
	// Downs and Ups count the changes of locators' reachability.
	Downs, Ups uint64
	// NoRLOC counts probes not sent for want of a local RLOC to answer to.
	NoRLOC, SendErrors uint64
}

// Counters returns the current counters.
func (p *Prober) Counters() Counters {
	k := &p.counter
	return Counters{
		Sent: k.sent.Load(), Answered: k.answered.Load(), Missed: k.missed.Load(), Unmatched: k.unmatched.Load(),
		Downs: k.downs.Load(), Ups: k.ups.Load(), NoRLOC: k.noRLOC.Load(), SendErrors: k.sendErrors.Load(),
	}
}

// Locator is one row of the RTT matrix's row of this router: a probed
// locator, whether it is up, and its round-trip times.
type Locator struct {
	Address string `json:"address"`
	// EID is the EID-prefix the probes ask about.
	EID string `json:"eid"`
	Up  bool   `json:"up"`
	// Known is false until the locator answered or went down: before, it
	// is taken as up on its R bit.
	Known bool `json:"known"`
	// RTT is the last round-trip time, SRTT the smoothed one (RFC 6298),
	// in milliseconds; zero until it answers.
	RTT  float64 `json:"rtt_ms"`
	SRTT float64 `json:"srtt_ms"`
	// MinRTT is the least RTT of the last MinWindow, in milliseconds.
	MinRTT    float64   `json:"min_rtt_ms"`
	Sent      uint64    `json:"sent"`
	Answered  uint64    `json:"answered"`
	Misses    int       `json:"misses_in_a_row"`
	LastReply time.Time `json:"last_reply,omitzero"`
	Since     time.Time `json:"since"` // up or down since
}

// Matrix returns this router's row of the RTT matrix: every locator it
// probes, sorted by address.
func (p *Prober) Matrix() []Locator {
	p.mu.Lock()
	locs := make([]*locator, 0, len(p.locs))
	for _, l := range p.locs {
		locs = append(locs, l)
	}
	slices.SortFunc(locs, func(a, b *locator) int { return a.addr.Compare(b.addr) })
	out := make([]Locator, 0, len(locs))
	for _, l := range locs {
		out = append(out, Locator{
			Address: l.addr.String(), EID: l.eid.String(), Up: l.up, Known: l.known,
			RTT: ms(l.last), SRTT: ms(l.srtt), MinRTT: ms(minOf(l.mins)), Sent: l.sent, Answered: l.answered, Misses: l.misses,
			LastReply: l.lastReply, Since: l.since,
		})
	}
	p.mu.Unlock()
	return out
}

func minOf(mins []sample) time.Duration {
	if len(mins) == 0 {
		return 0
	}
	return mins[0].rtt
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
