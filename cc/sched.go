package cc

import (
	"errors"
	"os"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// Schedulers is what the kernel offers for MPTCP's packet scheduler.
type Schedulers struct {
	// Available lists net.mptcp.available_schedulers ("default" here).
	Available []string `json:"available"`
	// BPF says that the kernel lets BPF programs be schedulers
	// (struct_ops of mptcp_sched_ops), which round-robin and redundant
	// schedulers need; no upstream kernel does as of 6.18.
	BPF bool `json:"bpf"`
}

// ReadSchedulers finds out what the kernel offers.
func ReadSchedulers() (Schedulers, error) {
	var s Schedulers
	b, err := os.ReadFile("/proc/sys/net/mptcp/available_schedulers")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	s.Available = strings.Fields(string(b))
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return s, err
	}
	var st *btf.Struct
	s.BPF = spec.TypeByName("bpf_struct_ops_mptcp_sched_ops", &st) == nil
	return s, nil
}
