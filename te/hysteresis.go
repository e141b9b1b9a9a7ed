package te

import (
	"fmt"
	"time"
)

// Hysteresis says when a better set of paths replaces the set in use, so
// that noise in the RTTs does not move subflows back and forth: at once
// when a path of the set in use is gone; otherwise only after Confirm
// evaluations in a row found a better set, and HoldDown after the last
// change. Better means more paths, or as many with a differential RTT (or
// else a total RTT) lower by Gain of it and by MinGain at least.
type Hysteresis struct {
	Confirm  int
	HoldDown time.Duration
	Gain     float64 // relative, 0.1 for 10 %
	MinGain  float64 // in cost units (seconds)
}

// Score is what sets are compared by: the number of paths, their
// differential RTT and their total RTT.
type Score struct {
	Paths         int
	Spread, Total float64
}

// ScoreOf is the score of a chosen set.
func ScoreOf(c Choice) Score { return Score{Paths: len(c.Paths), Spread: c.Spread, Total: c.Total} }

// Current is the set in use as it scores under the latest RTTs.
type Current struct {
	Score
	// Gone is set when a path of it can no longer be followed: a hop is
	// down, or a link of it is no longer measured. Why says which.
	Gone bool
	Why  string
	// Fits is false when a path of it breaks a rule now (its RTT grew
	// beyond rule 1's bound, say): any other set is then better.
	Fits bool
}

// Tracker follows the set of paths of one (source, destination) pair.
type Tracker struct {
	h       Hysteresis
	has     bool
	changed time.Time
	better  int // evaluations in a row that found a better set
	reason  string
	changes int
}

// NewTracker returns the tracker of a pair that has no set yet.
func NewTracker(h Hysteresis) *Tracker { return &Tracker{h: h} }

// Verdict is what an evaluation decided.
type Verdict struct {
	Adopt  bool
	Reason string
}

// Evaluate weighs the candidate set against the set in use at now. same
// says the candidate is the set in use. When the verdict adopts, the
// caller installs the candidate.
func (t *Tracker) Evaluate(now time.Time, cur Current, cand Score, same bool) Verdict {
	switch {
	case !t.has:
		if cand.Paths == 0 {
			return Verdict{}
		}
		return t.adopt(now, "first set")
	case same:
		t.better = 0
		return Verdict{}
	case cur.Gone:
		return t.adopt(now, cur.Why)
	}
	why, ok := improves(cur, cand, t.h)
	if !ok {
		t.better = 0
		return Verdict{}
	}
	t.better++
	if t.better < t.h.Confirm || now.Sub(t.changed) < t.h.HoldDown {
		return Verdict{}
	}
	return t.adopt(now, why)
}

func (t *Tracker) adopt(now time.Time, why string) Verdict {
	t.has, t.changed, t.better, t.reason = true, now, 0, why
	t.changes++
	return Verdict{Adopt: true, Reason: why}
}

// Changed is when the set last changed and why; Changes how many times
// it did; Pending how many evaluations in a row found a better set.
func (t *Tracker) Changed() (time.Time, string) { return t.changed, t.reason }
func (t *Tracker) Changes() int                 { return t.changes }
func (t *Tracker) Pending() int                 { return t.better }

// improves says whether cand is enough better than cur, and how.
func improves(cur Current, cand Score, h Hysteresis) (string, bool) {
	switch {
	case !cur.Fits && cand.Paths > 0:
		return "a path broke a rule: " + cur.Why, true
	case cand.Paths > cur.Paths:
		return fmt.Sprintf("more paths: %d, were %d", cand.Paths, cur.Paths), true
	case cand.Paths < cur.Paths:
		return "", false
	}
	if gain := cur.Spread - cand.Spread; gain > 0 && gain >= max(h.Gain*cur.Spread, h.MinGain) {
		return fmt.Sprintf("differential RTT %s, was %s", ms(cand.Spread), ms(cur.Spread)), true
	}
	if gain := cur.Total - cand.Total; gain > 0 && gain >= max(h.Gain*cur.Total, h.MinGain) && cand.Spread <= cur.Spread+h.MinGain {
		return fmt.Sprintf("total RTT %s, was %s", ms(cand.Total), ms(cur.Total)), true
	}
	return "", false
}
