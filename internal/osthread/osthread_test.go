package osthread

import (
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Work runs off the main thread, on a thread that is gone once it ends.
func TestGo(t *testing.T) {
	for range 50 { // enough to land on the main thread some of the time
		tids := make(chan int)
		Go(func() { tids <- unix.Gettid() })
		tid := <-tids
		if tid == unix.Getpid() {
			t.Fatal("work ran on the main thread")
		}
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		deadline := time.Now().Add(time.Second)
		for _, err := os.Stat(task); err == nil; _, err = os.Stat(task) {
			if time.Now().After(deadline) {
				t.Fatalf("thread %d still there a second after its work ended", tid)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
