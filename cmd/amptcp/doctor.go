package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/amptcp/amptcp/bench/dataplane"
	"github.com/amptcp/amptcp/internal/doctor"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
)

// doctorSystem is the machine that doctor, and the commands that check
// before they start, look at; tests put a fake in its place.
var doctorSystem = doctor.Host

// runDoctor is `amptcp doctor [-json]`. Exit status: 0 when everything
// required is there (warnings or not), 1 when something is missing, 2
// for bad arguments.
func runDoctor(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("doctor", flag.ContinueOnError)
	flags.SetOutput(stderr)
	jsonOut := flags.Bool("json", false, "print the report as one JSON object")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp doctor [-json]

Checks that this machine offers what amptcp needs, trying each feature
for real where files cannot tell (in network namespaces of its own that
vanish with it): MPTCP and its userspace path manager (amptcp pm), BPF
and TCX attachment (lispd's xtr and rtr roles), network namespaces, veth
and TAP devices (the lab, the benches), the congestion controls, BPF
struct_ops, and the tools the lab runs. It prints OK, WARN or MISSING
per item and, for each that is not OK, who needs it and what to do.
docs/kernel.md explains every item. Run it as root, as amptcp runs. Exit
status 1 when something required is missing.

`)
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	r := doctor.Run(doctorSystem(), doctor.Everything())
	var err error
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			*doctor.Report
			OK bool `json:"ok"`
		}{r, len(r.Missing()) == 0})
	} else {
		err = doctor.WriteText(stdout, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "amptcp doctor: %v\n", err)
		return 1
	}
	if len(r.Missing()) > 0 {
		return 1
	}
	return 0
}

// preflight runs the checks a command needs before it starts: it prints
// the warnings and, when something required is missing, what and how to
// fix it, and then says not to go on.
func preflight(command string, checks []doctor.Check, stderr io.Writer) bool {
	if err := doctor.Preflight(doctorSystem(), checks, stderr); err != nil {
		fmt.Fprintf(stderr, "amptcp %s: %v\n", command, err)
		return false
	}
	return true
}

// labChecks are what a lab of t needs, and running s in it if s is not
// nil: namespaces and MPTCP always, veth or TAP devices for its links,
// BPF and TCX for its tunnel routers, the userspace path manager for
// hosts that run amptcp pm, and the congestion controls and tools of
// the scenario's flows.
func labChecks(t *topo.Topology, s *scenario.Scenario) []doctor.Check {
	checks := []doctor.Check{doctor.Privileges(), doctor.Netns(), doctor.MPTCP()}
	var veth, tap, routers, pm bool
	for i := range t.Links {
		if t.Links[i].Emulated() {
			tap = true
		} else {
			veth = true
		}
	}
	for _, n := range t.Nodes {
		routers = routers || n.Role == topo.RoleXTR || n.Role == topo.RoleRTR
		pm = pm || n.PM != nil
	}
	var ccs []string
	var iperf3, mptcpize bool
	if s != nil {
		pm = pm || s.Variants.Dimension(scenario.DimPM) != nil
		flows := slices.Clone(s.Flows)
		for _, set := range s.FlowSets {
			flows = append(flows, set...)
		}
		for _, c := range s.Calibrate {
			flows = append(flows, c.Flow)
		}
		for _, f := range flows {
			if f.CC != "" {
				ccs = append(ccs, f.CC)
			}
			if f.Kind == scenario.KindIperf3 {
				iperf3 = true
				mptcpize = mptcpize || f.Protocol != "tcp"
			}
		}
		// The cc dimension's values are not checked here: the runs of a
		// variant whose congestion control the kernel lacks are skipped,
		// each with the reason, and the others run.
		if s.MeasuresFidelity() {
			ccs = append(ccs, "cubic") // the fidelity's reference flow
		}
	}
	add := func(need bool, c ...doctor.Check) {
		if need {
			checks = append(checks, c...)
		}
	}
	add(pm, doctor.UserspacePM())
	add(veth, doctor.Veth())
	add(tap, doctor.TUN())
	add(routers, doctor.BPF(), doctor.TCX())
	slices.Sort(ccs)
	add(len(ccs) > 0, doctor.Congestion(slices.Compact(ccs)...))
	add(iperf3, doctor.Iperf3())
	add(mptcpize, doctor.Mptcpize())
	return checks
}

// benchDataplaneChecks are what `bench dataplane` with opts (validated)
// needs: its chains of namespaces and veth links, the data plane for the
// lisp variants, VXLAN for vxlan, the congestion control and iperf3.
func benchDataplaneChecks(opts *dataplane.Options) []doctor.Check {
	checks := []doctor.Check{doctor.Privileges(), doctor.Netns(), doctor.Veth()}
	if slices.Contains(opts.Variants, "lisp") || slices.Contains(opts.Variants, "lisp-rtr") {
		checks = append(checks, doctor.BPF(), doctor.TCX())
	}
	if slices.Contains(opts.Variants, "vxlan") {
		checks = append(checks, doctor.VXLAN())
	}
	return append(checks, doctor.Congestion(opts.Congestion),
		doctor.Tool("iperf3", opts.Iperf3, "iperf3", "amptcp bench dataplane"))
}
