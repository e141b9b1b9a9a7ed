package lab

import (
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/traffic"
)

// TestDemoScenario runs `make demo`'s experiment, shortened, and checks
// what [A-MPTCP] §IV.C shows: every run succeeds; TCP and MPTCP with the
// kernel's path manager move the 2 MiB file over one subflow, A-MPTCP over
// the 2 its mapping system offers, the overridden A-MPTCP over 3; and
// A-MPTCP, with both 4 Mbit/s RLOCs of the data centre behind the client's
// 8 Mbit/s, takes at most 3/4 of TCP's time (the paper: nearly half).
func TestDemoScenario(t *testing.T) {
	testenv.RequireRoot(t)
	// Shortened: one repetition of 256 KiB and 2 MiB.
	s := shortDocScenario(t, testenv.Prefix+"-demo", "cloud-access.yaml", map[string][][2]string{
		"cloud-access-topology.yaml": nil,
		"cloud-access.yaml": {
			{`(?m)^sizes: .*$`, "sizes: [256KiB, 2MiB]"},
			{`(?m)^repetitions: .*$`, "repetitions: 1"},
			{`(?m)^timeout: .*$`, "timeout: 30s"},
			// Its claims, on the sizes left.
			{`(?m)flow: file/\d+MiB$`, "flow: file/2MiB"},
		},
	})
	res, _ := runTestScenario(t, s, "cloud-access.yaml")
	wantSubflows := map[string]int{"tcp": 1, "default": 1, "amptcp": 2, "subflows 3": 3}
	completion := map[string]time.Duration{}
	if len(res.Runs) != len(wantSubflows) {
		t.Fatalf("%d runs, want %d", len(res.Runs), len(wantSubflows))
	}
	for _, r := range res.Runs {
		pm := r.Variant["pm"]
		if r.Error != "" {
			t.Errorf("run %s (%s): %s", r.ID, pm, r.Error)
			continue
		}
		// The server sends (its subflows' records), the client receives
		// (its result has the completion time).
		ids := map[uint8]bool{}
		for _, rec := range res.Records[r.ID] {
			if rec.Flow != "file/2MiB" {
				continue
			}
			switch {
			case rec.Kind == traffic.KindSubflow && rec.Role == traffic.Sender:
				ids[rec.Subflow] = true
			case rec.Kind == traffic.KindResult && rec.Role == traffic.Receiver:
				if rec.Error != "" || rec.Completion <= 0 {
					t.Errorf("run %s (%s): result %+v", r.ID, pm, rec)
				}
				completion[pm] = rec.Completion
			case rec.Kind == traffic.KindResult && rec.CongestionControl != "cubic":
				t.Errorf("run %s (%s): the sender's result %+v", r.ID, pm, rec)
			}
		}
		if len(ids) != wantSubflows[pm] {
			t.Errorf("run %s (%s): the 2 MiB file went over subflows %v, want %d", r.ID, pm, ids, wantSubflows[pm])
		}
	}
	t.Logf("2 MiB: %v", completion)
	tcp, amptcp := completion["tcp"], completion["amptcp"]
	if tcp <= 0 || amptcp <= 0 || amptcp > tcp*3/4 {
		t.Errorf("2 MiB took %v with A-MPTCP, %v with TCP: want at most 3/4 of TCP's time", amptcp, tcp)
	}
}
