package mapcache

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/mapping"
)

// SetStatic installs the static entries of the configuration (iid is
// the instance of those that name none) and removes the static entries
// no longer there, as a configuration reload does. Static entries never
// expire and Map-Replies do not replace them; their locators are probed
// like any others. It returns how many entries it installed, changed or
// removed.
func (c *Cache) SetStatic(static []config.StaticMapping, iid uint32) (int, error) {
	want := map[mapping.EID]*entry{}
	for i, st := range static {
		e, err := staticEntry(st, iid)
		if err != nil {
			return 0, fmt.Errorf("map-cache.static[%d]: %w", i, err)
		}
		want[e.key] = e
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	var gone []*entry
	for key, e := range c.entries.All() {
		if e.static && want[key] == nil {
			gone = append(gone, e)
		}
	}
	for _, e := range gone {
		c.remove(e)
		n++
	}
	for key, e := range want {
		if old, ok := c.entries.Get(key); ok && old.static && old.action == e.action && slices.EqualFunc(old.paths, e.paths, samePath) {
			continue
		}
		e.installed = now
		if err := c.put(e); err != nil {
			return n, fmt.Errorf("map-cache.static %s: %w", key, err)
		}
		n++
	}
	return n, nil
}

func staticEntry(st config.StaticMapping, iid uint32) (*entry, error) {
	p, err := (config.EIDPrefix{Prefix: st.EIDPrefix}).Parse()
	if err != nil {
		return nil, err
	}
	if st.InstanceID != nil {
		iid = *st.InstanceID
	}
	e := &entry{key: mapping.NewEID(iid, p), static: true, action: dataplane.Encapsulate}
	switch st.Action {
	case "natively-forward":
		e.action = dataplane.NativelyForward
	case "drop":
		e.action = dataplane.Drop
	case "send-map-request":
		e.action = dataplane.SendMapRequest
	}
	for _, l := range st.Locators {
		pa := path{priority: l.Priority, weight: l.Weight, reachable: true}
		if l.Address != "" {
			pa.hops = []dataplane.Hop{{Addr: netip.MustParseAddr(l.Address).Unmap()}}
		}
		for _, h := range l.ELP {
			pa.hops = append(pa.hops, dataplane.Hop{Addr: netip.MustParseAddr(h.Address).Unmap(),
				Lookup: h.Lookup, Probe: h.Probe, Strict: h.Strict})
		}
		e.paths = append(e.paths, pa)
	}
	return e, nil
}

func samePath(a, b path) bool {
	return a.priority == b.priority && a.weight == b.weight && a.reachable == b.reachable && slices.Equal(a.hops, b.hops)
}
