package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 3 * time.Second

var logCounter atomic.Int64

// Process is a program running inside a node.
type Process struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the program has exited, still unreaped
	reap   sync.Once
	err    error // cmd.Wait's result, set in reap
	stop   sync.Once
}

// command prepares a program to run in nd. The program is forked from a
// thread inside the namespace (see Node.Do), so it is in nd's network
// namespace from its first instruction, with its real PID, and needs no
// `ip netns exec`. Unlike under `ip netns exec`, /sys still shows the root
// namespace's interfaces; netlink and /proc/sys/net show nd's.
func (nd *Node) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	// Pdeathsig: if the test binary dies without cleanup (a timeout,
	// SIGKILL), the kernel kills the program instead of leaving it to hold
	// the namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start runs a program inside the node until Stop or the end of t. Its
// stdout and stderr go to a file in t.TempDir (see LogPath and Output). The
// program gets its own process group, so that Stop also ends what it forks.
func (nd *Node) Start(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", filepath.Base(name), logCounter.Add(1)))
	f, err := os.Create(log)
	if err != nil {
		t.Fatalf("testnet: create log: %v", err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := nd.command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f // an *os.File: no copying goroutine
	cmd.SysProcAttr.Setpgid = true
	if err := nd.Do(cmd.Start); err != nil {
		t.Fatalf("testnet: start %s in %s: %v", name, nd.name, err)
	}
	p := &Process{cmd: cmd, log: log, exited: make(chan struct{})}
	go p.watch()
	nd.net.mu.Lock()
	nd.net.procs = append(nd.net.procs, p)
	nd.net.mu.Unlock()
	t.Cleanup(func() {
		p.Stop() // its exit status is the test's business
		if t.Failed() {
			t.Logf("testnet: output of %s in %s (pid %d):\n%s", cmdline(name, args), nd.name, p.PID(), tail(p.Output(), 4096))
		}
	})
	t.Logf("testnet: started %s in %s, pid %d, log %s", cmdline(name, args), nd.name, p.PID(), log)
	return p
}

// PID is the program's process ID, also its process group ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath is the file that collects the program's stdout and stderr.
func (p *Process) LogPath() string { return p.log }

// Output returns what the program has written so far to stdout and stderr.
func (p *Process) Output() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(b)
}

// watch waits for the program to exit without reaping it: until Wait
// reaps it, the zombie keeps its PID, which is also its process group's ID,
// from being given to an unrelated process, so signalling the group by
// that ID cannot hit anyone else.
func (p *Process) watch() {
	for {
		err := unix.Waitid(unix.P_PID, p.PID(), nil, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	close(p.exited)
}

// Wait waits for the program to exit and returns its exit error. What the
// program left running in its process group is killed then, because it
// would keep the namespace alive after the test.
func (p *Process) Wait() error {
	<-p.exited
	p.reap.Do(func() {
		p.signal(unix.SIGKILL)
		p.err = p.cmd.Wait()
	})
	return p.err
}

// Stop sends SIGTERM to the program's process group, SIGKILL if the
// program has not exited after a grace period, and returns what Wait
// returns (a program that does not handle SIGTERM reports "signal:
// terminated"). Calling Stop again returns the same result.
func (p *Process) Stop() error {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		p.signal(unix.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			p.signal(unix.SIGKILL)
		}
	})
	return p.Wait()
}

// signal signals the program's process group by its ID, never by a
// pattern on names, and only before the program is reaped (see watch).
func (p *Process) signal(sig unix.Signal) {
	if pgid := p.PID(); pgid > 1 {
		unix.Kill(-pgid, sig) // ESRCH: the group is already empty
	}
}

// Exec runs a program inside the node to completion and returns its
// combined stdout and stderr.
func (nd *Node) Exec(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	t.Logf("testnet: run %s in %s", cmdline(name, args), nd.name)
	cmd := nd.command(name, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := nd.Do(cmd.Start); err != nil {
		return "", fmt.Errorf("start %s in %s: %w", name, nd.name, err)
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("run %s in %s: %w", cmdline(name, args), nd.name, err)
	}
	return out.String(), nil
}

// tail keeps the last n bytes of s, where the reason a program failed
// usually is.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func cmdline(name string, args []string) string {
	return strings.Join(append([]string{name}, args...), " ")
}
