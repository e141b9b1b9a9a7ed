package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/internal/nsnet"
	"github.com/amptcp/amptcp/internal/tcpinfo"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lig"
)

// The first-packet chain's own addresses: the server's EIDs, one /32
// each (firstEID + i), on the server's loopback.
const (
	eidNet     = "192.168.3.0/24"
	firstEID   = "192.168.3.1"
	acceptPort = 5300
)

// RunFirstPacket builds the first-packet chain, runs the trials, removes
// everything it created (also when ctx is cancelled or a step fails) and
// returns the result.
func RunFirstPacket(ctx context.Context, opts FirstPacketOptions) (res *FirstPacketResult, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: it builds network namespaces")
	}
	lispd, err := buildinfo.Program("lispd", opts.Lispd, "--lispd")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "amptcp-bench-first-packet-")
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	if opts.Keep {
		opts.progress("keeping configurations and logs in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	fp := &firstPacket{opts: opts, dir: dir, lispd: lispd, began: time.Now()}
	defer func() {
		if cerr := fp.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the programs inherit this thread's priority
		raisePriority()
		res, err = fp.run(ctx)
	}()
	<-done
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return res, err
}

func (o *FirstPacketOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// firstPacket is the state of one RunFirstPacket.
type firstPacket struct {
	opts  FirstPacketOptions
	dir   string
	lispd string
	began time.Time
	p     *path // the chain: client, r1, r3, server, and ms
	ms    *nsnet.Node
	emu   *linkemu.Emulator
}

func (fp *firstPacket) progress(format string, args ...any) {
	fp.opts.progress("%6.1fs  "+format, append([]any{time.Since(fp.began).Seconds()}, args...)...)
}

func (fp *firstPacket) run(ctx context.Context) (*FirstPacketResult, error) {
	o := fp.opts
	res := &FirstPacketResult{EIDs: o.EIDs, Miss: o.Miss, ResolverRTT: msOf(o.ResolverRTT), PathRTT: msOf(o.PathRTT)}
	res.Environment = Environment{CPUs: runtime.NumCPU(), Go: runtime.Version(), Priority: priority(), Prefix: o.Prefix,
		Lispd: fp.lispd, LispdVersion: version(fp.lispd, "-version")}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		res.Environment.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	fp.progress("%d trials, map-resolver round trip %s, path round trip %s: about %s",
		o.EIDs, o.ResolverRTT, o.PathRTT, estimateFirstPacket(&o).Round(time.Second))
	deadline := time.Now().Add(o.SetupTimeout)
	if err := fp.build(); err != nil {
		return nil, err
	}
	if err := fp.startLispds(ctx, deadline); err != nil {
		return nil, err
	}
	ln, err := fp.listen(ctx)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	// The server's xTR resolves the client's site once, by this
	// connection to an address no trial uses: the trials measure r1's
	// misses alone.
	if _, err := fp.p.waitTraffic(ctx, deadline); err != nil {
		return nil, err
	}
	fp.progress("up: r3 knows the client's site")
	for i := range o.EIDs {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := fp.trial(ctx, eidAt(i))
		res.Trials = append(res.Trials, t)
		if t.Error != "" {
			fp.progress("[%d/%d] %s: %s", i+1, o.EIDs, t.EID, firstLine(t.Error))
		} else if (i+1)%10 == 0 || i+1 == o.EIDs {
			fp.progress("[%d/%d] %s: cold %s ms, warm %s ms, Map-Request %s ms", i+1, o.EIDs, t.EID, ms(t.ColdMs), ms(t.WarmMs), ms(t.ResolverMs))
		}
	}
	if c, err := daemon.QueryCounters(fp.sock("r1")); err == nil && c.Tunnel != nil {
		res.Counters = c.Tunnel.Held
	}
	res.summarize()
	return res, nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eidAt is the server's ith EID.
func eidAt(i int) netip.Addr {
	a := netip.MustParseAddr(firstEID).As4()
	a[3] += byte(i)
	return netip.AddrFrom4(a)
}

// build makes the chain: veths for the hosts' links, emulated links
// between r1 and r3 and between r1 and the map-server, and the EIDs on
// the server.
func (fp *firstPacket) build() error {
	o := fp.opts
	v := &Variant{Name: "first-packet", Routers: 2, kind: kindLISP}
	p := &path{variant: v, net: nsnet.New(o.Prefix, &nsnet.IfNames{Prefix: o.LinkPrefix})}
	fp.p = p
	n := p.net
	var err error
	for _, nd := range []struct {
		to   **nsnet.Node
		name string
	}{{&p.client, "client"}, {&p.r1, "r1"}, {&p.r3, "r3"}, {&p.server, "server"}, {&fp.ms, "ms"}} {
		if *nd.to, err = n.Node(nd.name); err != nil {
			return err
		}
	}
	if _, err := n.Link(p.client, p.r1, clientAddr, r1Site); err != nil {
		return err
	}
	if p.serverLink, err = n.Link(p.r3, p.server, r3Site, serverAddr); err != nil {
		return err
	}
	if fp.emu, err = linkemu.New(slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("link emulator: %w", err)
	}
	for _, l := range []struct {
		a, b         *nsnet.Node
		addrA, addrB string
		rtt          time.Duration
	}{{p.r1, p.r3, r1Under13, r3Under13, o.PathRTT}, {p.r1, fp.ms, r1MS, msAddr, o.ResolverRTT}} {
		if err := fp.wan(l.a, l.b, l.addrA, l.addrB, l.rtt); err != nil {
			return err
		}
	}
	for _, r := range []*nsnet.Node{p.r1, p.r3} {
		if err := r.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
	}
	for _, r := range []route{
		{p.client, "default", ip(r1Site)}, {p.server, "default", ip(r3Site)}, {fp.ms, "default", ip(r1MS)},
		{p.r3, msNet, ip(r1Under13)}, {p.r3, eidNet, ip(serverAddr)},
	} {
		if err := r.nd.Route(r.dst, r.via); err != nil {
			return err
		}
	}
	for i := range o.EIDs {
		if err := p.server.Up("lo", eidAt(i).String()+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// wan joins a and b with an emulated link of the round-trip time rtt,
// half each way, at 1 Gbit/s, with the addresses given.
func (fp *firstPacket) wan(a, b *nsnet.Node, addrA, addrB string, rtt time.Duration) error {
	nameA, err := fp.p.net.IfName("w")
	if err != nil {
		return err
	}
	nameB := nameA[:len(nameA)-1] + "v"
	dir := linkemu.Params{Rate: 1e9, Delay: rtt / 2, QueueBytes: 1 << 20}
	_, err = fp.emu.AddLink(linkemu.LinkConfig{
		A: linkemu.Endpoint{Namespace: a.NS.Name, Name: nameA}, B: linkemu.Endpoint{Namespace: b.NS.Name, Name: nameB},
		AB: dir, BA: dir,
	})
	if err != nil {
		return err
	}
	if err := a.Up(nameA, addrA); err != nil {
		return err
	}
	if err := b.Up(nameB, addrB); err != nil {
		return err
	}
	fp.p.underlay = append(fp.p.underlay, &nsnet.Veth{A: a, B: b, IfA: nameA, IfB: nameB})
	return nil
}

func (fp *firstPacket) sock(node string) string { return filepath.Join(fp.dir, node+".sock") }

// startLispds starts the mapping system and the xTRs, and waits until
// the map-resolver answers for the server's first EID.
func (fp *firstPacket) startLispds(ctx context.Context, deadline time.Time) error {
	p, o := fp.p, fp.opts
	rloc1, rloc3, resolver := ip(r1Under13), ip(r3Under13), ip(msAddr)
	eids := []string{siteB}
	for i := range o.EIDs {
		eids = append(eids, eidAt(i).String()+"/32")
	}
	x1 := xtrSpec{sock: fp.sock("r1"), rloc: rloc1, eidIface: p.net.Links()[0].Iface(p.r1), rlocIface: p.underlay[0].Iface(p.r1),
		eidPrefix: siteA, key: keySiteA, resolver: resolver, miss: o.Miss}
	x3 := xtrSpec{sock: fp.sock("r3"), rloc: rloc3, eidIface: p.serverLink.Iface(p.r3), rlocIface: p.underlay[0].Iface(p.r3),
		eidPrefix: siteB, more: eids[1:], key: keySiteB, resolver: resolver}
	for _, d := range []lispdSpec{
		{fp.ms, "map-server", mapServerConfig(fp.sock("ms"), resolver, eidNet), fp.sock("ms")},
		{p.r3, "xtr", xtrConfig(x3), x3.sock},
		{p.r1, "xtr", xtrConfig(x1), x1.sock},
	} {
		what := fmt.Sprintf("lispd %s on %s", d.role, d.nd.Name)
		cfgPath := filepath.Join(fp.dir, d.nd.Name+".yaml")
		if err := writeConfig(what, cfgPath, d.cfg); err != nil {
			return err
		}
		pr, err := startIn(d.nd.NS, what, []string{fp.lispd, "-config", cfgPath}, filepath.Join(fp.dir, d.nd.Name+"-lispd.log"), nil)
		if err != nil {
			return err
		}
		p.procs = append(p.procs, pr)
		if o.Started != nil {
			o.Started(what, pr.pid())
		}
		if err := waitControl(ctx, pr, d.sock, deadline); err != nil {
			return err
		}
	}
	last := eidAt(o.EIDs - 1).String()
	for _, q := range []struct {
		from             *nsnet.Node
		source, eid, end string
	}{{p.r1, rloc1, last, rloc3}, {p.r3, rloc3, clientIP, rloc1}} {
		if err := p.waitMapping(ctx, q.from, q.source, q.eid, q.end, resolver, deadline); err != nil {
			return err
		}
	}
	return nil
}

// listen accepts connections on every address of the server, and closes
// them at once.
func (fp *firstPacket) listen(ctx context.Context) (net.Listener, error) {
	var ln net.Listener
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	err := fp.p.server.NS.Do(func() (err error) {
		ln, err = lc.Listen(ctx, "tcp4", ":"+strconv.Itoa(acceptPort))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on the server: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln, nil
}

// trial connects to eid cold, asks the map-resolver about it, and
// connects again.
func (fp *firstPacket) trial(ctx context.Context, eid netip.Addr) Trial {
	t := Trial{EID: eid.String()}
	var err error
	if t.ColdMs, t.Retransmits, err = fp.connect(ctx, eid); err != nil {
		t.Error = "cold connection: " + err.Error()
		return t
	}
	opts := lig.Options{Resolver: netip.AddrPortFrom(netip.MustParseAddr(ip(msAddr)), config.DefaultPort),
		Source: netip.MustParseAddr(ip(r1Under13)), Tries: 1, Timeout: fp.opts.ConnectTimeout}
	var lr *lig.Result
	err = fp.p.r1.NS.Do(func() (err error) {
		lr, err = lig.Query(ctx, eid, opts)
		return err
	})
	if err != nil {
		t.Error = "Map-Request: " + err.Error()
		return t
	}
	t.ResolverMs = msOf(lr.RTT)
	if t.WarmMs, _, err = fp.connect(ctx, eid); err != nil {
		t.Error = "warm connection: " + err.Error()
	}
	return t
}

// connect opens a TCP connection from the client to eid and says how
// long it took to establish and how many segments (SYNs) it
// retransmitted meanwhile.
func (fp *firstPacket) connect(ctx context.Context, eid netip.Addr) (float64, uint32, error) {
	d := net.Dialer{Timeout: fp.opts.ConnectTimeout}
	d.SetMultipathTCP(false)
	var c net.Conn
	var took time.Duration
	err := fp.p.client.NS.Do(func() (err error) {
		began := time.Now()
		c, err = d.DialContext(ctx, "tcp4", netip.AddrPortFrom(eid, acceptPort).String())
		took = time.Since(began)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	n, err := tcpinfo.Retransmits(c)
	return msOf(took), n, err
}

// cleanup stops the programs, closes the emulated links and removes the
// namespaces by name.
func (fp *firstPacket) cleanup() error {
	var errs []error
	if fp.p != nil {
		fp.p.stopAll()
	}
	if fp.emu != nil {
		errs = append(errs, fp.emu.Close())
	}
	if fp.p != nil {
		errs = append(errs, fp.p.close())
	}
	return errors.Join(append(errs, nsnet.Sweep(fp.opts.Prefix, fp.opts.LinkPrefix))...)
}
