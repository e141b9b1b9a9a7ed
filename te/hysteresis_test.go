package te

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var hyst = Hysteresis{Confirm: 3, HoldDown: time.Minute, Gain: 0.1, MinGain: 0.002}

// TestHysteresisNoise: RTTs that wander by ±5 % around the set in use for
// 100 evaluations, with other sets that score as well within the noise,
// never replace it.
func TestHysteresisNoise(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	tr := NewTracker(hyst)
	now := time.Unix(1000, 0)
	if v := tr.Evaluate(now, Current{}, Score{Paths: 3, Spread: 0.010, Total: 0.254}, false); !v.Adopt || v.Reason != "first set" {
		t.Fatalf("first evaluation: %+v", v)
	}
	noise := func(x float64) float64 { return x * (1 + 0.1*(r.Float64()-0.5)) }
	for i := range 100 {
		now = now.Add(10 * time.Second)
		cur := Current{Score: Score{Paths: 3, Spread: noise(0.010), Total: noise(0.254)}, Fits: true}
		cand := Score{Paths: 3, Spread: noise(0.010), Total: noise(0.254)}
		if v := tr.Evaluate(now, cur, cand, r.IntN(2) == 0); v.Adopt {
			t.Fatalf("evaluation %d adopted %+v: %s", i, cand, v.Reason)
		}
	}
	if tr.Changes() != 1 {
		t.Errorf("%d changes", tr.Changes())
	}
}

// TestHysteresisBetter: a set 30 % better is adopted on the third
// evaluation in a row that finds it, and not before the hold-down.
func TestHysteresisBetter(t *testing.T) {
	tr := NewTracker(hyst)
	t0 := time.Unix(1000, 0)
	tr.Evaluate(t0, Current{}, Score{Paths: 2, Spread: 0.020, Total: 0.180}, false)
	cur := Current{Score: Score{Paths: 2, Spread: 0.020, Total: 0.180}, Fits: true}
	better := Score{Paths: 2, Spread: 0.014, Total: 0.170}
	for i := 1; i <= 7; i++ {
		v := tr.Evaluate(t0.Add(time.Duration(i)*10*time.Second), cur, better, false)
		if want := i == 6; v.Adopt != want {
			t.Fatalf("evaluation %d at +%ds: adopt %v, want %v (hold-down until +60s)", i, i*10, v.Adopt, want)
		}
		if v.Adopt {
			if v.Reason != "differential RTT 14.0 ms, was 20.0 ms" {
				t.Errorf("reason %q", v.Reason)
			}
			cur.Score = better
		}
	}

	// After the hold-down, three in a row: an evaluation without a better
	// set in between starts the count again.
	tr = NewTracker(hyst)
	tr.Evaluate(t0, Current{}, Score{Paths: 2, Spread: 0.020}, false)
	cur = Current{Score: Score{Paths: 2, Spread: 0.020}, Fits: true}
	at := t0.Add(2 * time.Minute)
	for i, c := range []Score{better, better, cur.Score, better, better, better} {
		v := tr.Evaluate(at.Add(time.Duration(i)*time.Second), cur, c, false)
		if want := i == 5; v.Adopt != want {
			t.Fatalf("evaluation %d: adopt %v, want %v", i, v.Adopt, want)
		}
	}
}

// TestHysteresisGone: a path of the set in use going down replaces it at
// once, hold-down or not; fewer paths are no improvement otherwise.
func TestHysteresisGone(t *testing.T) {
	tr := NewTracker(hyst)
	t0 := time.Unix(1000, 0)
	tr.Evaluate(t0, Current{}, Score{Paths: 3, Spread: 0.010}, false)
	cur := Current{Score: Score{Paths: 3, Spread: 0.010}, Fits: true}
	for i := range 5 {
		if v := tr.Evaluate(t0.Add(time.Duration(i+1)*time.Minute), cur, Score{Paths: 2, Spread: 0.001}, false); v.Adopt {
			t.Fatalf("fewer paths adopted: %+v", v)
		}
	}
	cur.Gone, cur.Why = true, "10.0.0.2 is down"
	if v := tr.Evaluate(t0.Add(10*time.Minute+time.Second), cur, Score{Paths: 2}, false); !v.Adopt || v.Reason != "10.0.0.2 is down" {
		t.Fatalf("path gone: %+v", v)
	}
	at, why := tr.Changed()
	if !at.Equal(t0.Add(10*time.Minute+time.Second)) || !strings.Contains(why, "down") || tr.Changes() != 2 {
		t.Errorf("changed %v %q, %d changes", at, why, tr.Changes())
	}
	// A set in use that breaks a rule is replaced after confirmation.
	cur = Current{Score: Score{Paths: 2}, Fits: false, Why: "path 2 is 130 ms, beyond 120 ms"}
	var v Verdict
	for i := range 3 {
		v = tr.Evaluate(t0.Add(20*time.Minute+time.Duration(i)*time.Second), cur, Score{Paths: 1}, false)
	}
	if !v.Adopt || !strings.Contains(v.Reason, "broke a rule") {
		t.Errorf("rule broken: %+v", v)
	}
}
