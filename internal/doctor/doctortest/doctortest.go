// Package doctortest gives tests a machine for package doctor to check:
// one that has everything amptcp needs, as root on Linux 6.18, which a
// test then breaks where it wants (a file changed or removed, a probe
// that fails, a tool not installed).
package doctortest

import (
	"errors"
	"io/fs"
	"testing/fstest"

	"github.com/cilium/ebpf/btf"

	"github.com/amptcp/amptcp/internal/doctor"
)

// Machine is a fake machine.
type Machine struct {
	// Files are its files from "/".
	Files fstest.MapFS
	// Probes fail with the error given for a probe: "netns", "bpf",
	// "tcx", "clsact", "tap", "link veth", "link vxlan", "link vxlan-gpe".
	Probes Probes
	// Tools map a program's name to its path.
	Tools map[string]string
}

// Healthy is a machine that has everything.
func Healthy() *Machine {
	m := &Machine{
		Files: fstest.MapFS{
			"sys/kernel/btf/vmlinux": {Data: BTF("tcp_congestion_ops", "bpf_struct_ops_tcp_congestion_ops")},
			"dev/net/tun":            {Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600},
		},
		Probes: Probes{},
		Tools:  map[string]string{"iperf3": "/usr/bin/iperf3", "mptcpize": "/usr/bin/mptcpize", "tshark": "/usr/bin/tshark"},
	}
	for name, value := range map[string]string{
		"proc/sys/kernel/osrelease":                          "6.18.0",
		"proc/self/status":                                   "Name:\tamptcp\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff",
		"proc/sys/net/mptcp/enabled":                         "1",
		"proc/sys/net/mptcp/available_path_managers":         "kernel userspace",
		"proc/sys/net/mptcp/path_manager":                    "kernel",
		"proc/sys/net/mptcp/pm_type":                         "0",
		"proc/sys/net/core/bpf_jit_enable":                   "1",
		"proc/sys/net/ipv4/tcp_available_congestion_control": "reno bbr cubic",
		"proc/sys/net/ipv4/tcp_allowed_congestion_control":   "reno bbr",
		"proc/sys/net/ipv4/tcp_congestion_control":           "bbr",
	} {
		m.Set(name, value)
	}
	return m
}

// Set writes a file (a line, as /proc shows values).
func (m *Machine) Set(name, value string) {
	m.Files[name] = &fstest.MapFile{Data: []byte(value + "\n")}
}

// System is the machine as doctor sees it.
func (m *Machine) System() *doctor.System {
	return &doctor.System{Root: m.Files, Probes: m.Probes, LookPath: func(name string) (string, error) {
		if p, ok := m.Tools[name]; ok {
			return p, nil
		}
		return "", errors.New(`exec: "` + name + `": executable file not found in $PATH`)
	}}
}

// Probes fail with the error given for a probe, by name.
type Probes map[string]error

func (p Probes) NewNetns() error           { return p["netns"] }
func (p Probes) LoadBPF() error            { return p["bpf"] }
func (p Probes) AttachTCX() error          { return p["tcx"] }
func (p Probes) AttachClsact() error       { return p["clsact"] }
func (p Probes) NewLink(kind string) error { return p["link "+kind] }
func (p Probes) NewTAP() error             { return p["tap"] }

// BTF is a raw BTF blob with empty struct types of these names, as
// /sys/kernel/btf/vmlinux holds the kernel's types.
func BTF(names ...string) []byte {
	b, err := btf.NewBuilder(nil, nil)
	if err == nil {
		for _, n := range names {
			if _, err = b.Add(&btf.Struct{Name: n}); err != nil {
				break
			}
		}
	}
	var raw []byte
	if err == nil {
		raw, err = b.Marshal(nil, nil)
	}
	if err != nil {
		panic("doctortest: build BTF: " + err.Error()) // a bug of this package, not of a test
	}
	return raw
}
