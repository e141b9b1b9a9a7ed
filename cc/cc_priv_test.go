package cc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/mptcp"
)

// requireStructOps skips (or fails, see testenv) without root or without
// BPF struct_ops for TCP in the kernel.
func requireStructOps(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	testenv.Require(t, err == nil, "needs kernel BTF (/sys/kernel/btf/vmlinux) for BPF struct_ops")
	testenv.ExclusiveCongestionControls(t)
}

func allowed(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// congestionOf reads TCP_CONGESTION back from a connection's socket.
func congestionOf(t *testing.T, c syscall.Conn) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var serr error
	if err := rc.Control(func(fd uintptr) {
		name, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return strings.TrimRight(name, "\x00")
}

// A loaded control is available and allowed, a namespace can make it its
// default, and closing the registration removes it.
func TestRegisterEach(t *testing.T) {
	requireStructOps(t)
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			r, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			if avail, _ := Available(); !slices.Contains(avail, name) {
				t.Errorf("%s not in tcp_available_congestion_control after Load: %v", name, avail)
			}
			if !slices.Contains(allowed(t), name) {
				t.Errorf("%s not in tcp_allowed_congestion_control: namespaces could not make it their default", name)
			}
			if _, err := Load(name); !errors.Is(err, ErrRegistered) {
				t.Errorf("second Load: %v, want ErrRegistered", err)
			}
			n := testnet.New(t)
			a, b := n.Node("a"), n.Node("b")
			n.Link(a, b, "10.78.1.1/24", "10.78.1.2/24")
			a.SetSysctl("net.ipv4.tcp_congestion_control", name)
			ln, err := b.Listen("tcp4", "10.78.1.2:7000")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				if c, err := ln.Accept(); err == nil {
					c.Close()
				}
			}()
			c, err := a.Dial(t.Context(), nil, "tcp4", "10.78.1.2:7000")
			if err != nil {
				t.Fatal(err)
			}
			if got := congestionOf(t, c.(syscall.Conn)); got != name {
				t.Errorf("a socket of a namespace whose default is %s got %q", name, got)
			}
			c.Close()
			a.SetSysctl("net.ipv4.tcp_congestion_control", "reno") // the default would keep it
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if avail, _ := Available(); slices.Contains(avail, name) {
				t.Errorf("%s still available after Close: %v", name, avail)
			}
		})
	}
}

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func control(t *testing.T, name string) Control {
	t.Helper()
	st, err := ReadStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Controls {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s in the status", name)
	return Control{}
}

// The map holds one entry per coupled connection with a slot per
// subflow, its windows and RTTs those of the kernel's subflows, and is
// empty once the connection is gone.
func TestCouplingState(t *testing.T) {
	requireStructOps(t)
	r, err := Load(LIA)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := bottleneck(20*mbit, 10*time.Millisecond, 1)
	rg := newRig(t, []linkemu.Params{p, p}, []int{0, 1}, 2)
	f := rg.startFlow("lia", LIA, true, 1)
	// The status merges every version of the programs the kernel still
	// holds: a socket of an earlier test, closing, may keep its own
	// version and connection there. This test's is the one with its token.
	var conn Connection
	var fi *mptcp.FullInfo
	mine := func() bool {
		var err error
		if fi, err = f.fullInfo(); err != nil {
			return false
		}
		conns := control(t, LIA).Connections
		i := slices.IndexFunc(conns, func(c Connection) bool { return c.Token == fi.Info.Token })
		if i < 0 {
			return false
		}
		conn = conns[i]
		return len(conn.Subflows) == 2
	}
	if !waitFor(10*time.Second, mine) {
		t.Fatalf("no connection with 2 subflows in the map for the flow's token: %+v", control(t, LIA))
	}
	time.Sleep(2 * time.Second)
	if !mine() {
		t.Fatalf("the flow's connection left the map while it runs: %+v", control(t, LIA))
	}
	// Equal paths: alpha = 1/2 (RFC 6356).
	if conn.Alpha < 0.3 || conn.Alpha > 0.7 {
		t.Errorf("LIA's alpha on two equal paths = %.3f, want about 0.5", conn.Alpha)
	}
	for _, s := range fi.Subflows {
		i := slices.IndexFunc(conn.Subflows, func(m Subflow) bool { return m.ID == uint32(s.ID) })
		if i < 0 {
			t.Errorf("subflow %d (%v) not in the map: %+v", s.ID, s.Local, conn.Subflows)
			continue
		}
		m := conn.Subflows[i]
		// Read at different moments: the same order of magnitude.
		if m.Cwnd == 0 || m.Cwnd > 4*s.TCP.SndCwnd+8 || 4*m.Cwnd+8 < s.TCP.SndCwnd {
			t.Errorf("subflow %d: cwnd %d in the map, %d in tcp_info", s.ID, m.Cwnd, s.TCP.SndCwnd)
		}
		if m.RTT < 15*time.Millisecond || m.RTT > 10*s.TCP.RTT+100*time.Millisecond {
			t.Errorf("subflow %d: RTT %v in the map, %v in tcp_info, path RTT 20 ms", s.ID, m.RTT, s.TCP.RTT)
		}
	}
	f.stop()
	rg.waitGone()
	token := fi.Info.Token
	gone := func() bool {
		return !slices.ContainsFunc(control(t, LIA).Connections, func(c Connection) bool { return c.Token == token })
	}
	if !waitFor(5*time.Second, gone) {
		t.Errorf("the connection %08x left in the map after close: %+v", token, control(t, LIA).Connections)
	}
	n, err := r.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if n.ConnsCreated != 1 || n.ConnsDeleted != 1 || n.CoupledAcks == 0 {
		t.Errorf("counters %+v: want 1 connection created and deleted, coupled ACKs", n)
	}
}

// received returns how much f received within d.
func received(f *flow, d time.Duration) int64 {
	b := f.received.Load()
	time.Sleep(d)
	return f.received.Load() - b
}

// pinnedConns reads the connections of an installed control.
func pinnedConns(t *testing.T, name string) []Connection {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(pinPath(name, "conns"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cs, err := readConns(m)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Installing again replaces the programs under running connections,
// which keep theirs and stay coupled; uninstalling unregisters the
// control while its connections go on, and the kernel frees the
// programs after their last socket closed.
func TestInstallReplaceUninstall(t *testing.T) {
	requireStructOps(t)
	if installed(OLIA) {
		t.Fatalf("%s is installed on this machine: the test would remove it", OLIA)
	}
	t.Cleanup(func() {
		if installed(OLIA) {
			Uninstall(OLIA)
		}
	})
	// Versions that an earlier process left to sockets that still close.
	before := control(t, OLIA).Loaded
	replaced, err := Install(OLIA)
	if err != nil || replaced {
		t.Fatalf("Install: replaced %v, %v", replaced, err)
	}
	p := bottleneck(20*mbit, 10*time.Millisecond, 1)
	rg := newRig(t, []linkemu.Params{p, p}, []int{0, 1}, 2)
	old := rg.startFlow("old", OLIA, true, 1)
	waitFor(10*time.Second, func() bool { return len(pinnedConns(t, OLIA)) == 1 })

	if replaced, err = Install(OLIA); err != nil || !replaced {
		t.Fatalf("Install again: replaced %v, %v", replaced, err)
	}
	if c := control(t, OLIA); !c.Registered || !c.Installed || c.Loaded != before+2 {
		t.Errorf("after the replacement: registered %v, installed %v, %d versions loaded (want true, true, %d: the old one serves the running connection)",
			c.Registered, c.Installed, c.Loaded, before+2)
	}
	if got := received(old, time.Second); got < 1<<20 {
		t.Errorf("the running connection moved %d bytes in a second after the replacement", got)
	}
	fresh := rg.startFlow("new", OLIA, true, 1)
	if !waitFor(10*time.Second, func() bool {
		cs := pinnedConns(t, OLIA)
		return len(cs) == 2 && len(cs[0].Subflows) == 2 && len(cs[1].Subflows) == 2
	}) {
		t.Errorf("the old and new connections are not both in the carried-over map: %+v", pinnedConns(t, OLIA))
	}

	still, err := Uninstall(OLIA)
	if err != nil || still {
		t.Fatalf("Uninstall: still registered %v, %v", still, err)
	}
	if c := control(t, OLIA); c.Registered || c.Installed {
		t.Errorf("after Uninstall: registered %v, installed %v", c.Registered, c.Installed)
	}
	for _, f := range []*flow{old, fresh} {
		if got := congestionOf(t, f.conn.(syscall.Conn)); got != OLIA {
			t.Errorf("flow %s: congestion control %q after unregistering, want %s kept", f.name, got, OLIA)
		}
		if got := received(f, time.Second); got < 1<<19 {
			t.Errorf("flow %s moved %d bytes in a second after unregistering", f.name, got)
		}
	}
	if c := control(t, OLIA); c.Loaded < before+2 {
		t.Errorf("%d versions loaded while their sockets run, want %d", c.Loaded, before+2)
	}
	old.stop()
	fresh.stop()
	rg.waitGone()
	start := time.Now()
	if !waitFor(60*time.Second, func() bool { return control(t, OLIA).Loaded <= before }) {
		t.Errorf("60 s after the last socket closed the kernel still holds %d versions (%d before the test)", control(t, OLIA).Loaded, before)
	}
	t.Logf("the kernel released the programs %v after the last socket closed", time.Since(start).Round(100*time.Millisecond))
}

// A thousand connections hold, each with its entry, and leave none.
func TestThousandConnections(t *testing.T) {
	requireStructOps(t)
	if testing.Short() {
		t.Skip("1,000 MPTCP connections: not with -short")
	}
	r, err := Load(BALIA)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := linkemu.Params{Rate: 1000 * mbit, Delay: time.Millisecond, QueueBytes: 1 << 20}
	rg := newRig(t, []linkemu.Params{p, p}, []int{0, 1}, 2)
	const n = 1000
	flows := make([]*flow, n)
	for i := range flows {
		flows[i] = rg.startPaced(fmt.Sprintf("c%d", i), BALIA, 1)
	}
	// The kernel's view: the connections that did not fall back to TCP
	// (a SYN lost twice does that), with their subflows that carried
	// data. (The kernel skips init on some subflows whose SYN was lost:
	// those join their connection's entry at their first ACK.)
	kernel := func() (map[uint32]int, int) {
		m, all := map[uint32]int{}, 0
		for _, f := range flows {
			if fi, err := f.fullInfo(); err == nil {
				all += len(fi.Subflows)
				for _, s := range fi.Subflows {
					if s.TCP.DataSegsOut > 0 {
						m[fi.Info.Token]++
					}
				}
			}
		}
		return m, all
	}
	inMap := func() map[uint32]int {
		cs, err := r.Connections()
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint32]int{}
		for _, c := range cs {
			m[c.Token] = len(c.Subflows)
		}
		return m
	}
	var want, got map[uint32]int
	var all int
	if !waitFor(60*time.Second, func() bool {
		want, all = kernel()
		got = inMap()
		for tok, n := range want {
			if got[tok] < n {
				return false
			}
		}
		return len(want) > n*95/100 && all == 2*len(want)
	}) {
		missing := 0
		for tok, s := range want {
			if got[tok] < s {
				missing++
			}
		}
		cn, _ := r.Counters()
		t.Fatalf("the kernel has %d MPTCP connections (of %d) with %d subflows; %d of them lack subflows that carried data in the map, which has %d entries; counters %+v",
			len(want), n, all, missing, len(got), cn)
	}
	cn, _ := r.Counters()
	t.Logf("%d connections of 2 subflows each, in the map (%d fell back to TCP); counters %+v", len(want), n-len(want), cn)
	for _, f := range flows {
		f.stop()
	}
	rg.waitGone()
	// Release removes the entries; the sweeper those of the few subflows
	// the kernel never releases, 10-15 s after their last callback. An
	// orphaned subflow that still retransmits is not visible to sock_diag
	// but still runs the control: give it the close timeout.
	start := time.Now()
	if !waitFor(60*time.Second, func() bool { return len(inMap()) == 0 }) {
		t.Errorf("%d connections left in the map 60 s after all closed", len(inMap()))
		var k uint32
		var v ccAmpConn
		it := r.conns.Iterate()
		for it.Next(&k, &v) {
			t.Logf("entry %08x refs %d slots %+v", k, v.Refs, v.Slots[:3])
		}
	}
	t.Logf("the map emptied %v after the connections were gone", time.Since(start).Round(100*time.Millisecond))
	cn, _ = r.Counters()
	if cn.MapFull != 0 || cn.SlotsFull != 0 || cn.ConnsCreated != cn.ConnsDeleted+cn.Swept {
		t.Errorf("counters %+v: nothing may be left uncoupled or behind", cn)
	}
}

// A SYN that times out makes the kernel call ssthresh before init: the
// subflow is coupled all the same, and its entry goes with it.
func TestSYNTimeout(t *testing.T) {
	requireStructOps(t)
	r, err := Load(BALIA)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := bottleneck(20*mbit, 10*time.Millisecond, 1)
	rg := newRig(t, []linkemu.Params{p, p}, []int{0, 1}, 2)
	for i, down := range rg.bottlenecks { // the first subflow's SYN, then the join's
		if err := down.SetDown(linkemu.AToB, true); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(1500*time.Millisecond, func() { down.SetDown(linkemu.AToB, false) })
		f := rg.startPaced("syn", BALIA, 1)
		// Coupled from the SYN's timeout on, and initialised once
		// established: the flow stops only when both subflows are, or
		// a join still in its handshake would never see init.
		if !waitFor(20*time.Second, func() bool {
			cs, err := r.Connections()
			c, cerr := r.Counters()
			return err == nil && cerr == nil && len(cs) == 1 && len(cs[0].Subflows) == 2 && c.Subflows == uint64(2*(i+1))
		}) {
			cs, _ := r.Connections()
			c, _ := r.Counters()
			var subs []string // what the kernel holds, to tell a missing join from a missing init
			if err := rg.cli.Do(func() error {
				ss, err := mptcp.Subflows()
				for _, s := range ss {
					subs = append(subs, fmt.Sprintf("%v->%v state %d, %d segments out", s.Local, s.Remote, s.State, s.TCP.SegsOut))
				}
				return err
			}); err != nil {
				subs = append(subs, "unreadable: "+err.Error())
			}
			t.Fatalf("connection not coupled with its 2 subflows, both initialised, after a lost SYN: %+v, counters %+v; the client's subflows: %v", cs, c, subs)
		}
		f.stop()
		rg.waitGone()
		if !waitFor(5*time.Second, func() bool { cs, _ := r.Connections(); return len(cs) == 0 }) {
			cs, _ := r.Connections()
			t.Errorf("entries left after the connection closed: %+v", cs)
		}
	}
	c, err := r.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Early == 0 || c.ConnsCreated != 2 || c.ConnsDeleted != 2 || c.Subflows != 4 {
		t.Errorf("counters %+v: want callbacks before init, 2 entries created and deleted, 4 subflows", c)
	}
}

// The sockops program sets the congestion control of single subflows:
// here a delay-based one on the subflow whose handshake took long.
func TestSubflowRules(t *testing.T) {
	requireStructOps(t)
	lia, err := Load(LIA)
	if err != nil {
		t.Fatal(err)
	}
	defer lia.Close()
	wv, err := Load(WVegas)
	if err != nil {
		t.Fatal(err)
	}
	defer wv.Close()
	short := bottleneck(20*mbit, 5*time.Millisecond, 1)
	long := bottleneck(20*mbit, 40*time.Millisecond, 1)
	rg := newRig(t, []linkemu.Params{short, long}, []int{0, 1}, 2)
	var cookie uint64
	if err := rg.cli.Do(func() (err error) { cookie, err = NetnsCookie(); return err }); err != nil {
		t.Fatal(err)
	}
	root, err := CgroupRoot()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := AttachSubflowRules(root, cookie, []Rule{{RTTAbove: 50 * time.Millisecond, Algorithm: WVegas}})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	f := rg.startFlow("mptcp", LIA, true, 1)
	subflowsOf := func(r *Registration) []uint32 {
		cs, err := r.Connections()
		if err != nil || len(cs) != 1 {
			return nil
		}
		var ids []uint32
		for _, s := range cs[0].Subflows {
			ids = append(ids, s.ID)
		}
		return ids
	}
	if !waitFor(10*time.Second, func() bool {
		return slices.Equal(subflowsOf(lia), []uint32{1}) && slices.Equal(subflowsOf(wv), []uint32{2})
	}) {
		t.Errorf("subflows under %s: %v, under %s: %v; want the 10 ms one (1) under LIA, the 80 ms one (2) under wVegas",
			LIA, subflowsOf(lia), WVegas, subflowsOf(wv))
	}
	if m, err := pol.Matched(); err != nil || len(m) != 1 || m[0] != 1 {
		t.Errorf("rule matches %v, %v; want one", m, err)
	}
	f.stop()
}
