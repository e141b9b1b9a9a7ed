// Package probe is the RLOC probing of lispd's tunnel routers (RFC 9300
// §10.3, RFC 9301 §5.2): every locator address that map-cache entries go
// through, the RLOC of a plain locator and each hop of an ELP, gets a
// Map-Request with the probe bit every interval, sent directly to it. The
// answers give the round-trip time to each locator, this router's row of
// the RTT matrix that traffic engineering uses ([LISP-TE]), and its
// reachability: a locator is down after a number of unanswered probes in a
// row and up again at the first answer. Changes are reported so that the
// map-cache moves traffic off a failed locator and back.
package probe

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Target is a locator to probe, with the EID-prefix of a map-cache entry
// that uses it: the probe asks about that EID, as RFC 9301 has it.
type Target struct {
	Addr netip.Addr
	EID  mapping.EID
}

// Options configure a Prober.
type Options struct {
	// Interval between probes of a locator; an unanswered probe counts as
	// missed when the next one leaves.
	Interval time.Duration
	// Misses is how many probes in a row a locator may leave unanswered
	// before it is down.
	Misses int
	Sender control.Sender
	// LocalRLOCs are the ITR-RLOCs of the probes, where the replies come
	// back. Locators among them (the router itself, as a hop of an ELP)
	// are not probed.
	LocalRLOCs func() []netip.Addr
	// Targets lists the locators in use, each round.
	Targets func() []Target
	// OnChange is called, without locks held, when a locator goes down
	// or comes back up.
	OnChange func(addr netip.Addr, up bool)
	// Port is where locators listen: 0 means 4342. Tests set others.
	Port uint16
	Log  *slog.Logger
}

// Prober probes locators. Its methods are safe for concurrent use.
type Prober struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time

	schedule chan struct{} // SetSchedule changed interval

	mu       sync.Mutex
	interval time.Duration
	misses   int
	locs     map[netip.Addr]*locator
	nonces   map[uint64]*locator
	counter  counters
}

// locator is the probing state of one address.
type locator struct {
	addr netip.Addr
	eid  mapping.EID
	// up until probing says otherwise; known once it said anything.
	up, known bool
	nonce     uint64 // of the probe awaiting an answer, 0 if none
	sentAt    time.Time
	misses    int // unanswered probes in a row
	last      time.Duration
	srtt      time.Duration
	mins      []sample // the window's minimum at the front: each sample smaller than the ones after

	sent      uint64
	answered  uint64
	lastReply time.Time
	since     time.Time // of the last change of up
}

// sample is an RTT and when it was measured.
type sample struct {
	at  time.Time
	rtt time.Duration
}

// MinWindow is how far back MinRTT looks: the minimum RTT of the last
// half minute is the path's, without the queues that traffic builds on
// it (SRTT follows those: a traffic-engineered set of paths weighted by
// SRTT would move away from its own traffic).
const MinWindow = 30 * time.Second

// New returns a Prober; Run starts it.
func New(opts Options) (*Prober, error) {
	if opts.Interval <= 0 || opts.Misses < 1 || opts.Sender == nil || opts.LocalRLOCs == nil || opts.Targets == nil {
		return nil, errors.New("probe: an interval, a miss count, a sender, local RLOCs and targets are required")
	}
	if opts.Port == 0 {
		opts.Port = control.Port
	}
	if opts.OnChange == nil {
		opts.OnChange = func(netip.Addr, bool) {}
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Prober{
		opts:     opts,
		log:      log.With("component", "probe"),
		now:      time.Now,
		schedule: make(chan struct{}, 1),
		interval: opts.Interval,
		misses:   opts.Misses,
		locs:     map[netip.Addr]*locator{},
		nonces:   map[uint64]*locator{},
	}, nil
}

// SetSchedule changes how often locators are probed and how many probes
// in a row they may miss before they are down, as a configuration
// reload does. Run takes the new interval at once.
func (p *Prober) SetSchedule(interval time.Duration, misses int) error {
	if interval <= 0 || misses < 1 {
		return errors.New("probe: the interval must be positive and the misses at least 1")
	}
	p.mu.Lock()
	p.interval, p.misses = interval, misses
	p.mu.Unlock()
	select {
	case p.schedule <- struct{}{}:
	default:
	}
	return nil
}

// SetClock replaces time.Now, for tests of round-trip times.
func (p *Prober) SetClock(now func() time.Time) { p.now = now }

// Run probes every interval until ctx is done.
func (p *Prober) Run(ctx context.Context) {
	p.mu.Lock()
	t := time.NewTicker(p.interval)
	p.mu.Unlock()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.schedule:
			p.mu.Lock()
			t.Reset(p.interval)
			p.mu.Unlock()
		case <-t.C:
			p.Round()
		}
	}
}

type change struct {
	addr netip.Addr
	up   bool
}

type datagram struct {
	dst   netip.AddrPort
	b     []byte
	loc   *locator
	nonce uint64
}

// Round probes every target once. A target whose previous probe is still
// unanswered has missed one more; at Misses in a row it is down. Targets
// no longer in use are forgotten.
func (p *Prober) Round() {
	targets := p.opts.Targets()
	rlocs := p.opts.LocalRLOCs()
	local := make(map[netip.Addr]bool, len(rlocs))
	for _, a := range rlocs {
		local[a.Unmap()] = true
	}
	now := p.now()
	var out []datagram
	var changes []change
	p.mu.Lock()
	inUse := make(map[netip.Addr]bool, len(targets))
	for _, t := range targets {
		addr := t.Addr.Unmap()
		if local[addr] || inUse[addr] || !addr.IsValid() {
			continue
		}
		inUse[addr] = true
		l := p.locs[addr]
		if l == nil {
			l = &locator{addr: addr, up: true, since: now}
			p.locs[addr] = l
		}
		l.eid = t.EID
		if l.nonce != 0 {
			delete(p.nonces, l.nonce)
			l.nonce = 0
			l.misses++
			p.counter.missed.Add(1)
			if l.up && l.misses >= p.misses {
				l.up, l.known, l.since = false, true, now
				changes = append(changes, change{addr, false})
				p.counter.downs.Add(1)
			}
		}
		if len(rlocs) == 0 {
			p.counter.noRLOC.Add(1)
			continue
		}
		nonce := control.Nonce()
		b, err := encodeProbe(nonce, l.eid, rlocs, addr)
		if err != nil { // an EID that does not fit a record: none comes from the map-cache
			p.log.Error("cannot encode probe", "rloc", addr, "eid", l.eid, "error", err)
			continue
		}
		l.nonce = nonce
		l.sent++
		p.nonces[nonce] = l
		out = append(out, datagram{netip.AddrPortFrom(addr, p.opts.Port), b, l, nonce})
	}
	for addr, l := range p.locs {
		if !inUse[addr] {
			delete(p.nonces, l.nonce)
			delete(p.locs, addr)
		}
	}
	p.mu.Unlock()
	for _, dg := range out {
		// Each probe is timed from its own send, not the round's start:
		// a round of many probes takes a while to send.
		p.mu.Lock()
		if dg.loc.nonce == dg.nonce {
			dg.loc.sentAt = p.now()
		}
		p.mu.Unlock()
		if err := p.opts.Sender.Send(dg.dst, dg.b); err != nil {
			p.counter.sendErrors.Add(1)
			p.log.Debug("send probe", "rloc", dg.dst.Addr(), "error", err)
			continue
		}
		p.counter.sent.Add(1)
	}
	p.report(changes)
}

func (p *Prober) report(changes []change) {
	for _, c := range changes {
		if c.up {
			p.log.Info("locator up", "rloc", c.addr)
		} else {
			p.log.Warn("locator down", "rloc", c.addr)
		}
		p.opts.OnChange(c.addr, c.up)
	}
}

// encodeProbe builds an RLOC probe (RFC 9301 §5.2): a Map-Request with
// the probe bit for eid, sent directly (not in an ECM), with the local
// RLOCs as ITR-RLOCs, those of the locator's family first.
func encodeProbe(nonce uint64, eid mapping.EID, rlocs []netip.Addr, to netip.Addr) ([]byte, error) {
	itrs := make([]lisp.Address, 0, min(len(rlocs), lisp.MaxITRRLOCs))
	for _, same := range []bool{true, false} {
		for _, a := range rlocs {
			if a = a.Unmap(); (a.Is4() == to.Is4()) == same && len(itrs) < lisp.MaxITRRLOCs {
				itrs = append(itrs, lisp.IPAddress(a))
			}
		}
	}
	req := lisp.MapRequest{
		Probe:    true,
		Nonce:    nonce,
		ITRRLOCs: itrs,
		Records:  []lisp.RequestRecord{{EID: control.EIDAddress(eid.IID, eid.Prefix.Addr()), MaskLen: uint8(eid.Prefix.Bits())}},
	}
	return req.AppendBinary(nil)
}

// HandleReply takes a Map-Reply with the probe bit and reports whether it
// answered a probe in flight (matched by nonce: the reply may come from
// another address of the locator's router). The answer gives the RTT and
// brings a down locator back up.
func (p *Prober) HandleReply(reply *lisp.MapReply, src netip.AddrPort) bool {
	now := p.now()
	p.mu.Lock()
	l, ok := p.nonces[reply.Nonce]
	if !ok {
		p.mu.Unlock()
		p.counter.unmatched.Add(1)
		p.log.Debug("probe reply for no probe in flight", "from", src, "nonce", reply.Nonce)
		return false
	}
	delete(p.nonces, reply.Nonce)
	l.nonce = 0
	rtt := now.Sub(l.sentAt)
	l.last = rtt
	if l.answered == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 8 // RFC 6298's alpha
	}
	l.answered++
	for len(l.mins) > 0 && l.mins[len(l.mins)-1].rtt >= rtt {
		l.mins = l.mins[:len(l.mins)-1]
	}
	l.mins = append(l.mins, sample{now, rtt})
	for now.Sub(l.mins[0].at) > MinWindow {
		l.mins = l.mins[1:]
	}
	l.misses = 0
	l.lastReply = now
	var changes []change
	if !l.up {
		l.since = now
		changes = append(changes, change{l.addr, true})
		p.counter.ups.Add(1)
	}
	l.up, l.known = true, true
	p.mu.Unlock()
	p.counter.answered.Add(1)
	p.report(changes)
	return true
}

// Up reports whether a locator is up: until probing found it down, it is.
func (p *Prober) Up(addr netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.locs[addr.Unmap()]
	return l == nil || l.up
}

// MinRTT is the least RTT of a locator's answers in the last MinWindow,
// once it answered.
func (p *Prober) MinRTT(addr netip.Addr) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.locs[addr.Unmap()]
	if l == nil || len(l.mins) == 0 {
		return 0, false
	}
	return l.mins[0].rtt, true
}

// RTT is a locator's smoothed round-trip time, once it answered.
func (p *Prober) RTT(addr netip.Addr) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.locs[addr.Unmap()]
	if l == nil || l.answered == 0 {
		return 0, false
	}
	return l.srtt, true
}
