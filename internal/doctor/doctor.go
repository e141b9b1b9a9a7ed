// Package doctor checks that the running kernel and the machine offer
// what amptcp needs: MPTCP and its userspace path manager, BPF with TCX
// for lispd's tunnel routers, network namespaces, veth and TAP devices
// for the lab and the benches, the congestion controls, and the tools
// the lab runs. Each check says OK, or what is missing and what to do,
// in the user's words (docs/kernel.md explains each fact).
//
// Checks read the machine through a System: its files (/proc, /sys,
// /dev) as an fs.FS, its PATH, and a few probes that try the real thing
// in a network namespace of their own (load a BPF program, attach it
// with TCX, make a TAP device). Tests give a System of fakes.
package doctor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Status is the outcome of one check.
type Status uint8

// The outcomes. A check that finds something missing reports Missing
// when it is required and Warn when it is not.
const (
	OK Status = iota
	Warn
	Missing
)

func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Warn:
		return "WARN"
	}
	return "MISSING"
}

// MarshalText is the status in JSON: "ok", "warn", "missing".
func (s Status) MarshalText() ([]byte, error) { return []byte(strings.ToLower(s.String())), nil }

// System is the machine the checks look at.
type System struct {
	// Root is the file system from "/": the checks read
	// proc/sys/net/mptcp/enabled, sys/kernel/btf/vmlinux, dev/net/tun...
	Root fs.FS
	// LookPath finds a program, as exec.LookPath does.
	LookPath func(name string) (string, error)
	// Probes try what files cannot tell.
	Probes Probes
}

// Probes try kernel features for real, each in a network namespace of
// its own that disappears with it (but NewNetns, which only makes one,
// and LoadBPF, which needs none). They return the kernel's error.
type Probes interface {
	// NewNetns makes a network namespace.
	NewNetns() error
	// LoadBPF loads a trivial BPF program.
	LoadBPF() error
	// AttachTCX attaches a trivial tc program to a device's ingress
	// with TCX.
	AttachTCX() error
	// AttachClsact adds a clsact qdisc and a direct-action BPF filter.
	AttachClsact() error
	// NewLink makes a link of kind ("veth", "vxlan", "vxlan-gpe": a
	// VXLAN-GPE device as lispd's GRO device).
	NewLink(kind string) error
	// NewTAP makes a TAP device through /dev/net/tun.
	NewTAP() error
}

// Check is one thing amptcp needs from the machine.
type Check struct {
	// Name names the check in the output ("mptcp", "tcx").
	Name string
	// Required says that amptcp (or the command that runs the check)
	// cannot work without it; what is not required is only a warning.
	Required bool
	// For says who needs it, in the user's words.
	For string
	run func(*System) finding
}

// Optional returns the check made a warning only.
func (c Check) Optional() Check {
	c.Required = false
	return c
}

// finding is what a check found: OK, Warn (it works, but not as well as
// it could), or Missing (which Run turns into Warn when not required).
type finding struct {
	status Status
	found  string
	fix    string
}

func ok(format string, args ...any) finding {
	return finding{status: OK, found: fmt.Sprintf(format, args...)}
}

func missing(found, fix string) finding { return finding{status: Missing, found: found, fix: fix} }

// Result is what one check found.
type Result struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Required bool   `json:"required"`
	For      string `json:"for"`
	// Found is what the machine has, or the error it gave.
	Found string `json:"found"`
	// Fix is what to do, when the status is not OK.
	Fix string `json:"fix,omitempty"`
}

// Report is the outcome of a set of checks.
type Report struct {
	// Kernel is the running kernel's release.
	Kernel string   `json:"kernel"`
	Checks []Result `json:"checks"`
}

// Run runs the checks in order.
func Run(sys *System, checks []Check) *Report {
	r := &Report{Kernel: readTrim(sys, "proc/sys/kernel/osrelease")}
	for _, c := range checks {
		f := c.run(sys)
		if f.status == Missing && !c.Required {
			f.status = Warn
		}
		r.Checks = append(r.Checks, Result{
			Name: c.Name, Status: f.status, Required: c.Required, For: c.For, Found: f.found, Fix: f.fix,
		})
	}
	return r
}

// Missing returns the results of the required checks that failed.
func (r *Report) Missing() []Result { return r.with(Missing) }

// Warnings returns the results that are warnings.
func (r *Report) Warnings() []Result { return r.with(Warn) }

func (r *Report) with(s Status) []Result {
	var rs []Result
	for _, c := range r.Checks {
		if c.Status == s {
			rs = append(rs, c)
		}
	}
	return rs
}

// MissingError says what a command needs and the machine lacks.
type MissingError struct {
	Missing []Result
}

func (e *MissingError) Error() string {
	var b strings.Builder
	b.WriteString("this machine lacks what it needs (amptcp doctor checks everything):")
	for _, c := range e.Missing {
		b.WriteString("\n")
		writeResult(&b, c, true)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Err is a *MissingError when a required check failed, else nil.
func (r *Report) Err() error {
	if m := r.Missing(); len(m) > 0 {
		return &MissingError{Missing: m}
	}
	return nil
}

// Preflight runs the checks a command needs before it starts: it writes
// the warnings to w and returns a *MissingError when something required
// is missing.
func Preflight(sys *System, checks []Check, w io.Writer) error {
	r := Run(sys, checks)
	for _, c := range r.Warnings() {
		var b strings.Builder
		writeResult(&b, c, true)
		fmt.Fprint(w, b.String())
	}
	return r.Err()
}

// readTrim reads a small file of sys, trimmed; "" when it cannot.
func readTrim(sys *System, name string) string {
	b, err := fs.ReadFile(sys.Root, name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// exists reports whether sys has the file; err is set when it cannot
// tell (not a missing file).
func exists(sys *System, name string) (bool, error) {
	_, err := fs.Stat(sys.Root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
