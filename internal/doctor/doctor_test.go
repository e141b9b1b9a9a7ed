package doctor_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/doctor"
	"github.com/amptcp/amptcp/internal/doctor/doctortest"
)

func result(t *testing.T, r *doctor.Report, name string) doctor.Result {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return doctor.Result{}
}

// TestHealthyMachine: a machine with everything passes every check, and
// the report says so.
func TestHealthyMachine(t *testing.T) {
	r := doctor.Run(doctortest.Healthy().System(), doctor.Everything())
	for _, c := range r.Checks {
		if c.Status != doctor.OK || c.Fix != "" {
			t.Errorf("%s: %s %q, fix %q; want OK", c.Name, c.Status, c.Found, c.Fix)
		}
	}
	if r.Kernel != "6.18.0" || r.Err() != nil {
		t.Errorf("kernel %q, err %v", r.Kernel, r.Err())
	}
	var out bytes.Buffer
	if err := doctor.WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Linux 6.18.0\n",
		"OK       mptcp-pm    path managers: kernel userspace (in use here: kernel;",
		"OK       struct-ops  tcp_congestion_ops can be registered from BPF; MPTCP schedulers cannot be BPF programs here",
		"OK       congestion  available: reno bbr cubic; allowed without privileges: reno bbr; default: bbr\n",
		"\nEverything is here.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestEachMissingItem: each thing a machine may lack fails its own check
// (and only the checks that depend on it), saying what was found and
// what to do.
func TestEachMissingItem(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(m *doctortest.Machine)
		check   string
		status  doctor.Status
		found   string
		fix     string
		alsoBad []string
	}{
		{"no MPTCP", func(m *doctortest.Machine) {
			for f := range m.Files {
				if strings.HasPrefix(f, "proc/sys/net/mptcp/") {
					delete(m.Files, f)
				}
			}
		}, "mptcp", doctor.Missing, "no net.mptcp sysctls: this kernel has no MPTCP", "CONFIG_MPTCP=y", []string{"mptcp-pm"}},
		{"MPTCP disabled", func(m *doctortest.Machine) { m.Set("proc/sys/net/mptcp/enabled", "0") },
			"mptcp", doctor.Missing, "net.mptcp.enabled = 0", "sysctl -w net.mptcp.enabled=1", nil},
		{"no userspace path manager", func(m *doctortest.Machine) {
			m.Set("proc/sys/net/mptcp/available_path_managers", "kernel")
		}, "mptcp-pm", doctor.Missing, "path managers: kernel", "Linux 5.19 or later", nil},
		{"a kernel before 5.19", func(m *doctortest.Machine) {
			delete(m.Files, "proc/sys/net/mptcp/available_path_managers")
			delete(m.Files, "proc/sys/net/mptcp/path_manager")
			delete(m.Files, "proc/sys/net/mptcp/pm_type")
		}, "mptcp-pm", doctor.Missing, "only the in-kernel path manager", "Linux 5.19 or later", nil},
		{"not root", func(m *doctortest.Machine) {
			m.Files["proc/self/status"].Data = []byte("Name:\tamptcp\nCapEff:\t0000000000001000\n")
		}, "privileges", doctor.Missing, "without CAP_SYS_ADMIN, CAP_BPF", "run as root", nil},
		{"no bpf()", func(m *doctortest.Machine) { m.Probes["bpf"] = unix.ENOSYS },
			"bpf", doctor.Missing, "no bpf() system call", "CONFIG_BPF_SYSCALL=y", nil},
		{"bpf() refused", func(m *doctortest.Machine) { m.Probes["bpf"] = unix.EPERM },
			"bpf", doctor.Missing, "load a BPF program: operation not permitted", "run as root", nil},
		{"JIT off", func(m *doctortest.Machine) { m.Set("proc/sys/net/core/bpf_jit_enable", "0") },
			"bpf", doctor.Warn, "net.core.bpf_jit_enable = 0: they run interpreted", "sysctl -w net.core.bpf_jit_enable=1", nil},
		{"no TCX", func(m *doctortest.Machine) { m.Probes["tcx"] = unix.EINVAL },
			"tcx", doctor.Missing, "attach a tc program with TCX: invalid argument", "Linux 6.6 or later", nil},
		{"no clsact", func(m *doctortest.Machine) { m.Probes["clsact"] = unix.ENOENT },
			"clsact", doctor.Warn, "add a clsact qdisc with a BPF filter: no such file or directory", "CONFIG_NET_SCH_INGRESS", nil},
		{"no BTF", func(m *doctortest.Machine) { delete(m.Files, "sys/kernel/btf/vmlinux") },
			"btf", doctor.Warn, "no /sys/kernel/btf/vmlinux", "CONFIG_DEBUG_INFO_BTF=y", []string{"struct-ops"}},
		{"no struct_ops for congestion controls", func(m *doctortest.Machine) {
			m.Files["sys/kernel/btf/vmlinux"].Data = doctortest.BTF("tcp_congestion_ops")
		}, "struct-ops", doctor.Warn, "tcp_congestion_ops is not a struct_ops type of this kernel", "CONFIG_BPF_JIT=y", nil},
		{"no cubic", func(m *doctortest.Machine) {
			m.Set("proc/sys/net/ipv4/tcp_available_congestion_control", "reno bbr")
		}, "congestion", doctor.Missing, "cubic not available (available: reno bbr;", "modprobe tcp_cubic", nil},
		{"no namespaces", func(m *doctortest.Machine) { m.Probes["netns"] = unix.EINVAL },
			"netns", doctor.Missing, "make a network namespace: invalid argument", "CONFIG_NET_NS=y", nil},
		{"no veth", func(m *doctortest.Machine) { m.Probes["link veth"] = unix.EOPNOTSUPP },
			"veth", doctor.Missing, "make a veth link: operation not supported", "modprobe veth", nil},
		{"no vxlan", func(m *doctortest.Machine) { m.Probes["link vxlan"] = unix.EOPNOTSUPP },
			"vxlan", doctor.Warn, "make a vxlan link: operation not supported", "modprobe vxlan", nil},
		{"a kernel before 6.5", func(m *doctortest.Machine) { m.Set("proc/sys/kernel/osrelease", "6.1.0-18-amd64") },
			"lisp-gpe-gro", doctor.Warn, "kernel 6.1.0-18-amd64 is older than 6.5", "Linux 6.5 or later", nil},
		{"no VXLAN-GPE device", func(m *doctortest.Machine) { m.Probes["link vxlan-gpe"] = unix.EOPNOTSUPP },
			"lisp-gpe-gro", doctor.Warn, "make a VXLAN-GPE device on UDP port 4341: operation not supported", "CONFIG_VXLAN", nil},
		{"no /dev/net/tun", func(m *doctortest.Machine) { delete(m.Files, "dev/net/tun") },
			"tun", doctor.Missing, "no /dev/net/tun", "modprobe tun", nil},
		{"no TAP device", func(m *doctortest.Machine) { m.Probes["tap"] = unix.EBADFD },
			"tun", doctor.Missing, "make a TAP device: file descriptor in bad state", "modprobe tun", nil},
		{"no iperf3", func(m *doctortest.Machine) { delete(m.Tools, "iperf3") },
			"iperf3", doctor.Warn, "iperf3 not found", "install the Debian package iperf3", nil},
		{"no mptcpize", func(m *doctortest.Machine) { delete(m.Tools, "mptcpize") },
			"mptcpize", doctor.Warn, "mptcpize not found", "install the Debian package mptcpize", nil},
		{"no tshark", func(m *doctortest.Machine) { delete(m.Tools, "tshark") },
			"tshark", doctor.Warn, "tshark not found", "install the Debian package tshark", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := doctortest.Healthy()
			tt.breakIt(m)
			r := doctor.Run(m.System(), doctor.Everything())
			c := result(t, r, tt.check)
			if c.Status != tt.status || !strings.Contains(c.Found, tt.found) || !strings.Contains(c.Fix, tt.fix) {
				t.Errorf("%s: %s %q, fix %q; want %s, %q, fix with %q", c.Name, c.Status, c.Found, c.Fix, tt.status, tt.found, tt.fix)
			}
			for _, o := range r.Checks {
				if o.Name != tt.check && o.Status != doctor.OK && !slices.Contains(tt.alsoBad, o.Name) {
					t.Errorf("%s failed too: %s %q", o.Name, o.Status, o.Found)
				}
			}
			if wantErr := tt.status == doctor.Missing; (r.Err() != nil) != wantErr {
				t.Errorf("Err() = %v; want an error: %v", r.Err(), wantErr)
			}
		})
	}
}

// TestRequiredOrNot: what is missing fails a command that needs it and
// only warns one that does not.
func TestRequiredOrNot(t *testing.T) {
	m := doctortest.Healthy()
	m.Probes["link vxlan"] = unix.EOPNOTSUPP
	if r := doctor.Run(m.System(), []doctor.Check{doctor.VXLAN()}); r.Checks[0].Status != doctor.Missing || r.Err() == nil {
		t.Errorf("required vxlan: %+v", r.Checks[0])
	}
	if r := doctor.Run(m.System(), []doctor.Check{doctor.VXLAN().Optional()}); r.Checks[0].Status != doctor.Warn || r.Err() != nil {
		t.Errorf("optional vxlan: %+v", r.Checks[0])
	}
	// A tool given by path is looked up there.
	m.Tools["/opt/iperf3/bin/iperf3"] = "/opt/iperf3/bin/iperf3"
	delete(m.Tools, "iperf3")
	if r := doctor.Run(m.System(), []doctor.Check{doctor.Tool("iperf3", "/opt/iperf3/bin/iperf3", "iperf3", "a bench")}); r.Err() != nil {
		t.Errorf("iperf3 by path: %v", r.Err())
	}
}

// TestPreflight: a command's checks print their warnings and fail with
// every missing item, each with its fix.
func TestPreflight(t *testing.T) {
	m := doctortest.Healthy()
	m.Set("proc/sys/net/mptcp/enabled", "0")
	m.Set("proc/sys/net/core/bpf_jit_enable", "0")
	m.Probes["tcx"] = unix.EINVAL
	var warnings bytes.Buffer
	err := doctor.Preflight(m.System(), []doctor.Check{doctor.MPTCP(), doctor.BPF(), doctor.TCX(), doctor.Netns()}, &warnings)
	var me *doctor.MissingError
	if !errors.As(err, &me) || len(me.Missing) != 2 {
		t.Fatalf("Preflight = %v; want a MissingError with mptcp and tcx", err)
	}
	for _, want := range []string{
		"this machine lacks what it needs (amptcp doctor checks everything):\n",
		"MISSING  mptcp       net.mptcp.enabled = 0\n",
		"fix: sysctl -w net.mptcp.enabled=1",
		"MISSING  tcx         attach a tc program with TCX: invalid argument\n",
		"needed by: lispd's xtr and rtr roles",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "netns") || !strings.Contains(warnings.String(), "WARN     bpf") ||
		!strings.Contains(warnings.String(), "fix: sysctl -w net.core.bpf_jit_enable=1") {
		t.Errorf("warnings %q, error %v", warnings.String(), err)
	}
}

// TestReportJSON: statuses are words in JSON, for scripts.
func TestReportJSON(t *testing.T) {
	m := doctortest.Healthy()
	delete(m.Tools, "tshark")
	m.Probes["tcx"] = unix.EINVAL
	b, err := json.Marshal(doctor.Run(m.System(), []doctor.Check{doctor.TCX(), doctor.Tshark()}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kernel":"6.18.0"`, `"name":"tcx","status":"missing","required":true`, `"name":"tshark","status":"warn","required":false`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

// TestWriteTextMissing: the verdict counts what is missing.
func TestWriteTextMissing(t *testing.T) {
	m := doctortest.Healthy()
	m.Set("proc/sys/net/mptcp/enabled", "0")
	delete(m.Tools, "tshark")
	var out bytes.Buffer
	doctor.WriteText(&out, doctor.Run(m.System(), doctor.Everything()))
	for _, want := range []string{
		"MISSING  mptcp       net.mptcp.enabled = 0\n                     needed by: MPTCP connections, amptcp pm, the lab's hosts\n",
		"\n1 required item missing (and 1 warning): see the fixes above.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
