package lisp_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/inet"
	"github.com/amptcp/amptcp/internal/pcap"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lisp"
)

// A real peer checks our encoder: tshark (Debian's, 4.0) decodes the
// messages and data headers we write into a capture, on UDP 4342 and
// 4341, and we compare its field values with what we meant to send.

var (
	ctlSrc  = netip.MustParseAddrPort("192.0.2.1:61000")
	ctlDst  = netip.MustParseAddrPort("192.0.2.2:4342")
	dataSrc = netip.MustParseAddrPort("192.0.2.1:50123")
	dataDst = netip.MustParseAddrPort("192.0.2.2:4341")
)

type tsharkCase struct {
	name string
	// msg is a control message to send on UDP 4342, or data a data header
	// to send on UDP 4341 in front of an inner IPv4 datagram.
	msg  lisp.Message
	key  string // sign msg with this key
	data *lisp.DataHeader
	// want lists, for each tshark field named, all its values in the
	// packet in order. Fields not named are not checked.
	want map[string][]string
	// undissected is the LCAF type, if any, that Wireshark 4.0 leaves
	// undissected ("Not dissected yet"), checked byte by byte instead.
	undissected lisp.LCAFType
}

func tsharkCases() []tsharkCase {
	elp := &lisp.ELP{Hops: []lisp.ELPHop{
		{Address: ip("192.0.2.10"), RLOCProbe: true},
		{Address: ip("192.0.2.20"), Lookup: true, Strict: true},
		{Address: ip("198.51.100.1")},
	}}
	elp6 := &lisp.ELP{Hops: []lisp.ELPHop{{Address: ip("2001:db8::a"), Strict: true}, {Address: ip("2001:db8::b")}}}
	lcafRecord := lisp.MapRecord{
		TTL: 60, MaskLen: 0,
		EID: lcaf(&lisp.InstanceID{IID: 7, Address: lcaf(&lisp.SourceDest{
			SourceMaskLen: 24, DestMaskLen: 16, Source: ip("10.1.1.0"), Dest: ip("10.2.0.0"),
		})}),
		Locators: []lisp.Locator{
			rloc(1, 10, "R", lcaf(&lisp.ASNumber{AS: 65001, Address: ip("192.0.2.31")})),
			rloc(1, 10, "R", lcaf(&lisp.ReplicationList{Entries: []lisp.RLEEntry{
				{Level: 0, Address: ip("192.0.2.41")}, {Level: 1, Address: ip("192.0.2.42")},
			}})),
			rloc(1, 10, "R", lcaf(&lisp.KeyValue{Key: ip("192.0.2.51"), Value: ip("192.0.2.52")})),
			rloc(1, 10, "R", lcaf(&lisp.NATTraversal{
				MSPort: 4342, ETRPort: 50000, GlobalETR: ip("203.0.113.5"), MS: ip("192.0.2.1"),
				PrivateETR: ip("10.0.0.2"), RTRs: []lisp.Address{ip("198.51.100.9"), ip("198.51.100.10")},
			})),
			rloc(1, 10, "R", lcaf(&lisp.AFIList{Addresses: []lisp.Address{ip("192.0.2.61"), ip("2001:db8::61")}})),
		},
	}
	inner := func(src, dst string) *lisp.MapRequest {
		return &lisp.MapRequest{
			Nonce: 0x1122334455667788, SourceEID: ip(src),
			ITRRLOCs: []lisp.Address{ip(src)},
			Records:  []lisp.RequestRecord{{EID: ip(dst), MaskLen: uint8(map[bool]int{true: 32, false: 128}[strings.Contains(dst, ".")])}},
		}
	}
	return []tsharkCase{
		{
			name: "Map-Request with every flag tshark knows", msg: messageVectors["msg-map-request-flags"],
			want: map[string][]string{
				"lisp.type": {"1"}, "lisp.mreq.flags.auth": {"1"}, "lisp.mreq.flags.mrp": {"0"},
				"lisp.mreq.flags.probe": {"1"}, "lisp.mreq.flags.smr": {"1"}, "lisp.mreq.flags.pitr": {"1"},
				"lisp.mreq.flags.smri": {"1"},
				// To Wireshark 4.0, R I Rsvd L D are reserved bits (mask 0x003fe0 of
				// the first three bytes, shown shifted down): L and D are the low two.
				"lisp.mreq.res": {"0x000003"},
				"lisp.irc":      {"1"}, "lisp.records": {"2"}, "lisp.nonce": {"0xfedcba9876543210"},
				"lisp.mreq.srceid.afi":   {"0"},
				"lisp.mreq.itr_rloc.afi": {"2", "1"}, "lisp.mreq.itr_rloc_ipv6": {"2001:db8::1"},
				"lisp.mreq.itr_rloc_ipv4":        {"198.51.100.1"},
				"lisp.mreq.record.prefix.length": {"32", "48"},
				"lisp.mreq.record.prefix.ipv4":   {"10.0.0.5"},
				"lisp.mreq.record.prefix.ipv6":   {"2001:db8:1::"},
				"lisp.mreq.record.prefix.afi":    {"1", "2"},
			},
		},
		{
			name: "RLOC-probe Map-Request with its Map-Reply record", msg: messageVectors["msg-map-request-probe"],
			want: map[string][]string{
				"lisp.mreq.flags.mrp": {"1"}, "lisp.mreq.flags.probe": {"1"}, "lisp.irc": {"0"},
				"lisp.mreq.srceid.ipv4": {"10.1.0.1"}, "lisp.mapping.ttl": {"1440"},
				"lisp.mapping.loccnt": {"1"}, "lisp.mapping.eid.masklen": {"24"}, "lisp.mapping.auth": {"1"},
				"lisp.mapping.ver": {"7"}, "lisp.mapping.eid.ipv4": {"10.1.0.0"},
				"lisp.loc.priority": {"1"}, "lisp.loc.weight": {"100"}, "lisp.loc.flags.local": {"1"},
				"lisp.loc.flags.reach": {"1"}, "lisp.loc.locator": {"192.0.2.1"},
			},
		},
		{
			name: "Map-Request for an Application Data EID", msg: messageVectors["msg-map-request-appdata"],
			want: map[string][]string{
				"lisp.mreq.record.prefix.afi": {"16387"}, "lisp.lcaf.type": {"4"}, "lisp.lcaf.length": {"18"},
			},
			undissected: lisp.LCAFAppData,
		},
		{
			name: "Map-Reply with IPv4 and IPv6 locators", msg: messageVectors["msg-map-reply"],
			want: map[string][]string{
				"lisp.type": {"2"}, "lisp.mrep.flags.probe": {"0"}, "lisp.mrep.flags.enlr": {"1"},
				"lisp.mrep.flags.sec": {"0"}, "lisp.records": {"1"}, "lisp.mapping.loccnt": {"3"},
				"lisp.mapping.eid.masklen": {"16"}, "lisp.mapping.ver": {"291"},
				"lisp.mapping.eid.ipv4": {"10.1.0.0"},
				"lisp.loc.priority":     {"1", "1", "2"}, "lisp.loc.weight": {"50", "50", "100"},
				"lisp.loc.multicast_priority": {"255", "255", "255"},
				"lisp.loc.flags.local":        {"0", "1", "0"}, "lisp.loc.flags.reach": {"1", "1", "0"},
				"lisp.loc.afi":     {"1", "1", "2"},
				"lisp.loc.locator": {"192.0.2.1", "198.51.100.1", "2001:db8::2"},
			},
		},
		{
			name: "negative Map-Reply", msg: messageVectors["msg-map-reply-negative"],
			want: map[string][]string{
				"lisp.mapping.loccnt": {"0"}, "lisp.mapping.act": {"2"}, "lisp.mapping.ttl": {"15"},
				"lisp.mapping.eid.masklen": {"8"}, "lisp.mapping.eid.ipv4": {"10.0.0.0"},
			},
		},
		{
			name: "Map-Reply with ELPs, in an AFI List and alone",
			msg: &lisp.MapReply{Probe: true, Nonce: 9, Records: []lisp.MapRecord{{
				TTL: 1440, MaskLen: 16, Authoritative: true,
				EID: lcaf(&lisp.InstanceID{IID: 1000, Address: ip("10.2.0.0")}),
				Locators: []lisp.Locator{
					rloc(1, 50, "R", lcaf(&lisp.AFIList{Addresses: []lisp.Address{ip("198.51.100.2"), lcaf(elp)}})),
					rloc(2, 50, "R", lcaf(elp6)),
				},
			}}},
			want: map[string][]string{
				"lisp.mrep.flags.probe": {"1"}, "lisp.mapping.eid.afi": {"16387"},
				"lisp.lcaf.type": {"2", "1", "10", "10"},
				"lisp.lcaf.iid":  {"1000"}, "lisp.lcaf.iid.ipv4": {"10.2.0.0"},
				"lisp.lcaf.afi_list.ipv4":        {"198.51.100.2"},
				"lisp.lcaf.elp_hop.ipv4":         {"192.0.2.10", "192.0.2.20", "198.51.100.1"},
				"lisp.lcaf.elp_hop.ipv6":         {"2001:db8::a", "2001:db8::b"},
				"lisp.lcaf.elp_hop.flags.local":  {"0", "1", "0", "0", "0"},
				"lisp.lcaf.elp_hop.flags.probe":  {"1", "0", "0", "0", "0"},
				"lisp.lcaf_elp_hop.flags.strict": {"0", "1", "0", "1", "0"},
				"lisp.loc.priority":              {"1", "2"},
			},
		},
		{
			name: "Map-Reply with the other LCAF types Wireshark dissects",
			msg: &lisp.MapReply{Nonce: 10, Records: []lisp.MapRecord{lcafRecord, {
				TTL: 60, EID: lisp.NameAddress("site-a.example"),
				Locators: []lisp.Locator{rloc(1, 100, "R", ip("192.0.2.71"))},
			}}},
			want: map[string][]string{
				"lisp.lcaf.type":               {"2", "12", "3", "13", "15", "7", "1"},
				"lisp.lcaf.iid":                {"7"},
				"lisp.lcaf.srcdst.src.masklen": {"24"}, "lisp.lcaf.srcdst.dst.masklen": {"16"},
				"lisp.lcaf.srcdst.src.ipv4": {"10.1.1.0"}, "lisp.lcaf.srcdst.dst.ipv4": {"10.2.0.0"},
				"lisp.lcaf.asn": {"65001"}, "lisp.lcaf.asn.ipv4": {"192.0.2.31"},
				"lisp.lcaf.rle_entry.level": {"0", "1"},
				"lisp.lcaf.rle_entry.ipv4":  {"192.0.2.41", "192.0.2.42"},
				"lisp.lcaf.kv_key.ipv4":     {"192.0.2.51"}, "lisp.lcaf.kv_value.ipv4": {"192.0.2.52"},
				"lisp.lcaf.natt.msport": {"4342"}, "lisp.lcaf.natt.etrport": {"50000"},
				"lisp.lcaf.natt.rloc.ipv4": {"203.0.113.5", "192.0.2.1", "10.0.0.2", "198.51.100.9", "198.51.100.10"},
				"lisp.lcaf.afi_list.ipv4":  {"192.0.2.61"}, "lisp.lcaf.afi_list.ipv6": {"2001:db8::61"},
				"lisp.mapping.eid.dn": {"site-a.example"},
			},
		},
		{
			name: "authenticated Map-Register with xTR-ID", key: "amptcp-site-key",
			msg: messageVectors["msg-map-register"],
			want: map[string][]string{
				"lisp.type": {"3"}, "lisp.mreg.flags.pmr": {"1"}, "lisp.mreg.flags.sec": {"0"},
				"lisp.mreg.flags.xtrid": {"1"}, "lisp.mreg.flags.wmn": {"1"},
				// Wireshark reads Key ID and Algorithm ID as one 16-bit Key ID (RFC 6833).
				"lisp.keyid": {"0x0002"}, "lisp.authlen": {"32"},
				"lisp.auth":             {colonHex(vectorAuth("msg-map-register"))},
				"lisp.xtrid":            {"01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10"},
				"lisp.siteid":           {"00:00:00:00:00:00:00:01"},
				"lisp.mapping.eid.ipv4": {"10.1.0.0"}, "lisp.loc.locator": {"192.0.2.1", "198.51.100.1"},
			},
		},
		{
			name: "Map-Register with the E, T, a and m bits", key: "sha1-key",
			msg: messageVectors["msg-map-register-sha1"],
			want: map[string][]string{
				"lisp.mreg.flags.sec": {"1"},
				// E, T, a and m are the low four of Wireshark 4.0's reserved bits
				// (mask 0x00fffe, shown shifted down).
				"lisp.mreg.res": {"0x00000f"},
				"lisp.keyid":    {"0x0301"}, "lisp.authlen": {"20"},
				"lisp.mapping.eid.ipv6": {"2001:db8:1::"}, "lisp.mapping.ttl": {"3"},
			},
		},
		{
			name: "Map-Notify", key: "amptcp-site-key", msg: messageVectors["msg-map-notify"],
			want: map[string][]string{
				"lisp.type": {"4"}, "lisp.mnot.flags.xtrid": {"1"}, "lisp.mnot.flags.rtr": {"0"},
				"lisp.nonce": {"0x5a5a5a5a00000001"}, "lisp.authlen": {"32"},
				"lisp.auth":  {colonHex(vectorAuth("msg-map-notify"))},
				"lisp.xtrid": {"01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10"},
			},
		},
		{
			// Wireshark 4.0 does not dissect type 5 beyond its type.
			name: "Map-Notify-Ack", key: "amptcp-site-key", msg: messageVectors["msg-map-notify-ack"],
			want: map[string][]string{"lisp.type": {"5"}},
		},
		{
			name: "ECM with an IPv4 Map-Request",
			msg: &lisp.ECM{
				ToMS: true, TTL: 64, Message: inner("10.1.0.1", "10.2.0.1"),
				Source: netip.MustParseAddrPort("10.1.0.1:61001"), Destination: netip.MustParseAddrPort("10.2.0.1:4342"),
			},
			want: map[string][]string{
				"lisp.type": {"8", "1"}, "lisp.ecm.flags.sec": {"0"}, "lisp.ecm.flags.ddt": {"0"},
				// E and M are reserved to Wireshark 4.0; M is 0x01000000.
				"lisp.ecm.res": {"0x01000000"},
				"ip.src":       {"192.0.2.1", "10.1.0.1"}, "ip.dst": {"192.0.2.2", "10.2.0.1"},
				"udp.srcport": {"61000", "61001"}, "udp.dstport": {"4342", "4342"},
				"ip.checksum.status":           {"1", "1"},
				"lisp.mreq.record.prefix.ipv4": {"10.2.0.1"},
			},
		},
		{
			name: "ECM with an IPv6 Map-Request, to the ETR", msg: messageVectors["msg-ecm-ipv6"],
			want: map[string][]string{
				"lisp.type": {"8", "1"}, "lisp.ecm.res": {"0x02000000"},
				"ipv6.src": {"2001:db8::1"}, "ipv6.dst": {"2001:db8:2::1"},
				"ipv6.hlim":                    {"64"},
				"lisp.mreq.record.prefix.ipv6": {"2001:db8:2::1"},
			},
		},
		{
			name: "Map-Referral", msg: messageVectors["msg-map-referral"],
			want: map[string][]string{
				"lisp.type": {"6"}, "lisp.records": {"2"}, "lisp.mapping.ttl": {"1440", "15"},
				"lisp.mapping.act": {"0", "3"}, "lisp.mapping.auth": {"1", "1"},
				"lisp.referral.incomplete": {"0", "1"}, "lisp.referral.sigcnt": {"0", "1"},
				"lisp.mapping.eid.ipv4": {"10.0.0.0", "10.9.0.0"},
				"lisp.loc.locator":      {"192.0.2.50", "192.0.2.51"},
			},
		},
		{
			name: "data header with nonce, instance ID and LSBs", data: ptr(dataVectors["data-nonce-iid"]),
			want: map[string][]string{
				"lisp-data.flags.nonce": {"1"}, "lisp-data.flags.lsb": {"1"}, "lisp-data.flags.iid": {"1"},
				"lisp-data.flags.mv": {"0"}, "lisp-data.nonce": {"11259375"},
				"lisp-data.iid": {"1000"}, "lisp-data.lsb8": {"0x03"},
				"ip.src": {"192.0.2.1", "10.1.0.1"},
			},
		},
		{
			name: "data header with map-versions", data: ptr(dataVectors["data-map-version"]),
			want: map[string][]string{
				"lisp-data.flags.mv": {"1"}, "lisp-data.srcmapver": {"291"}, "lisp-data.dstmapver": {"1110"},
				"lisp-data.iid": {"16777215"},
			},
		},
		{
			name: "data header with 32 LSBs", data: ptr(dataVectors["data-lsbs"]),
			want: map[string][]string{
				"lisp-data.flags.lsb": {"1"}, "lisp-data.flags.iid": {"0"}, "lisp-data.lsb": {"0x00000005"},
			},
		},
		{
			name: "data header asking for an echo, key 1", data: ptr(dataVectors["data-echo-key"]),
			want: map[string][]string{
				"lisp-data.flags.nonce": {"1"}, "lisp-data.flags.enr": {"1"},
				// Wireshark 4.0 shows R and KK as reserved bits: KK=01.
				"lisp-data.flags.res": {"0x01"},
				"lisp-data.nonce":     {"1"},
			},
		},
		{
			// Wireshark 4.0 knows no LISP-GPE: it takes the P bit for a
			// reserved one and still finds the IPv4 packet behind it, as
			// an ETR of RFC 9300 does.
			name: "LISP-GPE data header, IPv4", data: ptr(dataVectors["data-gpe-ipv4"]),
			want: map[string][]string{
				"lisp-data.flags.nonce": {"0"}, "lisp-data.flags.iid": {"1"}, "lisp-data.flags.res": {"0x04"},
				"lisp-data.iid": {"7"}, "ip.src": {"192.0.2.1", "10.1.0.1"}, "udp.dstport": {"4341", "9"},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func colonHex(b []byte) string {
	s := make([]string, len(b))
	for i, c := range b {
		s[i] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(s, ":")
}

// innerDatagram is what the data packets encapsulate: UDP 10.1.0.1 to
// 10.2.0.1.
func innerDatagram(t *testing.T) []byte {
	pkt := append(make([]byte, inet.HeaderLen(netip.MustParseAddr("10.1.0.1"))), "amptcp"...)
	err := inet.PutUDP(pkt, netip.MustParseAddrPort("10.1.0.1:5001"), netip.MustParseAddrPort("10.2.0.1:9"), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pkt
}

func TestTsharkDecodesOurEncoding(t *testing.T) {
	tshark := testenv.RequireTool(t, "tshark")
	cases := tsharkCases()
	path := filepath.Join(t.TempDir(), "lisp.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	encoded := make([][]byte, len(cases))
	for i, tc := range cases {
		var payload []byte
		if tc.data != nil {
			payload, err = tc.data.AppendBinary(nil)
			payload = append(payload, innerDatagram(t)...)
		} else if tc.key != "" {
			payload, err = tc.msg.(interface {
				AppendSigned(b, key []byte) ([]byte, error)
			}).AppendSigned(nil, []byte(tc.key))
		} else {
			payload, err = tc.msg.AppendBinary(nil)
		}
		if err != nil {
			t.Fatalf("%s: encode: %v", tc.name, err)
		}
		encoded[i] = payload
		src, dst := ctlSrc, ctlDst
		if tc.data != nil {
			src, dst = dataSrc, dataDst
		}
		if err := w.WriteUDP(src, dst, payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Checksum validation on, so that tshark checks our inner ECM headers.
	out, err := exec.Command(tshark, "-r", path, "-T", "json", "--no-duplicate-keys",
		"-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	packets, err := flattenPackets(out)
	if err != nil {
		t.Fatalf("tshark output: %v", err)
	}
	if len(packets) != len(cases) {
		t.Fatalf("tshark decoded %d packets, we wrote %d", len(packets), len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := packets[i]
			for field, want := range tc.want {
				if !slices.Equal(got[field], want) && (len(want) > 0 || len(got[field]) > 0) {
					t.Errorf("%s = %q, want %q", field, got[field], want)
				}
			}
			checkExperts(t, got, tc.undissected)
			if tc.undissected == lisp.LCAFAppData {
				checkAppDataLayout(t, encoded[i], tc.msg.(*lisp.MapRequest).Records[0].EID.LCAF().(*lisp.AppData))
			}
		})
	}
}

// checkExperts fails on anything Wireshark found wrong: malformed packets,
// bad checksums, expert errors and warnings, except the warning that it
// does not dissect a type.
func checkExperts(t *testing.T, fields map[string][]string, undissected lisp.LCAFType) {
	t.Helper()
	if len(fields["_ws.malformed"]) > 0 {
		t.Errorf("tshark: malformed packet: %q", fields["_ws.malformed"])
	}
	for _, m := range fields["_ws.expert.message"] {
		if undissected != 0 && strings.Contains(m, "Not dissected yet") {
			continue
		}
		t.Errorf("tshark expert: %s", m)
	}
	for _, s := range append(fields["ip.checksum.status"], fields["udp.checksum.status"]...) {
		if s != "1" { // 1: good
			t.Errorf("tshark checksum status %s, want 1 (good)", s)
		}
	}
}

// checkAppDataLayout checks the Application Data LCAF that Wireshark does
// not dissect against RFC 8060's layout, field by field.
func checkAppDataLayout(t *testing.T, msg []byte, a *lisp.AppData) {
	t.Helper()
	at := bytes.Index(msg, []byte{0x40, 0x03, 0, 0, byte(lisp.LCAFAppData)})
	if at < 0 {
		t.Fatal("no App-Data LCAF header in the message")
	}
	b := msg[at:]
	addr, err := a.Address.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want uint32
	}{
		{"Rsvd2", uint32(b[5]), 0},
		{"Length", uint32(binary.BigEndian.Uint16(b[6:])), uint32(12 + len(addr))},
		{"TOS", binary.BigEndian.Uint32(b[8:]) >> 8, a.TOS},
		{"Protocol", uint32(b[11]), uint32(a.Protocol)},
		{"local port low", uint32(binary.BigEndian.Uint16(b[12:])), uint32(a.LocalPorts.Low)},
		{"local port high", uint32(binary.BigEndian.Uint16(b[14:])), uint32(a.LocalPorts.High)},
		{"remote port low", uint32(binary.BigEndian.Uint16(b[16:])), uint32(a.RemotePorts.Low)},
		{"remote port high", uint32(binary.BigEndian.Uint16(b[18:])), uint32(a.RemotePorts.High)},
	} {
		if f.got != f.want {
			t.Errorf("App-Data %s = %d, want %d", f.name, f.got, f.want)
		}
	}
	if !bytes.Equal(b[20:20+len(addr)], addr) {
		t.Errorf("App-Data address = %x, want %x", b[20:20+len(addr)], addr)
	}
}

// flattenPackets turns tshark's JSON into, per packet, every field's
// values in document order. Order matters (the n-th locator's values), so
// this reads tokens rather than maps.
func flattenPackets(out []byte) ([]map[string][]string, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("want a JSON array: %v %v", tok, err)
	}
	var packets []map[string][]string
	for dec.More() {
		fields := map[string][]string{}
		if err := flatten(dec, "", fields); err != nil {
			return nil, err
		}
		packets = append(packets, fields)
	}
	return packets, nil
}

func flatten(dec *json.Decoder, key string, fields map[string][]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if err := flatten(dec, k.(string), fields); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := flatten(dec, key, fields); err != nil {
					return err
				}
			}
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case string:
		fields[key] = append(fields[key], v)
	case json.Number:
		fields[key] = append(fields[key], v.String())
	}
	return nil
}

func TestFlattenKeepsOrder(t *testing.T) {
	got, err := flattenPackets([]byte(`[{"a":{"x":"1","y":["2",{"x":"3"}]}},{"x":"4"}]`))
	want := []map[string][]string{{"x": {"1", "3"}, "y": {"2"}}, {"x": {"4"}}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("flattenPackets = %v, %v; want %v", got, err, want)
	}
	if _, err := flattenPackets([]byte(`{}`)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a non-array was accepted: %v", err)
	}
}
