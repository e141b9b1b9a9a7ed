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
	MPriority uint8
	MWeight   uint8
	// Local (L): the locator belongs to the sender of the message.
	Local bool
	// Probed (p): this is the locator an RLOC-probe reply answers for.
	Probed bool
	// Reachable (R): the sender considers the locator up.
	Reachable bool
	Address   Address
}

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

func (rec *MapRecord) appendTo(b []byte, msg string) ([]byte, error) {
	switch {
	case len(rec.Locators) > 255:
		return nil, countError(msg, "locators", len(rec.Locators), 255)
	case rec.Action > maxAction:
		return nil, encodeError(msg, "action %d exceeds 3 bits", rec.Action)
	case rec.MapVersion > MaxMapVersion:
		return nil, encodeError(msg, "map-version %d exceeds 12 bits", rec.MapVersion)
	}
	if err := checkMaskLen(rec.EID, rec.MaskLen); err != nil {
		return nil, encodeError(msg, "EID %s: %v", rec.EID, err)
	}
	b = binary.BigEndian.AppendUint32(b, rec.TTL)
	b = append(b, byte(len(rec.Locators)), rec.MaskLen)
	w := uint16(rec.Action) << actionShift
	if rec.Authoritative {
		w |= recordAuthoritativeFlag
	}
	b = binary.BigEndian.AppendUint16(b, w)
	b = binary.BigEndian.AppendUint16(b, rec.MapVersion)
	b, err := appendAddress(b, rec.EID, 0)
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
	start := r.off
	h := r.take(recordFixedLen, "record header")
	if h == nil {
		return
	}
	rec.TTL = binary.BigEndian.Uint32(h)
	count := int(h[4])
	rec.MaskLen = h[5]
	w := binary.BigEndian.Uint16(h[6:])
	rec.Action = Action(w >> actionShift)
	rec.Authoritative = w&recordAuthoritativeFlag != 0
	rec.MapVersion = binary.BigEndian.Uint16(h[8:]) & MaxMapVersion
	maskAt := start + 5
	r.address(&rec.EID)
	if r.err != nil {
		r.prefix("EID.")
		return
	}
	if checkMaskLen(rec.EID, rec.MaskLen) != nil {
		r.failAt(maskAt, "EID mask-len", ErrBadValue)
		return
	}
	rec.Locators = r.locators(rec.Locators, count, "locators")
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
