package mptcp

import (
	"encoding/binary"
	"time"
)

// The kernel's structures grow at their end from one release to the next
// (struct mptcp_info was 40 bytes in 5.6 and is 96 in 6.18; struct
// tcp_info is 280 bytes in 6.18 and 248 in 6.10). The decoders below read
// each field only if the kernel's structure reaches it, leave the others
// zero, and ignore what follows the last field they know; Len says how
// many bytes the kernel gave.

// structReader reads little-endian-or-native fields at fixed offsets of a
// structure of any length, giving zero past its end.
type structReader []byte

func (r structReader) u8(off int) uint8 {
	if off+1 > len(r) {
		return 0
	}
	return r[off]
}

func (r structReader) u16(off int) uint16 {
	if off+2 > len(r) {
		return 0
	}
	return binary.NativeEndian.Uint16(r[off:])
}

func (r structReader) u32(off int) uint32 {
	if off+4 > len(r) {
		return 0
	}
	return binary.NativeEndian.Uint32(r[off:])
}

func (r structReader) u64(off int) uint64 {
	if off+8 > len(r) {
		return 0
	}
	return binary.NativeEndian.Uint64(r[off:])
}

// us reads a u32 in microseconds, ms one in milliseconds.
func (r structReader) us(off int) time.Duration { return time.Duration(r.u32(off)) * time.Microsecond }
func (r structReader) ms(off int) time.Duration { return time.Duration(r.u32(off)) * time.Millisecond }

// The bits of Info.Flags (MPTCP_INFO_FLAG_*).
const (
	InfoFlagFallback          uint32 = 1 << 0 // the connection fell back to plain TCP
	InfoFlagRemoteKeyReceived uint32 = 1 << 1
)

// Info is an MPTCP connection's struct mptcp_info (from MPTCP_INFO,
// MPTCP_FULL_INFO or sock_diag).
type Info struct {
	Subflows           uint8 // additional subflows (the initial one is not counted)
	AddAddrSignal      uint8 // addresses announced
	AddAddrAccepted    uint8 // peer's announcements accepted
	SubflowsMax        uint8
	AddAddrSignalMax   uint8
	AddAddrAcceptedMax uint8
	Flags              uint32 // InfoFlag*
	Token              uint32
	WriteSeq           uint64
	SndUna             uint64
	RcvNxt             uint64
	LocalAddrUsed      uint8
	LocalAddrMax       uint8
	CsumEnabled        bool
	Retransmits        uint32 // 6.6 and later, like the fields below
	BytesRetrans       uint64
	BytesSent          uint64
	BytesReceived      uint64
	BytesAcked         uint64
	SubflowsTotal      uint8 // all subflows, the initial one included (6.8)
	LastDataSent       time.Duration
	LastDataRecv       time.Duration
	LastAckRecv        time.Duration
	// Len is the size of the kernel's struct mptcp_info.
	Len int
}

// MPTCPInfoSize is the size of struct mptcp_info that this package knows
// (Linux 6.8 to 6.18).
const MPTCPInfoSize = 96

// ParseInfo decodes a struct mptcp_info of any length.
func ParseInfo(b []byte) Info {
	r := structReader(b)
	return Info{
		Subflows:           r.u8(0),
		AddAddrSignal:      r.u8(1),
		AddAddrAccepted:    r.u8(2),
		SubflowsMax:        r.u8(3),
		AddAddrSignalMax:   r.u8(4),
		AddAddrAcceptedMax: r.u8(5),
		Flags:              r.u32(8),
		Token:              r.u32(12),
		WriteSeq:           r.u64(16),
		SndUna:             r.u64(24),
		RcvNxt:             r.u64(32),
		LocalAddrUsed:      r.u8(40),
		LocalAddrMax:       r.u8(41),
		CsumEnabled:        r.u8(42) != 0,
		Retransmits:        r.u32(44),
		BytesRetrans:       r.u64(48),
		BytesSent:          r.u64(56),
		BytesReceived:      r.u64(64),
		BytesAcked:         r.u64(72),
		SubflowsTotal:      r.u8(80),
		LastDataSent:       r.ms(84),
		LastDataRecv:       r.ms(88),
		LastAckRecv:        r.ms(92),
		Len:                len(b),
	}
}

// TCPInfo is a TCP subflow's struct tcp_info: what a path manager needs to
// see a subflow stall or recover. Times are converted to durations;
// Retransmits is the current count of unanswered retransmissions (it goes
// back to 0 when an ACK arrives), TotalRetrans the running total.
type TCPInfo struct {
	State              uint8
	CAState            uint8
	Retransmits        uint8
	Probes             uint8
	Backoff            uint8
	Options            uint8
	SndWScale          uint8
	RcvWScale          uint8
	RTO                time.Duration
	ATO                time.Duration
	SndMSS             uint32
	RcvMSS             uint32
	Unacked            uint32 // segments in flight
	Sacked             uint32
	Lost               uint32
	Retrans            uint32 // segments retransmitted and still in flight
	LastDataSent       time.Duration
	LastDataRecv       time.Duration
	LastAckRecv        time.Duration
	PMTU               uint32
	RcvSsthresh        uint32
	RTT                time.Duration // smoothed
	RTTVar             time.Duration
	SndSsthresh        uint32
	SndCwnd            uint32 // segments
	AdvMSS             uint32
	Reordering         uint32
	RcvRTT             time.Duration
	RcvSpace           uint32
	TotalRetrans       uint32
	PacingRate         uint64 // bytes per second
	MaxPacingRate      uint64
	BytesAcked         uint64
	BytesReceived      uint64
	SegsOut            uint32
	SegsIn             uint32
	NotsentBytes       uint32
	MinRTT             time.Duration
	DataSegsIn         uint32
	DataSegsOut        uint32
	DeliveryRate       uint64 // bytes per second
	BusyTime           time.Duration
	RwndLimited        time.Duration
	SndbufLimited      time.Duration
	Delivered          uint32
	DeliveredCE        uint32
	BytesSent          uint64
	BytesRetrans       uint64
	DSACKDups          uint32
	ReordSeen          uint32
	RcvOOOPack         uint32
	SndWnd             uint32
	RcvWnd             uint32
	Rehash             uint32
	TotalRTO           uint16
	TotalRTORecoveries uint16
	TotalRTOTime       time.Duration
	// Len is the size of the kernel's struct tcp_info.
	Len int
}

// ParseTCPInfo decodes a struct tcp_info of any length.
func ParseTCPInfo(b []byte) TCPInfo {
	r := structReader(b)
	return TCPInfo{
		State:              r.u8(0),
		CAState:            r.u8(1),
		Retransmits:        r.u8(2),
		Probes:             r.u8(3),
		Backoff:            r.u8(4),
		Options:            r.u8(5),
		SndWScale:          r.u8(6) & 0x0f,
		RcvWScale:          r.u8(6) >> 4,
		RTO:                r.us(8),
		ATO:                r.us(12),
		SndMSS:             r.u32(16),
		RcvMSS:             r.u32(20),
		Unacked:            r.u32(24),
		Sacked:             r.u32(28),
		Lost:               r.u32(32),
		Retrans:            r.u32(36),
		LastDataSent:       r.ms(44),
		LastDataRecv:       r.ms(52),
		LastAckRecv:        r.ms(56),
		PMTU:               r.u32(60),
		RcvSsthresh:        r.u32(64),
		RTT:                r.us(68),
		RTTVar:             r.us(72),
		SndSsthresh:        r.u32(76),
		SndCwnd:            r.u32(80),
		AdvMSS:             r.u32(84),
		Reordering:         r.u32(88),
		RcvRTT:             r.us(92),
		RcvSpace:           r.u32(96),
		TotalRetrans:       r.u32(100),
		PacingRate:         r.u64(104),
		MaxPacingRate:      r.u64(112),
		BytesAcked:         r.u64(120),
		BytesReceived:      r.u64(128),
		SegsOut:            r.u32(136),
		SegsIn:             r.u32(140),
		NotsentBytes:       r.u32(144),
		MinRTT:             r.us(148),
		DataSegsIn:         r.u32(152),
		DataSegsOut:        r.u32(156),
		DeliveryRate:       r.u64(160),
		BusyTime:           time.Duration(r.u64(168)) * time.Microsecond,
		RwndLimited:        time.Duration(r.u64(176)) * time.Microsecond,
		SndbufLimited:      time.Duration(r.u64(184)) * time.Microsecond,
		Delivered:          r.u32(192),
		DeliveredCE:        r.u32(196),
		BytesSent:          r.u64(200),
		BytesRetrans:       r.u64(208),
		DSACKDups:          r.u32(216),
		ReordSeen:          r.u32(220),
		RcvOOOPack:         r.u32(224),
		SndWnd:             r.u32(228),
		RcvWnd:             r.u32(232),
		Rehash:             r.u32(236),
		TotalRTO:           r.u16(240),
		TotalRTORecoveries: r.u16(242),
		TotalRTOTime:       r.ms(244),
		Len:                len(b),
	}
}
