package doctor

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/lispgro"
	"github.com/amptcp/amptcp/internal/osthread"
)

// Host is this machine: its files from /, its PATH, and probes that try
// the kernel's features in throwaway network namespaces.
func Host() *System {
	return &System{Root: os.DirFS("/"), LookPath: exec.LookPath, Probes: hostProbes{}}
}

// hostProbes try the running kernel. Each probe that needs a device
// makes a network namespace of its own on a thread that ends with the
// probe, so that the namespace and all in it go with the thread: nothing
// is named, nothing is left behind, even if the program is killed.
type hostProbes struct{}

// inNewNetns runs fn on a thread of its own, in a new network namespace.
func inNewNetns(fn func() error) error {
	errc := make(chan error, 1)
	osthread.Go(func() {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare the network namespace: %w", err)
			return
		}
		errc <- fn()
	})
	return <-errc
}

func (hostProbes) NewNetns() error { return inNewNetns(func() error { return nil }) }

func (hostProbes) LoadBPF() error {
	p, err := trivialProgram(ebpf.SocketFilter)
	if err != nil {
		return err
	}
	return p.Close()
}

// loopback is the index of lo, the one device of a new namespace.
const loopback = 1

func (hostProbes) AttachTCX() error {
	return withTCProgram(func(p *ebpf.Program) error {
		l, err := link.AttachTCX(link.TCXOptions{Interface: loopback, Program: p, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		return l.Close()
	})
}

func (hostProbes) AttachClsact() error {
	return withTCProgram(func(p *ebpf.Program) error {
		q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: loopback, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
		if err := netlink.QdiscAdd(q); err != nil {
			return fmt.Errorf("add qdisc clsact: %w", err)
		}
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: loopback, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: p.FD(), Name: "doctor", DirectAction: true}
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("add bpf filter: %w", err)
		}
		return nil
	})
}

func (hostProbes) NewLink(kind string) error {
	return inNewNetns(func() error {
		attrs := netlink.LinkAttrs{Name: "doctor0"}
		var l netlink.Link
		switch kind {
		case "veth":
			l = &netlink.Veth{LinkAttrs: attrs, PeerName: "doctor1"}
		case "vxlan":
			l = &netlink.Vxlan{LinkAttrs: attrs, VxlanId: 1, Port: 4789}
		case "vxlan-gpe":
			return lispgro.Create(attrs.Name)
		default:
			return fmt.Errorf("no probe for links of kind %q", kind)
		}
		return netlink.LinkAdd(l)
	})
}

func (hostProbes) NewTAP() error {
	return inNewNetns(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("doctor0")
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("make a TAP device: %w", err)
		}
		return nil
	})
}

// withTCProgram runs fn in a new network namespace with a trivial tc
// program.
func withTCProgram(fn func(p *ebpf.Program) error) error {
	return inNewNetns(func() error {
		p, err := trivialProgram(ebpf.SchedCLS)
		if err != nil {
			return err
		}
		defer p.Close()
		return fn(p)
	})
}

// trivialProgram loads a program of type t that returns 0: for a socket
// filter, drop; for tc, TC_ACT_OK.
func trivialProgram(t ebpf.ProgramType) (*ebpf.Program, error) {
	return ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: "amptcp_doctor", Type: t, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	}, ebpf.ProgramOptions{LogDisabled: true})
}
