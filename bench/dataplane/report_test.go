package dataplane

import (
	"encoding/json"
	"strings"
	"testing"
)

// sampleResult is a run of every variant in both profiles, in which
// lisp-rtr did not come up and the host stole CPU time.
func sampleResult() *Result {
	up := map[string]bool{"plain": true, "plain-3": true, "vxlan": true, "lisp": true}
	r := &Result{
		Seconds: 10, Repetitions: 3, Streams: []int{1, 4}, Congestion: "cubic", Profiles: Profiles,
		Variants: variantResults(up, VariantNames()...),
		Environment: Environment{Kernel: "6.18.44", CPUs: 2, Iperf3: "/usr/bin/iperf3", Iperf3Version: "iperf 3.12",
			Lispd: "/usr/bin/lispd", LispdVersion: "lispd v0.4", Go: "go1.26.8",
			Pinning: "iperf3 client on cpu 0, server on cpu 1 (iperf3 -A)", Priority: "nice -20"},
	}
	gbps := map[string]float64{"plain": 13.5, "plain-3": 15.2, "vxlan": 11.4, "lisp": 14.1}
	for rep := 1; rep <= 3; rep++ {
		for _, p := range []string{"gso", "wire"} {
			for _, v := range []string{"plain", "plain-3", "vxlan", "lisp"} {
				for _, st := range []int{1, 4} {
					g := gbps[v] * float64(st+1) / 2
					if p == "wire" && v == "lisp" {
						g /= 2
					}
					m := measured(rep, p, v, st, g)
					m.CPU = CPUUse{Busy: 15, Idle: 5, Steal: 5} // 20 s of two CPUs, a quarter stolen
					if v == "lisp" {
						m.Programs = []ProgramRuns{{Router: "r1", Program: "itr", Runs: 300000, NsPerRun: 500 + float64(rep)},
							{Router: "r3", Program: "underlay_xdp", Runs: 1000, NsPerRun: 150}}
					}
					r.Runs = append(r.Runs, m)
				}
			}
		}
	}
	r.Runs[0].Error = "iperf3: unable to connect to server: Connection refused"
	r.summarize()
	return r
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	if err := WriteText(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"iperf3 TCP (cubic), 10s runs, medians of 3 repetitions taken in turns",
		"profile gso: veth defaults",
		"profile wire: NIC-like underlay",
		// plain, 1 stream, lost its first run: the median of two.
		"                                                               server link        underlay     CPU/Gbit/s\n" +
			"  variant   streams  Gbit/s (min-max)       ratio             Mpps   B/pkt    Mpps   B/pkt machine    own   retr\n" +
			"  plain           1   13.50 (13.50-13.50)                    0.135  64,000   1.350   1,500   0.074  0.037      2\n",
		"only 2 of 3 runs measured: iperf3: unable to connect to server: Connection refused",
		"  vxlan           4   28.50 (28.50-28.50)   0.84 × plain     0.285  64,000   2.850   1,500   0.035  0.018      2\n",
		"  lisp-rtr        1  did not come up: lispd xtr on r1 exited: exit status 1",
		"  gso   1 stream  ITR/ETR: lisp      ≥ 0.95 × plain and > vxlan     1.04 × plain, 1.24 × vxlan   MET\n",
		"  wire  4 streams ITR/ETR: lisp      ≥ 0.95 × plain and > vxlan     0.52 × plain, 0.62 × vxlan   MISSED\n",
		"  lispd's programs, ns per run (runs per second):\n  lisp            1  r1 itr 502 (30.0k), r3 underlay_xdp 150 (100)\n",
		"  wire  4 streams CPU:     lisp      ≤ 1.10 × plain's CPU/Gbit/s    1.91 × plain's               MISSED\n",
		"  gso   1 stream  RTR:     lisp-rtr  ≥ 0.95 × plain-3               -                            NOT MEASURED (lisp-rtr did not come up)\n",
		"variants that did not come up:\n  lisp-rtr: lispd xtr on r1 exited: exit status 1\n    lispd's log ends with:\n      dataplane: not implemented yet",
		"The host stole 25% of the CPU time",
		"iperf 3.12 (/usr/bin/iperf3), Linux 6.18.44, 2 CPUs, go1.26.8, lispd v0.4 (/usr/bin/lispd)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("line %d ends in a space: %q", i+1, line)
		}
	}
}

// TestResultJSON checks the names of the JSON a script reads.
func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(sampleResult())
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Runs []struct {
			Repetition int     `json:"repetition"`
			Variant    string  `json:"variant"`
			Gbps       float64 `json:"gbps"`
			Error      string  `json:"error"`
			Iperf      *struct {
				Retransmits uint64 `json:"retransmits"`
			} `json:"iperf3"`
		} `json:"runs"`
		Summaries []struct {
			Variant string   `json:"variant"`
			Ratio   *float64 `json:"ratio_to_reference"`
		} `json:"summaries"`
		Targets []struct {
			Status string `json:"status"`
		} `json:"targets"`
		Variants []struct {
			Name  string `json:"name"`
			Up    bool   `json:"up"`
			Error string `json:"error"`
		} `json:"variants"`
		Profiles []struct {
			Name     string    `json:"name"`
			Underlay *Offloads `json:"underlay"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Runs) != 48 || j.Runs[0].Error == "" || j.Runs[1].Gbps != 13.5*2.5 || j.Runs[1].Iperf.Retransmits != 1 {
		t.Errorf("runs: %d, first two %+v %+v", len(j.Runs), j.Runs[0], j.Runs[1])
	}
	if len(j.Summaries) != 20 || j.Summaries[4].Variant != "vxlan" || j.Summaries[4].Ratio == nil {
		t.Errorf("summaries: %+v", j.Summaries)
	}
	if len(j.Targets) != 16 || len(j.Variants) != 5 || j.Variants[4].Up || j.Variants[4].Error == "" {
		t.Errorf("targets %+v, variants %+v", j.Targets, j.Variants)
	}
	if j.Profiles[0].Underlay != nil || *j.Profiles[1].Underlay != (Offloads{TSO: false, GSO: false, GRO: true}) {
		t.Errorf("profiles: %+v", j.Profiles)
	}
}
