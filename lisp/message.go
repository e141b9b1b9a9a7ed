package lisp

import (
	"fmt"
	"strconv"
)

// MsgType is the 4-bit Type of a LISP control message (RFC 9301 §5.1).
type MsgType uint8

// The control message types.
const (
	TypeMapRequest   MsgType = 1
	TypeMapReply     MsgType = 2
	TypeMapRegister  MsgType = 3
	TypeMapNotify    MsgType = 4
	TypeMapNotifyAck MsgType = 5
	TypeMapReferral  MsgType = 6 // RFC 8111
	TypeInfo         MsgType = 7 // NAT traversal; not decoded
	TypeECM          MsgType = 8
)

var msgTypeNames = [...]string{
	TypeMapRequest:   "Map-Request",
	TypeMapReply:     "Map-Reply",
	TypeMapRegister:  "Map-Register",
	TypeMapNotify:    "Map-Notify",
	TypeMapNotifyAck: "Map-Notify-Ack",
	TypeMapReferral:  "Map-Referral",
	TypeInfo:         "Info",
	TypeECM:          "ECM",
}

func (t MsgType) String() string {
	if int(t) < len(msgTypeNames) && msgTypeNames[t] != "" {
		return msgTypeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Message is a LISP control message. Decoding copies what it keeps: a
// decoded message never aliases its input.
type Message interface {
	Type() MsgType
	// Len is the encoded length in bytes.
	Len() int
	// AppendBinary appends the encoded message to b.
	AppendBinary(b []byte) ([]byte, error)
	// DecodeFromBytes decodes the message, which must fill b exactly. It
	// reuses the receiver's storage (slices, records) from an earlier
	// decode, as a server loop wants; values taken from that decode are
	// overwritten.
	DecodeFromBytes(b []byte) error
	String() string
}

// Parse decodes one control message, choosing its type from the first
// four bits.
func Parse(b []byte) (Message, error) {
	r := newReader(b, "LISP message")
	m := r.message()
	return m, r.error()
}

// message decodes the control message that fills the reader. It calls
// each type's decode directly: through an interface the reader would
// escape to the heap, an allocation per message.
func (r *reader) message() Message {
	if r.remaining() < 1 {
		r.fail("type", errShort)
		return nil
	}
	var m Message
	switch t := MsgType(r.b[r.off] >> 4); t {
	case TypeMapRequest:
		v := newMapRequest()
		r.msg = "Map-Request"
		v.decode(r)
		m = v
	case TypeMapReply:
		v := new(MapReply)
		r.msg = "Map-Reply"
		v.decode(r)
		m = v
	case TypeMapRegister:
		v := new(MapRegister)
		r.msg = "Map-Register"
		v.decode(r)
		m = v
	case TypeMapNotify:
		v := new(MapNotify)
		r.msg = "Map-Notify"
		v.decode(r)
		m = v
	case TypeMapNotifyAck:
		v := new(MapNotifyAck)
		r.msg = "Map-Notify-Ack"
		v.decode(r)
		m = v
	case TypeMapReferral:
		v := new(MapReferral)
		r.msg = "Map-Referral"
		v.decode(r)
		m = v
	case TypeECM:
		v := new(ECM)
		r.msg = "ECM"
		v.decode(r)
		m = v
	default:
		r.fail("type", fmt.Errorf("%w: message type %d", ErrUnknownType, t))
		return nil
	}
	r.finish()
	if r.err != nil {
		return nil
	}
	return m
}

// header reads the first word of a message, checks its type and returns
// the 28 bits after the type.
func (r *reader) header(want MsgType) uint32 {
	w := r.u32("header")
	if r.err == nil && MsgType(w>>28) != want {
		r.failAt(r.off-4, "type", fmt.Errorf("%w: type %d, want %d (%s)", ErrBadValue, w>>28, want, want))
	}
	return w & 0x0fffffff
}

// flag returns mask if set, else 0: a helper for building header words.
func flag(set bool, mask uint32) uint32 {
	if set {
		return mask
	}
	return 0
}

// countError reports a list too long for its count field.
func countError(msg, what string, n, max int) error {
	return encodeError(msg, "%d %s, at most %d fit the count field", n, what, max)
}
