// Package osthread runs code on an OS thread of its own that ends with
// it: for code that changes what a thread carries (namespaces, mounts,
// scheduling policy, CPU affinity) and must not hand that to the
// goroutines that would run on the thread next.
package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Go runs work in a new goroutine, locked to a thread that ends when
// work returns.
func Go(work func()) { go runAndEnd(work) }

// runAndEnd runs work on the calling goroutine's thread and leaves it
// locked, so that the thread ends with the goroutine. Not on the
// process's main thread, which Go keeps when its goroutine ends locked:
// it would stay as work left it, and /proc/self shows the main thread.
func runAndEnd(work func()) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread is locked to this goroutine now, so the next
		// one gets another.
		done := make(chan struct{})
		go func() {
			defer close(done)
			runAndEnd(work)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	work() // and never unlock
}
