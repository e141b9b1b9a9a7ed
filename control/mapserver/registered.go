package mapserver

import (
	"net/netip"
	"slices"

	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Registered is one ETR's registration of one EID-prefix: how the te
// role learns the overlay's xTRs and their RLOCs.
type Registered struct {
	Site   string
	EID    mapping.EID
	Source netip.AddrPort
	XTRID  *lisp.XTRID
	// RLOCs are the addresses the ETR's locators end at: a plain RLOC,
	// the last hop of an ELP, the addresses of an AFI List.
	RLOCs []netip.Addr
}

// Registered lists every ETR's registration, in no particular order.
func (s *Server) Registered() []Registered {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Registered
	for e, v := range s.regs.All() {
		reg := v.reg
		for _, etr := range reg.ETRs {
			r := Registered{Site: reg.Site.Name, EID: e, Source: etr.Source, XTRID: etr.XTRID}
			for _, l := range etr.Locators {
				for _, a := range rlocsOf(l.Address) {
					if !slices.Contains(r.RLOCs, a) {
						r.RLOCs = append(r.RLOCs, a)
					}
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// rlocsOf is where a locator ends: its address, the last hop of its ELP,
// or the addresses of an AFI List.
func rlocsOf(a lisp.Address) []netip.Addr {
	if ip := a.IP(); ip.IsValid() {
		return []netip.Addr{ip.Unmap()}
	}
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		if len(l.Hops) > 0 {
			if ip := l.Hops[len(l.Hops)-1].Address.IP(); ip.IsValid() {
				return []netip.Addr{ip.Unmap()}
			}
		}
	case *lisp.AFIList:
		var out []netip.Addr
		for _, in := range l.Addresses {
			out = append(out, rlocsOf(in)...)
		}
		return out
	}
	return nil
}
