package mapcache

import (
	"time"
)

// ResolverHolddown is how long a map-resolver that let a Map-Request time
// out is asked only when every other one is down too. After it, the
// resolver is asked again in its place in the configured order: a primary
// that comes back is used again, and one still down costs one request a
// timeout every holddown.
const ResolverHolddown = 30 * time.Second

// pickResolver chooses the map-resolver for r's next try: one r has not
// asked yet before one it has, an up one before one down, and the
// configured order among equals. The caller holds the lock.
func (c *Cache) pickResolver(r *request, now time.Time) int {
	best, bestKey := 0, [2]int{-1, -1}
	for i := range c.resolvers {
		asked := 0
		for _, t := range r.tries {
			if t.resolver == i {
				asked++
			}
		}
		down := 0
		if c.resolverDown(i, now) {
			down = 1
		}
		key := [2]int{asked, down}
		if bestKey[0] < 0 || key[0] < bestKey[0] || (key[0] == bestKey[0] && key[1] < bestKey[1]) {
			best, bestKey = i, key
		}
	}
	return best
}

// resolverDown reports whether resolver i failed within the holddown.
func (c *Cache) resolverDown(i int, now time.Time) bool {
	t := c.downSince[i]
	return !t.IsZero() && now.Sub(t) < ResolverHolddown
}

// resolverFailed notes that resolver i let a try time out.
func (c *Cache) resolverFailed(i int, now time.Time) {
	if !c.resolverDown(i, now) {
		c.log.Warn("map-resolver did not answer: asking the others first", "map_resolver", c.resolvers[i],
			"holddown", ResolverHolddown)
	}
	c.downSince[i] = now
}

// resolverAnswered notes that resolver i answered.
func (c *Cache) resolverAnswered(i int) {
	if !c.downSince[i].IsZero() {
		c.log.Info("map-resolver answers again", "map_resolver", c.resolvers[i])
		c.downSince[i] = time.Time{}
	}
}

// ResolverState is a map-resolver as `lispd status` shows it.
type ResolverState struct {
	Address string `json:"address"`
	// Down says it let a request time out within the holddown: it is
	// asked only after the others.
	Down bool `json:"down"`
	// DownSince is when it last failed, while it is down.
	DownSince time.Time `json:"down_since,omitzero"`
}

// Resolvers returns the map-resolvers in their configured order.
func (c *Cache) Resolvers() []ResolverState {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ResolverState, len(c.resolvers))
	for i, a := range c.resolvers {
		out[i] = ResolverState{Address: a.String(), Down: c.resolverDown(i, now)}
		if out[i].Down {
			out[i].DownSince = c.downSince[i]
		}
	}
	return out
}
