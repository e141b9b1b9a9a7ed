package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// sweepResults are results of the sweep's runs: goodput by variant
// (pm, failure), each run one saturated upload whose connection had the
// subflows given.
func sweepResults(goodput map[[2]string][]float64, subflows map[string]int) *Results {
	res := &Results{Records: map[string][]traffic.Record{}}
	for _, point := range []string{"owd45", "owd150"} {
		for _, pm := range []string{"amptcp", "subflows 1", "subflows 2", "subflows 3", "subflows 4"} {
			for i, g := range goodput[[2]string{pm, point}] {
				id := fmt.Sprintf("%s-%s-%d", pm, point, i)
				res.Runs = append(res.Runs, &Run{ID: id, Variant: Variant{"pm": pm, "failure": point}})
				res.Records[id] = []traffic.Record{
					{Flow: "bulk", Kind: traffic.KindConnection, Role: traffic.Sender, Subflows: uint8(subflows[point])},
					{Time: t0, Flow: "bulk", Kind: traffic.KindResult, Role: traffic.Receiver, FlowKind: traffic.Saturate,
						Start: t0, Completion: time.Second, BytesReceived: uint64(g * 1e6 / 8)},
				}
			}
		}
	}
	return res
}

// The claim holds where rule 1 is within the tolerance of the best
// subset, fails where it is well below; the table says so.
func TestHoLSweep(t *testing.T) {
	rule := sweepResults(map[[2]string][]float64{
		{"amptcp", "owd45"}: {48, 50, 52}, {"amptcp", "owd150"}: {20, 21, 22},
	}, map[string]int{"owd45": 4, "owd150": 3})
	subsets := sweepResults(map[[2]string][]float64{
		{"subflows 1", "owd45"}: {19}, {"subflows 2", "owd45"}: {37}, {"subflows 3", "owd45"}: {50}, {"subflows 4", "owd45"}: {53},
		{"subflows 1", "owd150"}: {19}, {"subflows 2", "owd150"}: {37}, {"subflows 3", "owd150"}: {38}, {"subflows 4", "owd150"}: {10},
	}, nil)
	pts, err := HoLSweep(rule, subsets, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Point != "owd45" || pts[0].Best != 4 || !pts[0].Holds || pts[0].RuleSubflows != 4 || pts[0].FourWorse {
		t.Errorf("owd45: %+v", pts[0])
	}
	if pts[1].Best != 3 || pts[1].Holds || pts[1].RuleSubflows != 3 || !pts[1].FourWorse {
		t.Errorf("owd150: %+v (21 is well below 38)", pts[1])
	}
	var b bytes.Buffer
	WriteHoL(&b, pts)
	for _, want := range []string{"owd45    50.0 (4) n=3", "53.0* n=1", "holds", "FAILS", "at 1 of 2 points", "at 2 of 2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	if _, err := HoLSweep(rule, sweepResults(nil, nil), 0.1); err == nil {
		t.Error("no subsets: no error")
	}
}
