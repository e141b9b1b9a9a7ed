package mapcache

import (
	"net/netip"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// path is a path of an entry as the Map-Reply gave it; whether it is up
// also depends on probing, and is computed when the entry is installed.
type path struct {
	hops             []dataplane.Hop
	priority, weight uint8
	reachable        bool // the locator's R bit
}

// pathOf reads a locator as a path: a plain address is one hop; an ELP
// (LCAF type 10) is its hops with their L, P and S bits, whether it comes
// alone or inside an AFI List, as lispers.net sends it next to an AFI 0
// entry. An AFI List of addresses (an RLOC's IPv4 and IPv6 addresses) is
// the first address of a family the router has an RLOC of. Anything else
// (names, other LCAFs, an ELP with a hop that is not an IP address or with
// more hops than the data plane takes) is not usable.
func pathOf(l lisp.Locator, has4, has6 bool) (path, bool) {
	p := path{priority: l.Priority, weight: l.Weight, reachable: l.Reachable}
	hops, ok := hopsOf(l.Address, has4, has6)
	if !ok {
		return path{}, false
	}
	p.hops = hops
	return p, true
}

func hopsOf(a lisp.Address, has4, has6 bool) ([]dataplane.Hop, bool) {
	if ip := a.IP(); ip.IsValid() {
		return []dataplane.Hop{{Addr: ip.Unmap()}}, true
	}
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		return elpHops(l)
	case *lisp.AFIList:
		for _, in := range l.Addresses {
			if elp, ok := in.LCAF().(*lisp.ELP); ok {
				return elpHops(elp)
			}
		}
		var first netip.Addr
		for _, in := range l.Addresses {
			ip := in.IP().Unmap()
			switch {
			case !ip.IsValid():
			case (ip.Is4() && has4) || (ip.Is6() && has6):
				return []dataplane.Hop{{Addr: ip}}, true
			case !first.IsValid():
				first = ip
			}
		}
		if first.IsValid() {
			return []dataplane.Hop{{Addr: first}}, true
		}
	}
	return nil, false
}

func elpHops(elp *lisp.ELP) ([]dataplane.Hop, bool) {
	if len(elp.Hops) == 0 || len(elp.Hops) > dataplane.MaxHops {
		return nil, false
	}
	hops := make([]dataplane.Hop, len(elp.Hops))
	for i, h := range elp.Hops {
		ip := h.Address.IP()
		if !ip.IsValid() {
			return nil, false
		}
		hops[i] = dataplane.Hop{Addr: ip.Unmap(), Lookup: h.Lookup, Probe: h.RLOCProbe, Strict: h.Strict}
	}
	return hops, true
}

// pathsOf reads a record's locators, in their order (a path's index is
// its path ID in the data plane), keeping at most MaxPaths usable ones.
// It returns how many locators were not usable.
func pathsOf(locs []lisp.Locator, rlocs []netip.Addr) (paths []path, unusable int) {
	var has4, has6 bool
	for _, a := range rlocs {
		has4, has6 = has4 || a.Unmap().Is4(), has6 || !a.Unmap().Is4()
	}
	for _, l := range locs {
		p, ok := pathOf(l, has4, has6)
		if !ok || len(paths) == dataplane.MaxPaths {
			unusable++
			continue
		}
		paths = append(paths, p)
	}
	return paths, unusable
}

// actionOf is the data plane's action for a negative Map-Reply record.
func actionOf(a lisp.Action) dataplane.Action {
	switch a {
	case lisp.ActionNone, lisp.ActionNativelyForward:
		return dataplane.NativelyForward
	case lisp.ActionSendMapRequest:
		return dataplane.SendMapRequest
	}
	return dataplane.Drop // the drop actions, and the ones not yet defined
}
