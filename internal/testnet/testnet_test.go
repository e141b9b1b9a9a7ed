package testnet

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestIfNameFitsIFNAMSIZ(t *testing.T) {
	for _, ids := range [][2]int{{1, 1}, {99, 99}, {999, 99}} {
		name, err := ifName(int64(ids[0]), ids[1], 'b')
		if err != nil {
			t.Fatalf("ifName(%d, %d): %v", ids[0], ids[1], err)
		}
		if len(name) > unix.IFNAMSIZ-1 || !strings.HasPrefix(name, linkPrefix(int64(ids[0]))) {
			t.Errorf("ifName(%d, %d) = %q: too long or without the Net's prefix", ids[0], ids[1], name)
		}
	}
	if name, err := ifName(1234567, 1234, 'a'); err == nil {
		t.Errorf("ifName accepted %q (%d bytes)", name, len(name))
	}
}

func TestParseAddrs(t *testing.T) {
	addrs, err := parseAddrs("10.0.1.1/24, fd00:1::1/64")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 2 {
		t.Fatalf("got %d addresses, want 2", len(addrs))
	}
	// The host part is kept (not masked away) and only IPv6 skips DAD.
	if got := addrs[0].IPNet.String(); got != "10.0.1.1/24" || addrs[0].Flags != 0 {
		t.Errorf("IPv4 address = %s flags %#x, want 10.0.1.1/24 flags 0", got, addrs[0].Flags)
	}
	if got := addrs[1].IPNet.String(); got != "fd00:1::1/64" || addrs[1].Flags != unix.IFA_F_NODAD {
		t.Errorf("IPv6 address = %s flags %#x, want fd00:1::1/64 with IFA_F_NODAD", got, addrs[1].Flags)
	}
	if addrs, err := parseAddrs(""); err != nil || len(addrs) != 0 {
		t.Errorf(`parseAddrs("") = %v, %v; want none`, addrs, err)
	}
	if _, err := parseAddrs("10.0.1.1"); err == nil {
		t.Error("accepted an address without a prefix length")
	}
}
