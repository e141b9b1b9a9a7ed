package mptcp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrEventsLost is returned by Receive when the kernel dropped events
// because the listener's receive buffer was full (it wraps ENOBUFS too).
// The listener stays usable; what happened meanwhile is unknown, so the
// caller resynchronises its state (Connections and Subflows list what
// exists now) and goes on receiving.
var ErrEventsLost = errors.New("mptcp: events lost: the receive buffer overflowed")

// eventsRcvBuf is the receive buffer the listener asks for. An event is
// about 150 bytes of payload but costs about 1 KiB of buffer (the skb);
// 4 MiB holds a burst of a few thousand connections' events.
const eventsRcvBuf = 4 << 20

// EventListener receives the mptcp_pm_events multicast group of one
// network namespace: the namespace of the thread that called
// ListenEvents. Receive is for one goroutine at a time; Close and
// Malformed may be called from any.
//
// While any process listens to mptcp_pm_events, a server using the
// userspace path manager accepts MP_JOIN, in every namespace
// (docs/kernel.md, "What the path manager works around"): a
// server-side path manager must hold one open.
type EventListener struct {
	conn      *netlink.Conn
	familyID  uint16
	closed    atomic.Bool
	malformed atomic.Uint64
	// raw, when set, sees each message's generic netlink payload before
	// it is decoded (the captures under testdata/ were made with it).
	raw func(cmd uint8, attrs []byte)
}

// ListenEvents joins mptcp_pm_events in the calling thread's network
// namespace, with a receive buffer of at least 4 MiB (SO_RCVBUFFORCE when
// the process may, else as much of it as net.core.rmem_max allows).
func ListenEvents() (*EventListener, error) {
	gc, family, err := dialFamily()
	if err != nil {
		return nil, err
	}
	var group uint32
	for _, g := range family.Groups {
		if g.Name == eventsGroup {
			group = g.ID
		}
	}
	if group == 0 {
		gc.Close()
		return nil, fmt.Errorf("mptcp: family %s has no multicast group %s", familyName, eventsGroup)
	}
	gc.Close() // only needed to resolve the names
	// A plain netlink socket: genetlink's Receive refuses a whole batch
	// when one message is malformed, and the listener must skip just that
	// one. Opened on this thread, so in the caller's namespace.
	conn, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("mptcp: open generic netlink socket: %w", err)
	}
	if err := setRcvBuf(conn, eventsRcvBuf); err != nil {
		conn.Close()
		return nil, err
	}
	if err := conn.JoinGroup(group); err != nil {
		conn.Close()
		return nil, fmt.Errorf("mptcp: join %s: %w", eventsGroup, err)
	}
	return &EventListener{conn: conn, familyID: family.ID}, nil
}

// setRcvBuf sets the receive buffer, forcing it past net.core.rmem_max
// when the process has CAP_NET_ADMIN.
func setRcvBuf(conn *netlink.Conn, size int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("mptcp: set receive buffer: %w", err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
		if serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("mptcp: set receive buffer: %w", err)
	}
	return nil
}

// Receive blocks until the kernel sends events and returns them, in
// order. Messages that do not decode are counted (Malformed) and skipped.
// It returns an error wrapping ErrEventsLost when the kernel dropped
// events (the listener stays usable), and net.ErrClosed once Close was
// called, also when Close interrupts a blocked Receive.
func (l *EventListener) Receive() ([]Event, error) {
	for {
		msgs, err := l.conn.Receive()
		if err != nil {
			return nil, l.receiveError(err)
		}
		events := l.decode(msgs)
		if len(events) > 0 {
			return events, nil
		}
	}
}

// receiveError maps what a failed receive means for the caller.
func (l *EventListener) receiveError(err error) error {
	switch {
	case l.closed.Load(), errors.Is(err, os.ErrClosed), errors.Is(err, net.ErrClosed):
		return net.ErrClosed
	case errors.Is(err, unix.ENOBUFS):
		return fmt.Errorf("%w: %w", ErrEventsLost, unix.ENOBUFS)
	}
	return fmt.Errorf("mptcp: receive events: %w", err)
}

// decode turns one read's messages into events, counting the ones that do
// not decode.
func (l *EventListener) decode(msgs []netlink.Message) []Event {
	events := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		if m.Header.Type != netlink.HeaderType(l.familyID) {
			continue // not ours: a reply to nothing, or another family
		}
		var gm genetlink.Message
		if err := gm.UnmarshalBinary(m.Data); err != nil {
			l.malformed.Add(1)
			continue
		}
		if l.raw != nil {
			l.raw(gm.Header.Command, gm.Data)
		}
		ev, err := ParseEvent(gm.Header.Command, gm.Data)
		if err != nil {
			l.malformed.Add(1)
			continue
		}
		events = append(events, ev)
	}
	return events
}

// Malformed is the number of messages that did not decode and were
// skipped.
func (l *EventListener) Malformed() uint64 { return l.malformed.Load() }

// Close leaves the group and closes the socket; a Receive blocked in
// another goroutine returns net.ErrClosed.
func (l *EventListener) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	return l.conn.Close()
}
