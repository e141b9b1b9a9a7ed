package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/nsnet"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// setUpLISP makes the lisp and lisp-rtr variants: a map-server node off
// r1, underlay routes so that every router reaches it and the RLOCs reach
// each other, and lispd in its roles. The kernel gets no route between
// the sites: only lispd's data plane can carry their traffic. It returns
// once the mapping system resolves both sites' EIDs.
func (p *path) setUpLISP(ctx context.Context, lispd, dir string, deadline time.Time, started func(string, int)) error {
	ms, err := p.net.Node("ms")
	if err != nil {
		return err
	}
	if _, err := p.net.Link(p.r1, ms, r1MS, msAddr); err != nil {
		return err
	}
	if err := ms.Route("default", ip(r1MS)); err != nil {
		return err
	}
	rloc1, rloc3 := ip(r1Under13), ip(r3Under13)
	var routes []route
	if p.r2 == nil {
		routes = []route{{p.r3, msNet, ip(r1Under13)}}
	} else {
		rloc1, rloc3 = ip(r1Under12), ip(r3Under23)
		routes = []route{
			{p.r1, "10.0.23.0/24", ip(r2Under12)},
			{p.r2, msNet, ip(r1Under12)},
			{p.r3, msNet, ip(r2Under23)},
			{p.r3, "10.0.12.0/24", ip(r2Under23)},
		}
	}
	for _, r := range routes {
		if err := r.nd.Route(r.dst, r.via); err != nil {
			return err
		}
	}

	resolver := ip(msAddr)
	name := p.variant.Name
	sock := func(node string) string { return filepath.Join(dir, name+"-"+node+".sock") }
	// LISP-GPE between lispd's routers, but for lisp-xdp, which
	// decapsulates in XDP what comes with RFC 9300's headers.
	gpe, xdp := []string{underlay}, p.variant.kind == kindLISPXDP
	if xdp {
		gpe = nil
	}
	x1 := xtrSpec{sock: sock("r1"), rloc: rloc1, eidIface: p.net.Links()[0].Iface(p.r1), rlocIface: p.underlay[0].Iface(p.r1),
		eidPrefix: siteA, key: keySiteA, resolver: resolver, gpe: gpe, xdp: xdp}
	x3 := xtrSpec{sock: sock("r3"), rloc: rloc3, eidIface: p.serverLink.Iface(p.r3), rlocIface: p.lastHop.Iface(p.r3),
		eidPrefix: siteB, key: keySiteB, resolver: resolver, gpe: gpe, xdp: xdp}
	daemons := []lispdSpec{{ms, "map-server", mapServerConfig(sock("ms"), resolver), sock("ms")}}
	if p.r2 != nil {
		// Each site registers the ELP through r2 toward itself: r2's
		// address facing the other site, then the site's RLOC.
		x1.elp = []string{ip(r2Under23), rloc1}
		x3.elp = []string{ip(r2Under12), rloc3}
		l12, l23 := p.underlay[0], p.underlay[1]
		rtr := rtrConfig(sock("r2"), []string{ip(r2Under12), ip(r2Under23)}, []string{l12.Iface(p.r2), l23.Iface(p.r2)}, resolver, gpe)
		daemons = append(daemons, lispdSpec{p.r2, "rtr", rtr, sock("r2")})
	}
	daemons = append(daemons, lispdSpec{p.r3, "xtr", xtrConfig(x3), x3.sock}, lispdSpec{p.r1, "xtr", xtrConfig(x1), x1.sock})

	for _, d := range daemons {
		what := fmt.Sprintf("lispd %s on %s", d.role, d.nd.Name)
		cfgPath := filepath.Join(dir, name+"-"+d.nd.Name+".yaml")
		if err := writeConfig(what, cfgPath, d.cfg); err != nil {
			return err
		}
		pr, err := startIn(d.nd.NS, what, []string{lispd, "-config", cfgPath}, filepath.Join(dir, name+"-"+d.nd.Name+"-lispd.log"), nil)
		if err != nil {
			return err
		}
		p.procs = append(p.procs, pr)
		if started != nil {
			started(what, pr.pid())
		}
		if err := waitControl(ctx, pr, d.sock, deadline); err != nil {
			return err
		}
	}
	// The mapping system answers for both sites.
	for _, q := range []struct {
		from     *nsnet.Node
		source   string
		eid      string
		wantRLOC string
	}{{p.r1, rloc1, serverIP, rloc3}, {p.r3, rloc3, clientIP, rloc1}} {
		if err := p.waitMapping(ctx, q.from, q.source, q.eid, q.wantRLOC, resolver, deadline); err != nil {
			return err
		}
	}
	return nil
}

// writeConfig checks a lispd configuration and writes it.
func writeConfig(what, path, cfg string) error {
	if _, err := config.Parse([]byte(cfg)); err != nil {
		return fmt.Errorf("check the configuration of %s: %w", what, err)
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write the configuration of %s: %w", what, err)
	}
	return nil
}

// route is a route to add to a node.
type route struct {
	nd       *nsnet.Node
	dst, via string
}

// lispdSpec is a lispd to start.
type lispdSpec struct {
	nd        *nsnet.Node
	role, cfg string
	sock      string
}

// waitControl waits until lispd answers on its control socket.
func waitControl(ctx context.Context, pr *process, sock string, deadline time.Time) error {
	for {
		_, err := daemon.QueryStatus(sock)
		switch {
		case err == nil:
			return nil
		case pr.exited():
			return pr.failure()
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("%s did not answer on its control socket %s: %v%s", pr.name, sock, err, pr.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMapping asks the map-resolver from a router, as its ITR would,
// until the EID resolves to a positive mapping whose locators end at
// wantRLOC.
func (p *path) waitMapping(ctx context.Context, from *nsnet.Node, source, eid, wantRLOC, resolver string, deadline time.Time) error {
	opts := lig.Options{
		Resolver: netip.AddrPortFrom(netip.MustParseAddr(resolver), config.DefaultPort),
		Source:   netip.MustParseAddr(source),
		Tries:    1, Timeout: 500 * time.Millisecond,
	}
	var last error
	for {
		var res *lig.Result
		err := from.NS.Do(func() (err error) {
			res, err = lig.Query(ctx, netip.MustParseAddr(eid), opts)
			return err
		})
		if err == nil {
			err = checkMapping(res, wantRLOC)
		}
		if err == nil {
			return nil
		}
		last = err
		if dead := p.dead(); dead != nil {
			return dead
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mapping system did not resolve %s from %s: %v%s", eid, from.Name, last, p.logTails())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkMapping accepts a Map-Reply with a positive record with a
// locator at wantRLOC, or an ELP ending there.
func checkMapping(res *lig.Result, wantRLOC string) error {
	if res == nil || res.Reply == nil {
		return lig.ErrNoReply
	}
	want := netip.MustParseAddr(wantRLOC)
	var seen []string
	for _, rec := range res.Reply.Records {
		for _, loc := range rec.Locators {
			seen = append(seen, loc.Address.String())
			if slices.Contains(locatorEnds(loc.Address), want) {
				return nil
			}
		}
	}
	if len(seen) == 0 {
		return errors.New("a negative Map-Reply (not registered yet)")
	}
	return fmt.Errorf("a Map-Reply with locators %v, none at %s", seen, wantRLOC)
}

// locatorEnds are the addresses where a locator's packets end: its IP,
// the last hop of its ELP, and those of an AFI List's members.
func locatorEnds(a lisp.Address) []netip.Addr {
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		if len(l.Hops) > 0 {
			return []netip.Addr{l.Hops[len(l.Hops)-1].Address.IP()}
		}
		return nil
	case *lisp.AFIList:
		var ends []netip.Addr
		for _, in := range l.Addresses {
			ends = append(ends, locatorEnds(in)...)
		}
		return ends
	}
	return []netip.Addr{a.IP()}
}

// logTails are the ends of the logs of the path's programs.
func (p *path) logTails() string {
	var b strings.Builder
	for _, pr := range p.procs {
		b.WriteString(pr.logTail())
	}
	return b.String()
}

// version runs `prog flag` and returns the first line it prints.
func version(prog, flag string) string {
	out, err := exec.Command(prog, flag).Output()
	if err != nil {
		return "unknown"
	}
	return firstLine(strings.TrimSpace(string(out)))
}
