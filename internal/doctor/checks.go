package doctor

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/lispgro"
)

// Everything is what `amptcp doctor` checks: every part's needs, with the
// tools as warnings.
func Everything() []Check {
	return []Check{
		Privileges(),
		MPTCP(), UserspacePM(),
		BPF(), TCX(), Clsact().Optional(), BTF(), StructOps(),
		Congestion("cubic"),
		LISPGPEGRO().Optional(),
		Netns(), Veth(), TUN(), VXLAN().Optional(),
		Iperf3().Optional(), Mptcpize().Optional(), Tshark(),
	}
}

// Router is what lispd's xtr and rtr roles need: their data plane.
func Router() []Check { return []Check{Privileges(), BPF(), TCX()} }

// The checks. Each is required unless its doc says otherwise; Optional
// makes one a warning.

// Privileges: the effective capabilities that namespaces, BPF and the
// path manager's netlink commands need (root has them).
func Privileges() Check {
	return Check{Name: "privileges", Required: true, For: "namespaces, BPF, MPTCP path management", run: privileges}
}

// caps are the capabilities amptcp's privileged parts use, by number.
var caps = []struct {
	bit  uint
	name string
}{{12, "CAP_NET_ADMIN"}, {21, "CAP_SYS_ADMIN"}, {39, "CAP_BPF"}}

func privileges(sys *System) finding {
	b, err := fs.ReadFile(sys.Root, "proc/self/status")
	if err != nil {
		return missing(fmt.Sprintf("cannot read /proc/self/status: %v", err), "run as root")
	}
	var eff uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "CapEff:"); found {
			eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return missing(fmt.Sprintf("unreadable CapEff in /proc/self/status: %q", v), "run as root")
			}
		}
	}
	var have, lack []string
	for _, c := range caps {
		if eff&(1<<c.bit) != 0 {
			have = append(have, c.name)
		} else {
			lack = append(lack, c.name)
		}
	}
	if len(lack) > 0 {
		return missing("without "+strings.Join(lack, ", "), "run as root (sudo)")
	}
	return ok("%s", strings.Join(have, ", "))
}

// MPTCP: the kernel's Multipath TCP, enabled in this network namespace.
func MPTCP() Check {
	return Check{Name: "mptcp", Required: true, For: "MPTCP connections, amptcp pm, the lab's hosts", run: mptcpEnabled}
}

func mptcpEnabled(sys *System) finding {
	v := readTrim(sys, "proc/sys/net/mptcp/enabled")
	switch v {
	case "1":
		return ok("net.mptcp.enabled = 1")
	case "":
		return missing("no net.mptcp sysctls: this kernel has no MPTCP",
			"use a kernel built with CONFIG_MPTCP=y (Linux 5.6 or later; Debian's kernels have it)")
	}
	return missing("net.mptcp.enabled = "+v,
		"sysctl -w net.mptcp.enabled=1 (and put net.mptcp.enabled=1 in /etc/sysctl.d/ to keep it)")
}

// UserspacePM: the userspace path manager, which amptcp pm drives over
// generic netlink.
func UserspacePM() Check {
	return Check{Name: "mptcp-pm", Required: true, For: "amptcp pm (the userspace path manager)", run: userspacePM}
}

func userspacePM(sys *System) finding {
	const fix = "amptcp pm needs MPTCP's userspace path manager: Linux 5.19 or later"
	if avail := readTrim(sys, "proc/sys/net/mptcp/available_path_managers"); avail != "" {
		inUse := readTrim(sys, "proc/sys/net/mptcp/path_manager")
		if !slices.Contains(strings.Fields(avail), "userspace") {
			return missing("path managers: "+avail, fix)
		}
		return ok("path managers: %s (in use here: %s; amptcp pm switches to userspace while it runs)", avail, inUse)
	}
	switch readTrim(sys, "proc/sys/net/mptcp/pm_type") {
	case "0":
		return ok("net.mptcp.pm_type = 0 (kernel; amptcp pm sets 1, userspace, while it runs)")
	case "1":
		return ok("net.mptcp.pm_type = 1 (userspace)")
	}
	if readTrim(sys, "proc/sys/net/mptcp/enabled") == "" {
		return missing("no MPTCP (see mptcp)", fix)
	}
	return missing("neither net.mptcp.path_manager nor net.mptcp.pm_type: only the in-kernel path manager", fix)
}

// BPF: the bpf() system call loads programs, and the JIT compiles them
// (without it they run, slower: a warning).
func BPF() Check {
	return Check{Name: "bpf", Required: true, For: "lispd's xtr and rtr roles (the eBPF data plane)", run: bpfLoads}
}

func bpfLoads(sys *System) finding {
	if err := sys.Probes.LoadBPF(); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return missing("no bpf() system call", "use a kernel built with CONFIG_BPF_SYSCALL=y")
		}
		return probeFailed("load a BPF program", err, "use a kernel built with CONFIG_BPF_SYSCALL=y")
	}
	switch readTrim(sys, "proc/sys/net/core/bpf_jit_enable") {
	case "":
		return finding{status: Warn, found: "BPF programs load, but this kernel has no BPF JIT: they run interpreted, slower",
			fix: "use a kernel built with CONFIG_BPF_JIT=y"}
	case "0":
		return finding{status: Warn, found: "BPF programs load, but net.core.bpf_jit_enable = 0: they run interpreted, slower",
			fix: "sysctl -w net.core.bpf_jit_enable=1"}
	}
	return ok("BPF programs load, JIT on")
}

// TCX: tc programs attach with TCX links (Linux 6.6), as the data plane
// attaches its programs.
func TCX() Check {
	return Check{Name: "tcx", Required: true, For: "lispd's xtr and rtr roles (the eBPF data plane)", run: func(sys *System) finding {
		return probed(sys.Probes.AttachTCX(), "attach a tc program with TCX",
			"use Linux 6.6 or later (CONFIG_NET_XGRESS=y): lispd attaches its programs to tc ingress with TCX links",
			"a tc program attaches to a device's ingress with a TCX link")
	}}
}

// LISPGPEGRO: the kernel's GRO for LISP-GPE, through a VXLAN-GPE device
// on port 4341 (Linux 6.5), which lispd's xtr and rtr roles make unless
// told not to (dataplane.lisp-gpe.gro). They run without it, slower on
// an underlay of MTU-sized frames: optional in Everything.
func LISPGPEGRO() Check {
	return Check{Name: "lisp-gpe-gro", Required: true, For: "lispd's GRO for LISP-GPE (dataplane.lisp-gpe.gro)", run: func(sys *System) finding {
		if err := lispgro.Supported(readTrim(sys, "proc/sys/kernel/osrelease")); err != nil {
			return missing(err.Error(), "use Linux 6.5 or later; lispd runs without GRO for LISP-GPE meanwhile")
		}
		return probed(sys.Probes.NewLink("vxlan-gpe"), "make a VXLAN-GPE device on UDP port 4341",
			"use a kernel built with CONFIG_VXLAN", "a VXLAN-GPE device on UDP port 4341 can be made")
	}}
}

// Clsact: the clsact qdisc with a direct-action BPF filter, what tc(8)
// attaches with. amptcp does not use it: optional in Everything.
func Clsact() Check {
	return Check{Name: "clsact", Required: true, For: "tc(8) and tools older than TCX (amptcp attaches with TCX)", run: func(sys *System) finding {
		return probed(sys.Probes.AttachClsact(), "add a clsact qdisc with a BPF filter",
			"use a kernel built with CONFIG_NET_SCH_INGRESS and CONFIG_NET_CLS_BPF",
			"a clsact qdisc takes a direct-action BPF filter")
	}}
}

// btfPath is the kernel's own BTF.
const btfPath = "sys/kernel/btf/vmlinux"

// BTF: the kernel's type information, which struct_ops programs need.
// The data plane does without: not required.
func BTF() Check {
	return Check{Name: "btf", For: "BPF congestion controls (struct_ops); not the data plane", run: btfPresent}
}

func btfPresent(sys *System) finding {
	fi, err := fs.Stat(sys.Root, btfPath)
	if err != nil {
		return missing("no /"+btfPath, "use a kernel built with CONFIG_DEBUG_INFO_BTF=y")
	}
	return ok("/%s, %.1f MB", btfPath, float64(fi.Size())/1e6)
}

// StructOps: BPF programs can register a TCP congestion control (the
// kernel's BTF has the struct_ops type of tcp_congestion_ops). Not
// required. It also says whether MPTCP schedulers can be BPF programs.
func StructOps() Check {
	return Check{Name: "struct-ops", For: "TCP congestion controls written in BPF", run: structOps}
}

func structOps(sys *System) finding {
	f, err := sys.Root.Open(btfPath)
	if err != nil {
		return missing("no kernel BTF (see btf)", "use a kernel built with CONFIG_DEBUG_INFO_BTF=y and CONFIG_BPF_JIT=y")
	}
	defer f.Close()
	ra, isReaderAt := f.(io.ReaderAt)
	if !isReaderAt {
		return missing("cannot read /"+btfPath, "")
	}
	spec, err := btf.LoadSpecFromReader(ra)
	if err != nil {
		return missing(fmt.Sprintf("cannot parse /%s: %v", btfPath, err), "")
	}
	has := func(name string) bool {
		_, err := spec.AnyTypeByName("bpf_struct_ops_" + name)
		return err == nil
	}
	if !has("tcp_congestion_ops") {
		return missing("tcp_congestion_ops is not a struct_ops type of this kernel",
			"use Linux 5.6 or later built with CONFIG_BPF_JIT=y and CONFIG_DEBUG_INFO_BTF=y")
	}
	sched := "MPTCP schedulers cannot be BPF programs here (mptcp_sched_ops is no struct_ops type)"
	if has("mptcp_sched_ops") {
		sched = "mptcp_sched_ops too"
	}
	return ok("tcp_congestion_ops can be registered from BPF; %s", sched)
}

// Congestion: the TCP congestion controls named are available. It also
// says which are allowed for unprivileged sockets and as a namespace's
// default, and which is the default: the lab and the benches set theirs
// explicitly, because the default differs between kernels.
func Congestion(names ...string) Check {
	return Check{Name: "congestion", Required: true, For: "the flows that use " + strings.Join(names, ", "),
		run: func(sys *System) finding { return congestion(sys, names) }}
}

func congestion(sys *System, names []string) finding {
	avail := readTrim(sys, "proc/sys/net/ipv4/tcp_available_congestion_control")
	if avail == "" {
		return missing("cannot read net.ipv4.tcp_available_congestion_control", "")
	}
	found := fmt.Sprintf("available: %s; allowed without privileges: %s; default: %s", avail,
		readTrim(sys, "proc/sys/net/ipv4/tcp_allowed_congestion_control"),
		readTrim(sys, "proc/sys/net/ipv4/tcp_congestion_control"))
	var lack []string
	for _, n := range names {
		if !slices.Contains(strings.Fields(avail), n) {
			lack = append(lack, n)
		}
	}
	if len(lack) > 0 {
		fix := make([]string, len(lack))
		for i, n := range lack {
			fix[i] = "modprobe tcp_" + n
		}
		return missing(strings.Join(lack, ", ")+" not available ("+found+")",
			strings.Join(fix, "; ")+", or use a kernel built with it")
	}
	return ok("%s", found)
}

// Netns: network namespaces, which the lab and the benches build their
// networks in.
func Netns() Check {
	return Check{Name: "netns", Required: true, For: "the lab and amptcp bench dataplane", run: func(sys *System) finding {
		return probed(sys.Probes.NewNetns(), "make a network namespace", "use a kernel built with CONFIG_NET_NS=y",
			"a network namespace can be made")
	}}
}

// Veth: veth pairs, the lab's plain links and the benches' chains.
func Veth() Check {
	return Check{Name: "veth", Required: true, For: "the lab's links and amptcp bench dataplane", run: linkWorks("veth", "CONFIG_VETH")}
}

// VXLAN: the kernel's VXLAN, the reference tunnel of amptcp bench
// dataplane.
func VXLAN() Check {
	return Check{Name: "vxlan", Required: true, For: "amptcp bench dataplane's vxlan variant", run: linkWorks("vxlan", "CONFIG_VXLAN")}
}

func linkWorks(kind, option string) func(*System) finding {
	return func(sys *System) finding {
		return probed(sys.Probes.NewLink(kind), "make a "+kind+" link",
			fmt.Sprintf("modprobe %s, or use a kernel built with %s", kind, option), "a "+kind+" link can be made")
	}
}

// TUN: TAP devices, which the lab's link emulator relays frames between.
func TUN() Check {
	return Check{Name: "tun", Required: true, For: "the lab's emulated links (TAP devices)", run: tunWorks}
}

func tunWorks(sys *System) finding {
	const fix = "modprobe tun, or use a kernel built with CONFIG_TUN"
	there, err := exists(sys, "dev/net/tun")
	if err != nil {
		return missing(fmt.Sprintf("cannot look at /dev/net/tun: %v", err), fix)
	}
	if !there {
		return missing("no /dev/net/tun", fix+" (and mknod /dev/net/tun c 10 200 where no devtmpfs makes it)")
	}
	return probed(sys.Probes.NewTAP(), "make a TAP device", fix, "/dev/net/tun makes TAP devices")
}

// The tools. Each names its Debian package; scripts/deps.sh (make deps)
// installs them.

// Iperf3 runs the lab's iperf3 flows and amptcp bench dataplane.
func Iperf3() Check {
	return Tool("iperf3", "", "iperf3", "amptcp bench dataplane and the lab's iperf3 flows")
}

// Mptcpize runs iperf3 over MPTCP in the lab.
func Mptcpize() Check {
	return Tool("mptcpize", "", "mptcpize", "the lab's iperf3 flows over MPTCP (mptcpize run iperf3)")
}

// Tshark checks the LISP codec against Wireshark's dissectors, in tests
// only: not required.
func Tshark() Check {
	return Tool("tshark", "", "tshark", "the tests that check the LISP codec against Wireshark").Optional()
}

// Tool: a program, path if given (a flag's value), else name in PATH.
func Tool(name, path, pkg, usedBy string) Check {
	return Check{Name: name, Required: true, For: usedBy, run: func(sys *System) finding {
		p := cmp.Or(path, name)
		found, err := sys.LookPath(p)
		if err != nil {
			return missing(p+" not found", "install the Debian package "+pkg+" (make deps installs what is missing)")
		}
		return ok("%s", found)
	}}
}

// probed is the finding of a probe: done when it worked, else what it
// tried and the kernel's error.
func probed(err error, what, fix, done string) finding {
	if err != nil {
		return probeFailed(what, err, fix)
	}
	return ok("%s", done)
}

// probeFailed is the finding of a probe the kernel refused: for lack of
// privileges, or for lack of the feature (fix says what to do).
func probeFailed(what string, err error, fix string) finding {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return missing(what+": "+err.Error(), "run as root (see privileges)")
	}
	return missing(what+": "+err.Error(), fix)
}
