package lisp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// AFIList is LCAF type 1 (RFC 8060): a list of addresses, such as an
// RLOC's IPv4 and IPv6 addresses, or (as lispers.net sends an RLOC that is
// a path) an AFI 0 entry followed by an ELP.
//
//	|           AFI = 16387         |     Rsvd1     |     Flags     |
//	|   Type = 1    |     Rsvd2     |            Length             |
//	|            AFI = x            |       Address  ...            |
//	|            AFI = y            |       Address  ...            |
type AFIList struct {
	Addresses []Address
}

func (l *AFIList) Type() LCAFType                    { return LCAFAFIList }
func (l *AFIList) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }

func (l *AFIList) bodyLen(depth int) int {
	n := 0
	for _, a := range l.Addresses {
		n += addressLen(a, depth)
	}
	return n
}

func (l *AFIList) appendBody(b []byte, depth int) (_ []byte, err error) {
	for _, a := range l.Addresses {
		if b, err = appendAddress(b, a, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *AFIList) String() string { return "afi-list{" + joinAddresses(l.Addresses, ", ") + "}" }

// afiListBlock holds an AFI List and room for its usual two entries (an
// RLOC's two families, or AFI 0 and an ELP).
type afiListBlock struct {
	list  AFIList
	addrs [2]Address
}

func (r *reader) afiList() LCAF {
	b := fromSlab(&r.lists)
	l := &b.list
	l.Addresses = b.addrs[:0]
	for i := 0; r.remaining() > 0; i++ {
		l.Addresses = grow(l.Addresses)
		r.address(&l.Addresses[i])
		if r.err != nil {
			r.prefix("addresses[%d].", i)
			return nil
		}
	}
	return l
}

// InstanceID is LCAF type 2 (RFC 8060): an address in a virtual
// network (the 24-bit instance ID of the data header; the field holds 32
// bits). MaskLen, carried in Rsvd2, makes the ID a range.
//
//	|           AFI = 16387         |     Rsvd1     |     Flags     |
//	|   Type = 2    | IID mask-len  |             Length            |
//	|                         Instance ID                           |
//	|              AFI = x          |         Address  ...          |
type InstanceID struct {
	IID     uint32
	MaskLen uint8
	Address Address
}

func (l *InstanceID) Type() LCAFType                    { return LCAFInstanceID }
func (l *InstanceID) headerBits() (uint8, uint8, uint8) { return 0, 0, l.MaskLen }
func (l *InstanceID) bodyLen(depth int) int             { return 4 + addressLen(l.Address, depth) }

func (l *InstanceID) appendBody(b []byte, depth int) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, l.IID)
	return appendAddress(b, l.Address, depth)
}

func (l *InstanceID) String() string {
	if l.MaskLen != 0 {
		return fmt.Sprintf("[%d/%d]%s", l.IID, l.MaskLen, l.Address)
	}
	return fmt.Sprintf("[%d]%s", l.IID, l.Address)
}

func (r *reader) instanceID(maskLen uint8) LCAF {
	l := &InstanceID{MaskLen: maskLen, IID: r.u32("instance ID")}
	r.address(&l.Address)
	if r.err != nil {
		return nil
	}
	return l
}

// ASNumber is LCAF type 3 (RFC 8060): an address with the autonomous
// system it belongs to.
//
//	|   Type = 3    |     Rsvd2     |             Length            |
//	|                           AS Number                           |
//	|              AFI = x          |         Address  ...          |
type ASNumber struct {
	AS      uint32
	Address Address
}

func (l *ASNumber) Type() LCAFType                    { return LCAFASNumber }
func (l *ASNumber) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }
func (l *ASNumber) bodyLen(depth int) int             { return 4 + addressLen(l.Address, depth) }

func (l *ASNumber) appendBody(b []byte, depth int) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, l.AS)
	return appendAddress(b, l.Address, depth)
}

func (l *ASNumber) String() string { return fmt.Sprintf("as{%d %s}", l.AS, l.Address) }

func (r *reader) asNumber() LCAF {
	l := &ASNumber{AS: r.u32("AS number")}
	r.address(&l.Address)
	if r.err != nil {
		return nil
	}
	return l
}

// PortRange is an inclusive range of transport ports.
type PortRange struct {
	Low, High uint16
}

func (p PortRange) String() string {
	if p.Low == p.High {
		return strconv.Itoa(int(p.Low))
	}
	return fmt.Sprintf("%d-%d", p.Low, p.High)
}

// AppData is LCAF type 4 (RFC 8060): an address qualified by the
// traffic it applies to. A-MPTCP sends it in Map-Requests to ask for the
// path of one transport flow ([LISP-TE] §III.B).
//
//	|   Type = 4    |     Rsvd2     |            Length             |
//	|       IP TOS, IPv6 TC, or Flow Label          |    Protocol   |
//	|    Local Port (lower-range)   |    Local Port (upper-range)   |
//	|   Remote Port (lower-range)   |   Remote Port (upper-range)   |
//	|              AFI = x          |         Address  ...          |
type AppData struct {
	TOS         uint32 // 24 bits: IPv4 TOS, IPv6 traffic class or flow label
	Protocol    uint8
	LocalPorts  PortRange
	RemotePorts PortRange
	Address     Address
}

func (l *AppData) Type() LCAFType                    { return LCAFAppData }
func (l *AppData) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }
func (l *AppData) bodyLen(depth int) int             { return 12 + addressLen(l.Address, depth) }

func (l *AppData) appendBody(b []byte, depth int) ([]byte, error) {
	if l.TOS > 0xffffff {
		return nil, encodeError("LCAF App-Data", "TOS/flow label %#x exceeds 24 bits", l.TOS)
	}
	b = binary.BigEndian.AppendUint32(b, l.TOS<<8|uint32(l.Protocol))
	b = binary.BigEndian.AppendUint16(b, l.LocalPorts.Low)
	b = binary.BigEndian.AppendUint16(b, l.LocalPorts.High)
	b = binary.BigEndian.AppendUint16(b, l.RemotePorts.Low)
	b = binary.BigEndian.AppendUint16(b, l.RemotePorts.High)
	return appendAddress(b, l.Address, depth)
}

func (l *AppData) String() string {
	return fmt.Sprintf("app-data{proto %d tos %#x local %s remote %s %s}",
		l.Protocol, l.TOS, l.LocalPorts, l.RemotePorts, l.Address)
}

func (r *reader) appData() LCAF {
	w := r.u32("TOS and protocol")
	l := &AppData{TOS: w >> 8, Protocol: uint8(w)}
	l.LocalPorts = PortRange{r.u16("local port low"), r.u16("local port high")}
	l.RemotePorts = PortRange{r.u16("remote port low"), r.u16("remote port high")}
	r.address(&l.Address)
	if r.err != nil {
		return nil
	}
	return l
}

// NATTraversal is LCAF type 7 (RFC 8060): how to reach an ETR behind
// a NAT, through the RTRs listed last.
//
//	|   Type = 7    |     Rsvd2     |             Length            |
//	|       MS UDP Port Number      |      ETR UDP Port Number      |
//	|              AFI = x          |  Global ETR RLOC Address  ... |
//	|              AFI = x          |       MS RLOC Address  ...    |
//	|              AFI = x          | Private ETR RLOC Address  ... |
//	|              AFI = x          |      RTR RLOC Address 1 ...   |
//	|              AFI = x          |      RTR RLOC Address k ...   |
type NATTraversal struct {
	MSPort, ETRPort uint16
	GlobalETR       Address
	MS              Address
	PrivateETR      Address
	RTRs            []Address
}

func (l *NATTraversal) Type() LCAFType                    { return LCAFNATTraversal }
func (l *NATTraversal) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }

func (l *NATTraversal) bodyLen(depth int) int {
	n := 4 + addressLen(l.GlobalETR, depth) + addressLen(l.MS, depth) + addressLen(l.PrivateETR, depth)
	for _, a := range l.RTRs {
		n += addressLen(a, depth)
	}
	return n
}

func (l *NATTraversal) appendBody(b []byte, depth int) (_ []byte, err error) {
	b = binary.BigEndian.AppendUint16(b, l.MSPort)
	b = binary.BigEndian.AppendUint16(b, l.ETRPort)
	for _, a := range append([]Address{l.GlobalETR, l.MS, l.PrivateETR}, l.RTRs...) {
		if b, err = appendAddress(b, a, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *NATTraversal) String() string {
	return fmt.Sprintf("nat{ms-port %d etr-port %d global %s ms %s private %s rtrs [%s]}",
		l.MSPort, l.ETRPort, l.GlobalETR, l.MS, l.PrivateETR, joinAddresses(l.RTRs, " "))
}

func (r *reader) natTraversal() LCAF {
	l := &NATTraversal{MSPort: r.u16("MS UDP port"), ETRPort: r.u16("ETR UDP port")}
	for _, f := range []struct {
		dst  *Address
		name string
	}{{&l.GlobalETR, "global ETR RLOC."}, {&l.MS, "MS RLOC."}, {&l.PrivateETR, "private ETR RLOC."}} {
		r.address(f.dst)
		if r.err != nil {
			r.prefix("%s", f.name)
			return nil
		}
	}
	for i := 0; r.remaining() > 0; i++ {
		l.RTRs = grow(l.RTRs)
		r.address(&l.RTRs[i])
		if r.err != nil {
			r.prefix("RTRs[%d].", i)
			return nil
		}
	}
	return l
}

// SourceDest is LCAF type 12 (RFC 8060): a source and destination
// prefix pair, for source-specific mappings.
//
//	|   Type = 12   |     Rsvd2     |             Length            |
//	|            Reserved           |   Source-ML   |    Dest-ML    |
//	|              AFI = x          |     Source-Prefix ...         |
//	|              AFI = y          |     Destination-Prefix ...    |
type SourceDest struct {
	SourceMaskLen, DestMaskLen uint8
	Source, Dest               Address
}

func (l *SourceDest) Type() LCAFType                    { return LCAFSourceDest }
func (l *SourceDest) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }

func (l *SourceDest) bodyLen(depth int) int {
	return 4 + addressLen(l.Source, depth) + addressLen(l.Dest, depth)
}

func (l *SourceDest) appendBody(b []byte, depth int) ([]byte, error) {
	if err := checkMaskLen(l.Source, l.SourceMaskLen); err != nil {
		return nil, encodeError("LCAF Source-Dest", "source: %v", err)
	}
	if err := checkMaskLen(l.Dest, l.DestMaskLen); err != nil {
		return nil, encodeError("LCAF Source-Dest", "dest: %v", err)
	}
	b = append(b, 0, 0, l.SourceMaskLen, l.DestMaskLen)
	b, err := appendAddress(b, l.Source, depth)
	if err != nil {
		return nil, err
	}
	return appendAddress(b, l.Dest, depth)
}

func (l *SourceDest) String() string {
	return fmt.Sprintf("(%s/%d, %s/%d)", l.Source, l.SourceMaskLen, l.Dest, l.DestMaskLen)
}

func (r *reader) sourceDest() LCAF {
	r.u16("reserved")
	l := &SourceDest{SourceMaskLen: r.u8("source mask-len"), DestMaskLen: r.u8("dest mask-len")}
	maskAt := r.off - 2
	r.address(&l.Source)
	if r.err != nil {
		r.prefix("source.")
		return nil
	}
	r.address(&l.Dest)
	if r.err != nil {
		r.prefix("dest.")
		return nil
	}
	if checkMaskLen(l.Source, l.SourceMaskLen) != nil {
		r.failAt(maskAt, "source mask-len", ErrBadValue)
	}
	if checkMaskLen(l.Dest, l.DestMaskLen) != nil {
		r.failAt(maskAt+1, "dest mask-len", ErrBadValue)
	}
	return l
}

// KeyValue is LCAF type 15 (RFC 8060): an address used as a key for
// another.
//
//	|   Type = 15   |     Rsvd2     |             Length            |
//	|              AFI = x          |       Address as Key ...      |
//	|              AFI = y          |       Address as Value ...    |
type KeyValue struct {
	Key, Value Address
}

func (l *KeyValue) Type() LCAFType                    { return LCAFKeyValue }
func (l *KeyValue) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }
func (l *KeyValue) bodyLen(depth int) int {
	return addressLen(l.Key, depth) + addressLen(l.Value, depth)
}

func (l *KeyValue) appendBody(b []byte, depth int) ([]byte, error) {
	b, err := appendAddress(b, l.Key, depth)
	if err != nil {
		return nil, err
	}
	return appendAddress(b, l.Value, depth)
}

func (l *KeyValue) String() string { return fmt.Sprintf("kv{%s => %s}", l.Key, l.Value) }

func (r *reader) keyValue() LCAF {
	l := &KeyValue{}
	r.address(&l.Key)
	if r.err != nil {
		r.prefix("key.")
		return nil
	}
	r.address(&l.Value)
	if r.err != nil {
		r.prefix("value.")
		return nil
	}
	return l
}

// JSON is LCAF type 14 (RFC 8060): a JSON document, optionally
// binary-encoded (the B bit), and an address it describes (the empty
// Address when it describes none).
//
//	|   Type = 14   |    Rsvd2    |B|            Length             |
//	|           JSON length         | JSON binary/text encoding ... |
//	|              AFI = x          |       Optional Address ...    |
type JSON struct {
	Binary  bool
	Data    []byte
	Address Address
}

func (l *JSON) Type() LCAFType { return LCAFJSON }

func (l *JSON) headerBits() (uint8, uint8, uint8) {
	if l.Binary {
		return 0, 0, 1
	}
	return 0, 0, 0
}

func (l *JSON) bodyLen(depth int) int { return 2 + len(l.Data) + addressLen(l.Address, depth) }

func (l *JSON) appendBody(b []byte, depth int) ([]byte, error) {
	if len(l.Data) > 0xffff {
		return nil, encodeError("LCAF JSON", "%d bytes exceed the 16-bit JSON length", len(l.Data))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(l.Data)))
	b = append(b, l.Data...)
	return appendAddress(b, l.Address, depth)
}

func (l *JSON) String() string {
	if l.Binary {
		return fmt.Sprintf("json{%d binary bytes, %s}", len(l.Data), l.Address)
	}
	return fmt.Sprintf("json{%s, %s}", l.Data, l.Address)
}

func (r *reader) json(rsvd2 uint8) LCAF {
	n := int(r.u16("JSON length"))
	l := &JSON{Binary: rsvd2&1 != 0, Data: r.copyBytes(n, "JSON data")}
	r.address(&l.Address)
	if r.err != nil {
		return nil
	}
	return l
}

func joinAddresses(addrs []Address, sep string) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, sep)
}

// checkMaskLen refuses a prefix length longer than its address.
func checkMaskLen(a Address, maskLen uint8) error {
	if bits := maskBits(a); bits >= 0 && int(maskLen) > bits {
		return fmt.Errorf("mask-len %d exceeds the %d bits of a %s address", maskLen, bits, a.AFI())
	}
	return nil
}
