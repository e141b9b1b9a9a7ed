package pm

import "fmt"

// binder plans [NorNet]'s binder (Boccassi et al.'s gateway aggregation):
// a subflow per gateway of the local site on the first subflow's address
// pair. The paper's binder names each gateway in a loose source route
// (LSRR), which NorNet's routers ignored; here the gateways are the
// local site's locators (its RLOCs or ELPs, from the mapping system) and
// each subflow gets a port sum of its own modulo their number, which a
// port-sum xTR sends by its own RLOC or ELP (source-selection: port-sum)
// and the peer's xTR answers through (path-selection: port-sum). Without
// a mapping of the local site it knows no gateway: its subflows
// (subflows: N, else 1) share the first path, as the paper's did where
// LSRR was ignored.
func (p *Plan) binder(in planInput) {
	g := in.localMap.Paths()
	p.Local = in.localMap
	if g == 0 {
		p.Want = max(in.subflows, 1)
		p.Why = fmt.Sprintf("binder: no gateway known (no mapping of the local site): %d subflows on the first path", p.Want)
		return
	}
	p.Want, p.P, p.PathsBack = g, g, g
	p.Why = fmt.Sprintf("binder: a subflow per gateway of the site, %d", g)
	if in.subflows > 0 {
		p.Want = in.subflows
		p.Why = fmt.Sprintf("binder: %d subflows over the site's %d gateways", in.subflows, g)
	}
}
