package maprequest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// proc is a server process the bench started: lispd or the reference
// echo server. It is stopped by its PID, never by name.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
	log  string        // file holding its stderr
	// input, if not nil, is the parent's end of the process's stdin,
	// closed on stop.
	input io.Closer
}

// startPinned starts argv on the CPUs of set (any CPU when nil) with
// GOMAXPROCS=procs, its stderr in logFile. The process inherits the CPU mask of the thread
// that forks it, so one locked thread with the server's mask starts it:
// every thread of the child is then on that CPU from its first
// instruction, without taskset. The same thread stays locked until the
// child exits, because the child's parent-death signal (SIGTERM when the
// bench dies without stopping it) fires when that thread ends.
func startPinned(name string, argv []string, set *unix.CPUSet, procs int, logFile string, stdin io.Reader, stdout io.Writer) (*proc, error) {
	logf, err := os.Create(logFile)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, logf
	// A process group of its own: Ctrl-C in a terminal then reaches the
	// bench alone, which stops its servers in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logFile}
	started := make(chan error, 1)
	go func() {
		defer logf.Close()
		if err := lockThreadTo(set); err != nil {
			started <- err
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// pid is the process ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process by its PID: SIGTERM, then SIGKILL if it is still
// there after a few seconds.
func (p *proc) stop() {
	if p.input != nil {
		p.input.Close()
	}
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// failure describes how the process ended, with the end of its log.
func (p *proc) failure() error {
	msg := fmt.Sprintf("%s exited", p.name)
	if p.err != nil {
		msg += ": " + p.err.Error()
	}
	if tail := tailFile(p.log, 10); tail != "" {
		msg += "\n" + tail
	}
	return errors.New(msg)
}

// tailFile returns the last n lines of a file, or "" if it cannot be read.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procStatus reads fields of /proc/PID/status, such as VmRSS (in bytes)
// and Cpus_allowed_list.
func procStatus(pid int) (map[string]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fields := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields, s.Err()
}

// rss is the resident memory of a process in bytes.
func rss(pid int) (uint64, error) {
	st, err := procStatus(pid)
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	kb, ok := strings.CutSuffix(st["VmRSS"], " kB")
	if !ok {
		return 0, fmt.Errorf("read memory of process %d: no VmRSS", pid)
	}
	n, err := strconv.ParseUint(kb, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	return n << 10, nil
}

// cpuTime is the CPU time a process has used, user and system, from
// /proc/PID/stat (in clock ticks of 10 ms, precise enough over seconds).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis (utime and stime are fields 14, 15).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// runDelay is how long the threads of a process, those alive now, have
// waited for a CPU while they could run (the second field of each
// thread's /proc/PID/task/TID/schedstat): time the server lost to other
// tasks on its CPUs.
func runDelay(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// udpDrops is the kernel's count of UDP datagrams dropped for a full
// receive buffer, on the whole host (loopback traffic included).
func udpDrops() uint64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Udp: ")
		if !ok {
			continue
		}
		if names == nil {
			names = strings.Fields(rest)
			continue
		}
		for i, v := range strings.Fields(rest) {
			if i < len(names) && names[i] == "RcvbufErrors" {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n
			}
		}
	}
	return 0
}
