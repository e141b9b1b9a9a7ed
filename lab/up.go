package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/deploy"
	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/mptcp"
	"github.com/amptcp/amptcp/pm"
)

// ReadyTimeout bounds Up's wait for the daemons and the registrations.
const ReadyTimeout = 30 * time.Second

// hostLimits are the MPTCP limits of the hosts: room for the plans of
// every policy (the kernel's maximum is 8).
var hostLimits = mptcp.Limits{Subflows: 8, AddAddrAccepted: 8}

// Up builds the lab of a topology and starts its daemons; topologyPath,
// if not empty, is noted in the state. On failure it takes down what it
// built and returns why.
func Up(ctx context.Context, t *topo.Topology, topologyPath string, opts Options) (*State, error) {
	dir := opts.dir(t.Name)
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		return nil, fmt.Errorf("lab %s exists (%s): take it down first (amptcp lab down %s)", t.Name, dir, t.Name)
	}
	plan, err := topo.Compile(t, dir)
	if err != nil {
		return nil, err
	}
	if left, err := netns.List(plan.Prefix); err != nil || len(left) > 0 {
		return nil, fmt.Errorf("lab %s: namespaces %v exist already (%v): amptcp lab down %s", t.Name, left, err, t.Name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	st := &State{Name: plan.Name, Prefix: plan.Prefix, Dir: dir, Topology: topologyPath}
	if err := st.save(); err != nil {
		return nil, err
	}
	b := &builder{plan: plan, st: st, opts: opts}
	if err := b.build(ctx); err != nil {
		opts.progress("up failed: %v; taking down what was built", err)
		if derr := Down(t.Name, opts); derr != nil {
			err = errors.Join(err, fmt.Errorf("take down: %w", derr))
		}
		return nil, err
	}
	return st, nil
}

type builder struct {
	plan *topo.Plan
	st   *State
	opts Options
}

func (b *builder) build(ctx context.Context) error {
	p := b.plan
	b.opts.progress("lab %s: %d nodes, %d links, in %s", p.Name, len(p.Nodes), len(p.Links), p.Dir)
	for _, n := range p.Nodes {
		b.st.Namespaces = append(b.st.Namespaces, n.Namespace)
		if err := b.st.save(); err != nil {
			return err
		}
		if err := b.node(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := b.loadFirewall(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	b.opts.progress("namespaces: %d created", len(p.Nodes))
	links := b.opts.Links
	if links == nil {
		links = Veth{}
	}
	emulated := emulatedLinks(p)
	if len(emulated) > 0 {
		if err := b.startLinkd(ctx, emulated); err != nil {
			return err
		}
	}
	for _, l := range p.Links {
		if !l.Emulated {
			b.st.Links = append(b.st.Links, LinkEnd{l.A.Namespace, l.A.Interface}, LinkEnd{l.B.Namespace, l.B.Interface})
			if err := b.st.save(); err != nil {
				return err
			}
			if err := links.MakeLink(l); err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
		for _, e := range []topo.End{l.A, l.B} {
			if err := configureEnd(e, l.MTU); err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
	}
	b.opts.progress("links: %d up (%d emulated by linkd, %d veth pairs)", len(p.Links), len(emulated), len(p.Links)-len(emulated))
	for _, n := range p.Nodes {
		if err := addRoutes(n, false); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	b.opts.progress("routes: added")
	if err := b.startDaemons(); err != nil {
		return err
	}
	if err := b.waitReady(ctx); err != nil {
		return err
	}
	b.st.Up = true
	if err := b.st.save(); err != nil {
		return err
	}
	b.opts.progress("lab %s is up", p.Name)
	return nil
}

// node creates a namespace with lo up, forwarding on routers (without
// reverse-path filtering: a flow's paths need not be symmetric), and the
// MPTCP limits on hosts.
func (b *builder) node(n topo.NodePlan) error {
	ns, err := netns.Create(n.Namespace)
	if err != nil {
		return err
	}
	h, err := handleAt(n.Namespace)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	sysctls := [][2]string{{"net.ipv4.conf.all.rp_filter", "0"}, {"net.ipv4.conf.default.rp_filter", "0"}}
	if n.Forwarding {
		sysctls = append(sysctls, [2]string{"net.ipv4.ip_forward", "1"})
	}
	// What deploy/ sets on real hosts and routers, on top.
	switch n.Role {
	case topo.RoleHost:
		more, err := deploy.Sysctls(deploy.HostSysctls)
		if err != nil {
			return err
		}
		sysctls = append(sysctls, more...)
		sysctls = append(sysctls, labHostSysctls...)
		// The lab's settings for every host, over deploy/'s.
		sysctls = append(sysctls, b.plan.Hosts.Sysctls()...)
	case topo.RoleXTR, topo.RoleRTR:
		more, err := deploy.Sysctls(deploy.RouterSysctls)
		if err != nil {
			return err
		}
		sysctls = append(sysctls, more...)
	}
	err = ns.Do(func() error {
		for _, kv := range sysctls {
			path := filepath.Join("/proc/sys", strings.ReplaceAll(kv[0], ".", "/"))
			err := os.WriteFile(path, []byte(kv[1]), 0o644)
			// A kernel without IPv6 has no IPv6 settings; sysctl --system
			// passes over them on a real host too.
			if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(kv[0], "net.ipv6.") {
				continue
			}
			if err != nil {
				return fmt.Errorf("set %s: %w", kv[0], err)
			}
		}
		if n.Role != topo.RoleHost {
			return nil
		}
		c, err := mptcp.Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetLimits(hostLimits); err != nil {
			return fmt.Errorf("set MPTCP limits: %w", err)
		}
		return nil
	})
	return err
}

// configureEnd sets a link end's MTU and address and brings it up.
func configureEnd(e topo.End, mtu int) error {
	h, err := handleAt(e.Namespace)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(e.Interface)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", e.Interface, e.Namespace, err)
	}
	if err := h.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set the MTU of %s: %w", e.Interface, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.Address.Addr().AsSlice(), Mask: net.CIDRMask(e.Address.Bits(), 32)}}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", e.Address, e.Interface, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", e.Interface, err)
	}
	return nil
}

// addRoutes adds a node's routes and source routes; with again, those
// that exist (and the source rules) are kept as they are.
func addRoutes(n topo.NodePlan, again bool) error {
	if len(n.Routes) == 0 && len(n.SourceRoutes) == 0 {
		return nil
	}
	h, err := handleAt(n.Namespace)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, r := range n.Routes {
		l, err := h.LinkByName(r.Dev)
		if err != nil {
			return fmt.Errorf("route %s: %w", r, err)
		}
		route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: r.Via.AsSlice()}
		if r.Dst.IsValid() {
			route.Dst = &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), 32)}
		}
		if err := h.RouteAdd(route); err != nil && !(again && errors.Is(err, unix.EEXIST)) {
			return fmt.Errorf("route %s: %w", r, err)
		}
	}
	for i, r := range n.SourceRoutes {
		l, err := h.LinkByName(r.Dev)
		if err != nil {
			return fmt.Errorf("source route from %s: %w", r.From, err)
		}
		route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: r.Via.AsSlice(), Table: r.Table}
		if err := h.RouteAdd(route); err != nil && !(again && errors.Is(err, unix.EEXIST)) {
			return fmt.Errorf("default route via %s dev %s table %d: %w", r.Via, r.Dev, r.Table, err)
		}
		if again {
			continue // rules stay when their interface goes down
		}
		rule := netlink.NewRule()
		rule.Src = &net.IPNet{IP: r.From.AsSlice(), Mask: net.CIDRMask(32, 32)}
		rule.Table, rule.Priority = r.Table, sourceRulePriority+i
		if err := h.RuleAdd(rule); err != nil {
			return fmt.Errorf("rule from %s lookup %d: %w", r.From, r.Table, err)
		}
	}
	return nil
}

// sourceRulePriority is the priority of a multi-homed host's first
// source rule: before the main table's (32766).
const sourceRulePriority = 1000

// startDaemons writes the configurations and starts lispd on every LISP
// node and `amptcp pm` on every host with a pm block, each with the
// command lines of its systemd unit in deploy/ (ExecStartPre, then
// ExecStart), the node's directory standing for /etc/amptcp.
func (b *builder) startDaemons() error {
	lispd, amptcp, err := binaries(b.opts.Bin)
	for _, n := range b.plan.Nodes {
		if n.Lispd != nil {
			if err != nil {
				return err
			}
			host := deploy.Host{Bin: filepath.Dir(lispd), Config: b.plan.EtcDir(n.Name)}
			if err := b.startUnit(n, "lispd", n.LispdSocket, deploy.UnitFor(n.Lispd.Roles), n.LispdInstance, host, n.LispdYAML); err != nil {
				return err
			}
		}
		if n.PM != nil {
			if err != nil {
				return err
			}
			host := deploy.Host{Bin: filepath.Dir(amptcp), Config: b.plan.EtcDir(n.Name)}
			if err := b.startUnit(n, "pm", n.PMSocket, deploy.PMUnit, "", host, n.PMYAML); err != nil {
				return err
			}
		}
	}
	return nil
}

// startUnit writes a daemon's configuration where its unit reads it on
// host, runs the unit's ExecStartPre commands in the node's namespace,
// and starts its ExecStart.
func (b *builder) startUnit(n topo.NodePlan, daemonName, socket, unitName, instance string, host deploy.Host,
	gen func() ([]byte, error)) error {
	unit, err := deploy.LoadUnit(unitName)
	if err != nil {
		return err
	}
	path, err := unit.ConfigPath(host, instance)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := writeConfig(path, gen); err != nil {
		return err
	}
	for _, pre := range unit.ExecStartPre {
		argv := host.Command(pre, instance)
		cmd := exec.Command(argv[0], argv[1:]...)
		var out []byte
		err := (&netns.NS{Name: n.Namespace}).Do(func() (err error) {
			out, err = cmd.CombinedOutput()
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %s: %w\n%s", daemonName, strings.Join(argv, " "), err, out)
		}
	}
	argv := host.Command(unit.ExecStart, instance)
	return b.start(n, daemonName, socket, argv[0], argv[1:]...)
}

func writeConfig(path string, gen func() ([]byte, error)) error {
	data, err := gen()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// binaries finds lispd and amptcp: in bin, else next to this executable,
// else on PATH.
func binaries(bin string) (lispd, amptcp string, err error) {
	if lispd, err = findBinary(bin, "lispd"); err != nil {
		return
	}
	amptcp, err = findBinary(bin, "amptcp")
	return
}

// findBinary finds one program: in bin, else next to this executable,
// else on PATH.
func findBinary(bin, name string) (string, error) {
	if bin != "" {
		return filepath.Join(bin, name), nil
	}
	return buildinfo.Program(name, "", "-bin")
}

// start runs a daemon in the node's namespace, in a process group of its
// own, its output in its log, and notes its PID and start time. The
// daemon outlives Up: nothing ties it to this process.
func (b *builder) start(n topo.NodePlan, daemonName, socket, prog string, args ...string) error {
	return b.startProcess(Process{Node: n.Name, Daemon: daemonName, Namespace: n.Namespace,
		Socket: socket, Log: b.plan.LogPath(n.Name, daemonName)}, prog, args...)
}

// startProcess starts p's program in p's namespace (this process's when
// it names none) and notes it in the state.
func (b *builder) startProcess(p Process, prog string, args ...string) error {
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = b.plan.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Forked from a thread inside the namespace: the daemon is in it from
	// its first instruction.
	if p.Namespace == "" {
		err = cmd.Start()
	} else {
		err = (&netns.NS{Name: p.Namespace}).Do(cmd.Start)
	}
	if err != nil {
		return fmt.Errorf("start %s in %s: %w", p.Daemon, cmp.Or(p.Namespace, "the host's namespace"), err)
	}
	p.PID = cmd.Process.Pid
	go cmd.Wait() // reap it if it dies while this process lives
	p.StartTime, _ = startTime(p.PID)
	b.st.Processes = append(b.st.Processes, p)
	if err := b.st.save(); err != nil {
		return err
	}
	b.opts.progress("%s: %s started, pid %d, log %s", cmp.Or(p.Node, "lab"), p.Daemon, p.PID, p.Log)
	return nil
}

// waitReady waits until every daemon answers on its control socket and
// every xTR is registered with every map-server.
func (b *builder) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	for _, p := range b.st.Processes {
		if err := b.waitFor(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// waitFor waits until the daemon answers (and, an xTR, is registered).
func (b *builder) waitFor(ctx context.Context, p Process) error {
	who := cmp.Or(p.Node, "lab") + "'s " + p.Daemon
	for {
		why := notReady(p)
		if why == "" {
			break
		}
		if alive, _ := running(p); !alive {
			return fmt.Errorf("%s exited: see %s:\n%s", who, p.Log, logTail(p.Log))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s after %v (log %s)", who, why, ReadyTimeout, p.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.opts.progress("%s: %s ready", cmp.Or(p.Node, "lab"), p.Daemon)
	return nil
}

// notReady says what a daemon still lacks, or "".
func notReady(p Process) string {
	if p.Daemon == linkdDaemon {
		if _, err := (&linkClient{socket: p.Socket}).Stats(); err != nil {
			return "no answer on its control socket"
		}
		return ""
	}
	if p.Daemon == "pm" {
		if _, err := pm.QueryStatus(p.Socket); err != nil {
			return "no answer on its control socket"
		}
		return ""
	}
	st, err := daemon.QueryStatus(p.Socket)
	if err != nil {
		return "no answer on its control socket"
	}
	if st.XTR != nil {
		for _, ms := range st.XTR.MapServers {
			if ms.State != "registered" {
				return fmt.Sprintf("not registered with %s (%s)", ms.Address, ms.State)
			}
		}
	}
	return ""
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// startTime reads a process's start time (field 22 of /proc/PID/stat).
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var v uint64
	_, err = fmt.Sscan(f[19], &v)
	return v, err
}

// running reports whether the recorded process still runs: its PID
// exists, with the recorded start time, and is not a zombie.
func running(p Process) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false, nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) || s[i+2] == 'Z' {
		return false, nil
	}
	st, err := startTime(p.PID)
	if err != nil {
		return false, nil
	}
	return p.StartTime == 0 || st == p.StartTime, nil
}

// labHostSysctls keep a lab's connections MPTCP: a SYN that the emulated
// WAN loses or delays twice (a link's failure, or a machine too busy to
// run the emulator in time) would otherwise make the kernel fall back to
// TCP, and then disable MPTCP in the namespace for an hour as if a
// firewall stripped its options. On real hosts both stay as the kernel
// has them.
var labHostSysctls = [][2]string{
	{"net.mptcp.syn_retrans_before_tcp_fallback", "128"}, // 128 or more: never drop the options
	{"net.mptcp.blackhole_timeout", "0"},                 // 0: no blackhole detection
}
