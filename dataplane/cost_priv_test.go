package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

// What each program costs per packet, as the kernel times it
// (BPF_PROG_TEST_RUN): go test -run '^$' -bench . ./dataplane (as root).
//
// Every run gets a fresh copy of the packet, because the programs change
// it (a repeat count would run the ETR on what it decapsulated). The
// kernel times each run alone; a benchmark reports the typical time over
// b.N runs (ns/pkt), that of a reference program run in turns with it on
// the same packet (ref-ns/pkt: one bpf_skb_load_bytes of the headers the
// program reads, then TC_ACT_OK), and their difference (net-ns/pkt):
// what the routing costs above reading the headers, which the machine's
// noise and the test run's own timing (about 100 ns here) leave alone.
//
// What test runs cannot show: BPF_PROG_TEST_RUN builds a linear skb of
// at most a page that nobody else holds, where TCP hands the ITR 64 KB
// GSO packets with paged data and a cloned head, which
// bpf_skb_adjust_room copies (gso_size in the context makes no GSO
// packet: its gso_type stays 0, which bpf_skb_adjust_room refuses). A
// redirect is only a verdict here: the transmit is not counted. And each
// run finds the maps, the route and the headers in the cache.

// A costCase is one packet through one program.
type costCase struct {
	name    string
	prog    func(*rig) *ebpf.Program
	ifindex func(*rig) int
	frame   []byte
	headers int // bytes after the Ethernet header the program parses
	verdict uint32
}

// segments are the TCP segments measured by their payload: a bare ACK,
// a small segment and a full one (an inner packet of the overlay's MTU,
// 1464 bytes: 1500 less 36 of encapsulation).
var segments = []struct {
	name    string
	payload func(headers int) int
}{
	{"ack", func(int) int { return 0 }},
	{"64B", func(int) int { return 64 }},
	{"full", func(headers int) int { return 1464 - headers }},
}

// tsOption is the timestamp option that Linux puts on every segment.
func tsOption() []byte { return []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2} }

// dssOption is the DSS option of an MPTCP data segment: an 8-byte data
// ACK and an 8-byte data sequence mapping.
func dssOption(n int) []byte {
	b := []byte{30, 28, 0x20, 0x0f}
	b = binary.BigEndian.AppendUint64(b, 1000)         // data ACK
	b = binary.BigEndian.AppendUint64(b, 5000)         // data sequence number
	b = binary.BigEndian.AppendUint32(b, 1)            // subflow sequence number
	return binary.BigEndian.AppendUint16(b, uint16(n)) // data-level length
}

// dataSegment is a TCP data segment (of an MPTCP subflow with a DSS
// option, or of plain TCP) with n bytes of payload.
func dataSegment(mptcp bool, n int) tcpSeg {
	opts := tsOption()
	if mptcp {
		opts = append(opts, dssOption(n)...)
	}
	return tcpSeg{flags: ack, seq: 1, options: opts, payload: make([]byte, n)}
}

func tcpHeaders(mptcp bool) int {
	if mptcp {
		return 20 + 20 + 12 + 28
	}
	return 20 + 20 + 12
}

func BenchmarkITR(b *testing.B) {
	r := xtrRig(b)
	r.benchmark(b, xtrCases(func(mptcp bool, local netip.AddrPort, seg tcpSeg) costCase {
		return costCase{
			prog:    func(r *rig) *ebpf.Program { return r.dp.objs.Itr },
			ifindex: func(r *rig) int { return r.eid },
			frame:   eth(r.ethOf(r.eid), hostMAC, ethIPv4, tcp(local, hostB, 64, seg)),
			verdict: actRedirect,
		}
	}))
	if subs := r.subflows(); len(subs) != 1 || subs[0].Packets <= 2 {
		b.Errorf("the MPTCP segments were not counted on their subflow: %+v", subs)
	}
}

func BenchmarkETR(b *testing.B) {
	r := xtrRig(b)
	r.benchmark(b, xtrCases(func(mptcp bool, local netip.AddrPort, seg tcpSeg) costCase {
		return costCase{
			prog:    func(r *rig) *ebpf.Program { return r.dp.objs.Underlay },
			ifindex: func(r *rig) int { return r.rloc },
			frame: eth(r.rlocMAC, nextHopMAC, ethIPv4,
				encapsulated(rlocA, ourV4, 64, lisp.DataHeader{NoncePresent: true, Nonce: 1}, tcp(hostB, local, 64, seg))),
			headers: 36,
			verdict: actOK,
		}
	}))
}

// xtrRig is the data plane of an xTR whose site is 10.1.0.0/24, with a
// map-cache entry of two paths for 10.2.0.0/16 and an MPTCP subflow from
// port 40000 of hostA to hostB.
func xtrRig(b *testing.B) *rig {
	r := newRig(b, config.Dataplane{}, Options{})
	r.put("10.1.0.0/24", Entry{Action: NativelyForward})
	r.put("10.2.0.0/16", twoPaths(true))
	r.itrTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	r.itrTCP(port(40000), tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)})
	return r
}

// xtrCases are the segments of plain TCP (from port 40001 of hostA) and
// of xtrRig's MPTCP subflow, as cases that mk makes of hostA's port
// and the segment; the headers the case reads are added to its own.
func xtrCases(mk func(mptcp bool, local netip.AddrPort, seg tcpSeg) costCase) []costCase {
	var cases []costCase
	for _, mptcp := range []bool{false, true} {
		local := port(40001)
		if mptcp {
			local = port(40000)
		}
		for _, s := range segments {
			c := mk(mptcp, local, dataSegment(mptcp, s.payload(tcpHeaders(mptcp))))
			c.name = fmt.Sprintf("%s/%s", kind(mptcp), s.name)
			c.headers += tcpHeaders(mptcp)
			cases = append(cases, c)
		}
	}
	return cases
}

func BenchmarkRTR(b *testing.B) {
	r := newRig(b, config.Dataplane{EIDInterfaces: []string{}}, Options{RTR: true})
	r.put("10.2.0.0/16", Entry{Paths: []Path{
		elp(1, 50, "198.51.100.11", "203.0.113.21", "203.0.113.1"),
		elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20", "203.0.113.1"),
	}})
	hdr := lisp.DataHeader{NoncePresent: true, Nonce: 1}
	hdr.SetPathID(2)
	var cases []costCase
	for _, s := range segments {
		inner := tcp(hostA, hostB, 64, dataSegment(false, s.payload(tcpHeaders(false))))
		cases = append(cases, costCase{
			name:    "tcp/" + s.name,
			prog:    func(r *rig) *ebpf.Program { return r.dp.objs.Underlay },
			ifindex: func(r *rig) int { return r.rloc },
			frame: eth(r.rlocMAC, nextHopMAC, ethIPv4,
				encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 64, hdr, inner)),
			headers: 36 + tcpHeaders(false),
			verdict: actRedirect,
		})
	}
	r.benchmark(b, cases)
}

func kind(mptcp bool) string {
	if mptcp {
		return "mptcp"
	}
	return "tcp"
}

// benchmark runs each case as a sub-benchmark.
func (r *rig) benchmark(b *testing.B, cases []costCase) {
	for _, c := range cases {
		ref := referenceProgram(b, c.headers)
		ctx := skbContext(c.ifindex(r))
		b.Run(c.name, func(b *testing.B) {
			prog, refs := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			err := r.ns.Do(func() error {
				for range b.N {
					v, d, err := testRun(c.prog(r), c.frame, ctx)
					if err != nil {
						return err
					}
					if v != c.verdict {
						return fmt.Errorf("verdict %d, want %d; counters %v", v, c.verdict, nonZero(r.counters()))
					}
					prog = append(prog, d)
					if _, d, err = testRun(ref, c.frame, ctx); err != nil {
						return err
					}
					refs = append(refs, d)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			p, q := typical(prog), typical(refs)
			b.ReportMetric(p, "ns/pkt")
			b.ReportMetric(q, "ref-ns/pkt")
			b.ReportMetric(p-q, "net-ns/pkt")
		})
	}
}

// typical is the mean of the middle 80 % of the times, in ns: the
// kernel's clock counts in steps of about 10 ns here, and the machine's
// other work interrupts some runs.
func typical(d []time.Duration) float64 {
	slices.Sort(d)
	mid := d[len(d)/10 : len(d)-len(d)/10]
	var sum time.Duration
	for _, x := range mid {
		sum += x
	}
	return float64(sum) / float64(len(mid))
}

// referenceProgram is a tc program that reads n bytes of headers after
// the Ethernet header with one bpf_skb_load_bytes and lets the packet
// pass: the least a program that routes by the headers does.
func referenceProgram(b *testing.B, n int) *ebpf.Program {
	b.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SchedCLS,
		License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R2, 14),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, -int32(n)),
			asm.Mov.Imm(asm.R4, int32(n)),
			asm.FnSkbLoadBytes.Call(),
			asm.Mov.Imm(asm.R0, actOK),
			asm.Return(),
		},
	})
	if err != nil {
		b.Fatalf("reference program: %v", err)
	}
	b.Cleanup(func() { prog.Close() })
	return prog
}

// skbContext is a struct __sk_buff for BPF_PROG_TEST_RUN: the packet
// comes in on ifindex.
func skbContext(ifindex int) []byte {
	ctx := make([]byte, 48) // up to ifindex
	binary.NativeEndian.PutUint32(ctx[40:], uint32(ifindex))
	return ctx
}

// progRunAttr is union bpf_attr for BPF_PROG_TEST_RUN.
type progRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// testRun runs prog once on a copy of frame and returns its verdict and
// the time the kernel measured. cilium/ebpf's Program.Benchmark returns
// the time but takes no context, which the programs need for the
// interface the packet came in on; Program.Run takes one but returns no
// time.
func testRun(prog *ebpf.Program, frame, ctx []byte) (uint32, time.Duration, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&frame[0])
	pin.Pin(&ctx[0])
	attr := progRunAttr{
		progFD:     uint32(prog.FD()),
		dataSizeIn: uint32(len(frame)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&frame[0]))),
		repeat:     1,
		ctxSizeIn:  uint32(len(ctx)),
		ctxIn:      uint64(uintptr(unsafe.Pointer(&ctx[0]))),
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
		}
		return attr.retval, time.Duration(attr.duration), nil
	}
}
