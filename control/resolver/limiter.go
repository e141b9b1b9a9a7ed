package resolver

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter rate-limits Map-Requests per source address, so that one
// misbehaving or spoofing source cannot take the resolver from others.
// Sources idle for a while are forgotten; the number tracked is bounded,
// and sources beyond the bound share one bucket.
type limiter struct {
	mu        sync.Mutex
	rate      rate.Limit
	burst     int
	sources   map[netip.Addr]*source
	overflow  *rate.Limiter
	lastSweep time.Time
}

type source struct {
	lim  *rate.Limiter
	seen time.Time
}

const (
	maxSources = 1 << 16
	idleAfter  = time.Minute
)

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{
		rate:     rate.Limit(perSecond),
		burst:    burst,
		sources:  map[netip.Addr]*source{},
		overflow: rate.NewLimiter(rate.Limit(perSecond), burst),
	}
}

func (l *limiter) allow(a netip.Addr) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > idleAfter {
		for k, s := range l.sources {
			if now.Sub(s.seen) > idleAfter {
				delete(l.sources, k)
			}
		}
		l.lastSweep = now
	}
	s := l.sources[a]
	if s == nil {
		if len(l.sources) >= maxSources {
			return l.overflow.AllowN(now, 1)
		}
		s = &source{lim: rate.NewLimiter(l.rate, l.burst)}
		l.sources[a] = s
	}
	s.seen = now
	return s.lim.AllowN(now, 1)
}
