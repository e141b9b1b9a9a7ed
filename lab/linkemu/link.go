package linkemu

import (
	"errors"
	"slices"

	"golang.org/x/sys/unix"
)

// Link is one emulated link. Its methods are safe to call from any
// goroutine; changes take effect on the loop before they return.
type Link struct {
	e *Emulator

	// Owned by the loop.
	cfg     LinkConfig
	fds     [2]int   // the TAPs of A and B: direction d reads fds[d]
	pipes   [2]*pipe // indexed by Direction
	writers [2]func(*frame)
	free    []*frame
	closed  bool
}

// Update changes the parameters of direction d: fn gets the current
// ones and edits them, for example
//
//	l.Update(linkemu.AToB, func(p *linkemu.Params) { p.Rate = 10e6 })
//
// If the result is not valid nothing changes and Update returns why.
// fn runs on the loop: it must be quick and must not call the Emulator.
// See pipe.setParams for what happens to frames already on the link.
func (l *Link) Update(d Direction, fn func(*Params)) error {
	var err error
	doErr := l.e.do(func(int64) {
		if l.closed {
			err = ErrClosed
			return
		}
		p := l.pipes[d].p
		fn(&p)
		if err = p.Validate(l.cfg.MTU); err == nil {
			l.pipes[d].setParams(p)
			*l.cfg.Params(d) = p
		}
	})
	return errors.Join(doErr, err)
}

// Set replaces the parameters of direction d.
func (l *Link) Set(d Direction, p Params) error {
	return l.Update(d, func(q *Params) { *q = p })
}

// SetDown takes direction d down (down=true): it drops every frame,
// including those queued or in flight, until it is brought up again.
// Taking a whole link down is SetDown on both directions.
func (l *Link) SetDown(d Direction, down bool) error {
	return l.onLoop(func(now int64) { l.pipes[d].setDown(down, now, l.put) })
}

// Config returns the link's current configuration.
func (l *Link) Config() (LinkConfig, error) {
	var c LinkConfig
	err := l.onLoop(func(int64) { c = l.cfg })
	return c, err
}

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() (Stats, error) {
	var s Stats
	err := l.onLoop(func(int64) { s = Stats{AB: l.pipes[AToB].stats, BA: l.pipes[BToA].stats} })
	return s, err
}

// Close stops the link and removes its TAP devices. Closing twice is
// not an error.
func (l *Link) Close() error {
	err := l.e.do(func(int64) {
		if l.closed {
			return
		}
		l.e.links = slices.DeleteFunc(l.e.links, func(o *Link) bool { return o == l })
		l.e.rebuildPoll()
		l.closeFDs()
	})
	if errors.Is(err, ErrClosed) {
		return nil // the emulator closed it
	}
	return err
}

// onLoop runs fn on the loop unless the link is closed.
func (l *Link) onLoop(fn func(now int64)) error {
	closed := false
	err := l.e.do(func(now int64) {
		if closed = l.closed; !closed {
			fn(now)
		}
	})
	if err == nil && closed {
		err = ErrClosed
	}
	return err
}

func (l *Link) closeFDs() {
	for i, fd := range l.fds {
		if fd >= 0 {
			unix.Close(fd)
			l.fds[i] = -1
		}
	}
	l.closed = true
}

// get returns a frame buffer that holds the largest frame of the link.
func (l *Link) get() *frame {
	if n := len(l.free); n > 0 {
		f := l.free[n-1]
		l.free = l.free[:n-1]
		f.buf = f.buf[:cap(f.buf)]
		return f
	}
	// One byte more than the largest frame, so that a frame that would
	// not fit shows as too long instead of being cut silently.
	return &frame{buf: make([]byte, l.cfg.MTU+EthernetHeader+1)}
}

func (l *Link) put(f *frame) { l.free = append(l.free, f) }

// read takes up to readBatch frames from the TAP that direction d reads.
func (l *Link) read(d Direction, now int64) {
	pp := l.pipes[d]
	for range readBatch {
		f := l.get()
		n, err := unix.Read(l.fds[d], f.buf)
		if err != nil || n == 0 {
			l.put(f)
			return // EAGAIN: read everything there was
		}
		if n == len(f.buf) {
			pp.stats.FramesIn++
			pp.stats.TooLong++
			l.put(f)
			continue
		}
		f.buf = f.buf[:n]
		if !pp.offer(f, now) {
			l.put(f)
		}
	}
}

// writer returns the function that delivers the frames of direction d
// to the other TAP; made once per link, so that delivering allocates
// nothing.
func (l *Link) writer(d Direction) func(*frame) {
	pp := l.pipes[d]
	return func(f *frame) {
		if _, err := unix.Write(l.fds[1-d], f.buf); err != nil {
			pp.stats.WriteErrors++
		} else {
			pp.delivered(f, l.e.now())
		}
		l.put(f)
	}
}
