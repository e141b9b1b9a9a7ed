package cc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/mptcp"
)

// fastPath is a client and a server joined by two veth links (no
// emulation: as fast as the CPU). With two, the client's MPTCP
// connections get a second subflow over the second link.
type fastPath struct {
	cli, srv *testnet.Node
	port     int
}

func newFastPath(b *testing.B, subflows int) *fastPath {
	b.Helper()
	n := testnet.New(b)
	fp := &fastPath{cli: n.Node("cli"), srv: n.Node("srv"), port: 6000}
	n.Link(fp.cli, fp.srv, "10.79.1.1/24", "10.79.1.2/24")
	n.Link(fp.cli, fp.srv, "10.79.2.1/24", "10.79.2.2/24")
	for _, nd := range []*testnet.Node{fp.cli, fp.srv} {
		nd.SetSysctl("net.ipv4.tcp_congestion_control", "reno")
		var c *mptcp.Client
		if err := nd.Do(func() (err error) { c, err = mptcp.Dial(); return err }); err != nil {
			b.Fatal(err)
		}
		if err := c.SetLimits(mptcp.Limits{Subflows: 8, AddAddrAccepted: 8}); err != nil {
			b.Fatal(err)
		}
		if nd == fp.cli && subflows == 2 {
			// The second subflow goes from the second address to the
			// server's first, over the second link.
			if err := c.AddEndpoint(mptcp.Addr{ID: 2, IP: netip.MustParseAddr("10.79.2.1"), Flags: mptcp.FlagSubflow}); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
	}
	return fp
}

// transfer sends for d over MPTCP with congestion control cc and returns
// the goodput in Gbit/s.
func (fp *fastPath) transfer(b *testing.B, cc string, d time.Duration) float64 {
	b.Helper()
	fp.port++
	addr := fmt.Sprintf("10.79.1.2:%d", fp.port)
	var ln net.Listener
	if err := fp.srv.Do(func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) })
		return serr
	}}
	dialer.SetMultipathTCP(true)
	var conn net.Conn
	if err := fp.cli.Do(func() (err error) { conn, err = dialer.DialContext(context.Background(), "tcp4", addr); return err }); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
	n := <-got
	return float64(n) * 8 / time.Since(start).Seconds() / 1e9
}

// BenchmarkPerACK measures what each congestion control costs per ACK in
// the kernel: the BPF run time of the callbacks it calls on ACKs
// (cong_control, and wVegas's pkts_acked; cong_avoid for amp_reno) per ACK
// over a 2-subflow MPTCP connection, against amp_reno, the BPF wrapper of
// the kernel's Reno, in the same run.
//
// It registers each control for the run, or, when another process holds
// it registered, measures the registered version (the one the sockets
// get by name): either way it reads the run time of every loaded program
// of the control's name, before and after, so that other sockets of the
// machine that run the control during the benchmark count too (a
// "shared" metric of 1 says so).
//
//	go test -run '^$' -bench PerACK ./cc
func BenchmarkPerACK(b *testing.B) {
	requireStructOps(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable BPF run-time stats: %v", err)
	}
	defer stats.Close()
	fp := newFastPath(b, 2)
	for _, name := range []string{Reno, LIA, OLIA, BALIA, WVegas} {
		b.Run(name, func(b *testing.B) {
			shared := 0.0
			r, err := Load(name)
			switch {
			case errors.Is(err, ErrRegistered):
				shared = 1
			case err != nil:
				b.Fatal(err)
			default:
				defer r.Close()
			}
			acks0, runtime0 := perACKStats(b, name)
			var gbps float64
			for b.Loop() {
				gbps += fp.transfer(b, name, time.Second)
			}
			acks1, runtime1 := perACKStats(b, name)
			if acks := acks1 - acks0; acks > 0 {
				b.ReportMetric(float64((runtime1-runtime0).Nanoseconds())/float64(acks), "ns/ack")
			}
			b.ReportMetric(gbps/float64(b.N), "Gbit/s")
			b.ReportMetric(shared, "shared")
		})
	}
}

// perACKStats sums, over the loaded programs of congestion control name
// (every version the kernel holds), the ACKs (the runs of cong_control, or
// of cong_avoid for a control without it) and the run time of the
// callbacks that run on ACKs: cong_control, cong_avoid and pkts_acked. The
// kernel cuts program names to 15 characters: wvegas_pkts_acked is
// "wvegas_pkts_ack", wvegas_cong_control "wvegas_cong_con".
func perACKStats(b *testing.B, name string) (acks uint64, runtime time.Duration) {
	b.Helper()
	prefix := short(name) + "_"
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return acks, runtime
		}
		if err != nil {
			b.Fatalf("list BPF programs: %v", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // freed meanwhile
		}
		info, err := p.Info()
		if err == nil && info.Type == ebpf.StructOps && strings.HasPrefix(info.Name, prefix) {
			if st, err := p.Stats(); err == nil {
				rest := strings.TrimPrefix(info.Name, prefix)
				ack := rest == "cong_avoid" || strings.HasPrefix(rest, "cong_con")
				if ack {
					acks += st.RunCount
				}
				if ack || strings.HasPrefix(rest, "pkts_ack") {
					runtime += st.Runtime
				}
			}
		}
		p.Close()
	}
}

// BenchmarkFastPath measures the goodput of one MPTCP subflow over a veth
// link, where the CPU is the bottleneck, with each congestion control
// against the kernel's cubic and Reno in the same run.
//
//	go test -run '^$' -bench FastPath ./cc
func BenchmarkFastPath(b *testing.B) {
	requireStructOps(b)
	fp := newFastPath(b, 1)
	for _, name := range []string{"cubic", "reno", Reno, LIA, OLIA, BALIA, WVegas} {
		b.Run(name, func(b *testing.B) {
			if Is(name) {
				// Another process's registration serves as well.
				r, err := Load(name)
				if err != nil && !errors.Is(err, ErrRegistered) {
					b.Fatal(err)
				}
				if err == nil {
					defer r.Close()
				}
			}
			var gbps float64
			for b.Loop() {
				gbps += fp.transfer(b, name, time.Second)
			}
			b.ReportMetric(gbps/float64(b.N), "Gbit/s")
		})
	}
}
