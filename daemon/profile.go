package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"sync"

	"github.com/amptcp/amptcp/internal/ctlsock"
)

// WithProfiles lets the control socket start and stop CPU profiles of
// lispd, written with an execution trace and the allocation profiles
// around them into dir, so that a benchmark can profile one phase of its
// load (amptcp bench map-request --profile). Without it the commands are
// refused.
func WithProfiles(dir string) Option {
	return func(o *options) { o.profiles = dir }
}

// Profile names the files of one profile: the CPU profile, the execution
// trace (go tool trace: where the goroutines waited, the garbage
// collector, the system calls), and the allocation profiles (cumulative
// since lispd started) at its start and at its end, whose difference is
// what the profiled time allocated:
//
//	go tool pprof -sample_index alloc_space -diff_base AllocsBefore Allocs
type Profile struct {
	CPU          string `json:"cpu"`
	Trace        string `json:"trace"`
	AllocsBefore string `json:"allocs_before"`
	Allocs       string `json:"allocs"`
}

// profiler runs one CPU profile at a time into its directory, numbering
// the files.
type profiler struct {
	dir string // "": profiles are off

	mu         sync.Mutex
	n          int
	current    *Profile
	cpu, trace *os.File
}

var errProfilesOff = errors.New("profiles are off: start lispd with -profile DIR")

// start begins profile n+1: the allocations so far, the CPU profile and
// the trace.
func (p *profiler) start() (*Profile, error) {
	if p.dir == "" {
		return nil, errProfilesOff
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current != nil {
		return nil, fmt.Errorf("a profile is running already (%s)", p.current.CPU)
	}
	p.n++
	name := func(what, ext string) string {
		return filepath.Join(p.dir, "lispd-"+strconv.Itoa(p.n)+"."+what+ext)
	}
	prof := &Profile{CPU: name("cpu", ".pprof"), Trace: name("trace", ".out"),
		AllocsBefore: name("allocs-before", ".pprof"), Allocs: name("allocs", ".pprof")}
	if err := writeProfile("allocs", prof.AllocsBefore); err != nil {
		return nil, err
	}
	cpu, err := os.Create(prof.CPU)
	if err != nil {
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	tr, err := os.Create(prof.Trace)
	if err != nil {
		cpu.Close()
		return nil, fmt.Errorf("start trace: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		tr.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	if err := trace.Start(tr); err != nil {
		pprof.StopCPUProfile()
		cpu.Close()
		tr.Close()
		return nil, fmt.Errorf("start trace: %w", err)
	}
	p.current, p.cpu, p.trace = prof, cpu, tr
	return prof, nil
}

// stop ends the CPU profile and the trace, and writes the allocations so
// far.
func (p *profiler) stop() (*Profile, error) {
	if p.dir == "" {
		return nil, errProfilesOff
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prof := p.current
	if prof == nil {
		return nil, errors.New("no profile is running")
	}
	trace.Stop()
	pprof.StopCPUProfile()
	err := errors.Join(p.cpu.Close(), p.trace.Close())
	p.current, p.cpu, p.trace = nil, nil, nil
	if err != nil {
		return nil, fmt.Errorf("write CPU profile and trace: %w", err)
	}
	if err := writeProfile("allocs", prof.Allocs); err != nil {
		return nil, err
	}
	return prof, nil
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s profile: %w", name, err)
	}
	err = pprof.Lookup(name).WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s profile: %w", name, err)
	}
	return nil
}

// StartProfile asks the lispd at the control socket path to start a CPU
// profile; it must run with profiles on (WithProfiles).
func StartProfile(path string) (*Profile, error) {
	var p Profile
	if err := ctlsock.Query(path, "lispd", "profile-start", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// StopProfile asks the lispd at the control socket path to stop its CPU
// profile, and returns the files it wrote.
func StopProfile(path string) (*Profile, error) {
	var p Profile
	if err := ctlsock.Query(path, "lispd", "profile-stop", &p); err != nil {
		return nil, err
	}
	return &p, nil
}
