package mptcp

import (
	"errors"
	"net"
	"os"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestReceiveError pins how a failed receive reaches the caller: an
// overrun as ErrEventsLost (still an ENOBUFS), a closed socket as
// net.ErrClosed, anything else wrapped.
func TestReceiveError(t *testing.T) {
	l := &EventListener{}
	overrun := &netlink.OpError{Op: "receive", Err: os.NewSyscallError("recvmsg", unix.ENOBUFS)}
	if err := l.receiveError(overrun); !errors.Is(err, ErrEventsLost) || !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("overrun: %v; want ErrEventsLost and ENOBUFS", err)
	}
	closedFile := &netlink.OpError{Op: "receive", Err: os.ErrClosed}
	if err := l.receiveError(closedFile); err != net.ErrClosed {
		t.Errorf("closed socket: %v; want net.ErrClosed", err)
	}
	other := &netlink.OpError{Op: "receive", Err: unix.EBADMSG}
	if err := l.receiveError(other); !errors.Is(err, unix.EBADMSG) || errors.Is(err, ErrEventsLost) {
		t.Errorf("other error: %v; want it wrapped", err)
	}
	l.closed.Store(true)
	if err := l.receiveError(other); err != net.ErrClosed {
		t.Errorf("after Close: %v; want net.ErrClosed", err)
	}
}

// TestDecodeSkipsMalformed: a message that does not decode is counted,
// the others in the same read are returned.
func TestDecodeSkipsMalformed(t *testing.T) {
	const family = 0x1c
	l := &EventListener{familyID: family}
	good := append([]byte{byte(EventClosed), 1, 0, 0}, hexBytes(t, "08000100 01000000")...)
	badAttr := append([]byte{byte(EventClosed), 1, 0, 0}, hexBytes(t, "06000100 0100 0000")...)
	msgs := []netlink.Message{
		{Header: netlink.Header{Type: family}, Data: good},
		{Header: netlink.Header{Type: family}, Data: []byte{1}}, // no generic netlink header
		{Header: netlink.Header{Type: family}, Data: badAttr},
		{Header: netlink.Header{Type: netlink.Error}, Data: []byte{0, 0, 0, 0}}, // not ours: ignored
		{Header: netlink.Header{Type: family}, Data: good},
	}
	evs := l.decode(msgs)
	if len(evs) != 2 || evs[0].Type != EventClosed || evs[0].Token != 1 || l.Malformed() != 2 {
		t.Fatalf("decode: %v, %d malformed; want 2 closed events, 2 malformed", evs, l.Malformed())
	}
}
