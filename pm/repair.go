package pm

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mptcp"
)

// maxPortTries bounds the source ports one create tries when the kernel
// finds them in use.
const maxPortTries = 16

// create opens the subflow of slot s: a new local ID and a source port
// with the slot's residue, the next such port when the kernel says the
// address is in use.
func (e *engine) create(c *conn, s *slot) {
	if s.att != nil {
		return
	}
	s.lastTry = e.now()
	cands := newPortCandidates(e.ports(), s.Remote.Port(), c.plan.P, s.Residue, e.rand(1<<30))
	for range maxPortTries {
		port, ok := cands.get()
		if !ok {
			break
		}
		local := netip.AddrPortFrom(s.Local, port)
		if c.portTaken(local) {
			continue
		}
		// A new ID for every try: the kernel keys its local addresses by
		// (address, port) and refuses an ID it knows with another port.
		id := c.nextID()
		err := e.k.CreateSubflow(c.token, mptcp.Addr{ID: id, IP: s.Local, Port: port}, s.Remote)
		if errors.Is(err, unix.EADDRINUSE) {
			e.count.portsInUse++
			continue
		}
		if errors.Is(err, unix.ENOTCONN) {
			// The connection is closing: its CLOSED event is on the way
			// (or was lost), and no subflow can join it any more.
			e.count.createFailed[errnoName(err)]++
			e.log.Debug("connection closing", "token", c.token)
			delete(e.conns, c.token)
			return
		}
		if err != nil {
			e.createFailed(c, s, errnoName(err), err)
			return
		}
		now := e.now()
		c.recent[c.nRecent%len(c.recent)] = local
		c.nRecent++
		s.att = &attempt{local: local, remote: s.Remote, id: id, sent: now, progress: now}
		s.state = slotPending
		e.count.created++
		e.log.Debug("subflow created", "token", c.token, "slot", s.index, "local", local, "remote", s.Remote, "id", id)
		return
	}
	e.createFailed(c, s, "no_free_port", errors.New("no free source port with the slot's residue"))
}

// createFailed backs off: a create the kernel refuses (no route, no
// such address, a connection that fell back to TCP) fails the same way
// the next time, until a link or address change, which retries at once.
func (e *engine) createFailed(c *conn, s *slot, label string, err error) {
	e.count.createFailed[label]++
	e.log.Debug("create subflow", "token", c.token, "slot", s.index, "local", s.Local, "remote", s.Remote, "error", err)
	e.broken(c, s, "create_failed", true)
}

// errnoName is a short label for a command's error: its errno's name.
func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
	}
	return "other"
}

// portTaken says whether a subflow of c uses this local address and port
// (the kernel would refuse it, at the cost of a command), or used it
// lately.
func (c *conn) portTaken(local netip.AddrPort) bool {
	if slices.Contains(c.recent[:], local) {
		return true
	}
	for a := range c.attempts() {
		if a.local == local {
			return true
		}
	}
	return false
}

// nextID returns a local address ID that no subflow of c has: IDs are
// per connection, 0 is the first subflow's.
func (c *conn) nextID() uint8 {
	taken := map[uint8]bool{0: true}
	for a := range c.attempts() {
		taken[a.id] = true
	}
	for range 255 {
		if c.lastID++; !taken[c.lastID] {
			return c.lastID
		}
	}
	return c.lastID + 1 // all taken: the kernel will say
}

// destroy closes the subflow of slot s, which breaks the slot.
func (e *engine) destroy(c *conn, s *slot, reason string) {
	a := s.att
	if err := e.k.DestroySubflow(c.token, a.local, a.remote); err != nil && !errors.Is(err, unix.ENOENT) {
		e.log.Debug("destroy subflow", "token", c.token, "local", a.local, "remote", a.remote, "error", err)
	}
	e.count.destroyed[reason]++
	e.log.Info("subflow destroyed", "token", c.token, "slot", s.index, "local", a.local, "remote", a.remote, "reason", reason)
	s.att = nil
	e.broken(c, s, reason, false)
}

// broken marks a slot without a subflow and schedules its repair: one
// repair interval after its last create (so at once after a stall or a
// create that got no answer, and never more often than each interval),
// or, after refusals in a row, a wait that doubles up to max-backoff.
func (e *engine) broken(c *conn, s *slot, reason string, refused bool) {
	now := e.now()
	if !s.repairing {
		s.broke, s.cause = now, reason
	}
	s.state, s.reason, s.repairing = slotBroken, reason, true
	e.count.broken[reason]++
	wait := e.cfg.Repair.Interval.Duration
	if !refused {
		s.refusals = 0
		s.retryAt = s.lastTry.Add(wait)
		return
	}
	s.refusals++
	s.retryAt = now.Add(min(wait<<min(s.refusals-1, 16), e.cfg.Repair.MaxBackoff.Duration))
}

// needsPoll says whether the tick reads sock_diag: for connections
// waiting for min-bytes, and for the subflows that repair watches.
func (e *engine) needsPoll() (conns, subflows bool) {
	for _, c := range e.conns {
		switch {
		case c.state == stateWaiting:
			conns = true
		case c.state == stateOpen && (*e.cfg.Repair.Enabled || e.cfg.Backup.Enabled) && len(c.slots) > 1:
			subflows = true
		}
	}
	return conns, subflows
}

// tick runs the timers: opens the connections that reached min-bytes,
// destroys stalled subflows and creates that got no answer, and repairs
// the broken slots whose time has come.
func (e *engine) tick() {
	wantConns, wantSubs := e.needsPoll()
	if now := e.now(); now.Sub(e.lastPoll) < e.cfg.PollInterval.Duration {
		wantConns, wantSubs = false, false
	} else if wantConns || wantSubs {
		e.lastPoll = now
	}
	if wantConns {
		if cs, err := e.diag.Connections(); err != nil {
			e.log.Warn("read connections", "error", err)
		} else {
			e.bytesReached(cs)
		}
	}
	if wantSubs {
		if subs, err := e.diag.Subflows(); err != nil {
			e.log.Warn("read subflows", "error", err)
		} else {
			e.watch(subs)
		}
	}
	if !*e.cfg.Repair.Enabled {
		return
	}
	now := e.now()
	for _, c := range e.conns {
		if c.state != stateOpen {
			continue
		}
		for _, s := range c.slots {
			if s.state == slotPending && !s.att.handshaken && now.Sub(s.att.sent) >= e.synTimeout(c, s) {
				s.synTimeouts++
				e.destroy(c, s, "syn_timeout")
			}
			if s.state == slotBroken && !now.Before(s.retryAt) {
				e.create(c, s)
			}
		}
	}
}

// maxSynWait bounds the wait for a create's handshake, so that a path
// that comes back is tried within it: well inside the second that
// repair is given, and before the kernel's own SYN
// retransmission after a second.
const maxSynWait = 500 * time.Millisecond

// synTimeout is how long a create may wait for its handshake before it is
// destroyed and sent again: a repair interval (three RTTs on a long
// path), doubled after each create of the slot that timed out, up to
// maxSynWait. Without the doubling, a burst of connections that delays
// every handshake beyond the interval would be answered with a storm of
// creates that delays them further.
func (e *engine) synTimeout(c *conn, s *slot) time.Duration {
	base := max(e.cfg.Repair.Interval.Duration, 3*c.rtt)
	return min(base<<min(s.synTimeouts, 8), max(maxSynWait, base))
}

// bytesReached opens the waiting connections that carried min-bytes.
func (e *engine) bytesReached(cs []ConnInfo) {
	for _, ci := range cs {
		c := e.conns[ci.Token]
		if c == nil || ci.Listener {
			continue
		}
		c.bytes = ci.Bytes
		if c.state == stateWaiting && ci.Bytes >= e.cfg.LongLived.MinBytes {
			e.log.Debug("long-lived", "token", c.token, "bytes", ci.Bytes)
			e.open(c)
		}
	}
}

type subKey struct {
	token         uint32
	local, remote netip.AddrPort
}

// watch reads the subflows' progress and destroys the stalled ones: no
// byte acknowledged for stall-time while retransmitting, when another
// subflow of the connection got acknowledgements in that time. That is
// a path that failed where the host cannot see it ([MPTCP-failures]); the
// kernel would wait for its RTO backoff to give up on it.
func (e *engine) watch(subs []SubflowInfo) {
	now := e.now()
	stall := e.cfg.Repair.StallTime.Duration
	byKey := make(map[subKey]*SubflowInfo, len(subs))
	for i := range subs {
		byKey[subKey{subs[i].Token, subs[i].Local, subs[i].Remote}] = &subs[i]
	}
	for _, c := range e.conns {
		if c.state != stateOpen {
			continue
		}
		progressing := 0
		for _, s := range c.slots {
			a := s.att
			if a != nil && !a.established {
				// A join whose socket is established waits for the
				// peer's last ACK (MPTCP v1) or for its event: alive.
				if si := byKey[subKey{c.token, a.local, a.remote}]; si != nil && si.State == tcpEstablished {
					a.handshaken = true
				}
			}
			if a == nil || !a.established {
				continue
			}
			si := byKey[subKey{c.token, a.local, a.remote}]
			if si == nil {
				continue
			}
			if si.BytesAcked > a.acked {
				a.acked, a.progress = si.BytesAcked, now
			}
			a.stuck = si.Retransmits > 0 || si.Backoff > 0
			a.rtt = si.RTT
			c.rtt = max(c.rtt, si.RTT)
			if now.Sub(a.progress) < stall {
				progressing++
			}
		}
		if *e.cfg.Repair.Enabled {
			for _, s := range c.slots {
				a := s.att
				if a == nil || !a.established || !a.stuck || now.Sub(a.progress) < stall {
					continue
				}
				if progressing > 0 {
					e.destroy(c, s, "stall")
				}
			}
		}
		e.backups(c)
	}
}

// linkChanged repairs at once after an interface or address change: a
// link that is back makes the broken slots worth trying now, and the
// creates sent while it was down will not be answered before the
// kernel's SYN retransmission.
func (e *engine) linkChanged() {
	now := e.now()
	for _, c := range e.conns {
		if c.state != stateOpen || !*e.cfg.Repair.Enabled {
			continue
		}
		for _, s := range c.slots {
			if s.state == slotPending && !s.att.handshaken && s.att.sent.Before(now) {
				e.destroy(c, s, "link_change")
			}
			if s.state == slotBroken {
				e.create(c, s)
			}
		}
	}
}
