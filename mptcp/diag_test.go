package mptcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readDiag reads a file of testdata/diag: the message and the two lines
// ss printed for the socket.
func readDiag(t *testing.T, name string) (msg []byte, ssAddrs, ssInfo string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", "diag", name))
	if err != nil {
		t.Fatal(err)
	}
	var ss []string
	for l := range strings.SplitSeq(string(text), "\n") {
		if _, rest, ok := strings.Cut(l, "# ss "); ok {
			_, v, _ := strings.Cut(rest, ": ")
			ss = append(ss, v)
		}
	}
	if len(ss) != 2 {
		t.Fatalf("%s: want two '# ss' lines", name)
	}
	return hexBytes(t, string(text)), ss[0], ss[1]
}

var ssField = regexp.MustCompile(`(?:^| )([a-z_]+):(\S+)`)

// ssFields reads ss's "key:value" fields.
func ssFields(s string) map[string]string {
	f := map[string]string{}
	for _, m := range ssField.FindAllStringSubmatch(s, -1) {
		if _, dup := f[m[1]]; !dup {
			f[m[1]] = m[2]
		}
	}
	return f
}

// ssMillis reads ss's milliseconds with microsecond decimals ("0.016").
func ssMillis(t *testing.T, v string) time.Duration {
	t.Helper()
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("ss value %q: %v", v, err)
	}
	return time.Duration(f*1000+0.5) * time.Microsecond
}

func ssUint(t *testing.T, v string, base int) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v, base, 64)
	if err != nil {
		t.Fatalf("ss value %q: %v", v, err)
	}
	return n
}

// TestParseDiagCaptured decodes the sock_diag messages of a connection
// and its subflows and compares them with what ss printed for them.
func TestParseDiagCaptured(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "diag", "tcp-*.hex"))
	if len(files) != 2 {
		t.Fatalf("want 2 subflow captures, have %v", files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			msg, addrs, info := readDiag(t, filepath.Base(file))
			s, ok, err := parseSubflow(msg)
			if err != nil || !ok {
				t.Fatalf("parseSubflow: ok %v, %v", ok, err)
			}
			if got := s.Local.String() + " " + s.Remote.String(); got != addrs {
				t.Errorf("addresses %s; ss %s", got, addrs)
			}
			f := ssFields(info)
			// token:<remote token>(id:<remote id>)/<local token>(id:<local id>)
			m := regexp.MustCompile(`token:\w+\(id:(\d+)\)/(\w+)\(id:(\d+)\)`).FindStringSubmatch(info)
			if m == nil {
				t.Fatalf("no token in %q", info)
			}
			check := func(name string, got, want any) {
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s = %v; ss says %v", name, got, want)
				}
			}
			check("RemoteID", s.RemoteID, m[1])
			check("Token", fmt.Sprintf("%x", s.Token), m[2])
			check("LocalID", s.LocalID, m[3])
			check("State", s.State, 1)
			rtt, rttvar, _ := strings.Cut(f["rtt"], "/")
			check("RTT", s.TCP.RTT, ssMillis(t, rtt))
			check("RTTVar", s.TCP.RTTVar, ssMillis(t, rttvar))
			check("MinRTT", s.TCP.MinRTT, ssMillis(t, f["minrtt"]))
			check("RTO", s.TCP.RTO, time.Duration(ssUint(t, f["rto"], 10))*time.Millisecond)
			for name, got := range map[string]uint64{
				"mss": uint64(s.TCP.SndMSS), "pmtu": uint64(s.TCP.PMTU), "rcvmss": uint64(s.TCP.RcvMSS),
				"advmss": uint64(s.TCP.AdvMSS), "cwnd": uint64(s.TCP.SndCwnd), "ssthresh": uint64(s.TCP.SndSsthresh),
				"bytes_sent": s.TCP.BytesSent, "bytes_acked": s.TCP.BytesAcked, "segs_out": uint64(s.TCP.SegsOut),
				"segs_in": uint64(s.TCP.SegsIn), "data_segs_out": uint64(s.TCP.DataSegsOut),
				"delivered": uint64(s.TCP.Delivered), "rcv_space": uint64(s.TCP.RcvSpace),
				"rcv_ssthresh": uint64(s.TCP.RcvSsthresh), "snd_wnd": uint64(s.TCP.SndWnd),
			} {
				check(name, got, ssUint(t, f[name], 10))
			}
			if s.TCP.Len != 280 {
				t.Errorf("tcp_info of %d bytes; the capture's kernel has 280", s.TCP.Len)
			}
		})
	}

	msg, addrs, info := readDiag(t, "mptcp-connection.hex")
	c, err := parseConnection(msg)
	if err != nil {
		t.Fatal(err)
	}
	f := ssFields(info)
	if got := c.Local.String() + " " + c.Remote.String(); got != addrs {
		t.Errorf("connection addresses %s; ss %s", got, addrs)
	}
	if fmt.Sprintf("%x", c.Token) != f["token"] || c.Listener || c.State != 1 ||
		c.Info.WriteSeq != ssUint(t, f["write_seq"], 16) || c.Info.SndUna != ssUint(t, f["snd_una"], 16) ||
		c.Info.RcvNxt != ssUint(t, f["rcv_nxt"], 16) || uint64(c.Info.Subflows) != ssUint(t, f["subflows"], 10) ||
		c.Info.Flags&InfoFlagRemoteKeyReceived == 0 || c.Info.Len != MPTCPInfoSize {
		t.Errorf("connection %+v; ss says %s", c, info)
	}
}

// TestParseDiagTruncated: every cut of a captured message fails with a
// *ParseError or decodes, never panics.
func TestParseDiagTruncated(t *testing.T) {
	for _, name := range []string{"tcp-subflow-0.hex", "tcp-subflow-2.hex", "mptcp-connection.hex"} {
		msg, _, _ := readDiag(t, name)
		for n := range len(msg) {
			_, _, err1 := parseSubflow(msg[:n])
			_, err2 := parseConnection(msg[:n])
			var pe *ParseError
			for _, err := range []error{err1, err2} {
				if err != nil && !errors.As(err, &pe) {
					t.Fatalf("%s cut at %d: %v", name, n, err)
				}
			}
		}
	}
	bad := make([]byte, inetDiagMsgLen)
	bad[0] = 99
	if _, err := parseConnection(bad); !errors.Is(err, ErrBadValue) {
		t.Errorf("family 99: %v; want ErrBadValue", err)
	}
}

func TestDiagRequest(t *testing.T) {
	// ss -M sends the protocol as INET_DIAG_REQ_PROTOCOL: 262 does not fit
	// the request's u8.
	b := diagRequest(unix.AF_INET6, ipprotoMPTCP)
	want := hexBytes(t, `
		0a 00 02 00 ffffffff        # family AF_INET6, protocol in the attribute, ext INFO, all states
		0000 0000                        # sockid: any source and destination port
		00000000000000000000000000000000 # any source address
		00000000000000000000000000000000 # any destination address
		00000000 0000000000000000        # any interface, no cookie
		08000300 06010000           # INET_DIAG_REQ_PROTOCOL 262
	`)
	if string(b) != string(want) {
		t.Fatalf("diagRequest(AF_INET6, MPTCP) = %x\nwant %x", b, want)
	}
	if b := diagRequest(unix.AF_INET, unix.IPPROTO_TCP); len(b) != inetDiagReqLen || b[1] != unix.IPPROTO_TCP {
		t.Fatalf("diagRequest(AF_INET, TCP) = %x", b)
	}
}

// TestParseInfoLengths: shorter structures (older kernels) leave the
// fields they lack zero, longer ones (newer kernels) are read as far as
// this package knows.
func TestParseInfoLengths(t *testing.T) {
	full := make([]byte, MPTCPInfoSize+16)
	for i := range full {
		full[i] = byte(i)
	}
	ne := binary.NativeEndian
	info := ParseInfo(full)
	if info.Token != ne.Uint32(full[12:]) || info.BytesAcked != ne.Uint64(full[72:]) ||
		info.LastAckRecv != time.Duration(ne.Uint32(full[92:]))*time.Millisecond || info.Len != len(full) {
		t.Fatalf("ParseInfo(112 bytes): %+v", info)
	}
	old := ParseInfo(full[:40]) // Linux 5.6: up to rcv_nxt
	if old.RcvNxt != ne.Uint64(full[32:]) || old.LocalAddrUsed != 0 || old.BytesSent != 0 || old.Len != 40 {
		t.Fatalf("ParseInfo(40 bytes): %+v", old)
	}
	tcp := make([]byte, 300)
	for i := range tcp {
		tcp[i] = byte(i)
	}
	ti := ParseTCPInfo(tcp)
	if ti.SndCwnd != ne.Uint32(tcp[80:]) || ti.BytesAcked != ne.Uint64(tcp[120:]) || ti.TotalRTO != ne.Uint16(tcp[240:]) ||
		ti.RTT != time.Duration(ne.Uint32(tcp[68:]))*time.Microsecond || ti.SndWScale != 6&0xf || ti.RcvWScale != 6>>4 {
		t.Fatalf("ParseTCPInfo(300 bytes): %+v", ti)
	}
	short := ParseTCPInfo(tcp[:104]) // before pacing_rate
	if short.TotalRetrans != ne.Uint32(tcp[100:]) || short.PacingRate != 0 || short.BytesAcked != 0 {
		t.Fatalf("ParseTCPInfo(104 bytes): %+v", short)
	}
	if (ParseTCPInfo(nil) != TCPInfo{}) {
		t.Fatal("ParseTCPInfo(nil) is not zero")
	}
}

// TestParseFullInfo decodes a struct mptcp_full_info as the kernel fills
// it: the sizes it wrote back, and arrays packed with them.
func TestParseFullInfo(t *testing.T) {
	ne := binary.NativeEndian
	const tcpSize, sfSize = 280, 264
	hdr := make([]byte, fullInfoMPTCPInfo+MPTCPInfoSize)
	ne.PutUint32(hdr[fullInfoSizeTCPInfoKernel:], tcpSize)
	ne.PutUint32(hdr[fullInfoSizeTCPInfoUser:], tcpSize)
	ne.PutUint32(hdr[fullInfoSizeSfInfoKernel:], sfSize)
	ne.PutUint32(hdr[fullInfoSizeSfInfoUser:], sfSize)
	ne.PutUint32(hdr[fullInfoNumSubflows:], 3) // one more than room
	ne.PutUint32(hdr[fullInfoSizeArraysUser:], 2)
	ne.PutUint32(hdr[fullInfoMPTCPInfo+12:], 0xc2d333ce) // token
	sf := make([]byte, 2*offerSfInfo)
	tcp := make([]byte, 2*offerTCPInfo)
	// Subflow 1: IPv4; subflow 2: IPv6, each packed at the kernel's size.
	sockaddr4 := func(b []byte, ip string, port uint16) {
		ne.PutUint16(b, unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], port)
		a := netip.MustParseAddr(ip).As4()
		copy(b[4:], a[:])
	}
	sockaddr6 := func(b []byte, ip string, port uint16) {
		ne.PutUint16(b, unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], port)
		a := netip.MustParseAddr(ip).As16()
		copy(b[8:], a[:])
	}
	ne.PutUint32(sf, 1)
	sockaddr4(sf[8:], "10.0.1.1", 52508)
	sockaddr4(sf[8+128:], "10.0.1.2", 5000)
	ne.PutUint32(sf[sfSize:], 2)
	sockaddr6(sf[sfSize+8:], "fd00:2::1", 40002)
	sockaddr6(sf[sfSize+8+128:], "::ffff:10.0.2.2", 5000)
	ne.PutUint32(tcp[80:], 10)         // subflow 1 cwnd
	ne.PutUint32(tcp[tcpSize+80:], 20) // subflow 2 cwnd, right after the first's 280 bytes
	fi, total, err := parseFullInfo(hdr, sf, tcp)
	if err != nil {
		t.Fatal(err)
	}
	want := []SubflowInfo{
		{ID: 1, Local: netip.MustParseAddrPort("10.0.1.1:52508"), Remote: netip.MustParseAddrPort("10.0.1.2:5000")},
		{ID: 2, Local: netip.MustParseAddrPort("[fd00:2::1]:40002"), Remote: netip.MustParseAddrPort("10.0.2.2:5000")},
	}
	if total != 3 || fi.Info.Token != 0xc2d333ce || len(fi.Subflows) != 2 {
		t.Fatalf("parseFullInfo: total %d, %+v", total, fi)
	}
	for i, w := range want {
		s := fi.Subflows[i]
		if s.ID != w.ID || s.Local != w.Local || s.Remote != w.Remote || s.TCP.SndCwnd != uint32(10*(i+1)) || s.TCP.Len != tcpSize {
			t.Errorf("subflow %d: %+v; want %+v with cwnd %d", i, s, w, 10*(i+1))
		}
	}
	if _, _, err := parseFullInfo(hdr[:20], sf, tcp); !errors.Is(err, ErrTruncated) {
		t.Errorf("short header: %v; want ErrTruncated", err)
	}
	ne.PutUint32(hdr[fullInfoSizeTCPInfoUser:], offerTCPInfo+1)
	if _, _, err := parseFullInfo(hdr, sf, tcp); !errors.Is(err, ErrBadValue) {
		t.Errorf("tcp_info larger than offered: %v; want ErrBadValue", err)
	}
}
