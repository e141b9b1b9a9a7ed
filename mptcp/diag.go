package mptcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Connection is an MPTCP socket of the namespace, as `ss -M` lists it.
type Connection struct {
	Token         uint32
	Local, Remote netip.AddrPort // the socket's: its first subflow's
	State         uint8          // TCP state numbers (TCP_ESTABLISHED = 1, TCP_LISTEN = 10, ...)
	Info          Info           // zero for a listener
	Listener      bool
}

// Subflow is a TCP subflow of an MPTCP connection of the namespace, as
// `ss -tie` shows it with its "tcp-ulp-mptcp" part.
type Subflow struct {
	Token             uint32 // the connection's (local) token
	Local, Remote     netip.AddrPort
	LocalID, RemoteID uint8
	Backup            bool // either end asked for backup priority
	State             uint8
	TCP               TCPInfo
}

// The TCP states the diag layer reports.
const tcpListen = 10 // TCP_LISTEN

// The diag protocol numbers and attributes.
const (
	ipprotoMPTCP       = 262
	sockDiagByFamily   = 20 // SOCK_DIAG_BY_FAMILY
	inetDiagInfo       = 2  // INET_DIAG_INFO
	inetDiagULPInfo    = 19 // INET_DIAG_ULP_INFO
	inetDiagReqProto   = 3  // INET_DIAG_REQ_PROTOCOL: a u32, for protocols above 255
	inetDiagReqLen     = 56 // struct inet_diag_req_v2
	inetDiagMsgLen     = 72 // struct inet_diag_msg
	ulpInfoName        = 1  // INET_ULP_INFO_NAME
	ulpInfoMPTCP       = 3  // INET_ULP_INFO_MPTCP
	subflowAttrTokenLo = 2  // MPTCP_SUBFLOW_ATTR_TOKEN_LOC
	subflowAttrFlags   = 8  // MPTCP_SUBFLOW_ATTR_FLAGS
	subflowAttrIDRem   = 9  // MPTCP_SUBFLOW_ATTR_ID_REM
	subflowAttrIDLoc   = 10 // MPTCP_SUBFLOW_ATTR_ID_LOC
	subflowFlagBkupRem = 1 << 4
	subflowFlagBkupLoc = 1 << 5
)

// Connections lists the MPTCP sockets (connections and listeners) of the
// calling thread's network namespace, with their mptcp_info.
func Connections() ([]Connection, error) {
	var conns []Connection
	err := diagDump(ipprotoMPTCP, func(m []byte) error {
		c, err := parseConnection(m)
		if err == nil {
			conns = append(conns, c)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return conns, nil
}

// Subflows lists the TCP subflows of the MPTCP connections of the calling
// thread's network namespace, with their tcp_info (TCP sockets without the
// mptcp ULP, and listeners, are left out).
func Subflows() ([]Subflow, error) {
	var subs []Subflow
	err := diagDump(unix.IPPROTO_TCP, func(m []byte) error {
		s, ok, err := parseSubflow(m)
		if ok {
			subs = append(subs, s)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return subs, nil
}

// diagDump dumps the sockets of one protocol, IPv4 then IPv6, in every
// state, asking for INET_DIAG_INFO (which brings INET_DIAG_ULP_INFO with
// it for TCP), and calls fn with each message's payload.
func diagDump(proto int, fn func(msg []byte) error) error {
	conn, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return fmt.Errorf("mptcp: open sock_diag socket: %w", err)
	}
	defer conn.Close()
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := diagRequest(family, proto)
		msgs, err := conn.Execute(netlink.Message{
			Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
			Data:   req,
		})
		if err != nil {
			return fmt.Errorf("mptcp: sock_diag dump of protocol %d: %w", proto, err)
		}
		for _, m := range msgs {
			if err := fn(m.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// diagRequest builds a struct inet_diag_req_v2 for every socket of family
// and proto, followed by INET_DIAG_REQ_PROTOCOL when proto does not fit
// its u8 field (IPPROTO_MPTCP is 262).
func diagRequest(family uint8, proto int) []byte {
	b := make([]byte, inetDiagReqLen, inetDiagReqLen+8)
	b[0] = family
	if proto < 256 {
		b[1] = uint8(proto)
	}
	b[2] = 1 << (inetDiagInfo - 1) // idiag_ext
	binary.NativeEndian.PutUint32(b[4:], 0xffffffff)
	if proto >= 256 {
		b = binary.NativeEndian.AppendUint16(b, 8)
		b = binary.NativeEndian.AppendUint16(b, inetDiagReqProto)
		b = binary.NativeEndian.AppendUint32(b, uint32(proto))
	}
	return b
}

// diagMsg is the fixed part of a struct inet_diag_msg.
type diagMsg struct {
	state         uint8
	local, remote netip.AddrPort
}

func parseDiagMsg(what string, b []byte) (diagMsg, []byte, error) {
	if len(b) < inetDiagMsgLen {
		return diagMsg{}, nil, &ParseError{Msg: what, Field: "inet_diag_msg", Err: ErrTruncated}
	}
	var addr func(off int) netip.Addr
	switch b[0] {
	case unix.AF_INET:
		addr = func(off int) netip.Addr { return addrFrom(b[off : off+4]) }
	case unix.AF_INET6:
		addr = func(off int) netip.Addr { return addrFrom(b[off : off+16]) }
	default:
		return diagMsg{}, nil, &ParseError{Msg: what, Field: "idiag_family", Err: ErrBadValue}
	}
	m := diagMsg{
		state:  b[1],
		local:  netip.AddrPortFrom(addr(8), binary.BigEndian.Uint16(b[4:])),
		remote: netip.AddrPortFrom(addr(24), binary.BigEndian.Uint16(b[6:])),
	}
	return m, b[inetDiagMsgLen:], nil
}

// parseConnection decodes one MPTCP socket's diag message.
func parseConnection(b []byte) (Connection, error) {
	const what = "mptcp diag"
	m, attrs, err := parseDiagMsg(what, b)
	if err != nil {
		return Connection{}, err
	}
	c := Connection{Local: m.local, Remote: m.remote, State: m.state, Listener: m.state == tcpListen}
	err = walkAttrs(what, attrs, func(typ uint16, data []byte, off int) error {
		if typ == inetDiagInfo {
			c.Info = ParseInfo(data)
			c.Token = c.Info.Token
		}
		return nil
	})
	return c, err
}

// parseSubflow decodes one TCP socket's diag message; ok is false for a
// socket that is not an MPTCP subflow.
func parseSubflow(b []byte) (s Subflow, ok bool, err error) {
	const what = "tcp diag"
	m, attrs, err := parseDiagMsg(what, b)
	if err != nil || m.state == tcpListen {
		return Subflow{}, false, err
	}
	s = Subflow{Local: m.local, Remote: m.remote, State: m.state}
	err = walkAttrs(what, attrs, func(typ uint16, data []byte, off int) error {
		switch typ {
		case inetDiagInfo:
			s.TCP = ParseTCPInfo(data)
		case inetDiagULPInfo:
			return walkAttrs(what, data, func(typ uint16, data []byte, off int) error {
				switch typ {
				case ulpInfoName:
					ok = cString(data) == "mptcp"
				case ulpInfoMPTCP:
					return parseSubflowAttrs(&s, data)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return Subflow{}, false, err
	}
	return s, ok, nil
}

// parseSubflowAttrs reads the mptcp part of a subflow's ULP info.
func parseSubflowAttrs(s *Subflow, b []byte) error {
	const what = "tcp diag mptcp ulp info"
	return walkAttrs(what, b, func(typ uint16, data []byte, off int) error {
		switch typ {
		case subflowAttrTokenLo:
			v, err := fixed(what, data, off, attrSpec{4, false, "token_loc"})
			if err == nil {
				s.Token = binary.NativeEndian.Uint32(v)
			}
			return err
		case subflowAttrFlags:
			v, err := fixed(what, data, off, attrSpec{4, false, "flags"})
			if err == nil {
				s.Backup = binary.NativeEndian.Uint32(v)&(subflowFlagBkupRem|subflowFlagBkupLoc) != 0
			}
			return err
		case subflowAttrIDRem:
			v, err := fixed(what, data, off, attrSpec{1, false, "id_rem"})
			if err == nil {
				s.RemoteID = v[0]
			}
			return err
		case subflowAttrIDLoc:
			v, err := fixed(what, data, off, attrSpec{1, false, "id_loc"})
			if err == nil {
				s.LocalID = v[0]
			}
			return err
		}
		return nil
	})
}

// cString reads a NUL-terminated string attribute.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
