package maprequest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// placement is where the generator and the servers under test run.
type placement struct {
	generator int          // the generator's CPU; -1: not pinned
	servers   *unix.CPUSet // the servers'; nil: not pinned
	n         int          // how many CPUs the servers use (their GOMAXPROCS)
	shared    bool         // the servers' CPUs include the generator's
}

// place picks the CPU the generator runs on and the n the servers get,
// among those this process may use: CPUs of their own when there are
// n+1, else the last n, the generator's among them. With fewer than two
// CPUs nothing is pinned and everything shares what there is.
func place(n int) (placement, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return placement{generator: -1, n: n}, nil
	}
	var allowed []int
	for i := range 1024 {
		if set.IsSet(i) {
			allowed = append(allowed, i)
		}
	}
	if n > len(allowed) {
		return placement{}, fmt.Errorf("server CPUs: %d, but this process may run on %d", n, len(allowed))
	}
	if len(allowed) < 2 {
		return placement{generator: -1, n: n, shared: true}, nil
	}
	p := placement{generator: allowed[0], servers: new(unix.CPUSet), n: n}
	servers := allowed[1:]
	if len(servers) < n {
		servers, p.shared = allowed[len(allowed)-n:], true
	}
	for _, c := range servers[:n] {
		p.servers.Set(c)
	}
	return p, nil
}

// pinProcess moves every thread of this process to cpu, so that nothing
// of the generator (its garbage collector included) runs on the server's
// CPU, and raises their priority (see raisePriority); threads created
// later inherit both from the thread that creates them. The returned
// function puts the threads back as they were, so that a test process is
// left as it was.
func pinProcess(cpu int) (restore func(), err error) {
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	oldNice, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("read priority: %w", err)
	}
	oldNice = 20 - oldNice // the raw system call's 20 - nice
	one.Set(cpu)
	restore = func() { eachThread(&old, oldNice) }
	if err := eachThread(&one, topNice); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// eachThread sets the CPU affinity and the nice value of every thread of
// this process. Only the affinity must succeed: raising the priority needs
// a privilege the caller may not have.
func eachThread(set *unix.CPUSet, nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may have exited since the listing: that is no error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("set CPU affinity of thread %d: %w", tid, err)
		}
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	}
	return nil
}

// lockThreadTo locks the calling goroutine to its thread, that thread to
// the CPUs of set, and raises the thread's priority (see raisePriority).
// The caller returns without unlocking, so that the runtime ends the
// thread rather than reuse it with a strange mask. A nil set only locks
// and raises.
func lockThreadTo(set *unix.CPUSet) error {
	runtime.LockOSThread()
	raisePriority()
	if set == nil {
		return nil
	}
	if err := unix.SchedSetaffinity(0, set); err != nil {
		return fmt.Errorf("set CPU affinity: %w", err)
	}
	return nil
}

// topNice is the priority the measuring threads and the servers run at
// when allowed. Every other process of the machine then gets about 1% of
// a CPU we measure on while we want it: on two CPUs, one stray process
// running its 50 ms slice on the server's CPU otherwise lands in the
// p99 latency.
const topNice = -20

// raisePriority sets the calling thread's nice value to topNice (on Linux
// nice is per thread, and threads and processes started from this one
// inherit it). Without the privilege it changes nothing; priority says
// what the measurement ran at.
func raisePriority() {
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, topNice)
}

// priority describes the nice value of the calling thread.
func priority() string {
	// The raw getpriority system call returns 20 - nice, never negative.
	v, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return "unknown"
	}
	nice := 20 - v
	if nice > topNice {
		return fmt.Sprintf("nice %d (not permitted to raise to %d: other processes may show in the tail latencies)", nice, topNice)
	}
	return fmt.Sprintf("nice %d", nice)
}

// oneCPU is the set of cpu alone, or nil for a negative cpu.
func oneCPU(cpu int) *unix.CPUSet {
	if cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	return &set
}
