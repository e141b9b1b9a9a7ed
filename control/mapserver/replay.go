package mapserver

import (
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// replayGuard keeps a captured Map-Register from rewinding a site's
// registration: for the sites with anti-replay, a Map-Register's nonce is
// the time it was sent (control.TimeNonce) and must be newer than the last
// one accepted from the same xTR, and within the window of the
// map-server's clock.
//
// An xTR is known by its site and xTR-ID, which the HMAC covers. The
// source address does not tell xTRs apart here: anyone can send a
// captured datagram from another one. So the xTRs of a site that send no
// xTR-ID share one sequence; their nonces being times, that asks only
// that their clocks agree (and a Map-Register overtaken by another xTR's
// is sent again with a newer nonce).
//
// Nothing is kept across restarts: a Map-Register signed before the
// map-server started is refused as stale, so that a replay of one captured
// before cannot rewind the registrations made since. An xTR's state is
// forgotten once its last nonce is older than the window: everything it
// signed until then is stale too.
type replayGuard struct {
	window time.Duration
	since  time.Time            // the map-server's start
	last   map[replayKey]uint64 // the last nonce accepted from each xTR
	swept  time.Time            // when forget last ran
}

type replayKey struct {
	site  *Site
	xtrID lisp.XTRID
	hasID bool
}

func keyOf(site *Site, x *lisp.XTRID) replayKey {
	if x == nil {
		return replayKey{site: site}
	}
	return replayKey{site: site, xtrID: *x, hasID: true}
}

func newReplayGuard(window time.Duration, since time.Time) replayGuard {
	return replayGuard{window: window, since: since, last: map[replayKey]uint64{}, swept: since}
}

// timely says whether nonce's time is within the window of now and not
// older than the map-server: Accepted, Stale or Future.
func (g *replayGuard) timely(nonce uint64, now time.Time) Reason {
	t := control.NonceTime(nonce)
	switch {
	case t.Before(g.since) || t.Before(now.Add(-g.window)):
		return Stale
	case t.After(now.Add(g.window)):
		return Future
	}
	return Accepted
}

// advance accepts nonce from k if it is newer than the last. The caller
// holds the server's write lock, so that two Map-Registers of one xTR
// handled at once cannot both pass.
func (g *replayGuard) advance(k replayKey, nonce uint64) bool {
	if nonce <= g.last[k] {
		return false
	}
	g.last[k] = nonce
	return true
}

// forget drops the xTRs whose last nonce is older than the window, once a
// window. The caller holds the write lock.
func (g *replayGuard) forget(now time.Time) {
	if now.Sub(g.swept) < g.window {
		return
	}
	g.swept = now
	oldest := now.Add(-g.window)
	for k, n := range g.last {
		if control.NonceTime(n).Before(oldest) {
			delete(g.last, k)
		}
	}
}
