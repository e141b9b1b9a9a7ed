package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/lispgro"
	"github.com/amptcp/amptcp/internal/procnet"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/pm"
)

// tcxLinks are the IDs of the TCX links on the tc ingress of a node's
// interfaces, by interface name.
func tcxLinks(t *testing.T, nd *testnet.Node, ifaces ...string) map[string][]link.ID {
	t.Helper()
	out := map[string][]link.ID{}
	err := nd.Do(func() error {
		for _, name := range ifaces {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			res, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			for _, p := range res.Programs {
				id, _ := p.LinkID()
				out[name] = append(out[name], id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sockets sums what `ss -tni` says of the TCP sockets (MPTCP subflows
// included) of a node to dst: segments retransmitted since they opened,
// and their congestion windows, in segments: what one round trip
// carries.
func sockets(t *testing.T, nd *testnet.Node, dst string) (retrans, cwnd int) {
	t.Helper()
	out, err := nd.Exec(t, "ss", "-tniH", "state", "established", "dst", dst)
	if err != nil {
		t.Fatalf("ss: %v %s", err, out)
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "retrans:"); ok {
			_, total, _ := strings.Cut(v, "/")
			n, _ := strconv.Atoi(total)
			retrans += n
		}
		if v, ok := strings.CutPrefix(f, "cwnd:"); ok {
			n, _ := strconv.Atoi(v)
			cwnd += n
		}
	}
	return retrans, cwnd
}

// backlogDrops is how many packets the kernel dropped, on the whole
// machine, for lack of room in a CPU's input backlog (the second column
// of /proc/net/softnet_stat): what a busy CPU loses, whoever forwards.
func backlogDrops(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			v, _ := strconv.ParseUint(f[1], 16, 64)
			n += v
		}
	}
	return n
}

// iperf3Run is an iperf3 client and server pair, TCP or MPTCP (through
// mptcpize), between two nodes.
type iperf3Run struct {
	name    string
	client  *testnet.Process
	report  string // the client's JSON report (-J --logfile)
	started time.Time
	server  *testnet.Process
}

func startIperf3(t *testing.T, name string, from, to *testnet.Node, local, server string, port int, mptcp bool, seconds int) *iperf3Run {
	t.Helper()
	iperf3 := testenv.RequireTool(t, "iperf3")
	wrap := func(args ...string) (string, []string) {
		if mptcp {
			return testenv.RequireTool(t, "mptcpize"), append([]string{"run", iperf3}, args...)
		}
		return iperf3, args
	}
	r := &iperf3Run{name: name, report: filepath.Join(t.TempDir(), name+".json")}
	prog, args := wrap("-s", "-1", "-B", server, "-p", strconv.Itoa(port))
	r.server = to.Start(t, prog, args...)
	waitFor(t, name+"'s iperf3 server to listen", func() bool {
		ok, _ := procnet.TCPListening(fmt.Sprintf("/proc/%d/net", r.server.PID()), uint16(port))
		return ok
	})
	// Cubic, as the default of the namespaces may differ; a steady rate,
	// so that a dip shows and the machine's other work matters less.
	prog, args = wrap("-c", server, "-B", local, "-p", strconv.Itoa(port), "-t", strconv.Itoa(seconds), "-i", "0.2",
		"-C", "cubic", "-b", "300M", "-J", "--logfile", r.report)
	r.started = time.Now()
	r.client = from.Start(t, prog, args...)
	return r
}

// iperf3Report is what the test reads of iperf3's JSON report.
type iperf3Report struct {
	Start struct {
		Connected []struct {
			LocalPort uint16 `json:"local_port"`
		} `json:"connected"`
	} `json:"start"`
	Intervals []struct {
		Sum struct {
			Start         float64 `json:"start"`
			End           float64 `json:"end"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumReceived struct {
			Seconds float64 `json:"seconds"`
			Bytes   uint64  `json:"bytes"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// wait waits for the client and reads its report.
func (r *iperf3Run) wait(t *testing.T) *iperf3Report {
	t.Helper()
	err := r.client.Wait()
	b, _ := os.ReadFile(r.report)
	var rep iperf3Report
	if jerr := json.Unmarshal(b, &rep); jerr != nil || err != nil || rep.Error != "" {
		t.Fatalf("%s: iperf3 client: %v, %v, %s\n%s\n%s", r.name, err, jerr, rep.Error, b, r.client.Output())
	}
	return &rep
}

// window is when a round of restarts ran, in seconds since an iperf3
// client started.
type window struct{ from, to float64 }

// dips says, for each window, the lowest throughput iperf3 measured in
// the intervals around it, and the lowest elsewhere (the machine's own
// noise), against the median of the whole run.
func (rep *iperf3Report) dips(windows []window) string {
	var all []float64
	for _, iv := range rep.Intervals {
		all = append(all, iv.Sum.BitsPerSecond)
	}
	sort.Float64s(all)
	if len(all) == 0 {
		return "no intervals"
	}
	median := all[len(all)/2]
	lowest := func(in func(from, to float64) bool) float64 {
		low := -1.0
		for _, iv := range rep.Intervals[1 : len(rep.Intervals)-1] { // not the ramp up and down
			if in(iv.Sum.Start, iv.Sum.End) && (low < 0 || iv.Sum.BitsPerSecond < low) {
				low = iv.Sum.BitsPerSecond
			}
		}
		return low
	}
	near := func(w window) func(from, to float64) bool {
		return func(from, to float64) bool { return to > w.from-0.2 && from < w.to+0.4 }
	}
	parts := []string{fmt.Sprintf("median %.0f Mbit/s", median/1e6)}
	for i, w := range windows {
		low := lowest(near(w))
		parts = append(parts, fmt.Sprintf("restart %d (%.1f-%.1f s): lowest 0.2 s interval %.0f Mbit/s (%.0f%%)",
			i+1, w.from, w.to, low/1e6, 100*low/median))
	}
	low := lowest(func(from, to float64) bool {
		for _, w := range windows {
			if near(w)(from, to) {
				return false
			}
		}
		return true
	})
	parts = append(parts, fmt.Sprintf("away from the restarts: lowest %.0f Mbit/s (%.0f%%)", low/1e6, 100*low/median))
	return strings.Join(parts, "; ")
}

// routerCounters are the data plane counters that a restart must carry
// on, by router.
var routerCounters = map[string][]string{
	"xtra": {"itr_encapsulated", "etr_decapsulated", "subflow_bound", "itr_path0_bytes"},
	"xtrb": {"itr_encapsulated", "etr_decapsulated"},
	"rtr1": {"rtr_reencapsulated"},
	"rtr2": {"rtr_reencapsulated"},
}

// TestRestartUnderTraffic restarts lispd on both xTRs and both RTRs of
// the LISP-TE overlay three times, and `amptcp pm` once, while iperf3
// sends over TCP and over MPTCP (two subflows, one on each ELP) from
// site a to site b. The routers' data planes stay in place (the same
// TCX links, the programs replaced in them), so the connections go on:
// TCP retransmits less than one round trip's worth of segments over each
// round of restarts, the counters go on from where they were, the MPTCP
// connection keeps its subflows, which the new pm adopts. xtrA and xtrB
// and rtr1 restart with `lispd restart`; rtr2, with keep-on-exit, by
// SIGTERM and a new lispd.
func TestRestartUnderTraffic(t *testing.T) {
	pins := testenv.BPFFS(t)
	o := buildOverlay(t, overlayOptions{dataplane: map[string]string{
		"xtra": "pin-path: " + pins + "/xtra", "xtrb": "pin-path: " + pins + "/xtrb",
		"rtr1": "pin-path: " + pins + "/rtr1", "rtr2": "pin-path: " + pins + "/rtr2, keep-on-exit: true",
	}})
	mptcpLimits(t, 4, o.hostA, o.hostB)
	if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 8); err != nil { // resolve both ways
		t.Fatal(err)
	}
	pmConfig := "policy: fullmesh\ncontrol: {socket: \"{sock}\"}\n"
	pmProc, pmSock := startPM(t, o.hostA, "pma", pmConfig)

	const seconds = 16
	tcp := startIperf3(t, "tcp", o.hostA, o.hostB, "10.1.0.1", "10.2.0.1", 5201, false, seconds)
	mp := startIperf3(t, "mptcp", o.hostA, o.hostB, "10.1.0.1", "10.2.0.1", 5202, true, seconds)
	// The MPTCP connections (iperf3's control and data), each with the
	// subflow the pm opens from 10.1.0.2.
	mpServer := netip.MustParseAddrPort("10.2.0.1:5202")
	waitFor(t, "the pm to open the MPTCP connections' second subflows", func() bool {
		return mptcpPaired(pmStatus(t, pmSock), mpServer)
	})
	ports := ssPorts(t, o.hostA, mpServer)

	ifaces := map[string][]string{
		"xtra": {o.siteA.Iface(o.xtrA), o.aR1.Iface(o.xtrA), o.aR2.Iface(o.xtrA)},
		"xtrb": {o.siteB.Iface(o.xtrB), o.r1B.Iface(o.xtrB), o.r2B.Iface(o.xtrB)},
		"rtr1": {o.aR1.Iface(o.rtr1), o.r1B.Iface(o.rtr1)},
		"rtr2": {o.aR2.Iface(o.rtr2), o.r2B.Iface(o.rtr2)},
	}
	links := map[string]map[string][]link.ID{}
	for name, l := range o.lispds {
		links[name] = tcxLinks(t, l.nd, ifaces[name]...)
	}
	status := func(name string) *daemon.Status { return tunnelStatus(t, o.lispds[name].sock) }
	counters := map[string]map[string]uint64{}
	for name := range routerCounters {
		counters[name] = status(name).Dataplane.Counters
	}
	missesBefore := counters["xtra"]["itr_miss_dropped"] + counters["xtra"]["itr_miss_natively_forwarded"]
	metricBefore := scrape(t, o.xtrA)[`lispd_dataplane_packets_total{counter="itr_encapsulated"}`]

	var windows []window
	for round := 1; round <= 3; round++ {
		time.Sleep(time.Until(tcp.started.Add(time.Duration(round*35) * 100 * time.Millisecond)))
		retransBefore, cwnd := sockets(t, o.hostA, "10.2.0.1")
		dropsBefore := backlogDrops(t)
		from := time.Since(tcp.started).Seconds()
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for _, name := range []string{"xtra", "xtrb", "rtr1"} {
			l := o.lispds[name]
			wg.Go(func() {
				out, err := l.nd.Exec(t, filepath.Join(bin, "lispd"), "restart", "-socket", l.sock)
				t.Logf("%s: %s", name, strings.TrimSpace(out))
				if err != nil || !strings.Contains(out, "it adopted the data plane") || strings.Contains(out, "started empty") {
					errs <- fmt.Errorf("lispd restart of %s: %v %s", name, err, out)
				}
			})
		}
		r2 := o.lispds["rtr2"]
		if err := r2.proc.Stop(); err != nil {
			t.Errorf("rtr2's lispd exited with %v", err)
		}
		r2.start(t)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if round == 2 {
			if err := pmProc.Stop(); err != nil {
				t.Errorf("amptcp pm exited with %v", err)
			}
			pmProc, pmSock = startPM(t, o.hostA, "pma", pmConfig)
			waitFor(t, "the new pm to adopt the MPTCP connections", func() bool {
				return mptcpPaired(pmStatus(t, pmSock), mpServer)
			})
		}
		windows = append(windows, window{from, time.Since(tcp.started).Seconds()})
		if got := ssPorts(t, o.hostA, mpServer); !slices.Equal(got, ports) {
			t.Errorf("round %d: the MPTCP connections' subflows from ports %v, before the restarts %v", round, got, ports)
		}
		time.Sleep(time.Second) // what the restarts lost is retransmitted by now
		retransAfter, _ := sockets(t, o.hostA, "10.2.0.1")
		t.Logf("round %d: restarts from %.2f to %.2f s; %d segments retransmitted, congestion windows %d segments; %d packets dropped by the kernel for a full backlog",
			round, windows[round-1].from, windows[round-1].to, retransAfter-retransBefore, cwnd, backlogDrops(t)-dropsBefore)
		if retransAfter-retransBefore > cwnd {
			t.Errorf("round %d: %d segments retransmitted, more than one round trip's worth (%d)", round, retransAfter-retransBefore, cwnd)
		}
		for name, l := range o.lispds {
			st := status(name)
			a := st.Dataplane.Adoption
			// The links of its interfaces, and of its GRO device.
			if a == nil || a.Links != len(ifaces[name])+1 || len(a.Refused) != 0 || a.Entries == 0 {
				t.Errorf("round %d: %s adopted %+v", round, name, a)
			}
			if got := tcxLinks(t, l.nd, ifaces[name]...); !equalLinks(got, links[name]) {
				t.Errorf("round %d: %s's TCX links %v, before %v", round, name, got, links[name])
			}
			for _, c := range routerCounters[name] {
				if now := st.Dataplane.Counters[c]; now < counters[name][c] {
					t.Errorf("round %d: %s's %s went from %d to %d", round, name, c, counters[name][c], now)
				}
			}
			counters[name] = st.Dataplane.Counters
		}
	}

	tcpRep, mpRep := tcp.wait(t), mp.wait(t)
	t.Logf("TCP: %s", tcpRep.dips(windows))
	t.Logf("MPTCP: %s", mpRep.dips(offset(windows, mp.started.Sub(tcp.started).Seconds())))
	for _, rep := range []*iperf3Report{tcpRep, mpRep} {
		if rep.End.SumReceived.Seconds < seconds-1 || rep.End.SumReceived.Bytes == 0 {
			t.Errorf("iperf3 received %d bytes in %.1f s", rep.End.SumReceived.Bytes, rep.End.SumReceived.Seconds)
		}
	}
	a := status("xtra").Dataplane.Counters
	if misses := a["itr_miss_dropped"] + a["itr_miss_natively_forwarded"]; misses != missesBefore {
		t.Errorf("%d packets met no map-cache entry at xtrA during the restarts", misses-missesBefore)
	}
	if m := scrape(t, o.xtrA)[`lispd_dataplane_packets_total{counter="itr_encapsulated"}`]; m <= metricBefore {
		t.Errorf("xtrA's metric itr_encapsulated went from %v to %v", metricBefore, m)
	}

	t.Run("SIGHUP applies a changed static map-cache entry", func(t *testing.T) {
		l := o.lispds["xtra"]
		static := func(prio1, prio2 int) {
			b, err := os.ReadFile(l.config)
			if err != nil {
				t.Fatal(err)
			}
			cfg := regexp.MustCompile(`(?m)^map-cache: .*$`).ReplaceAllString(string(b), fmt.Sprintf(
				"map-cache: {map-resolvers: [10.0.100.2], probe-interval: 200ms, probe-misses: 3, static: [{eid-prefix: 10.2.0.0/24, "+
					"locators: [{elp: [10.0.11.2, 10.0.21.2], priority: %d, weight: 100}, {elp: [10.0.12.2, 10.0.22.2], priority: %d, weight: 100}]}]}",
				prio1, prio2))
			if err := os.WriteFile(l.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			before := tunnelStatus(t, l.sock).LastReload
			if err := unix.Kill(l.proc.PID(), unix.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the reload", func() bool {
				r := tunnelStatus(t, l.sock).LastReload
				return r != nil && (before == nil || r.Time.After(before.Time))
			})
			if r := tunnelStatus(t, l.sock).LastReload; !slices.Equal(r.Applied, []string{"map-cache.static"}) || len(r.NeedsRestart) != 0 {
				t.Fatalf("reload %+v", r)
			}
		}
		// Which ELP xtrA sends flows to site b on.
		sentOn := func() (uint64, uint64) {
			before := tunnelStatus(t, l.sock).Dataplane.Counters
			if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 8); err != nil {
				t.Fatal(err)
			}
			after := tunnelStatus(t, l.sock).Dataplane.Counters
			return after["itr_path0_packets"] - before["itr_path0_packets"], after["itr_path1_packets"] - before["itr_path1_packets"]
		}
		// The packets of an MPTCP subflow keep to its path whatever the
		// priorities: let iperf3's connections end first.
		waitFor(t, "iperf3's connections to end", func() bool {
			out, _ := o.hostA.Exec(t, "ss", "-tanH", "dst", "10.2.0.1")
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line != "" && !strings.HasPrefix(line, "TIME-WAIT") {
					return false
				}
			}
			return true
		})
		static(1, 2)
		if e := entryOf(tunnelStatus(t, l.sock), "10.2.0.0/24"); !strings.HasPrefix(e, "[1000]10.2.0.0/24 encapsulate") {
			t.Errorf("xtrA's entry %q", e)
		}
		if p0, p1 := sentOn(); p0 == 0 || p1 != 0 {
			t.Errorf("with the ELP through rtr1 preferred: %d packets on it, %d on the other", p0, p1)
		}
		static(2, 1)
		if p0, p1 := sentOn(); p0 != 0 || p1 == 0 {
			t.Errorf("with the ELP through rtr2 preferred: %d packets on the other, %d on it", p0, p1)
		}
	})

	top := t // what the subtests start lasts until the test's end
	t.Run("an incompatible pinned map is refused", func(t *testing.T) {
		// rtr2 leaves its data plane pinned when it exits (keep-on-exit);
		// a counters map of another layout stands in for its own, as an
		// older lispd's would.
		l := o.lispds["rtr2"]
		if err := l.proc.Stop(); err != nil {
			t.Errorf("rtr2's lispd exited with %v", err)
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		os.Remove(filepath.Join(pins, "rtr2", "counters"))
		if err := m.Pin(filepath.Join(pins, "rtr2", "counters")); err != nil {
			t.Fatal(err)
		}
		l.start(top)
		a := tunnelStatus(t, l.sock).Dataplane.Adoption
		if a == nil || !strings.Contains(a.Refused["counters"], "layout changed") || !slices.Contains(a.Maps, "mapcache4") || a.Links != 3 { // its RLOC interfaces and the GRO device
			t.Errorf("adoption %+v", a)
		}
		if !strings.Contains(l.proc.Output(), "pinned map not adopted") {
			t.Errorf("rtr2's lispd did not say it refused a map:\n%s", l.proc.Output())
		}
		// The ELP through rtr2 is preferred (above): it forwards, and
		// counts from 0.
		if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 4); err != nil {
			t.Fatal(err)
		}
		if c := tunnelStatus(t, l.sock).Dataplane.Counters; c["rtr_reencapsulated"] == 0 {
			t.Errorf("rtr2's counters %v", c)
		}
	})

	t.Run("stop for good leaves nothing pinned", func(t *testing.T) {
		stop := func(name, want string) {
			l := o.lispds[name]
			out, err := l.nd.Exec(t, filepath.Join(bin, "lispd"), "stop", "-config", l.config)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("lispd stop of %s: %v %s", name, err, out)
			}
		}
		stop("xtra", "stopped for good")
		if err := o.lispds["xtra"].proc.Wait(); err != nil {
			t.Errorf("xtrA's lispd exited with %v", err)
		}
		// rtr2 leaves its data plane when SIGTERM ends it (keep-on-exit):
		// lispd stop removes it afterwards.
		if err := o.lispds["rtr2"].proc.Stop(); err != nil {
			t.Errorf("rtr2's lispd exited with %v", err)
		}
		if _, err := os.Stat(filepath.Join(pins, "rtr2", "manifest")); err != nil {
			t.Errorf("rtr2 exited with keep-on-exit and left nothing pinned: %v", err)
		}
		stop("rtr2", "removed the data plane it left at "+filepath.Join(pins, "rtr2"))
		// rtr1 leaves nothing when SIGTERM ends it.
		if err := o.lispds["rtr1"].proc.Stop(); err != nil {
			t.Errorf("rtr1's lispd exited with %v", err)
		}
		for _, name := range []string{"xtra", "rtr1", "rtr2"} {
			if _, err := os.Stat(filepath.Join(pins, name)); !os.IsNotExist(err) {
				t.Errorf("%s left its pin directory: %v", name, err)
			}
			l := o.lispds[name]
			waitFor(t, name+"'s programs to be detached", func() bool {
				for _, ids := range tcxLinks(t, l.nd, ifaces[name]...) {
					if len(ids) > 0 {
						return false
					}
				}
				return true
			})
		}
		// Their GRO devices went with them; rtr2's with lispd stop.
		for _, name := range []string{"xtra", "rtr1", "rtr2"} {
			if _, err := o.lispds[name].nd.Netlink().LinkByName(lispgro.Name); err == nil {
				t.Errorf("%s's GRO device is left", name)
			}
		}
	})
}

// mptcpPaired says whether the pm has connections to server, each with
// two subflows up.
func mptcpPaired(st *pm.Status, server netip.AddrPort) bool {
	n := 0
	for i, c := range st.Connections {
		if c.Remote != server {
			continue
		}
		if len(upSubflows(&st.Connections[i])) != 2 {
			return false
		}
		n++
	}
	return n > 0
}

func equalLinks(a, b map[string][]link.ID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func offset(ws []window, by float64) []window {
	out := make([]window, len(ws))
	for i, w := range ws {
		out[i] = window{w.from - by, w.to - by}
	}
	return out
}
