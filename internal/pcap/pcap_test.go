package pcap

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"
)

// The bytes follow the libpcap file format: a 24-byte header with the
// magic, version 2.4 and link type 101, then a 16-byte record header with
// the timestamp and lengths in front of each packet.
func TestFileLayout(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, time.Unix(1700000000, 5000))
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddrPort("192.0.2.1:4342")
	dst := netip.MustParseAddrPort("192.0.2.2:4342")
	if err := w.WriteUDP(src, dst, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	want := "d4c3b2a1" + "0200" + "0400" + "00000000" + "00000000" + "ffff0000" + "65000000" +
		"00f15365" + "05000000" + "1e000000" + "1e000000"
	if got := hex.EncodeToString(buf.Bytes()[:40]); got != want {
		t.Errorf("headers:\n got %s\nwant %s", got, want)
	}
	if n := buf.Len(); n != 40+30 {
		t.Errorf("file is %d bytes, want 70", n)
	}
	if got := buf.Bytes()[40+28:]; !bytes.Equal(got, []byte{0xde, 0xad}) {
		t.Errorf("payload = %x", got)
	}
}
