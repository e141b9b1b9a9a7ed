package cc

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the status for people: each control, its counters,
// and its connections with their subflows.
func (st *Status) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range st.Controls {
		var state []string
		if c.Registered {
			state = append(state, "registered")
		} else {
			state = append(state, "not registered")
		}
		if c.Installed {
			state = append(state, "installed")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d loaded\t%d connections\n", c.Name, strings.Join(state, ", "), c.Loaded, len(c.Connections))
		if c.Loaded == 0 {
			continue
		}
		n := c.Counters
		fmt.Fprintf(tw, "  acks %d (coupled %d), reductions %d; entries +%d -%d swept %d; uncoupled: map full %d, connection full %d\n",
			n.Acks, n.CoupledAcks, n.Losses, n.ConnsCreated, n.ConnsDeleted, n.Swept, n.MapFull, n.SlotsFull)
		for _, conn := range c.Connections {
			fmt.Fprintf(tw, "  token %08x", conn.Token)
			if c.Name == LIA {
				fmt.Fprintf(tw, "\talpha %.3f", conn.Alpha)
			}
			fmt.Fprintln(tw)
			for _, s := range conn.Subflows {
				fmt.Fprintf(tw, "    subflow %d\tcwnd %d\trtt %v", s.ID, s.Cwnd, s.RTT)
				if c.Name != LIA && s.Alpha != 0 {
					fmt.Fprintf(tw, "\talpha %.3f", s.Alpha)
				}
				fmt.Fprintln(tw)
			}
		}
	}
	sch := "none: BPF programs cannot schedule MPTCP's packets on this kernel"
	if st.Schedulers.BPF {
		sch = "yes: this kernel offers mptcp_sched_ops to BPF"
	}
	fmt.Fprintf(tw, "MPTCP schedulers: %s; BPF schedulers: %s\n", strings.Join(st.Schedulers.Available, " "), sch)
	return tw.Flush()
}
