package dataplane

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/amptcp/amptcp/internal/nsnet"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// BPF run-time statistics (Options.BPFStats): the kernel counts the runs
// of every program and the time they took while a process holds its
// statistics descriptor open (the global sysctl would count for every
// program of a shared machine, and stay on). They cost each program run
// a clock read or two, so they are off unless asked for.

// enableBPFStats turns the run-time statistics on until the returned
// closer is closed.
func enableBPFStats() (interface{ Close() error }, error) {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, fmt.Errorf("enable BPF run-time statistics (Linux 5.8): %w", err)
	}
	return c, nil
}

// programRuns are a program's runs and their time, by where it runs:
// "r1 itr", "r3 underlay_xdp".
type programRuns map[string]ProgramRuns

// ProgramRuns is what one of lispd's programs on a router did during an
// iperf3 run.
type ProgramRuns struct {
	Router  string `json:"router"`
	Program string `json:"program"`
	Runs    uint64 `json:"runs"`
	// Nanoseconds is the time the runs took, NsPerRun their mean.
	Nanoseconds uint64  `json:"ns"`
	NsPerRun    float64 `json:"ns_per_run"`
}

// bpfRuns reads the statistics of the programs attached to the routers'
// interfaces (tc ingress and XDP), summed per router and program.
func (p *path) bpfRuns() (programRuns, error) {
	out := programRuns{}
	for _, r := range p.routers() {
		ids, err := attachedPrograms(r)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			prog, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue // detached meanwhile (a restart)
			}
			info, ierr := prog.Info()
			st, serr := prog.Stats()
			prog.Close()
			if err := errors.Join(ierr, serr); err != nil {
				return nil, fmt.Errorf("program %d on %s: %w", id, r.Name, err)
			}
			k := r.Name + " " + info.Name
			pr := out[k]
			pr.Router, pr.Program = r.Name, info.Name
			pr.Runs += st.RunCount
			pr.Nanoseconds += uint64(st.Runtime)
			out[k] = pr
		}
	}
	return out, nil
}

// attachedPrograms lists the IDs of the programs on a node's interfaces,
// on tc ingress (TCX) and in XDP, each once (lispd attaches the same
// program to several).
func attachedPrograms(nd *nsnet.Node) ([]ebpf.ProgramID, error) {
	links, err := nd.NL.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list the interfaces of %s: %w", nd.Name, err)
	}
	var ids []ebpf.ProgramID
	for _, l := range links {
		if x := l.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 {
			ids = append(ids, ebpf.ProgramID(x.ProgId))
		}
		var res *link.QueryResult
		err := nd.NS.Do(func() (err error) {
			res, err = link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
			return err
		})
		if err != nil {
			continue // no TCX on it
		}
		for _, pr := range res.Programs {
			ids = append(ids, pr.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// since are the runs of r's programs after before.
func (r programRuns) since(before programRuns) []ProgramRuns {
	var out []ProgramRuns
	for k, now := range r {
		b := before[k]
		d := ProgramRuns{Router: now.Router, Program: now.Program, Runs: now.Runs - b.Runs, Nanoseconds: now.Nanoseconds - b.Nanoseconds}
		if now.Runs < b.Runs || d.Runs == 0 {
			continue // replaced meanwhile, or idle
		}
		d.NsPerRun = float64(d.Nanoseconds) / float64(d.Runs)
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b ProgramRuns) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.Program, b.Program))
	})
	return out
}
