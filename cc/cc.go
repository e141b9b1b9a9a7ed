// Package cc registers amptcp's congestion controls with the kernel: the
// coupled controls of multipath TCP that upstream Linux lacks, amp_lia
// (RFC 6356), amp_olia, amp_balia and amp_wvegas, written as BPF
// struct_ops (tcp_congestion_ops), and amp_reno, a BPF wrapper of the
// kernel's Reno that serves as their reference. A socket selects one with
// TCP_CONGESTION; on an MPTCP socket it runs on every subflow, and the
// subflows of one connection share their windows and RTTs through a BPF
// map keyed by the connection's token. On a plain TCP socket each behaves
// as Reno (amp_wvegas as Vegas).
//
// A congestion control is registered through a BPF link: Load holds the
// registration in the calling process (it ends with Close or the
// process), Install pins it in the BPF file system so that it outlives the
// command that made it, and installing again replaces the programs of a
// registered control atomically, keeping the coupling state of the
// connections. Unregistering never disturbs a running connection: its
// sockets keep the programs they have until they close, and the kernel
// frees them then. The arithmetic is in bpf/ccmath.h, its reference model
// in cc/model; docs/cc.md describes the algorithms and their use.
package cc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// The congestion controls, by the names the kernel lists them under.
const (
	LIA    = "amp_lia"
	OLIA   = "amp_olia"
	BALIA  = "amp_balia"
	WVegas = "amp_wvegas"
	Reno   = "amp_reno"
)

// Names are the congestion controls this package registers: the coupled
// ones, then the Reno reference.
var Names = []string{LIA, OLIA, BALIA, WVegas, Reno}

// Coupled are the congestion controls that couple the subflows of a
// connection.
var Coupled = []string{LIA, OLIA, BALIA, WVegas}

// ErrUnknown is the error of a name that is not one of Names.
var ErrUnknown = errors.New("not one of amptcp's congestion controls")

// Canonical returns the kernel name of a congestion control given as
// "lia" or "amp_lia".
func Canonical(name string) (string, error) {
	full := name
	if !strings.HasPrefix(full, "amp_") {
		full = "amp_" + full
	}
	if !slices.Contains(Names, full) {
		return "", fmt.Errorf("%q: %w (%s)", name, ErrUnknown, strings.Join(Names, ", "))
	}
	return full, nil
}

// Is reports whether name is one of amptcp's congestion controls (by its
// kernel name).
func Is(name string) bool { return slices.Contains(Names, name) }

// short is the prefix of a control's programs and maps: "lia" for amp_lia.
func short(name string) string { return strings.TrimPrefix(name, "amp_") }

// The kernel names of a control's maps; Status finds them by these.
func connsMapName(name string) string    { return short(name) + "_conns" }
func countersMapName(name string) string { return short(name) + "_counters" }

// spec is the collection of one control: its struct_ops map, its own
// programs and its own instances of the shared maps, named after it.
func spec(name string) (*ebpf.CollectionSpec, error) {
	full, err := loadCc()
	if err != nil {
		return nil, fmt.Errorf("cc: read the BPF object: %w", err)
	}
	s := full.Copy()
	prefix := short(name) + "_"
	for k := range s.Programs {
		if !strings.HasPrefix(k, prefix) {
			delete(s.Programs, k)
		}
	}
	for k, m := range s.Maps {
		if m.Type == ebpf.StructOpsMap && k != name || k == "amp_rules" {
			delete(s.Maps, k)
		}
	}
	if s.Maps[name] == nil {
		return nil, fmt.Errorf("cc: the BPF object has no %s", name)
	}
	s.Maps["amp_conns"].Name = connsMapName(name)
	s.Maps["amp_counters"].Name = countersMapName(name)
	s.Maps["amp_blank"].Name = prefix + "blank"
	s.Maps["amp_sweep"].Name = prefix + "sweep"
	return s, nil
}

// Registration is one congestion control loaded and registered by this
// process. Close unregisters it.
type Registration struct {
	Name     string
	coll     *ebpf.Collection
	link     link.Link
	conns    *ebpf.Map
	counters *ebpf.Map
}

// ErrRegistered is the error of Load for a name the kernel already has.
var ErrRegistered = errors.New("already registered")

// Load loads the congestion control name and registers it through a BPF
// link that this process holds. It needs CAP_BPF and CAP_NET_ADMIN (root)
// and a kernel with BPF struct_ops for TCP (5.13 and later; links 6.4).
func Load(name string) (*Registration, error) {
	r, err := load(name, nil)
	if err != nil {
		return nil, err
	}
	if err := r.register(); err != nil {
		r.coll.Close()
		return nil, err
	}
	return r, nil
}

// load loads name without registering it, reusing the maps in keep (by
// their names in the object) instead of creating new ones.
func load(name string, keep map[string]*ebpf.Map) (*Registration, error) {
	if !Is(name) {
		return nil, fmt.Errorf("cc: %q: %w", name, ErrUnknown)
	}
	s, err := spec(name)
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollectionWithOptions(s, ebpf.CollectionOptions{MapReplacements: keep})
	if err != nil {
		return nil, fmt.Errorf("cc: load %s: %w", name, verifierDetail(err))
	}
	return &Registration{Name: name, coll: coll, conns: coll.Maps["amp_conns"], counters: coll.Maps["amp_counters"]}, nil
}

// register creates the link that registers r's struct_ops map.
func (r *Registration) register() error {
	l, err := link.AttachStructOps(link.StructOpsOptions{Map: r.coll.Maps[r.Name]})
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cc: register %s: %w", r.Name, ErrRegistered)
		}
		return fmt.Errorf("cc: register %s: %w", r.Name, err)
	}
	r.link = l
	return nil
}

// Close unregisters the congestion control (if this process registered
// it and did not Install it) and releases this process's hold on its
// programs and maps. Sockets that use it keep it until they close.
func (r *Registration) Close() error {
	var err error
	if r.link != nil {
		if err = r.link.Close(); err == nil {
			_, err = stillRegistered(r.Name) // wait for the kernel to let go
		}
	}
	r.coll.Close()
	if err != nil {
		return fmt.Errorf("cc: unregister %s: %w", r.Name, err)
	}
	return nil
}

// Counters returns the control's counters, summed over the CPUs.
func (r *Registration) Counters() (Counters, error) { return readCounters(r.counters) }

// verifierDetail adds the verifier's log to a load error, which says
// which instruction it refused.
func verifierDetail(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w\n%+v", err, ve)
	}
	return err
}

// Connections reads the connections this registration couples now.
func (r *Registration) Connections() ([]Connection, error) { return readConns(r.conns) }

// KernelName is the name the kernel knows a congestion control by: lia,
// olia, balia and wvegas are amptcp's amp_ ones; any other name is
// returned as it is (reno is the kernel's Reno).
func KernelName(name string) string {
	for _, n := range Coupled {
		if name == short(n) {
			return n
		}
	}
	return name
}
