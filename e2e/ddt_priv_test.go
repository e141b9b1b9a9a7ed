package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
)

// ddtNet is a LISP-DDT deployment, every part in its own namespace
// around a core router, on 172.16.N.0/24 (the core .1, the node .2):
//
//	root1 (1), root2 (2)    ddt-node, 10.0.0.0/8
//	  eu1 (3), eu2 (4)      ddt-node, 10.1.0.0/16
//	    ms1 (6)             map-server, 10.1.0.0/17: site a 10.1.1.0/24
//	    ms2 (7)             map-server, 10.1.128.0/17: site b 10.1.129.0/24
//	  us1 (5)               ddt-node, 10.2.0.0/16
//	    ms3 (8)             map-server, 10.2.0.0/17: site c 10.2.1.0/24 (forwarded to its ETR),
//	                        site e 10.2.64.0/18 (only 10.2.64.0/24 registered); its own peer
//	    ms4 (9)             map-server, 10.2.128.0/17: site d 10.2.129.0/24, the ITR's 10.2.200.0/24
//	  loop (12)             ddt-node, 10.9.0.0/16, which refers back to the root
//	  bad (13)              answers 10.8.0.0/16 with broken referrals, also from 172.16.13.3
//	mr (10)                 map-resolver, root 172.16.1.2 (priority 1), 172.16.2.2 (priority 2)
//	etrs (11)               the sites' ETRs, 172.16.11.2-6
//	itr (14) -- client      an xTR (lispd, eBPF data plane) asking mr; its host 10.2.200.2
//	ops (15)                where lig runs
type ddtNet struct {
	net   *testnet.Net
	nodes map[string]*testnet.Node
	links map[string]*testnet.Link // each node's to the core, and "client" the ITR's to its host
	procs map[string]*testnet.Process
	socks map[string]string
	dir   string
}

var ddtNodeNumbers = map[string]int{"root1": 1, "root2": 2, "eu1": 3, "eu2": 4, "us1": 5, "ms1": 6, "ms2": 7, "ms3": 8,
	"ms4": 9, "mr": 10, "etrs": 11, "loop": 12, "bad": 13, "itr": 14, "ops": 15}

// rloc is a node's address on its link to the core.
func rloc(name string) string { return fmt.Sprintf("172.16.%d.2", ddtNodeNumbers[name]) }

func newDDTNet(t *testing.T) *ddtNet {
	n := &ddtNet{net: testnet.New(t), nodes: map[string]*testnet.Node{}, links: map[string]*testnet.Link{},
		procs: map[string]*testnet.Process{}, socks: map[string]string{}, dir: t.TempDir()}
	core := n.net.Node("core")
	core.EnableForwarding()
	for name, i := range ddtNodeNumbers {
		nd := n.net.Node(name)
		n.nodes[name] = nd
		addrs := fmt.Sprintf("172.16.%d.2/24", i)
		switch name {
		case "etrs":
			addrs += ",172.16.11.3/24,172.16.11.4/24,172.16.11.5/24,172.16.11.6/24"
		case "bad":
			addrs += ",172.16.13.3/24"
		}
		n.links[name] = n.net.Link(core, nd, fmt.Sprintf("172.16.%d.1/24", i), addrs)
		nd.AddRoute("default", fmt.Sprintf("172.16.%d.1", i))
	}
	client := n.net.Node("client")
	n.nodes["client"] = client
	n.links["client"] = n.net.Link(n.nodes["itr"], client, "10.2.200.1/24", "10.2.200.2/24")
	client.AddRoute("default", "10.2.200.1")
	n.nodes["itr"].EnableForwarding()
	return n
}

// start runs lispd in node name with cfg ("{sock}" stands for its
// control socket) and waits for its control socket.
func (n *ddtNet) start(t testing.TB, name, cfg string) {
	t.Helper()
	sock := filepath.Join(n.dir, name+".sock")
	path := filepath.Join(n.dir, name+".yaml")
	cfg = fmt.Sprintf("listen: [\"0.0.0.0\"]\nlog: {level: debug}\ncontrol: {socket: %s}\n%s", sock, cfg)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.nodes[name].Start(t, filepath.Join(bin, "lispd"), "-config", path)
	n.procs[name], n.socks[name] = p, sock
	waitFor(t, name+"'s lispd", func() bool {
		_, err := daemon.QueryStatus(sock)
		return err == nil
	})
}

// stop ends node name's lispd.
func (n *ddtNet) stop(name string) { n.procs[name].Stop() }

func (n *ddtNet) status(t testing.TB, name string) *daemon.Status {
	t.Helper()
	st, err := daemon.QueryStatus(n.socks[name])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The configurations of the tree.
// ddtNodeConfig is a DDT node's: auth, its authoritative prefixes
// ("10.1.0.0/16", or several separated by ", "), and delegations.
func ddtNodeConfig(auth string, delegations ...string) string {
	return "roles: [ddt-node]\nddt-node:\n  authoritative-prefixes: [{prefix: " +
		strings.ReplaceAll(auth, ", ", "}, {prefix: ") + "}]\n  delegations:\n    - " +
		strings.Join(delegations, "\n    - ") + "\n"
}

func msConfig(auth string, sites ...string) string { return msConfigPeers(auth, "", sites...) }

// msConfigPeers is msConfig with the map-server's DDT peers (addresses
// separated by ", "): its referral sets are complete, and cached.
func msConfigPeers(auth, peers string, sites ...string) string {
	ddt := "{authoritative-prefixes: [" + auth + "]"
	if peers != "" {
		ddt += ", peers: [" + peers + "]"
	}
	return "roles: [map-server]\nmap-server:\n  ddt: " + ddt + "}\n  sites:\n    - " +
		strings.Join(sites, "\n    - ") + "\n"
}

func site(name, prefix string) string {
	return fmt.Sprintf("{name: %s, keys: [{id: 0, secret: key-%s}], eid-prefixes: [{prefix: %s}]}", name, name, prefix)
}

var (
	rootConfig = ddtNodeConfig("10.0.0.0/8",
		"{prefix: 10.1.0.0/16, referrals: [172.16.3.2, 172.16.4.2]}",
		"{prefix: 10.2.0.0/16, referrals: [172.16.5.2]}",
		"{prefix: 10.9.0.0/16, referrals: [172.16.12.2]}",
		"{prefix: 10.8.0.0/16, referrals: [172.16.13.2]}")
	euConfig = ddtNodeConfig("10.1.0.0/16",
		"{prefix: 10.1.0.0/17, type: map-server, referrals: [172.16.6.2]}",
		"{prefix: 10.1.128.0/17, type: map-server, referrals: [172.16.7.2]}")
	usConfig = ddtNodeConfig("10.2.0.0/16",
		"{prefix: 10.2.0.0/17, type: map-server, referrals: [172.16.8.2]}",
		"{prefix: 10.2.128.0/17, type: map-server, referrals: [172.16.9.2]}")
	// A misconfigured node: it refers 10.9.0.0/16 back to the root.
	loopConfig = ddtNodeConfig("10.9.0.0/16", "{prefix: 10.9.0.0/16, referrals: [172.16.1.2, 172.16.2.2]}")
	mrConfig   = `roles: [map-resolver]
metrics: {listen: "127.0.0.1:9342"}
map-resolver:
  ddt:
    root: [{address: 172.16.1.2, priority: 1}, {address: 172.16.2.2, priority: 2}]
    request-timeout: 500ms
`
)

// registerSite registers prefix from an ETR at addr with the map-server
// ms, for proxy replies or not, and keeps it registered.
func (n *ddtNet) registerSite(t *testing.T, addr, ms, name, prefix, locator string, proxy bool) *etr {
	t.Helper()
	e := newETR(t, n.nodes["etrs"], addr, netip.AddrPortFrom(netip.MustParseAddr(rloc(ms)), 4342), "key-"+name)
	e.register(&lisp.MapRegister{ProxyReply: proxy, Nonce: 1, Records: []lisp.MapRecord{
		record(prefix, lisp.MustParseAddress(locator))}})
	return e
}

// ligDDT runs amptcp lig in the ops node with args and the EID, and
// decodes its JSON; err is its exit error (no reply: exit status 1).
type ligDDTOutput struct {
	ligOutput
	Referrals []struct {
		Node       string   `json:"node"`
		Action     string   `json:"action"`
		EID        string   `json:"eid"`
		MaskLen    int      `json:"mask_len"`
		TTL        int      `json:"ttl_minutes"`
		Incomplete bool     `json:"incomplete"`
		Referrals  []string `json:"referrals"`
	} `json:"referrals"`
}

func (n *ddtNet) lig(t *testing.T, eid string, args ...string) (ligDDTOutput, error) {
	t.Helper()
	args = append(append([]string{"lig", "--json"}, args...), eid)
	out, err := n.nodes["ops"].Exec(t, filepath.Join(bin, "amptcp"), args...)
	var res ligDDTOutput
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
		t.Fatalf("amptcp lig %s: %v, output %q", eid, jerr, out)
	}
	return res, err
}

// resolve asks the map-resolver for eid and wants an answer.
func (n *ddtNet) resolve(t *testing.T, eid string) ligDDTOutput {
	t.Helper()
	res, err := n.lig(t, eid, "-m", rloc("mr"), "-c", "1", "-t", "3s")
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("lig %s: %v %+v", eid, err, res)
	}
	return res
}

func (n *ddtNet) resolverCounters(t *testing.T) *daemon.DDTResolverCounters {
	t.Helper()
	return n.status(t, "mr").Counters.DDTResolver
}

// TestDDT runs a three-level tree of lispd DDT nodes with four
// map-servers, a DDT map-resolver, an ITR and lig, all the real binaries
// in their own namespaces.
func TestDDT(t *testing.T) {
	n := newDDTNet(t)
	n.start(t, "root1", rootConfig)
	n.start(t, "root2", rootConfig)
	n.start(t, "eu1", euConfig)
	n.start(t, "eu2", euConfig)
	n.start(t, "us1", usConfig)
	n.start(t, "loop", loopConfig)
	n.start(t, "ms1", msConfig("{prefix: 10.1.0.0/17}", site("a", "10.1.1.0/24")))
	n.start(t, "ms2", msConfig("{prefix: 10.1.128.0/17}", site("b", "10.1.129.0/24")))
	n.start(t, "ms3", msConfigPeers("{prefix: 10.2.0.0/17}", rloc("ms3"), site("c", "10.2.1.0/24"),
		"{name: e, keys: [{id: 0, secret: key-e}], eid-prefixes: [{prefix: 10.2.64.0/18, accept-more-specifics: true}]}"))
	n.start(t, "ms4", msConfig("{prefix: 10.2.128.0/17}", site("d", "10.2.129.0/24"), site("itr", "10.2.200.0/24")))
	n.start(t, "mr", mrConfig)
	startBadNode(t, n.nodes["bad"])
	n.registerSite(t, "172.16.11.2:0", "ms1", "a", "10.1.1.0/24", "192.0.2.1", true)
	n.registerSite(t, "172.16.11.3:0", "ms2", "b", "10.1.129.0/24", "192.0.2.2", true)
	etrC := n.registerSite(t, "172.16.11.4:4342", "ms3", "c", "10.2.1.0/24", "172.16.11.4", false)
	n.registerSite(t, "172.16.11.5:0", "ms4", "d", "10.2.129.0/24", "192.0.2.4", true)
	n.registerSite(t, "172.16.11.2:0", "ms3", "e", "10.2.64.0/24", "192.0.2.5", true)

	t.Run("lig resolves under each map-server", func(t *testing.T) {
		for _, tc := range []struct{ eid, prefix, locator, replier string }{
			{"10.1.1.5", "10.1.1.0", "192.0.2.1", rloc("ms1")},
			{"10.1.129.5", "10.1.129.0", "192.0.2.2", rloc("ms2")},
			{"10.2.1.5", "10.2.1.0", "172.16.11.4", "172.16.11.4"}, // the ETR answers
			{"10.2.129.5", "10.2.129.0", "192.0.2.4", rloc("ms4")},
		} {
			res := n.resolve(t, tc.eid)
			rec := res.Records[0]
			if rec.EID != tc.prefix || rec.MaskLen != 24 || len(rec.Locators) != 1 || rec.Locators[0].Address != tc.locator ||
				!strings.HasPrefix(res.Replier, tc.replier+":") {
				t.Errorf("%s: %+v from %s", tc.eid, rec, res.Replier)
			}
		}
		if etrC.answers() != 1 {
			t.Errorf("site c's ETR answered %d forwarded requests, want 1", etrC.answers())
		}
		// A proxy reply reaches lig straight from the map-server, maybe
		// before the map-server's MS-ACK reaches the map-resolver: wait
		// for its counters.
		c := n.resolverCounters(t)
		for deadline := time.Now().Add(10 * time.Second); c.Resolved != 4 && time.Now().Before(deadline); c = n.resolverCounters(t) {
			time.Sleep(50 * time.Millisecond)
		}
		if c.Resolved != 4 || c.Referrals["ms-ack"] != 4 || c.Timeouts != 0 {
			t.Errorf("map-resolver: %+v", c)
		}
	})

	t.Run("lig -trace shows the referral chain", func(t *testing.T) {
		res, err := n.lig(t, "10.1.1.5", "-trace", "-m", rloc("root2"))
		if err != nil {
			t.Fatalf("lig -trace: %v", err)
		}
		want := []struct{ from, action, prefix string }{
			{rloc("root2"), "node-referral", "10.1.0.0/16"},
			{"172.16.", "ms-referral", "10.1.0.0/17"}, // eu1 or eu2
			{rloc("ms1"), "ms-ack", "10.1.1.0/24"},
		}
		if len(res.Referrals) != len(want) {
			t.Fatalf("referrals %+v", res.Referrals)
		}
		for i, w := range want {
			h := res.Referrals[i]
			if !strings.HasPrefix(h.Node, w.from) || h.Action != w.action || fmt.Sprintf("%s/%d", h.EID, h.MaskLen) != w.prefix {
				t.Errorf("hop %d: %+v, want %+v", i, h, w)
			}
		}
		if len(res.Referrals[0].Referrals) != 2 || len(res.Records) != 1 || res.Records[0].Locators[0].Address != "192.0.2.1" {
			t.Errorf("root's referral set %v, records %+v", res.Referrals[0].Referrals, res.Records)
		}
		out, err := n.nodes["ops"].Exec(t, filepath.Join(bin, "amptcp"), "lig", "-trace", "-m", rloc("root1"), "10.2.129.5")
		for _, line := range []string{
			"Received map-referral from 172.16.1.2 with rtt", ": node-referral 10.2.0.0/16, ttl 1440 mins, auth\n  referrals: 172.16.5.2 0/0",
			"Received map-referral from 172.16.5.2", ": ms-referral 10.2.128.0/17, ttl 1440 mins, auth",
			"Received map-referral from 172.16.9.2", ": ms-ack 10.2.129.0/24, ttl 1440 mins, auth, incomplete",
			"Received map-reply from 172.16.9.2 with rtt",
		} {
			if err != nil || !strings.Contains(out, line) {
				t.Errorf("lig -trace (%v) lacks %q:\n%s", err, line, out)
			}
		}
	})

	t.Run("an ITR resolves through the tree", func(t *testing.T) {
		n.start(t, "itr", fmt.Sprintf(`roles: [xtr]
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s]}
map-cache: {map-resolvers: [%s], probe-interval: 0s}
xtr:
  database-mappings: [{eid-prefix: 10.2.200.0/24, locators: [{address: %s, priority: 1, weight: 100}]}]
  map-servers: [{address: %s, secret: key-itr, proxy-reply: true}]
`, n.links["client"].Iface(n.nodes["itr"]), n.links["itr"].Iface(n.nodes["itr"]), rloc("mr"), rloc("itr"), rloc("ms4")))
		waitFor(t, "the ITR registered", func() bool { return n.status(t, "itr").XTR.MapServers[0].State == "registered" })
		want := map[string]bool{"10.1.1.0/24": true, "10.1.129.0/24": true, "10.2.1.0/24": true, "10.2.129.0/24": true}
		waitFor(t, "the ITR's map-cache to hold the four sites", func() bool {
			for _, eid := range []string{"10.1.1.9", "10.1.129.9", "10.2.1.9", "10.2.129.9"} {
				sendUDP(t, n.nodes["client"], eid)
			}
			found := 0
			for _, e := range n.status(t, "itr").MapCache {
				if want[e.EIDPrefix] && e.Action == "encapsulate" {
					found++
				}
			}
			return found == len(want)
		})
	})

	t.Run("a hole is answered and cached", func(t *testing.T) {
		res := n.resolve(t, "10.3.0.1")
		rec := res.Records[0]
		if rec.EID != "10.3.0.0" || rec.MaskLen != 16 || rec.TTL != 15 || rec.Action != "natively-forward" || len(rec.Locators) != 0 {
			t.Fatalf("hole: %+v", rec)
		}
		var cached bool
		for _, e := range n.status(t, "mr").DDTResolver.Referrals {
			cached = cached || (e.EID == "10.3.0.0/16" && e.Action == "delegation-hole" && time.Until(e.Expires) > 14*time.Minute)
		}
		if !cached {
			t.Errorf("no delegation-hole 10.3.0.0/16 for 15 minutes in the referral cache: %+v", n.status(t, "mr").DDTResolver.Referrals)
		}
		before := n.resolverCounters(t)
		if rec := n.resolve(t, "10.3.77.1").Records[0]; rec.EID != "10.3.0.0" || rec.MaskLen != 16 || rec.TTL < 14 {
			t.Errorf("second EID in the hole: %+v", rec)
		}
		if after := n.resolverCounters(t); after.Sent != before.Sent || after.CacheNegative != before.CacheNegative+1 {
			t.Errorf("the cached hole was not used: sent %d -> %d, negatives from the cache %d -> %d",
				before.Sent, after.Sent, before.CacheNegative, after.CacheNegative)
		}
	})

	// 10.2.100.1 is in ms3's site e, where only 10.2.64.0/24 is
	// registered: MS-NOT-REGISTERED (RFC 8111) for the largest prefix
	// around it that holds no registration, 10.2.96.0/19, for 1 minute
	// (the RFC's TTL for it, as against 15 for a delegation hole), which the map-resolver answers with a negative
	// Map-Reply of that prefix and TTL and caches: ms3 lists its peers
	// (itself), so the referral is complete.
	t.Run("an unregistered EID is MS-NOT-REGISTERED, answered and cached", func(t *testing.T) {
		before := n.resolverCounters(t)
		msBefore := n.status(t, "ms3").Counters.DDT.Referrals["ms-not-registered"]
		res := n.resolve(t, "10.2.100.1")
		rec := res.Records[0]
		if rec.EID != "10.2.96.0" || rec.MaskLen != 19 || rec.TTL != 1 || rec.Action != "natively-forward" ||
			len(rec.Locators) != 0 || !strings.HasPrefix(res.Replier, rloc("mr")+":") {
			t.Fatalf("unregistered: %+v from %s", rec, res.Replier)
		}
		after := n.resolverCounters(t)
		if after.Referrals["ms-not-registered"] != before.Referrals["ms-not-registered"]+1 ||
			after.Negatives != before.Negatives+1 || after.Sent != before.Sent+1 {
			t.Errorf("map-resolver: ms-not-registered %d -> %d, negative replies %d -> %d, sent %d -> %d; want one each",
				before.Referrals["ms-not-registered"], after.Referrals["ms-not-registered"],
				before.Negatives, after.Negatives, before.Sent, after.Sent)
		}
		if got := n.status(t, "ms3").Counters.DDT.Referrals["ms-not-registered"]; got != msBefore+1 {
			t.Errorf("ms3 sent %d MS-NOT-REGISTERED, want %d", got, msBefore+1)
		}
		var cached bool
		for _, e := range n.status(t, "mr").DDTResolver.Referrals {
			cached = cached || (e.EID == "10.2.96.0/19" && e.Action == "ms-not-registered" && e.Source == rloc("ms3") &&
				time.Until(e.Expires) > 0 && time.Until(e.Expires) <= time.Minute)
		}
		if !cached {
			t.Errorf("no ms-not-registered 10.2.96.0/19 from ms3 for at most a minute in the referral cache: %+v",
				n.status(t, "mr").DDTResolver.Referrals)
		}
		status, err := n.nodes["ops"].Exec(t, filepath.Join(bin, "lispd"), "status", "-socket", n.socks["mr"])
		if err != nil || !strings.Contains(status, "10.2.96.0/19  ms-not-registered, from "+rloc("ms3")+", expires in ") {
			t.Errorf("lispd status (%v) shows no cached ms-not-registered 10.2.96.0/19:\n%s", err, status)
		}

		// Another EID of the prefix, within the minute: from the cache,
		// nothing sent down the tree.
		res = n.resolve(t, "10.2.120.1")
		if rec := res.Records[0]; rec.EID != "10.2.96.0" || rec.MaskLen != 19 || rec.TTL != 1 || rec.Action != "natively-forward" {
			t.Errorf("second EID of the unregistered prefix: %+v", rec)
		}
		cachedAt := n.resolverCounters(t)
		if cachedAt.Sent != after.Sent || cachedAt.CacheNegative != after.CacheNegative+1 {
			t.Errorf("not answered from the cache: sent %d -> %d, negatives from the cache %d -> %d",
				after.Sent, cachedAt.Sent, after.CacheNegative, cachedAt.CacheNegative)
		}
		if m := scrape(t, n.nodes["mr"]); m[`lispd_ddt_resolver_cache_hits_total{kind="negative"}`] != float64(cachedAt.CacheNegative) {
			t.Errorf("metrics: negative cache hits %v, want %d", m[`lispd_ddt_resolver_cache_hits_total{kind="negative"}`],
				cachedAt.CacheNegative)
		}
		if got := n.status(t, "ms3").Counters.DDT.Referrals["ms-not-registered"]; got != msBefore+1 {
			t.Errorf("ms3 was asked again: %d MS-NOT-REGISTERED, want %d", got, msBefore+1)
		}
		// An EID of the registered part still resolves.
		if rec := n.resolve(t, "10.2.64.7").Records[0]; rec.EID != "10.2.64.0" || rec.MaskLen != 24 || len(rec.Locators) != 1 {
			t.Errorf("10.2.64.7: %+v", rec)
		}

		// lig -trace walks the tree to ms3 and ends at its referral.
		tr, err := n.lig(t, "10.2.100.1", "-trace", "-m", rloc("root1"))
		if err != nil {
			t.Fatalf("lig -trace: %v", err)
		}
		want := []struct{ from, action, prefix string }{
			{rloc("root1"), "node-referral", "10.2.0.0/16"},
			{rloc("us1"), "ms-referral", "10.2.0.0/17"},
			{rloc("ms3"), "ms-not-registered", "10.2.96.0/19"},
		}
		if len(tr.Referrals) != len(want) || len(tr.Records) != 0 {
			t.Fatalf("lig -trace: referrals %+v, records %+v", tr.Referrals, tr.Records)
		}
		for i, w := range want {
			h := tr.Referrals[i]
			if !strings.HasPrefix(h.Node, w.from+":") || h.Action != w.action || fmt.Sprintf("%s/%d", h.EID, h.MaskLen) != w.prefix {
				t.Errorf("hop %d: %+v, want %+v", i, h, w)
			}
		}
		if h := tr.Referrals[2]; h.TTL != 1 || h.Incomplete || len(h.Referrals) != 1 || h.Referrals[0] != rloc("ms3") {
			t.Errorf("ms3's referral: %+v, want TTL 1, complete, its peer set", h)
		}
		out, err := n.nodes["ops"].Exec(t, filepath.Join(bin, "amptcp"), "lig", "-trace", "-m", rloc("root1"), "10.2.100.1")
		for _, line := range []string{
			"Received map-referral from " + rloc("ms3") + " with rtt",
			": ms-not-registered 10.2.96.0/19, ttl 1 mins, auth\n",
			"No mapping for EID 10.2.100.1: its site has not registered it",
		} {
			if err != nil || !strings.Contains(out, line) {
				t.Errorf("lig -trace (%v) lacks %q:\n%s", err, line, out)
			}
		}
	})

	t.Run("a looping referral is refused", func(t *testing.T) {
		if _, err := n.lig(t, "10.9.0.1", "-m", rloc("mr"), "-c", "1", "-t", "2s"); err == nil {
			t.Error("lig got an answer through a loop")
		}
		if c := n.resolverCounters(t); c.Refused["loop"] != 1 {
			t.Errorf("refused %v, want one loop", c.Refused)
		}
	})

	t.Run("malformed referrals are refused", func(t *testing.T) {
		if _, err := n.lig(t, "10.8.0.1", "-m", rloc("mr"), "-c", "1", "-t", "3s"); err == nil {
			t.Error("lig got an answer from a broken node")
		}
		c := n.resolverCounters(t)
		if c.Refused["malformed"] < 1 || c.Refused["not-covering"] < 1 || c.Refused["unexpected-source"] < 1 {
			t.Errorf("refused %v, want malformed, not-covering and unexpected-source", c.Refused)
		}
		m := scrape(t, n.nodes["mr"])
		if m[`lispd_ddt_resolver_referrals_refused_total{reason="malformed"}`] < 1 {
			t.Errorf("metrics: %v", m)
		}
	})

	t.Run("a killed DDT node's second RLOC answers", func(t *testing.T) {
		n.stop("root1")
		before := n.resolverCounters(t)
		n.resolve(t, "10.4.0.1") // root1 first (priority 1): a timeout, then root2
		after := n.resolverCounters(t)
		if after.Timeouts != before.Timeouts+1 {
			t.Errorf("timeouts %d -> %d, want one (root1)", before.Timeouts, after.Timeouts)
		}
		if root := n.status(t, "mr").DDTResolver.Root; !root[0].Down || root[1].Down {
			t.Errorf("root RLOCs %+v, want 172.16.1.2 down", root)
		}
		n.resolve(t, "10.16.0.1")
		if c := n.resolverCounters(t); c.Timeouts != after.Timeouts {
			t.Errorf("the next request waited for the dead root again")
		}
	})

	t.Run("a map-server that stops being authoritative", func(t *testing.T) {
		// 10.1.128.0/17 moves from ms2 to ms1: ms2 keeps only 10.1.200.0/24,
		// ms1 takes site b, eu1 and eu2 delegate to ms1, site b registers
		// there.
		n.stop("ms2")
		n.start(t, "ms2", msConfig("{prefix: 10.1.200.0/24}", site("z", "10.1.200.0/24")))
		n.stop("ms1")
		n.start(t, "ms1", msConfig("{prefix: 10.1.0.0/17}, {prefix: 10.1.128.0/17}",
			site("a", "10.1.1.0/24"), site("b", "10.1.129.0/24")))
		moved := strings.Replace(euConfig, "referrals: [172.16.7.2]", "referrals: [172.16.6.2]", 1)
		for _, eu := range []string{"eu1", "eu2"} {
			n.stop(eu)
			n.start(t, eu, moved)
		}
		n.registerSite(t, "172.16.11.6:0", "ms1", "b", "10.1.129.0/24", "192.0.2.22", true)
		res := n.resolve(t, "10.1.129.5")
		if rec := res.Records[0]; len(rec.Locators) != 1 || rec.Locators[0].Address != "192.0.2.22" ||
			!strings.HasPrefix(res.Replier, rloc("ms1")+":") {
			t.Errorf("after the move: %+v from %s", rec, res.Replier)
		}
		if c := n.resolverCounters(t); c.Stale != 1 || c.Referrals["not-authoritative"] < 1 {
			t.Errorf("stale %d, not-authoritative %d: want the stale referral to ms2 dropped", c.Stale, c.Referrals["not-authoritative"])
		}
	})
}

// sendUDP sends one datagram from nd to eid, port 9: a miss for the ITR.
func sendUDP(t *testing.T, nd *testnet.Node, eid string) {
	t.Helper()
	c, err := nd.ListenUDP("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.WriteToUDPAddrPort([]byte("miss"), netip.AddrPortFrom(netip.MustParseAddr(eid), 9))
}

// startBadNode answers every DDT Map-Request in nd with three broken
// Map-Referrals: a truncated one, one for a prefix that does not hold the
// EID, and one from another address than the one asked.
func startBadNode(t *testing.T, nd *testnet.Node) {
	c, err := nd.ListenUDP("udp4", rloc("bad")+":4342")
	if err != nil {
		t.Fatal(err)
	}
	other, err := nd.ListenUDP("udp4", "172.16.13.3:4342")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed at the end of the test
			}
			var e lisp.ECM
			if e.DecodeFromBytes(buf[:n]) != nil {
				continue
			}
			req := e.Message.(*lisp.MapRequest)
			set := []lisp.Locator{{Reachable: true, Address: lisp.MustParseAddress("172.16.13.2")}}
			good := lisp.ReferralRecord{TTL: 1440, EID: lisp.MustParseAddress("10.8.0.0"), MaskLen: 24,
				Action: lisp.ReferralMS, Referrals: set}
			elsewhere := good
			elsewhere.EID = lisp.MustParseAddress("10.7.0.0")
			encode := func(rec lisp.ReferralRecord) []byte {
				b, _ := (&lisp.MapReferral{Nonce: req.Nonce, Records: []lisp.ReferralRecord{rec}}).AppendBinary(nil)
				return b
			}
			c.WriteToUDPAddrPort(encode(good)[:25], from)
			c.WriteToUDPAddrPort(encode(elsewhere), from)
			other.WriteToUDPAddrPort(encode(good), from)
		}
	}()
}
