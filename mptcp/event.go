package mptcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// The event attributes (enum mptcp_event_attr).
const (
	evToken       = 1  // u32
	evFamily      = 2  // u16
	evLocID       = 3  // u8
	evRemID       = 4  // u8
	evSaddr4      = 5  // be32
	evSaddr6      = 6  // in6_addr (at least 16 bytes)
	evDaddr4      = 7  // be32
	evDaddr6      = 8  // in6_addr
	evSport       = 9  // be16: network order, unlike the commands' PORT
	evDport       = 10 // be16
	evBackup      = 11 // u8
	evError       = 12 // u8
	evFlags       = 13 // u16
	evTimeout     = 14 // u32
	evIfIdx       = 15 // s32
	evResetReason = 16 // u32
	evResetFlags  = 17 // u32
	evServerSide  = 18 // u8, before FLAGS carried it (kept by 6.18 for old readers)
)

// The bits of the FLAGS event attribute (MPTCP_PM_EV_FLAG_*).
const (
	EventFlagDenyJoinID0 uint16 = 1 << 0 // the peer refuses joins to its initial address
	EventFlagServerSide  uint16 = 1 << 1 // the connection is the listening side's
)

// ParseEvent decodes one mptcp_pm event: cmd is the generic netlink
// command (the event type) and attrs the attributes that follow the
// generic netlink header. Attributes this package does not know are
// skipped, so newer kernels' additions do not break it; an attribute it
// knows with a length that does not fit, or a truncated one, is an error
// (*ParseError), as is command 0.
func ParseEvent(cmd uint8, attrs []byte) (Event, error) {
	ev := Event{Type: EventType(cmd)}
	const msg = "event" // the type is added on error: no allocation otherwise
	if cmd == 0 {
		return Event{}, &ParseError{Msg: "event unspec", Field: "command", Err: ErrBadValue}
	}
	var saddr, daddr netip.Addr
	var sport, dport uint16
	err := walkAttrs(msg, attrs, func(typ uint16, data []byte, off int) error {
		spec, ok := eventAttrs[typ]
		if !ok {
			return nil // unknown: a newer kernel's, skip it
		}
		v, err := fixed(msg, data, off, spec)
		if err != nil {
			return err
		}
		switch typ {
		case evToken:
			ev.Token = binary.NativeEndian.Uint32(v)
		case evFamily:
			// The addresses say their family themselves.
		case evLocID:
			ev.LocalID = v[0]
		case evRemID:
			ev.RemoteID = v[0]
		case evSaddr4, evSaddr6:
			saddr = addrFrom(v)
		case evDaddr4, evDaddr6:
			daddr = addrFrom(v)
		case evSport:
			sport = binary.BigEndian.Uint16(v)
		case evDport:
			dport = binary.BigEndian.Uint16(v)
		case evBackup:
			ev.Backup = v[0] != 0
		case evError:
			ev.Error = v[0]
		case evFlags:
			ev.Flags = binary.NativeEndian.Uint16(v)
		case evTimeout:
			ev.Timeout = binary.NativeEndian.Uint32(v)
		case evIfIdx:
			ev.IfIndex = int(int32(binary.NativeEndian.Uint32(v)))
		case evResetReason:
			ev.ResetReason = binary.NativeEndian.Uint32(v)
		case evResetFlags:
			ev.ResetFlags = binary.NativeEndian.Uint32(v)
		case evServerSide:
			if v[0] != 0 {
				ev.Flags |= EventFlagServerSide
			}
		}
		return nil
	})
	if err != nil {
		if pe, ok := err.(*ParseError); ok {
			pe.Msg = "event " + ev.Type.String()
		}
		return Event{}, err
	}
	ev.Server = ev.Flags&EventFlagServerSide != 0
	if saddr.IsValid() || sport != 0 {
		ev.Local = netip.AddrPortFrom(saddr, sport)
	}
	if daddr.IsValid() || dport != 0 {
		ev.Remote = netip.AddrPortFrom(daddr, dport)
	}
	return ev, nil
}

// attrSpec is the payload size and name of a known attribute; atLeast
// allows longer payloads, as the kernel's min-len checks do.
type attrSpec struct {
	size    int
	atLeast bool
	name    string
}

var eventAttrs = map[uint16]attrSpec{
	evToken: {4, false, "token"}, evFamily: {2, false, "family"},
	evLocID: {1, false, "loc_id"}, evRemID: {1, false, "rem_id"},
	evSaddr4: {4, false, "saddr4"}, evSaddr6: {16, true, "saddr6"},
	evDaddr4: {4, false, "daddr4"}, evDaddr6: {16, true, "daddr6"},
	evSport: {2, false, "sport"}, evDport: {2, false, "dport"},
	evBackup: {1, false, "backup"}, evError: {1, false, "error"},
	evFlags: {2, false, "flags"}, evTimeout: {4, false, "timeout"},
	evIfIdx: {4, false, "if_idx"}, evResetReason: {4, false, "reset_reason"},
	evResetFlags: {4, false, "reset_flags"}, evServerSide: {1, false, "server_side"},
}

// String formats the event as one log line with the fields it carries,
// like `ip mptcp monitor`.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s token=%08x", e.Type, e.Token)
	if e.LocalID != 0 || e.Type.isSubflow() {
		fmt.Fprintf(&b, " loc_id=%d", e.LocalID)
	}
	if e.RemoteID != 0 || e.Type.isSubflow() || e.Type == EventAnnounced || e.Type == EventRemoved {
		fmt.Fprintf(&b, " rem_id=%d", e.RemoteID)
	}
	if e.Local.IsValid() {
		fmt.Fprintf(&b, " local=%s", e.Local)
	}
	if e.Remote.IsValid() {
		fmt.Fprintf(&b, " remote=%s", e.Remote)
	}
	if e.Backup {
		b.WriteString(" backup")
	}
	if e.Server {
		b.WriteString(" server")
	}
	if e.IfIndex != 0 {
		fmt.Fprintf(&b, " if_idx=%d", e.IfIndex)
	}
	if e.Error != 0 {
		fmt.Fprintf(&b, " error=%d", e.Error)
	}
	if e.ResetReason != 0 || e.ResetFlags != 0 {
		fmt.Fprintf(&b, " reset_reason=%d reset_flags=%#x", e.ResetReason, e.ResetFlags)
	}
	return b.String()
}

func (t EventType) isSubflow() bool {
	return t == EventSubEstablished || t == EventSubClosed || t == EventSubPriority
}
