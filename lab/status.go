package lab

import (
	"fmt"
	"io"
	"strings"

	"github.com/amptcp/amptcp/daemon"
)

// DaemonStatus is how a daemon of the lab is doing.
type DaemonStatus struct {
	Process
	Running bool `json:"running"`
	// Registrations are an xTR's, "<map-server> <state>".
	Registrations []string `json:"registrations,omitempty"`
	Error         string   `json:"error,omitempty"`
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
		fmt.Fprintf(w, "  %-10s %-5s pid %-7d %s", d.Node, d.Daemon, d.PID, run)
		if len(d.Registrations) > 0 {
			fmt.Fprintf(w, ", registered: %s", strings.Join(d.Registrations, ", "))
		}
		if d.Error != "" {
			fmt.Fprintf(w, ", %s", d.Error)
		}
		fmt.Fprintln(w)
	}
}
