package pm

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"text/tabwriter"
	"time"
)

// Status is what `amptcp pm status` shows: each connection's plan and
// its subflows, with the path each one takes.
type Status struct {
	Policy Policy `json:"policy"`
	// PathManager is the namespace's path manager before the daemon
	// switched it to userspace; it is restored on exit.
	PathManager string       `json:"path_manager,omitempty"`
	Started     time.Time    `json:"started"`
	Connections []ConnStatus `json:"connections"`
	Counters    Counters     `json:"counters"`
}

// ConnStatus is one connection.
type ConnStatus struct {
	Token  uint32         `json:"token"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	Server bool           `json:"server"`
	// State is created, waiting (for min-bytes), short (not a long-lived
	// flow), lookup (asking the mapping system), open (its plan applies)
	// or server.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Bytes uint64    `json:"bytes"`
	Plan  *Plan     `json:"plan,omitempty"`
	// Setup is the time from ESTABLISHED (or min-bytes) to every planned
	// subflow established; 0 until then.
	Setup    time.Duration   `json:"setup"`
	Subflows []SubflowStatus `json:"subflows"`
}

// SubflowStatus is one planned subflow or one that exists outside the
// plan.
type SubflowStatus struct {
	// Slot is the index in the plan, -1 for a subflow outside it.
	Slot    int            `json:"slot"`
	Local   netip.AddrPort `json:"local"`
	Remote  netip.AddrPort `json:"remote"`
	LocalID uint8          `json:"local_id"`
	// Path is the path the local xTR gives it, (sport + dport) mod the
	// peer's paths, and PathBack the peer xTR's, mod ours; -1 when the
	// plan does not steer.
	Path     int `json:"path"`
	PathBack int `json:"path_back"`
	// State is pending, up or broken (no subflow now, Reason says why).
	State      string        `json:"state"`
	Reason     string        `json:"reason,omitempty"`
	Repairs    int           `json:"repairs"`
	BytesAcked uint64        `json:"bytes_acked"`
	RTT        time.Duration `json:"rtt"`
}

// status describes every connection, with the bytes of conns and the
// subflows' statistics of subs (a fresh sock_diag read; nil without one).
func (e *engine) status(conns []ConnInfo, subs []SubflowInfo) []ConnStatus {
	stats := map[subKey]SubflowInfo{}
	for _, s := range subs {
		stats[subKey{s.Token, s.Local, s.Remote}] = s
	}
	for _, ci := range conns {
		if c := e.conns[ci.Token]; c != nil && !ci.Listener {
			c.bytes = ci.Bytes
		}
	}
	out := make([]ConnStatus, 0, len(e.conns))
	for _, c := range e.conns {
		cs := ConnStatus{Token: c.token, Local: c.local, Remote: c.remote, Server: c.server,
			State: c.state.String(), Since: c.since, Bytes: c.bytes, Plan: c.plan, Setup: c.setup}
		for _, s := range c.slots {
			ss := SubflowStatus{Slot: s.index, State: s.state.String(), Repairs: s.repairs, Path: -1, PathBack: -1}
			if s.state == slotBroken {
				ss.Reason = s.reason
				ss.Local, ss.Remote = netip.AddrPortFrom(s.Local, 0), s.Remote
			}
			if a := s.att; a != nil {
				ss.Local, ss.Remote, ss.LocalID = a.local, a.remote, a.id
				ss.Path, ss.PathBack = c.plan.paths(a.local.Port(), a.remote.Port())
			}
			cs.Subflows = append(cs.Subflows, ss.with(stats[subKey{c.token, ss.Local, ss.Remote}]))
		}
		for _, a := range c.extras {
			ss := SubflowStatus{Slot: -1, Local: a.local, Remote: a.remote, LocalID: a.id, State: "up", Path: -1, PathBack: -1}
			if !a.established {
				ss.State = "pending"
			}
			if c.plan != nil {
				ss.Path, ss.PathBack = c.plan.paths(a.local.Port(), a.remote.Port())
			}
			cs.Subflows = append(cs.Subflows, ss.with(stats[subKey{c.token, a.local, a.remote}]))
		}
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b ConnStatus) int { return cmp.Compare(a.Token, b.Token) })
	return out
}

func (s SubflowStatus) with(si SubflowInfo) SubflowStatus {
	s.BytesAcked, s.RTT = si.BytesAcked, si.RTT
	return s
}

// paths are the path indexes of a subflow with these ports: toward the
// peer and back, or -1 when the plan does not steer.
func (p *Plan) paths(sport, dport uint16) (out, back int) {
	sum := portSum(sport, dport)
	switch {
	case p.PathsOut > 0:
		return int(sum % uint32(p.PathsOut)), int(sum % uint32(max(p.PathsBack, 1)))
	case p.Policy == PolicySubflows:
		return int(sum % uint32(p.P)), -1
	}
	return -1, -1
}

// WriteText prints the status for people.
func (st *Status) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "policy %s, %s", st.Policy, plural(len(st.Connections), "connection"))
	if st.PathManager != "" {
		fmt.Fprintf(w, " (path manager was %q, restored on exit)", st.PathManager)
	}
	fmt.Fprintln(w)
	for _, c := range st.Connections {
		side := "client"
		if c.Server {
			side = "server"
		}
		fmt.Fprintf(w, "\nconnection %08x %s -> %s %s %s, %d bytes\n", c.Token, c.Local, c.Remote, side, c.State, c.Bytes)
		if p := c.Plan; p != nil {
			fmt.Fprintf(w, "  plan %s: %d subflows: %s\n", p.Policy, p.N, p.Why)
			if c.Setup > 0 {
				fmt.Fprintf(w, "  all established %v after it was opened\n", c.Setup.Round(time.Microsecond))
			}
			if p.Fallback != "" {
				fmt.Fprintf(w, "  fallback: %s\n", p.Fallback)
			}
			for _, m := range []struct {
				side string
				m    *Mapping
			}{{"local", p.Local}, {"peer", p.Remote}} {
				if m.m != nil {
					fmt.Fprintf(w, "  %s mapping %s\n", m.side, m.m.describe())
				}
			}
			if p.PathsOut > 0 {
				fmt.Fprintf(w, "  path = (sport+dport) mod %d toward the peer, mod %d back\n", p.PathsOut, max(p.PathsBack, 1))
			}
		}
		if len(c.Subflows) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  slot\tlocal\tremote\tid\tpath\tstate\tacked\trtt\trepairs")
		for _, s := range c.Subflows {
			slot, path, state := "-", "-", s.State
			if s.Slot >= 0 {
				slot = fmt.Sprint(s.Slot)
			}
			if s.Path >= 0 {
				path = fmt.Sprint(s.Path)
				if s.PathBack >= 0 {
					path += "/" + fmt.Sprint(s.PathBack)
				}
			}
			if s.Reason != "" {
				state += " (" + s.Reason + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%d\t%v\t%d\n", slot, s.Local, s.Remote, s.LocalID, path, state,
				s.BytesAcked, s.RTT.Round(10*time.Microsecond), s.Repairs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func (m *Mapping) describe() string {
	if m.Negative {
		return fmt.Sprintf("%s: negative (no LISP site), ttl %v", m.EID, m.TTL)
	}
	s := fmt.Sprintf("%s: %s", m.EID, plural(m.RLOCs, "RLOC"))
	if m.ELPs > 0 {
		s += " + " + plural(m.ELPs, "ELP")
	}
	s += fmt.Sprintf(", ttl %v", m.TTL)
	if m.Replier.IsValid() {
		s += fmt.Sprintf(", from %s in %v", m.Replier, m.RTT.Round(time.Microsecond))
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
