package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// cpus picks the CPU the generator runs on and the one the server under
// test gets, among those this process may use. ok is false with fewer
// than two: then nothing is pinned and both share what there is.
func cpus() (generator, server int, ok bool) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, 0, false
	}
	var allowed []int
	for i := range 1024 {
		if set.IsSet(i) {
			allowed = append(allowed, i)
		}
	}
	if len(allowed) < 2 {
		return 0, 0, false
	}
	return allowed[0], allowed[1], true
}

// pinProcess moves every thread of this process to cpu, so that nothing
// of the generator (its garbage collector included) runs on the server's
// CPU; threads created later inherit the mask from the thread that
// creates them. The returned function puts the threads back on the CPUs
// they had, so that a test process is left as it was.
func pinProcess(cpu int) (restore func(), err error) {
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	one.Set(cpu)
	if err := setAllThreads(&one); err != nil {
		setAllThreads(&old)
		return nil, err
	}
	return func() { setAllThreads(&old) }, nil
}

func setAllThreads(set *unix.CPUSet) error {
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
	}
	return nil
}

// lockThreadTo locks the calling goroutine to its thread and that thread
// to cpu. The caller returns without unlocking, so that the runtime ends
// the thread rather than reuse it with a strange mask. A negative cpu
// only locks.
func lockThreadTo(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("set CPU affinity: %w", err)
	}
	return nil
}
