package dataplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
)

// process is a program the bench started inside one of its namespaces:
// a lispd, an iperf3 server or client. It is stopped by its PID, never by
// name.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string        // file holding its output
	done chan struct{} // closed when it has exited and been reaped
	err  error         // its exit status, once done is closed
}

// stopGrace is how long stop waits after SIGTERM before SIGKILL.
const stopGrace = 3 * time.Second

// startIn starts argv inside ns, its stderr (and its stdout, unless
// stdout is given) in logFile. It is forked from a thread locked into ns,
// so that it is in the namespace from its first instruction, with its
// real PID and without `ip netns exec`; the thread runs at the bench's
// raised priority, which the program inherits. The thread stays locked
// until the program exits and then ends, which also matters for the
// program's parent-death signal: SIGKILL when the thread that forked it
// ends, so that a bench killed without cleanup leaves nothing running.
func startIn(ns *netns.NS, name string, argv []string, logFile string, stdout io.Writer) (*process, error) {
	logf, err := os.Create(logFile)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	// A process group of its own: Ctrl-C in a terminal reaches the bench
	// alone, which stops its programs in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer logf.Close()
		// Never unlocked: the thread leaves the namespace by ending.
		runtime.LockOSThread()
		if err := enter(ns); err != nil {
			started <- err
			return
		}
		raisePriority()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, ns.Name, err)
	}
	return p, nil
}

// enter moves the calling (locked) thread into ns.
func enter(ns *netns.NS) error {
	fd, err := unix.Open(ns.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", ns.Name, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter namespace %s: %w", ns.Name, err)
	}
	return nil
}

// pid is the process ID, also its process group's.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits until the process exits or timeout passes, then stops it.
func (p *process) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.stop()
		return fmt.Errorf("%s did not finish within %v", p.name, timeout)
	}
}

// stop ends the process group by its ID: SIGTERM, then SIGKILL after a
// grace period. The process is reaped only after its exit (done), so its
// PID cannot have been given to anyone else while it is signalled.
func (p *process) stop() {
	if p.exited() {
		return
	}
	unix.Kill(-p.pid(), unix.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		unix.Kill(-p.pid(), unix.SIGKILL)
		<-p.done
	}
}

// cpuTime is the CPU time the process used, user and system, once it has
// exited.
func (p *process) cpuTime() time.Duration {
	if !p.exited() || p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// failure describes how the process ended, with the end of its log.
func (p *process) failure() error {
	msg := p.name + " exited"
	if p.err != nil {
		msg += ": " + p.err.Error()
	}
	return errors.New(msg + p.logTail())
}

// logTail is the end of the process's log, indented on lines of its own
// after a newline, or "" if it is empty.
func (p *process) logTail() string {
	t := tailFile(p.log, logTailLines)
	if t == "" {
		return ""
	}
	return "\n  " + p.name + "'s log ends with:\n    " + strings.ReplaceAll(t, "\n", "\n    ")
}

const logTailLines = 12

// tailFile returns the last n lines of a file, or "" if it cannot be read.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// topNice is the priority of the programs the bench starts, when the
// bench may raise it (as root): iperf3 then competes with little else on
// the CPUs it measures on.
const topNice = -20

// raisePriority sets the calling thread's nice value to topNice; programs
// it starts inherit it. Without the privilege it changes nothing.
func raisePriority() { _ = unix.Setpriority(unix.PRIO_PROCESS, 0, topNice) }
