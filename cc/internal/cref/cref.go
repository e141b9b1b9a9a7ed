//go:build cgo

// Package cref builds the congestion controls' C arithmetic
// (cc/bpf/ccmath.h) for user space, so that the differential test can
// drive the very code that runs in the BPF programs against the Go model.
// It is used by tests only; the rest of the module stays pure Go.
//
// amp.h and ccmath.h here are links to cc/bpf's: the go command keys its
// cache on the files of the package's directory, so a header included
// from elsewhere could change without the C being built again.
package cref

/*
#cgo CFLAGS: -O2 -Wall -Werror
#include <stdlib.h>
#include "ccmath.h"

static void cref_init(__u32 algo, struct amp_priv *p, struct amp_tcp *t) { amp_init(algo, p, t); }
static void cref_cong_avoid(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t, __u32 ack, __u32 acked) { amp_cong_avoid(algo, c, p, t, ack, acked); }
static __u32 cref_ssthresh(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t) { return amp_ssthresh(algo, c, p, t); }
static void cref_set_state(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t, __u8 st) { amp_set_state(algo, c, p, t, st); }
static void cref_pkts_acked(__u32 algo, struct amp_priv *p, __s32 rtt) { amp_pkts_acked(algo, p, rtt); }
static void cref_cwnd_event(__u32 algo, struct amp_priv *p, struct amp_tcp *t, __u32 ev) { amp_cwnd_event(algo, p, t, ev); }
static __u32 cref_undo(struct amp_tcp *t) { return amp_reno_undo(t); }
static int cref_claim(struct amp_conn *c, __u32 id) { return amp_claim(c, id); }
static int cref_leave(struct amp_conn *c, __u32 i) { return amp_leave(c, i); }
static __u32 cref_prr_cwnd(__u32 ss, __u32 in_flight, __u32 prior, __u32 delivered, __u32 out, __u32 newly, int lost, int adv) { return amp_prr_cwnd(ss, in_flight, prior, delivered, out, newly, lost, adv); }
static __u32 cref_restart_cwnd(__u32 cwnd, __u32 init, __s32 idle, __u32 rto) { return amp_restart_cwnd(cwnd, init, idle, rto); }
static __u64 cref_pacing_rate(__u32 mss, __u32 cwnd, __u32 ss, __u32 out, __u32 srtt8, __u64 max) { return amp_pacing_rate(mss, cwnd, ss, out, srtt8, max); }
*/
import "C"

import "unsafe"

// Available says that the C build is there (cgo is on).
const Available = true

// TCP mirrors struct amp_tcp.
type TCP struct {
	Cwnd, CwndCnt, Ssthresh, Clamp uint32
	SRTT                           uint32
	SndNxt                         uint32
	PriorCwnd                      uint32
	CwndLimited                    bool
	BytesAcked                     uint64
}

// Conn is a struct amp_conn in C memory: one connection's slots.
type Conn struct {
	algo uint32
	c    *C.struct_amp_conn
}

// NewConn allocates a connection coupled by algo (enum amp_algo). Free
// releases it.
func NewConn(algo int) *Conn {
	return &Conn{algo: uint32(algo), c: (*C.struct_amp_conn)(C.calloc(1, C.sizeof_struct_amp_conn))}
}

// Free releases the connection.
func (c *Conn) Free() { C.free(unsafe.Pointer(c.c)) }

// Alpha is LIA's alpha in the connection, 2^-16.
func (c *Conn) Alpha() uint64 { return uint64(c.c.alpha) }

// Refs is the number of claimed slots.
func (c *Conn) Refs() uint32 { return uint32(c.c.refs) }

// Sock is one socket's struct amp_priv and struct amp_tcp, in C memory.
type Sock struct {
	algo uint32
	conn *Conn // nil for a plain socket
	p    *C.struct_amp_priv
	t    *C.struct_amp_tcp
}

// NewSock makes a socket under algo, a subflow of conn (claiming a slot
// with id) or, with conn nil, a plain TCP socket, and runs init.
func NewSock(algo int, conn *Conn, id uint32, t TCP) *Sock {
	s := &Sock{algo: uint32(algo), conn: conn,
		p: (*C.struct_amp_priv)(C.calloc(1, C.sizeof_struct_amp_priv)),
		t: (*C.struct_amp_tcp)(C.calloc(1, C.sizeof_struct_amp_tcp))}
	s.Set(t)
	s.p.slot = C.AMP_NO_SLOT
	if conn != nil {
		s.p.mptcp = 1
		s.p.sub_id = C.__u32(id)
		if i := C.cref_claim(conn.c, C.__u32(id)); i >= 0 {
			s.p.slot = C.__u8(i)
		}
	}
	C.cref_init(C.__u32(s.algo), s.p, s.t)
	return s
}

// Free releases the socket's memory.
func (s *Sock) Free() {
	C.free(unsafe.Pointer(s.p))
	C.free(unsafe.Pointer(s.t))
}

// Slot is the slot the subflow claimed, -1 for none.
func (s *Sock) Slot() int {
	if s.p.slot == C.AMP_NO_SLOT {
		return -1
	}
	return int(s.p.slot)
}

// Get returns the socket's view.
func (s *Sock) Get() TCP {
	t := s.t
	return TCP{uint32(t.cwnd), uint32(t.cwnd_cnt), uint32(t.ssthresh), uint32(t.clamp), uint32(t.srtt_us),
		uint32(t.snd_nxt), uint32(t.prior_cwnd), t.cwnd_limited != 0, uint64(t.bytes_acked)}
}

// Set replaces the socket's view, as the kernel's TCP code changes it
// between callbacks.
func (s *Sock) Set(v TCP) {
	t := s.t
	t.cwnd, t.cwnd_cnt, t.ssthresh, t.clamp = C.__u32(v.Cwnd), C.__u32(v.CwndCnt), C.__u32(v.Ssthresh), C.__u32(v.Clamp)
	t.srtt_us, t.snd_nxt, t.prior_cwnd = C.__u32(v.SRTT), C.__u32(v.SndNxt), C.__u32(v.PriorCwnd)
	t.cwnd_limited = 0
	if v.CwndLimited {
		t.cwnd_limited = 1
	}
	t.bytes_acked = C.__u64(v.BytesAcked)
}

func (s *Sock) cconn() *C.struct_amp_conn {
	if s.conn == nil || s.p.slot == C.AMP_NO_SLOT {
		return nil
	}
	return s.conn.c
}

// CongAvoid runs cong_avoid.
func (s *Sock) CongAvoid(ack, acked uint32) {
	C.cref_cong_avoid(C.__u32(s.algo), s.cconn(), s.p, s.t, C.__u32(ack), C.__u32(acked))
}

// LossSsthresh runs ssthresh.
func (s *Sock) LossSsthresh() uint32 {
	return uint32(C.cref_ssthresh(C.__u32(s.algo), s.cconn(), s.p, s.t))
}

// SetState runs set_state.
func (s *Sock) SetState(st uint8) {
	C.cref_set_state(C.__u32(s.algo), s.cconn(), s.p, s.t, C.__u8(st))
}

// PktsAcked runs pkts_acked with an RTT sample.
func (s *Sock) PktsAcked(rtt int32) { C.cref_pkts_acked(C.__u32(s.algo), s.p, C.__s32(rtt)) }

// CwndEvent runs cwnd_event.
func (s *Sock) CwndEvent(ev uint8) { C.cref_cwnd_event(C.__u32(s.algo), s.p, s.t, C.__u32(ev)) }

// Undo runs undo_cwnd.
func (s *Sock) Undo() uint32 { return uint32(C.cref_undo(s.t)) }

// Alpha is the coupling term in the subflow's slot, 2^-16.
func (s *Sock) Alpha() int32 {
	if c := s.cconn(); c != nil {
		return int32(c.slots[s.p.slot].alpha)
	}
	return 0
}

// Leave frees the subflow's slot (release); true if it was the last.
func (s *Sock) Leave() bool {
	c := s.cconn()
	if c == nil {
		return false
	}
	last := C.cref_leave(c, C.__u32(s.p.slot)) != 0
	s.p.slot = C.AMP_NO_SLOT
	return last
}

// PRRCwnd runs amp_prr_cwnd: the window of the proportional rate
// reduction after an ACK that delivered newly packets.
func PRRCwnd(ssthresh, inFlight, prior, delivered, out, newly uint32, newlyLost, unaAdvanced bool) uint32 {
	return uint32(C.cref_prr_cwnd(C.__u32(ssthresh), C.__u32(inFlight), C.__u32(prior), C.__u32(delivered),
		C.__u32(out), C.__u32(newly), cbool(newlyLost), cbool(unaAdvanced)))
}

// RestartCwnd runs amp_restart_cwnd.
func RestartCwnd(cwnd, init uint32, idle int32, rto uint32) uint32 {
	return uint32(C.cref_restart_cwnd(C.__u32(cwnd), C.__u32(init), C.__s32(idle), C.__u32(rto)))
}

// PacingRate runs amp_pacing_rate.
func PacingRate(mss, cwnd, ssthresh, packetsOut, srttUs8 uint32, maxRate uint64) uint64 {
	return uint64(C.cref_pacing_rate(C.__u32(mss), C.__u32(cwnd), C.__u32(ssthresh), C.__u32(packetsOut),
		C.__u32(srttUs8), C.__u64(maxRate)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
