package linkemu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/osthread"
)

// ErrClosed is returned by calls on an Emulator that is closed, or on a
// Link that is.
var ErrClosed = errors.New("linkemu: closed")

// readBatch is how many frames the loop reads from one TAP before it
// looks at the others and at what is due: enough to amortize a ppoll
// over many frames, few enough that a busy TAP cannot delay the writes
// of the others by more than tens of microseconds.
const readBatch = 32

// loopPriority is the loop thread's SCHED_FIFO priority: the lowest, as
// it needs only to come before the ordinary threads, not before the
// kernel's own real-time threads.
const loopPriority = 1

// Emulator runs the event loop that serves every link. Its methods, and
// those of its Links, are safe to call from any goroutine.
type Emulator struct {
	log   *slog.Logger
	epoch time.Time
	wake  int // an eventfd in the poll set: control calls wake the loop
	steer steering
	// loopThread is the loop's thread ID, once it runs.
	loopThread atomic.Int32

	mu     sync.Mutex
	cmds   []*command
	closed bool
	done   chan struct{}

	// Owned by the loop.
	links    []*Link
	pfds     []unix.PollFd
	pfdEnds  []end // pfds[i+1] is the TAP of pfdEnds[i]
	stopping bool
}

// end names one TAP of a link: the one direction d reads from.
type end struct {
	l *Link
	d Direction
}

type command struct {
	fn   func(now int64)
	done chan struct{}
	err  error // ErrClosed if the loop stopped before running fn
}

// New starts an emulator with no links. log may be nil (discard).
func New(log *slog.Logger) (*Emulator, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create eventfd: %w", err)
	}
	e := &Emulator{
		log:   log.With("component", "linkemu"),
		epoch: time.Now(),
		wake:  wake,
		done:  make(chan struct{}),
		steer: steering{loopCPU: -1},
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err == nil {
		e.steer = planSteering(allowed)
	}
	e.rebuildPoll()
	// The loop holds a P while it waits (rawPpoll): the rest of the
	// process needs another.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	// The loop's thread takes its priority, timer slack and CPU, which no
	// other goroutine should inherit: it ends with the loop.
	osthread.Go(e.loop)
	return e, nil
}

// now is the loop's clock: monotonic nanoseconds since New.
func (e *Emulator) now() int64 { return int64(time.Since(e.epoch)) }

// do runs fn on the loop and waits until it has.
func (e *Emulator) do(fn func(now int64)) error {
	c := &command{fn: fn, done: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.cmds = append(e.cmds, c)
	e.mu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	// EAGAIN means the counter is saturated: the loop is woken anyway.
	unix.Write(e.wake, one[:])
	<-c.done
	return c.err
}

// Close stops the loop and closes every link's TAP devices, which
// removes them. Closing twice is not an error.
func (e *Emulator) Close() error {
	err := e.do(func(int64) { e.stopping = true })
	if err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	<-e.done // the TAPs are closed, so gone
	return nil
}

// AddLink creates the link's TAP devices, up, in their namespaces and
// starts relaying frames between them.
func (e *Emulator) AddLink(cfg LinkConfig) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("link %s-%s: %w", cfg.A.Name, cfg.B.Name, err)
	}
	cfg.MTU = cfg.mtu()
	l := &Link{e: e, cfg: cfg, fds: [2]int{-1, -1}}
	var err error
	for i, ep := range []Endpoint{cfg.A, cfg.B} {
		if l.fds[i], err = openTAP(ep, cfg.MTU); err != nil {
			l.closeFDs()
			return nil, err
		}
		if e.steer.loopCPU < 0 {
			continue
		}
		if err := e.steer.steerTAP(ep); err != nil {
			e.log.Warn("cannot steer a TAP's receive work away from the loop; links will carry less", "tap", ep.Name, "netns", ep.Namespace, "err", err)
		}
	}
	l.pipes = [2]*pipe{newPipe(cfg.AB, cfg.Seed, AToB), newPipe(cfg.BA, cfg.Seed, BToA)}
	l.writers = [2]func(*frame){l.writer(AToB), l.writer(BToA)}
	err = e.do(func(int64) {
		e.links = append(e.links, l)
		e.rebuildPoll()
	})
	if err != nil {
		l.closeFDs()
		return nil, err
	}
	e.log.Debug("link added", "a", cfg.A.Name, "a_netns", cfg.A.Namespace, "b", cfg.B.Name, "b_netns", cfg.B.Namespace)
	return l, nil
}

func (e *Emulator) rebuildPoll() {
	e.pfds = append(e.pfds[:0], unix.PollFd{Fd: int32(e.wake), Events: unix.POLLIN})
	e.pfdEnds = e.pfdEnds[:0]
	for _, l := range e.links {
		for _, d := range []Direction{AToB, BToA} {
			e.pfds = append(e.pfds, unix.PollFd{Fd: int32(l.fds[d]), Events: unix.POLLIN})
			e.pfdEnds = append(e.pfdEnds, end{l, d})
		}
	}
}

// loop is the one goroutine that moves frames. It stays on one OS thread
// so that the thread's sleeps in ppoll are all the waiting there is.
func (e *Emulator) loop() {
	e.loopThread.Store(int32(unix.Gettid()))
	defer close(e.done)
	// A thread's timer slack (50 us by default) lets the kernel wake it
	// late to batch wakeups; the loop wants the nanoseconds it asks for.
	// The slack stays with the thread, which is ours alone while locked.
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		e.log.Warn("cannot set timer slack; frames may be up to 50 us late", "err", err)
	}
	// Real-time priority: the loop runs ahead of every ordinary thread
	// when a frame is due, as netem's softirq would, so that a busy
	// machine delays frames by microseconds, not by a scheduler slice.
	// It sleeps whenever nothing is due, and the kernel's real-time
	// throttling (95 % of a CPU by default) bounds it when it is not.
	if e.steer.loopCPU >= 0 {
		if err := e.steer.pinLoop(); err != nil {
			e.log.Warn("cannot pin the loop to its CPU; it may share one with the TAPs' receive work", "cpu", e.steer.loopCPU, "err", err)
		}
	}
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: loopPriority}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		e.log.Warn("cannot run the loop at real-time priority; frames will be late on a busy machine", "err", err)
	}
	for {
		next := e.advance()
		wait := int64(maxRawWait)
		if next != never {
			wait = min(wait, max(0, next-e.now()))
		}
		err := rawPpoll(e.pfds, wait)
		if err != nil && !errors.Is(err, unix.EINTR) {
			// Cannot happen with valid descriptors; do not spin on it.
			e.log.Error("ppoll failed", "err", err)
			time.Sleep(time.Millisecond)
			continue
		}
		now := e.now()
		for i, pfd := range e.pfds[1:] {
			if pfd.Revents&(unix.POLLIN|unix.POLLERR|unix.POLLHUP) != 0 {
				end := e.pfdEnds[i]
				end.l.read(end.d, now)
			}
		}
		if e.pfds[0].Revents != 0 && e.runCommands() {
			e.shutdown()
			return
		}
	}
}

// advance writes every frame that is due and returns when the next one
// will be.
func (e *Emulator) advance() int64 {
	next := int64(never)
	now := e.now()
	for _, l := range e.links {
		for _, d := range []Direction{AToB, BToA} {
			pp := l.pipes[d]
			if pp.next() <= now {
				pp.advance(now, l.writers[d])
			}
			next = min(next, pp.next())
		}
	}
	return next
}

// runCommands runs the control calls that woke the loop and reports
// whether one of them was Close.
func (e *Emulator) runCommands() bool {
	var buf [8]byte
	unix.Read(e.wake, buf[:])
	e.mu.Lock()
	cmds := e.cmds
	e.cmds = nil
	e.mu.Unlock()
	now := e.now()
	for _, c := range cmds {
		c.fn(now)
		close(c.done)
	}
	if !e.stopping {
		return false
	}
	// Refuse new calls before answering the last ones, so that none
	// waits for a loop that is gone.
	e.mu.Lock()
	e.closed = true
	cmds = e.cmds
	e.cmds = nil
	e.mu.Unlock()
	for _, c := range cmds {
		c.err = ErrClosed
		close(c.done)
	}
	return true
}

func (e *Emulator) shutdown() {
	for _, l := range e.links {
		l.closeFDs()
	}
	e.links = nil
	unix.Close(e.wake)
	e.log.Debug("stopped")
}

// maxRawWait bounds each wait of the loop: while it waits in rawPpoll it
// keeps its P, so a stop of the world (the garbage collector's) waits
// for it to come back.
const maxRawWait = int64(time.Millisecond)

// rawPpoll waits in ppoll(2) without telling the Go scheduler: the loop
// keeps its P, so that it does not queue for one when it wakes, behind
// other goroutines' 10 ms time slices. With the process allocating hard
// beside 50 Mbit/s of traffic, the scheduler's ppoll left frames 13 to
// 110 ms late at worst (p99.9 10-100 ms, five runs), this one 2-5 ms
// (p99.9 under 2 ms).
func rawPpoll(fds []unix.PollFd, wait int64) error {
	ts := unix.NsecToTimespec(wait)
	_, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
