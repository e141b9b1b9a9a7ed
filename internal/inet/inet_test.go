package inet

import (
	"encoding/hex"
	"net/netip"
	"testing"
)

// The IPv4 header of RFC 1071's worked example is not a packet; use the
// classic header from Wikipedia's "IPv4 header checksum" article instead:
// 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7, checksum b861.
func TestChecksumKnownHeader(t *testing.T) {
	h, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	if got := Checksum(h); got != 0xb861 {
		t.Fatalf("Checksum = %#04x, want 0xb861", got)
	}
}

// A header with its checksum in place sums to zero, for both families,
// and the UDP checksum verifies over the pseudo-header.
func TestPutUDPChecksumsVerify(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{
		{"192.0.2.1:4342", "198.51.100.7:4342"},
		{"[2001:db8::1]:61000", "[2001:db8::2]:4342"},
	} {
		src, dst := netip.MustParseAddrPort(tc.src), netip.MustParseAddrPort(tc.dst)
		payload := []byte("odd-length payload")
		n := HeaderLen(src.Addr())
		pkt := append(make([]byte, n), payload...)
		if err := PutUDP(pkt, src, dst, 64, 0); err != nil {
			t.Fatal(err)
		}
		udp := pkt[n-UDPHeaderLen:]
		var pseudo []byte
		if src.Addr().Is4() {
			if Checksum(pkt[:IPv4HeaderLen]) != 0 {
				t.Errorf("%s: IPv4 header checksum does not verify", tc.src)
			}
			pseudo = append(pseudo, pkt[12:20]...)
		} else {
			pseudo = append(pseudo, pkt[8:40]...)
		}
		pseudo = append(pseudo, 0, 17, byte(len(udp)>>8), byte(len(udp)))
		if Checksum(append(pseudo, udp...)) != 0 {
			t.Errorf("%s: UDP checksum does not verify", tc.src)
		}
	}
}

func TestPutUDPRefusesMixedFamilies(t *testing.T) {
	pkt := make([]byte, 28)
	err := PutUDP(pkt, netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("[2001:db8::1]:2"), 64, 0)
	if err == nil {
		t.Fatal("PutUDP accepted an IPv4 source with an IPv6 destination")
	}
}
