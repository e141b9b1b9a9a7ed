package lisp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Action says what an ITR does with packets to an EID-prefix that has no
// locators (RFC 9301 §5.4, IANA "LISP ACT Values").
type Action uint8

// The actions of RFC 9301.
const (
	ActionNone              Action = 0 // keep the entry, do not encapsulate
	ActionNativelyForward   Action = 1
	ActionSendMapRequest    Action = 2
	ActionDrop              Action = 3 // Drop/No-Reason
	ActionDropPolicyDenied  Action = 4
	ActionDropAuthFailure   Action = 5
	maxAction               Action = 7 // the field has 3 bits
	actionShift                    = 13
	recordAuthoritativeFlag        = 1 << 12
)

var actionNames = [...]string{
	ActionNone:             "no-action",
	ActionNativelyForward:  "natively-forward",
	ActionSendMapRequest:   "send-map-request",
	ActionDrop:             "drop",
	ActionDropPolicyDenied: "drop-policy-denied",
	ActionDropAuthFailure:  "drop-auth-failure",
}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// TTLForever in a record's TTL lets the receiver decide how long to keep
// the mapping (RFC 9301 §5.4).
const TTLForever = 0xffffffff

// MaxMapVersion is the largest 12-bit map-version number.
const MaxMapVersion = 0xfff

// MapRecord is an EID-record: an EID-prefix and its locator set, as carried
// by Map-Reply, Map-Register, Map-Notify and the Map-Request's Map-Reply
// record (RFC 9301 §5.4).
//
//	|                          Record TTL                           |
//	| Locator Count | EID mask-len  | ACT |A|      Reserved         |
//	| Rsvd  |  Map-Version Number   |       EID-Prefix-AFI          |
//	|                          EID-Prefix                           |
//	|    Priority   |    Weight     |  M Priority   |   M Weight    | \
//	|        Unused Flags     |L|p|R|           Loc-AFI             |  Loc
//	|                             Locator                           | /
type MapRecord struct {
	TTL           uint32 // minutes; TTLForever lets the receiver choose
	EID           Address
	MaskLen       uint8
	Action        Action
	Authoritative bool
	MapVersion    uint16 // 12 bits; 0 when not versioned
	Locators      []Locator
}

// Locator is an RLOC-record of an EID-record.
type Locator struct {
	Priority  uint8 // 255: do not use for unicast
	Weight    uint8
	MPriority uint8 // UnusedPriority: do not use for multicast
	MWeight   uint8
	// Local (L): the locator belongs to the sender of the message.
	Local bool
	// Probed (p): this is the locator an RLOC-probe reply answers for.
	Probed bool
	// Reachable (R): the sender considers the locator up.
	Reachable bool
	Address   Address
}

// UnusedPriority as a locator's priority says not to use it for unicast,
// as its M-priority not to use it for multicast (RFC 9301 §5.4): a
// unicast-only router's locators have M-priority 255 and M-weight 0.
const UnusedPriority = 255

const (
	locatorLocal     uint16 = 1 << 2
	locatorProbed    uint16 = 1 << 1
	locatorReachable uint16 = 1 << 0
)

const (
	recordFixedLen = 10 // TTL, counts and flags, map-version: up to the EID-AFI
	minRecordLen   = recordFixedLen + 2
	minLocatorLen  = 6 + 2
)

func (l Locator) flags() uint16 {
	var f uint16
	if l.Local {
		f |= locatorLocal
	}
	if l.Probed {
		f |= locatorProbed
	}
	if l.Reachable {
		f |= locatorReachable
	}
	return f
}

func (l Locator) len() int { return 6 + addressLen(l.Address, 0) }

func (l Locator) appendTo(b []byte) ([]byte, error) {
	b = append(b, l.Priority, l.Weight, l.MPriority, l.MWeight)
	b = binary.BigEndian.AppendUint16(b, l.flags())
	return appendAddress(b, l.Address, 0)
}

func (l Locator) String() string {
	var f strings.Builder
	for _, b := range []struct {
		set  bool
		name byte
	}{{l.Local, 'L'}, {l.Probed, 'p'}, {l.Reachable, 'R'}} {
		if b.set {
			f.WriteByte(b.name)
		}
	}
	return fmt.Sprintf("%s priority %d weight %d mpriority %d mweight %d flags [%s]",
		l.Address, l.Priority, l.Weight, l.MPriority, l.MWeight, f.String())
}

func (r *reader) locator(l *Locator) {
	h := r.take(6, "priorities, weights and flags")
	if h == nil {
		return
	}
	l.Priority, l.Weight, l.MPriority, l.MWeight = h[0], h[1], h[2], h[3]
	f := binary.BigEndian.Uint16(h[4:])
	l.Local = f&locatorLocal != 0
	l.Probed = f&locatorProbed != 0
	l.Reachable = f&locatorReachable != 0
	r.address(&l.Address)
}

// locators decodes n locators into dst, reusing its storage; list names
// them in error paths.
func (r *reader) locators(dst []Locator, n int, list string) []Locator {
	dst = dst[:0]
	if c := r.capacity(n, minLocatorLen); cap(dst) < c {
		dst = make([]Locator, 0, c)
	}
	for i := range n {
		dst = grow(dst)
		r.locator(&dst[i])
		if r.err != nil {
			r.prefix("%s[%d].", list, i)
			return dst
		}
	}
	return dst
}

// Len is the encoded length of the record.
func (rec *MapRecord) Len() int {
	n := recordFixedLen + addressLen(rec.EID, 0)
	for _, l := range rec.Locators {
		n += l.len()
	}
	return n
}

// recordHeader is the fixed part of an EID-record and its EID, which the
// records of Map-Reply, Map-Register, Map-Notify and Map-Referral share:
//
//	|                          Record TTL                           |
//	| Locator Count | EID mask-len  | ACT |A|I|     Reserved        |
//	|SigCnt |  Map-Version Number   |       EID-Prefix-AFI          |
//	|                          EID-Prefix                           |
//
// I (incomplete) and SigCnt are Map-Referral's; elsewhere they are zero.
type recordHeader struct {
	ttl           uint32
	count         int // locators or referrals
	maskLen       uint8
	action        uint8
	authoritative bool
	incomplete    bool
	sigCount      int
	mapVersion    uint16
}

const (
	referralIncomplete = 1 << 11
	maxSigCount        = 15 // 4-bit SigCnt
)

// appendRecordHeader checks what must fit its field and appends the header
// and the EID; what names the counted items in errors.
func appendRecordHeader(b []byte, h recordHeader, eid Address, msg, what string) ([]byte, error) {
	switch {
	case h.count > 255:
		return nil, countError(msg, what, h.count, 255)
	case h.sigCount > maxSigCount:
		return nil, countError(msg, "signatures", h.sigCount, maxSigCount)
	case h.action > uint8(maxAction):
		return nil, encodeError(msg, "action %d exceeds 3 bits", h.action)
	case h.mapVersion > MaxMapVersion:
		return nil, encodeError(msg, "map-version %d exceeds 12 bits", h.mapVersion)
	}
	if err := checkMaskLen(eid, h.maskLen); err != nil {
		return nil, encodeError(msg, "EID %s: %v", eid, err)
	}
	b = binary.BigEndian.AppendUint32(b, h.ttl)
	b = append(b, byte(h.count), h.maskLen)
	w := uint16(h.action) << actionShift
	if h.authoritative {
		w |= recordAuthoritativeFlag
	}
	if h.incomplete {
		w |= referralIncomplete
	}
	b = binary.BigEndian.AppendUint16(b, w)
	b = binary.BigEndian.AppendUint16(b, uint16(h.sigCount)<<12|h.mapVersion)
	return appendAddress(b, eid, 0)
}

// recordHeader decodes a record's fixed part and its EID into eid, which
// must fit the mask-len.
func (r *reader) recordHeader(eid *Address) recordHeader {
	start := r.off
	f := r.take(recordFixedLen, "record header")
	if f == nil {
		return recordHeader{}
	}
	w := binary.BigEndian.Uint16(f[6:])
	v := binary.BigEndian.Uint16(f[8:])
	h := recordHeader{
		ttl:           binary.BigEndian.Uint32(f),
		count:         int(f[4]),
		maskLen:       f[5],
		action:        uint8(w >> actionShift),
		authoritative: w&recordAuthoritativeFlag != 0,
		incomplete:    w&referralIncomplete != 0,
		sigCount:      int(v >> 12),
		mapVersion:    v & MaxMapVersion,
	}
	r.address(eid)
	if r.err != nil {
		r.prefix("EID.")
	} else if checkMaskLen(*eid, h.maskLen) != nil {
		r.failAt(start+5, "EID mask-len", ErrBadValue)
	}
	return h
}

// AppendBinary appends the record as Map-Reply, Map-Register and
// Map-Notify carry it. A map-server that sends one record in many replies
// encodes it once, and builds each reply with MapReply.AppendHeader and a
// copy of it.
func (rec *MapRecord) AppendBinary(b []byte) ([]byte, error) { return rec.appendTo(b, "EID-record") }

func (rec *MapRecord) appendTo(b []byte, msg string) ([]byte, error) {
	b, err := appendRecordHeader(b, recordHeader{
		ttl: rec.TTL, count: len(rec.Locators), maskLen: rec.MaskLen,
		action: uint8(rec.Action), authoritative: rec.Authoritative, mapVersion: rec.MapVersion,
	}, rec.EID, msg, "locators")
	if err != nil {
		return nil, err
	}
	for _, l := range rec.Locators {
		if b, err = l.appendTo(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (r *reader) record(rec *MapRecord) {
	h := r.recordHeader(&rec.EID)
	if r.err != nil {
		return
	}
	rec.TTL, rec.MaskLen, rec.MapVersion = h.ttl, h.maskLen, h.mapVersion
	rec.Action, rec.Authoritative = Action(h.action), h.authoritative
	rec.Locators = r.locators(rec.Locators, h.count, "locators")
}

// records decodes n EID-records into dst, reusing its storage.
func (r *reader) records(dst []MapRecord, n int) []MapRecord {
	dst = dst[:0]
	if c := r.capacity(n, minRecordLen); cap(dst) < c {
		dst = make([]MapRecord, 0, c)
	}
	for i := range n {
		dst = grow(dst)
		r.record(&dst[i])
		if r.err != nil {
			r.prefix("records[%d].", i)
			return dst
		}
	}
	return dst
}

// grow extends s by one element, reusing the element's old storage (its
// slices) when s has the capacity. Decoders overwrite every field.
func grow[T any](s []T) []T {
	if len(s) < cap(s) {
		return s[:len(s)+1]
	}
	var zero T
	return append(s, zero)
}

func recordsLen(recs []MapRecord) int {
	n := 0
	for i := range recs {
		n += recs[i].Len()
	}
	return n
}

func appendRecords(b []byte, recs []MapRecord, msg string) (_ []byte, err error) {
	for i := range recs {
		if b, err = recs[i].appendTo(b, msg); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (rec *MapRecord) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s/%d ttl %d action %s", rec.EID, rec.MaskLen, rec.TTL, rec.Action)
	if rec.Authoritative {
		s.WriteString(" authoritative")
	}
	if rec.MapVersion != 0 {
		fmt.Fprintf(&s, " map-version %d", rec.MapVersion)
	}
	for _, l := range rec.Locators {
		s.WriteString("\n    locator ")
		s.WriteString(l.String())
	}
	return s.String()
}

func recordsString(recs []MapRecord) string {
	var s strings.Builder
	for i := range recs {
		s.WriteString("\n  record ")
		s.WriteString(recs[i].String())
	}
	return s.String()
}
