package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lab/linkemu"
	ligpkg "github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// ddtBench is a DDT tree with chains of three depths, and a map-resolver
// whose only link is emulated with a one-way delay, so that every round
// trip it makes, to the requester or to a node of the tree, costs the
// same RTT: a cold resolution through a chain of depth d (the DDT nodes
// asked, the map-server included) takes d RTTs, a warm one (the
// map-server's referral cached) and a plain one (map-resolver and
// map-server in one lispd) one RTT.
//
//	ops (1) -- lig, the load generator      root (2): 10.0.0.0/8
//	mr (10) == emulated == core             n1 (3): 10.3.0.0/16, 10.4.0.0/16
//	  172.16.10.2 the DDT map-resolver      n2 (4): 10.4.0.0/17
//	  172.16.10.3 a plain one (+map-server) ms (5): 10.2.0.0/16 (depth 2),
//	etrs (11)                                 10.3.0.0/17 (3), 10.4.0.0/18 (4)
type ddtBench struct {
	*ddtNet
	link *linkemu.Link
}

const (
	benchDDTResolver   = "172.16.10.2"
	benchPlainResolver = "172.16.10.3"
)

func newDDTBench(b *testing.B, delay time.Duration) *ddtBench {
	n := &ddtNet{net: testnet.New(b), nodes: map[string]*testnet.Node{}, links: map[string]*testnet.Link{},
		procs: map[string]*testnet.Process{}, socks: map[string]string{}, dir: b.TempDir()}
	em, err := linkemu.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	// After testnet's cleanup was registered, so it runs first: the TAPs
	// go before their namespaces.
	b.Cleanup(func() { em.Close() })
	core := n.net.Node("core")
	core.EnableForwarding()
	for name, i := range map[string]int{"ops": 1, "root": 2, "n1": 3, "n2": 4, "ms": 5, "etrs": 11} {
		nd := n.net.Node(name)
		n.nodes[name] = nd
		n.links[name] = n.net.Link(core, nd, fmt.Sprintf("172.16.%d.1/24", i), fmt.Sprintf("172.16.%d.2/24", i))
		nd.AddRoute("default", fmt.Sprintf("172.16.%d.1", i))
	}
	mr := n.net.Node("mr")
	n.nodes["mr"] = mr
	one := linkemu.Params{Rate: 1e9, Delay: delay, QueueBytes: 4 << 20}
	cfg := linkemu.LinkConfig{A: linkemu.Endpoint{Namespace: core.Name(), Name: testenv.Prefix + "-mra"},
		B: linkemu.Endpoint{Namespace: mr.Name(), Name: testenv.Prefix + "-mrb"}, AB: one, BA: one, Seed: 1}
	bench := &ddtBench{ddtNet: n}
	if bench.link, err = em.AddLink(cfg); err != nil {
		b.Fatal(err)
	}
	for _, e := range []struct {
		nd    *testnet.Node
		name  string
		addrs []string
	}{{core, cfg.A.Name, []string{"172.16.10.1/24"}}, {mr, cfg.B.Name, []string{benchDDTResolver + "/24", benchPlainResolver + "/24"}}} {
		l, err := e.nd.Netlink().LinkByName(e.name)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range e.addrs {
			a, _ := netlink.ParseAddr(s)
			if err := e.nd.Netlink().AddrAdd(l, a); err != nil {
				b.Fatal(err)
			}
		}
	}
	mr.AddRoute("default", "172.16.10.1")
	n.start(b, "root", ddtNodeConfig("10.0.0.0/8",
		"{prefix: 10.2.0.0/16, type: map-server, referrals: [172.16.5.2]}",
		"{prefix: 10.3.0.0/16, referrals: [172.16.3.2]}",
		"{prefix: 10.4.0.0/16, referrals: [172.16.3.2]}"))
	n.start(b, "n1", ddtNodeConfig("10.3.0.0/16, 10.4.0.0/16",
		"{prefix: 10.3.0.0/17, type: map-server, referrals: [172.16.5.2]}",
		"{prefix: 10.4.0.0/17, referrals: [172.16.4.2]}"))
	n.start(b, "n2", ddtNodeConfig("10.4.0.0/17", "{prefix: 10.4.0.0/18, type: map-server, referrals: [172.16.5.2]}"))
	const sites = `    - name: s
      keys: [{id: 0, secret: key-s}]
      eid-prefixes: [{prefix: 10.2.0.0/16, accept-more-specifics: true}, {prefix: 10.3.0.0/17, accept-more-specifics: true},
        {prefix: 10.4.0.0/18, accept-more-specifics: true}]
`
	n.start(b, "ms", "roles: [map-server]\nmap-server:\n  ddt: {authoritative-prefixes: [{prefix: 10.2.0.0/16}, {prefix: 10.3.0.0/17}, {prefix: 10.4.0.0/18}]}\n  sites:\n"+sites)
	bench.startResolvers(b, sites)
	for i, ms := range []string{"172.16.5.2", benchPlainResolver} {
		e := newETR(b, n.nodes["etrs"], "172.16.11.2:0", netip.AddrPortFrom(netip.MustParseAddr(ms), 4342), "key-s")
		var recs []lisp.MapRecord
		for _, d := range []int{2, 3, 4} {
			for k := range 16 {
				recs = append(recs, record(fmt.Sprintf("10.%d.%d.0/24", d, k), lisp.MustParseAddress("192.0.2.1")))
			}
		}
		e.register(&lisp.MapRegister{ProxyReply: true, Nonce: uint64(i + 1), Records: recs})
	}
	return bench
}

// startResolvers starts, in the mr node, the DDT map-resolver and the
// plain one (map-server and map-resolver with the same sites).
func (bench *ddtBench) startResolvers(b *testing.B, sites string) {
	b.Helper()
	bench.startIn(b, "mr", "ddt", "listen: [\""+benchDDTResolver+"\"]\nroles: [map-resolver]\n"+
		"map-resolver: {rate-limit: {per-second: 0}, ddt: {root: [172.16.2.2], request-timeout: 1s}}\n")
	bench.startIn(b, "mr", "plain", "listen: [\""+benchPlainResolver+"\"]\nroles: [map-server, map-resolver]\n"+
		"map-resolver: {rate-limit: {per-second: 0}}\nmap-server:\n  sites:\n"+sites)
}

// startIn runs a lispd called name in node nd (configuration as for
// start, but with its own listen address).
func (bench *ddtBench) startIn(b *testing.B, nd, name, cfg string) {
	b.Helper()
	sock := filepath.Join(bench.dir, name+".sock")
	path := filepath.Join(bench.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("log: {level: warn}\ncontrol: {socket: %s}\n%s", sock, cfg)), 0o600); err != nil {
		b.Fatal(err)
	}
	bench.procs[name] = bench.nodes[nd].Start(b, filepath.Join(bin, "lispd"), "-config", path)
	bench.socks[name] = sock
	waitFor(b, name+"'s lispd", func() bool {
		_, err := daemon.QueryStatus(sock)
		return err == nil
	})
}

// ask resolves eid at the resolver from the ops node and returns the
// round trip lig measured.
func (bench *ddtBench) ask(b *testing.B, resolver, eid string) time.Duration {
	b.Helper()
	var res *ligpkg.Result
	err := bench.nodes["ops"].Do(func() (err error) {
		res, err = ligpkg.Query(context.Background(), netip.MustParseAddr(eid), ligpkg.Options{
			Resolver: netip.AddrPortFrom(netip.MustParseAddr(resolver), 4342), Tries: 1, Timeout: 5 * time.Second})
		return err
	})
	if err != nil {
		b.Fatalf("resolve %s at %s: %v", eid, resolver, err)
	}
	if len(res.Reply.Records) != 1 || len(res.Reply.Records[0].Locators) != 1 {
		b.Fatalf("resolve %s at %s: %s", eid, resolver, res.Reply)
	}
	return res.RTT
}

// rtt measures the round trip between the map-resolver and the root: a
// UDP echo, the median of 21.
func (bench *ddtBench) rtt(b *testing.B) time.Duration {
	b.Helper()
	srv, err := bench.nodes["root"].ListenUDP("udp4", "172.16.2.2:7")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	cli, err := bench.nodes["mr"].ListenUDP("udp4", benchDDTResolver+":0")
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	var rtts []time.Duration
	buf := make([]byte, 64)
	for range 21 {
		start := time.Now()
		cli.WriteToUDPAddrPort([]byte("ping"), netip.MustParseAddrPort("172.16.2.2:7"))
		cli.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := cli.ReadFromUDPAddrPort(buf); err != nil {
			b.Fatalf("echo: %v", err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return percentile(rtts, 0.5)
}

// BenchmarkDDTResolution times resolutions through chains of depth 2, 3
// and 4 with the referral cache empty (the map-resolver restarted before
// each) and warm (the map-server's referral cached), and plain ones, with
// 5 ms each way on the map-resolver's link; the RTT is measured in the
// same run. The model: cold = depth × RTT, warm = plain = 1 RTT.
func BenchmarkDDTResolution(b *testing.B) {
	bench := newDDTBench(b, 5*time.Millisecond)
	rtt := bench.rtt(b)
	samples := map[string][]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, depth := range []int{2, 3, 4} {
			b.StopTimer()
			bench.stop("ddt")
			bench.startIn(b, "mr", "ddt", "listen: [\""+benchDDTResolver+"\"]\nroles: [map-resolver]\n"+
				"map-resolver: {rate-limit: {per-second: 0}, ddt: {root: [172.16.2.2], request-timeout: 1s}}\n")
			b.StartTimer()
			cold := fmt.Sprintf("cold-%d", depth)
			samples[cold] = append(samples[cold], bench.ask(b, benchDDTResolver, fmt.Sprintf("10.%d.0.1", depth)))
			warm := fmt.Sprintf("warm-%d", depth)
			samples[warm] = append(samples[warm], bench.ask(b, benchDDTResolver, fmt.Sprintf("10.%d.1.1", depth)))
		}
		samples["plain"] = append(samples["plain"], bench.ask(b, benchPlainResolver, "10.2.0.1"))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(rtt), "rtt-ms")
	var lines []string
	for _, depth := range []int{2, 3, 4} {
		cold, warm := percentile(samples[fmt.Sprintf("cold-%d", depth)], 0.5), percentile(samples[fmt.Sprintf("warm-%d", depth)], 0.5)
		b.ReportMetric(ms(cold), fmt.Sprintf("cold-depth%d-ms", depth))
		b.ReportMetric(ms(warm), fmt.Sprintf("warm-depth%d-ms", depth))
		lines = append(lines, fmt.Sprintf("depth %d: cold %.2f ms (%.2f x depth x RTT), warm %.2f ms (%.2f RTT)",
			depth, ms(cold), ms(cold)/(float64(depth)*ms(rtt)), ms(warm), ms(warm)/ms(rtt)))
	}
	plain := percentile(samples["plain"], 0.5)
	b.ReportMetric(ms(plain), "plain-ms")
	b.Logf("RTT %.2f ms (UDP echo, map-resolver to root); medians of %d: %s; plain %.2f ms (%.2f RTT)",
		ms(rtt), len(samples["plain"]), strings.Join(lines, "; "), ms(plain), ms(plain)/ms(rtt))
}

// BenchmarkDDTThroughput offers Map-Requests for cached EIDs, 64 in
// flight, to the DDT map-resolver (its referral cache warm: each request
// goes on to the map-server, which answers) and to the plain one
// (map-server and map-resolver in one lispd), with no delay on the link,
// each for a second per iteration, in turns, and reports both rates and
// their ratio.
func BenchmarkDDTThroughput(b *testing.B) {
	bench := newDDTBench(b, 0)
	for _, depth := range []int{2, 3, 4} { // warm the referral cache
		bench.ask(b, benchDDTResolver, fmt.Sprintf("10.%d.0.1", depth))
	}
	rates := map[string][]float64{}
	order := []struct{ name, addr string }{{"ddt", benchDDTResolver}, {"plain", benchPlainResolver}}
	b.ResetTimer()
	for b.Loop() {
		slices.Reverse(order) // each goes first in turn: the machine's drift falls on both
		for _, r := range order {
			rate, err := bench.load(r.addr, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			rates[r.name] = append(rates[r.name], rate)
		}
	}
	b.StopTimer()
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	ddt, plain := median(rates["ddt"]), median(rates["plain"])
	b.ReportMetric(ddt, "ddt-replies/s")
	b.ReportMetric(plain, "plain-replies/s")
	b.ReportMetric(ddt/plain, "ddt/plain")
	c := bench.status(b, "ddt").Counters.DDTResolver
	b.Logf("replies/s, medians of %d: DDT (warm) %.0f, plain %.0f: %.2f of plain; the DDT resolver sent %d requests, %d timeouts, %d given up",
		len(rates["ddt"]), ddt, plain, ddt/plain, c.Sent, c.Timeouts, c.Exhausted)
}

// load keeps 64 Map-Requests in flight to the resolver for d, from the
// ops node, and returns the Map-Replies a second. A request unanswered
// for a second is given up and replaced.
func (bench *ddtBench) load(resolver string, d time.Duration) (float64, error) {
	var conn *net.UDPConn
	err := bench.nodes["ops"].Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(172, 16, 1, 2)})
		return err
	})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	src := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	dst := netip.AddrPortFrom(netip.MustParseAddr(resolver), 4342)
	const window = 64
	sent := map[uint64]time.Time{}
	var nonce uint64
	send := func() error {
		nonce++
		eid := lisp.MustParseAddress(fmt.Sprintf("10.%d.%d.%d", 2+nonce%3, nonce%16, 1+nonce%250))
		ecm, err := ligpkg.NewRequest(eid, src, nonce)
		if err != nil {
			return err
		}
		pkt, err := ecm.AppendBinary(nil)
		if err != nil {
			return err
		}
		sent[nonce] = time.Now()
		_, err = conn.WriteToUDPAddrPort(pkt, dst)
		return err
	}
	for range window {
		if err := send(); err != nil {
			return 0, err
		}
	}
	var replies int
	var reply lisp.MapReply
	buf := make([]byte, 65535)
	start := time.Now()
	for time.Since(start) < d {
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err == nil && reply.DecodeFromBytes(buf[:n]) == nil {
			if _, ok := sent[reply.Nonce]; ok {
				delete(sent, reply.Nonce)
				replies++
			}
		}
		now := time.Now()
		for k, at := range sent {
			if now.Sub(at) > time.Second {
				delete(sent, k)
			}
		}
		for len(sent) < window {
			if err := send(); err != nil {
				return 0, err
			}
		}
	}
	return float64(replies) / time.Since(start).Seconds(), nil
}
