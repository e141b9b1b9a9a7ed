package lab

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/lab/linkemu"
)

// DaemonStatus is how a daemon of the lab is doing.
type DaemonStatus struct {
	Process
	Running bool `json:"running"`
	// Registrations are an xTR's, "<map-server> <state>".
	Registrations []string `json:"registrations,omitempty"`
	// Links are the link daemon's emulated links' counters, by name.
	Links map[string]linkemu.Stats `json:"links,omitempty"`
	Error string                   `json:"error,omitempty"`
}

// Status reads the lab's state and asks each daemon how it is.
func Status(name string, opts Options) (*State, []DaemonStatus, error) {
	st, err := Load(name, opts)
	if err != nil {
		return nil, nil, err
	}
	var out []DaemonStatus
	for _, p := range st.Processes {
		ds := DaemonStatus{Process: p}
		ds.Running, _ = running(p)
		if ds.Running && p.Daemon == "lispd" {
			s, err := daemon.QueryStatus(p.Socket)
			if err != nil {
				ds.Error = err.Error()
			} else if s.XTR != nil {
				for _, ms := range s.XTR.MapServers {
					ds.Registrations = append(ds.Registrations, ms.Address+" "+ms.State)
				}
			}
		}
		if ds.Running && p.Daemon == linkdDaemon {
			ds.Links, err = (&linkClient{socket: p.Socket}).Stats()
			if err != nil {
				ds.Error = err.Error()
			}
		}
		out = append(out, ds)
	}
	return st, out, nil
}

// WriteStatus prints a lab's status for people.
func WriteStatus(w io.Writer, st *State, daemons []DaemonStatus) {
	state := "up"
	if !st.Up {
		state = "not up (being built, or its up failed: amptcp lab down " + st.Name + ")"
	}
	fmt.Fprintf(w, "lab %s: %s\n  directory %s\n  namespaces %s*: %d\n", st.Name, state, st.Dir, st.Prefix, len(st.Namespaces))
	for _, d := range daemons {
		run := "running"
		if !d.Running {
			run = "NOT RUNNING"
		}
		fmt.Fprintf(w, "  %-10s %-5s pid %-7d %s", cmp.Or(d.Node, "(lab)"), d.Daemon, d.PID, run)
		if len(d.Registrations) > 0 {
			fmt.Fprintf(w, ", registered: %s", strings.Join(d.Registrations, ", "))
		}
		if d.Error != "" {
			fmt.Fprintf(w, ", %s", d.Error)
		}
		fmt.Fprintln(w)
		writeLinkStats(w, d.Links)
	}
}

// writeLinkStats prints a line per emulated link and direction.
func writeLinkStats(w io.Writer, links map[string]linkemu.Stats) {
	for _, name := range sortedLinkNames(links) {
		s := links[name]
		for _, dir := range []linkemu.Direction{linkemu.AToB, linkemu.BToA} {
			c := s.Dir(dir)
			fmt.Fprintf(w, "    %-14s %-6s in %d frames %d bytes, delivered %d, dropped: loss %d queue %d down %d, write errors %d, late p99 %v max %v\n",
				name, dir, c.FramesIn, c.BytesIn, c.Delivered, c.DroppedLoss, c.DroppedQueue, c.DroppedDown, c.WriteErrors,
				c.Lateness.Quantile(0.99), c.Lateness.Max)
		}
	}
}
