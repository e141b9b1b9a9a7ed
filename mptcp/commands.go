package mptcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// Command is an mptcp_pm generic netlink command (MPTCP_PM_CMD_*).
type Command uint8

// The commands: the in-kernel path manager's endpoints and limits (what
// `ip mptcp endpoint` and `ip mptcp limits` send), and the userspace path
// manager's per-connection commands.
const (
	CmdAddAddr        Command = 1
	CmdDelAddr        Command = 2
	CmdGetAddr        Command = 3
	CmdFlushAddrs     Command = 4
	CmdSetLimits      Command = 5
	CmdGetLimits      Command = 6
	CmdSetFlags       Command = 7
	CmdAnnounce       Command = 8
	CmdRemove         Command = 9
	CmdSubflowCreate  Command = 10
	CmdSubflowDestroy Command = 11
)

var commandNames = map[Command]string{
	CmdAddAddr: "add_addr", CmdDelAddr: "del_addr", CmdGetAddr: "get_addr",
	CmdFlushAddrs: "flush_addrs", CmdSetLimits: "set_limits", CmdGetLimits: "get_limits",
	CmdSetFlags: "set_flags", CmdAnnounce: "announce", CmdRemove: "remove",
	CmdSubflowCreate: "subflow_create", CmdSubflowDestroy: "subflow_destroy",
}

func (c Command) String() string {
	if s, ok := commandNames[c]; ok {
		return s
	}
	return fmt.Sprintf("command(%d)", uint8(c))
}

// The command attributes (MPTCP_PM_ATTR_*).
const (
	attrAddr        = 1 // nest of address attributes
	attrRcvAddAddrs = 2 // u32
	attrSubflows    = 3 // u32
	attrToken       = 4 // u32
	attrLocID       = 5 // u8
	attrAddrRemote  = 6 // nest of address attributes
)

// The address attributes (MPTCP_PM_ADDR_ATTR_*).
const (
	addrFamily = 1 // u16
	addrID     = 2 // u8
	addrAddr4  = 3 // be32
	addrAddr6  = 4 // 16 bytes
	addrPort   = 5 // u16 in host order: the kernel reads it with nla_get_u16
	addrFlags  = 6 // u32
	addrIfIdx  = 7 // s32
)

// ErrInvalidArgument is wrapped by the errors of calls this package
// refuses before asking the kernel, because the kernel would refuse them
// too or do something else than asked.
var ErrInvalidArgument = errors.New("invalid argument")

func invalid(cmd Command, format string, args ...any) error {
	return fmt.Errorf("mptcp: %s: %w: %s", cmd, ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// request is one command ready to send: its attributes, encoded.
type request struct {
	cmd   Command
	attrs []byte
}

// addrFields chooses which optional fields of an Addr a command sends.
type addrFields struct {
	id bool // send ID even when it is 0
}

// putAddr appends an address nest in the order iproute2 uses (ID, FLAGS,
// IF_IDX, PORT, FAMILY, ADDR4/ADDR6), so that the encodings compare
// byte for byte with what `ip mptcp` sends. Zero fields are left out,
// except ID when f.id is set; an invalid IP leaves out FAMILY and ADDR.
func putAddr(ae *netlink.AttributeEncoder, typ uint16, a Addr, f addrFields) {
	ae.Nested(typ, func(n *netlink.AttributeEncoder) error {
		if a.ID != 0 || f.id {
			n.Uint8(addrID, a.ID)
		}
		if a.Flags != 0 {
			n.Uint32(addrFlags, uint32(a.Flags))
		}
		if a.IfIndex != 0 {
			n.Int32(addrIfIdx, int32(a.IfIndex))
		}
		if a.Port != 0 {
			n.Uint16(addrPort, a.Port)
		}
		if a.IP.IsValid() {
			ip := a.IP.Unmap()
			n.Uint16(addrFamily, familyOf(ip))
			b := ip.AsSlice()
			if ip.Is4() {
				n.Bytes(addrAddr4, b)
			} else {
				n.Bytes(addrAddr6, b)
			}
		}
		return nil
	})
}

func endpoint(ap netip.AddrPort) Addr { return Addr{IP: ap.Addr(), Port: ap.Port()} }

func encode(cmd Command, fn func(ae *netlink.AttributeEncoder)) (request, error) {
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	b, err := ae.Encode()
	if err != nil {
		return request{}, fmt.Errorf("mptcp: %s: encode: %w", cmd, err)
	}
	return request{cmd: cmd, attrs: b}, nil
}

// encodeSubflowCreate asks the userspace path manager of connection token
// for a new subflow from local to remote. A local ID of 0 lets the kernel
// choose one, a local port of 0 lets it choose the source port.
func encodeSubflowCreate(token uint32, local Addr, remote netip.AddrPort) (request, error) {
	const cmd = CmdSubflowCreate
	if !local.IP.IsValid() || !remote.IsValid() || remote.Port() == 0 {
		return request{}, invalid(cmd, "need a local address and a remote address and port")
	}
	if familyOf(local.IP) != familyOf(remote.Addr()) {
		return request{}, invalid(cmd, "local %s and remote %s are of different families", local.IP, remote.Addr())
	}
	if local.Flags&FlagSignal != 0 {
		return request{}, invalid(cmd, "the signal flag is for Announce")
	}
	return encode(cmd, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrToken, token)
		putAddr(ae, attrAddr, local, addrFields{})
		putAddr(ae, attrAddrRemote, endpoint(remote), addrFields{})
	})
}

// encodeSubflowDestroy closes the subflow with these exact ends; the
// kernel needs both ports.
func encodeSubflowDestroy(token uint32, local, remote netip.AddrPort) (request, error) {
	const cmd = CmdSubflowDestroy
	if !local.IsValid() || !remote.IsValid() || local.Port() == 0 || remote.Port() == 0 {
		return request{}, invalid(cmd, "need both ends with their ports, got %s and %s", local, remote)
	}
	return encode(cmd, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrToken, token)
		putAddr(ae, attrAddr, endpoint(local), addrFields{})
		putAddr(ae, attrAddrRemote, endpoint(remote), addrFields{})
	})
}

// encodeAnnounce sends ADD_ADDR for a on connection token.
func encodeAnnounce(token uint32, a Addr) (request, error) {
	const cmd = CmdAnnounce
	if a.ID == 0 || !a.IP.IsValid() {
		return request{}, invalid(cmd, "need an address and a non-zero id (0 is the initial subflow's), got %s", a)
	}
	a.Flags |= FlagSignal
	return encode(cmd, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrToken, token)
		putAddr(ae, attrAddr, a, addrFields{})
	})
}

// encodeRemove sends REMOVE_ADDR for the local address ID on connection
// token (and closes the subflows that use it).
func encodeRemove(token uint32, localID uint8) (request, error) {
	return encode(CmdRemove, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrToken, token)
		ae.Uint8(attrLocID, localID)
	})
}

// encodeSetBackup sets or clears the backup priority of one subflow (the
// kernel sends MP_PRIO to the peer).
func encodeSetBackup(token uint32, local, remote netip.AddrPort, backup bool) (request, error) {
	const cmd = CmdSetFlags
	if !local.IsValid() || !remote.IsValid() {
		return request{}, invalid(cmd, "need both ends of the subflow, got %s and %s", local, remote)
	}
	l := endpoint(local)
	if backup {
		l.Flags = FlagBackup
	}
	return encode(cmd, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrToken, token)
		putAddr(ae, attrAddr, l, addrFields{})
		putAddr(ae, attrAddrRemote, endpoint(remote), addrFields{})
	})
}

// encodeAddEndpoint adds an endpoint to the in-kernel path manager, as
// `ip mptcp endpoint add` does.
func encodeAddEndpoint(a Addr) (request, error) {
	if !a.IP.IsValid() {
		return request{}, invalid(CmdAddAddr, "need an address")
	}
	return encode(CmdAddAddr, func(ae *netlink.AttributeEncoder) {
		putAddr(ae, attrAddr, a, addrFields{})
	})
}

// encodeDeleteEndpoint deletes the endpoint with this ID, as
// `ip mptcp endpoint delete id N` does.
func encodeDeleteEndpoint(id uint8) (request, error) {
	return encode(CmdDelAddr, func(ae *netlink.AttributeEncoder) {
		putAddr(ae, attrAddr, Addr{ID: id}, addrFields{id: true})
	})
}

// encodeSetLimits sets both limits, as `ip mptcp limits set subflows N
// add_addr_accepted M` does.
func encodeSetLimits(l Limits) (request, error) {
	return encode(CmdSetLimits, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrRcvAddAddrs, l.AddAddrAccepted)
		ae.Uint32(attrSubflows, l.Subflows)
	})
}

var addrAttrs = map[uint16]attrSpec{
	addrFamily: {2, false, "family"}, addrID: {1, false, "id"},
	addrAddr4: {4, false, "addr4"}, addrAddr6: {16, false, "addr6"},
	addrPort: {2, false, "port"}, addrFlags: {4, false, "flags"}, addrIfIdx: {4, false, "if_idx"},
}

// decodeAddr reads an address nest (an endpoint in GET_ADDR's replies).
func decodeAddr(msg string, b []byte) (Addr, error) {
	var a Addr
	err := walkAttrs(msg, b, func(typ uint16, data []byte, off int) error {
		spec, ok := addrAttrs[typ]
		if !ok {
			return nil
		}
		v, err := fixed(msg, data, off, spec)
		if err != nil {
			return err
		}
		switch typ {
		case addrID:
			a.ID = v[0]
		case addrAddr4, addrAddr6:
			a.IP = addrFrom(v)
		case addrPort:
			a.Port = binary.NativeEndian.Uint16(v)
		case addrFlags:
			a.Flags = AddrFlags(binary.NativeEndian.Uint32(v))
		case addrIfIdx:
			a.IfIndex = int(int32(binary.NativeEndian.Uint32(v)))
		}
		return nil
	})
	return a, err
}

// decodeEndpoint reads one GET_ADDR reply: the ADDR nest.
func decodeEndpoint(attrs []byte) (Addr, error) {
	const msg = "endpoint"
	var a Addr
	found := false
	err := walkAttrs(msg, attrs, func(typ uint16, data []byte, off int) error {
		if typ != attrAddr {
			return nil
		}
		var err error
		a, err = decodeAddr(msg, data)
		found = true
		return err
	})
	if err == nil && !found {
		err = &ParseError{Msg: msg, Field: "addr", Err: ErrTruncated}
	}
	return a, err
}

// decodeLimits reads a GET_LIMITS reply.
func decodeLimits(attrs []byte) (Limits, error) {
	const msg = "limits"
	var l Limits
	err := walkAttrs(msg, attrs, func(typ uint16, data []byte, off int) error {
		var dst *uint32
		var name string
		switch typ {
		case attrRcvAddAddrs:
			dst, name = &l.AddAddrAccepted, "rcv_add_addrs"
		case attrSubflows:
			dst, name = &l.Subflows, "subflows"
		default:
			return nil
		}
		v, err := fixed(msg, data, off, attrSpec{4, false, name})
		if err == nil {
			*dst = binary.NativeEndian.Uint32(v)
		}
		return err
	})
	return l, err
}
