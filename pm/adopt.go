package pm

import (
	"net/netip"
)

// resync makes the engine's state what the kernel says it is, from
// sock_diag: on start (adopting the connections that exist, so that a
// restart breaks nothing) and after events were lost. Connections that
// are gone are forgotten; new ones are taken as if their events had
// come; subflows that vanished break their slots, which repair opens
// again. No subflow that exists is destroyed. starting says the daemon
// has just started.
func (e *engine) resync(conns []ConnInfo, subs []SubflowInfo, starting bool) {
	bySub := map[uint32][]SubflowInfo{}
	for _, s := range subs {
		bySub[s.Token] = append(bySub[s.Token], s)
	}
	var listeners []netip.AddrPort
	for _, ci := range conns {
		if ci.Listener {
			listeners = append(listeners, ci.Local)
		}
	}
	seen := map[uint32]bool{}
	for _, ci := range conns {
		// Connections that are not established yet come with their
		// ESTABLISHED event; those closing (their CLOSED event lost) are
		// forgotten with those gone: no subflow can join them.
		if ci.Listener || ci.Token == 0 || ci.State != tcpEstablished {
			continue
		}
		seen[ci.Token] = true
		c := e.conns[ci.Token]
		if c == nil {
			c = &conn{token: ci.Token, local: ci.Local, remote: ci.Remote, announced: map[uint8]netip.AddrPort{},
				server: listening(listeners, ci.Local)}
			e.conns[ci.Token] = c
		}
		c.bytes = ci.Bytes
		e.reconcile(c, bySub[ci.Token])
		if c.state == stateCreated && ci.State == tcpEstablished {
			// Its ESTABLISHED event was lost, or it was there before the
			// daemon: then it had its announcements already.
			e.start(c, !starting)
		}
	}
	for token := range e.conns {
		if !seen[token] {
			delete(e.conns, token) // an event to come makes it anew
		}
	}
}

// listening says whether a socket at local is the accepted side of one
// of the listeners: the server side, which opens no subflows.
func listening(listeners []netip.AddrPort, local netip.AddrPort) bool {
	for _, l := range listeners {
		if l.Port() == local.Port() && (l.Addr().IsUnspecified() || l.Addr() == local.Addr()) {
			return true
		}
	}
	return false
}

// reconcile updates the subflows of c from sock_diag: the states of
// those it knows, the loss of those that are gone, the ones it did not
// know as extras (which the next plan, or this one's free slots, take).
func (e *engine) reconcile(c *conn, subs []SubflowInfo) {
	now := e.now()
	present := map[[2]netip.AddrPort]SubflowInfo{}
	for _, s := range subs {
		present[[2]netip.AddrPort{s.Local, s.Remote}] = s
	}
	for _, s := range c.slots {
		if s.att == nil {
			continue
		}
		si, ok := present[[2]netip.AddrPort{s.att.local, s.att.remote}]
		switch {
		case !ok:
			s.att = nil
			e.broken(c, s, "lost", false)
		case si.State == tcpEstablished && !s.att.established:
			s.att.established, s.att.progress, s.state = true, now, slotUp
			s.repairing = false
		}
	}
	var extras []*attempt
	for _, a := range c.extras {
		if _, ok := present[[2]netip.AddrPort{a.local, a.remote}]; ok {
			extras = append(extras, a)
		}
	}
	c.extras = extras
	for _, si := range subs {
		if c.attempt(si.Local, si.Remote) != nil {
			continue
		}
		c.extras = append(c.extras, &attempt{local: si.Local, remote: si.Remote, id: si.LocalID,
			established: si.State == tcpEstablished, sent: now, progress: now})
		c.lastID = max(c.lastID, si.LocalID)
	}
	if c.state == stateOpen {
		e.fill(c)
	}
}
