package maprequest

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

func TestPrefixesDistinctInSites(t *testing.T) {
	ps := newPrefixes(20_000)
	sites := []netip.Prefix{netip.MustParsePrefix(siteA), netip.MustParsePrefix(siteB)}
	seen := map[netip.Prefix]bool{}
	for _, p := range ps {
		switch {
		case seen[p]:
			t.Fatalf("%s drawn twice", p)
		case p != p.Masked() || p.Bits() < 16 || p.Bits() > 32:
			t.Fatalf("%s is not a /16 to /32 network", p)
		case !sites[0].Contains(p.Addr()) && !sites[1].Contains(p.Addr()):
			t.Fatalf("%s is in neither site prefix", p)
		}
		seen[p] = true
	}
	if again := newPrefixes(100); again[99] != ps[99] {
		t.Errorf("not deterministic: %s then %s", ps[99], again[99])
	}
}

// TestPutNonce checks that patching a template gives the bytes a fresh
// encoding gives, inner UDP checksum included.
func TestPutNonce(t *testing.T) {
	src := netip.MustParseAddrPort("127.0.0.1:40000")
	prefixes := newPrefixes(50)
	reqs, err := newRequests(50, prefixes, src)
	if err != nil {
		t.Fatal(err)
	}
	for i, nonce := range []uint64{1, 2, 0xffff, 0x10000, 3<<48 | 12345, 0xffffffffffffffff, 0x8000000000000001} {
		tmpl := reqs.msg(i)
		var ecm lisp.ECM
		if err := ecm.DecodeFromBytes(tmpl); err != nil {
			t.Fatal(err)
		}
		eid := ecm.Message.(*lisp.MapRequest).Records[0].EID
		fresh, err := lig.NewRequest(eid, src, nonce)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := bytes.Clone(tmpl)
		putNonce(got, nonce)
		if !bytes.Equal(got, want) {
			t.Errorf("nonce %#x:\n got %x\nwant %x", nonce, got, want)
		}
		if !prefixesContain(prefixes, eid.IP()) {
			t.Errorf("EID %s is in no registered prefix", eid)
		}
	}
}

func prefixesContain(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func TestReadReply(t *testing.T) {
	rec := lisp.MapRecord{TTL: 1440, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: rloc(7)}}}
	for _, tc := range []struct {
		reply    lisp.MapReply
		negative bool
	}{
		{lisp.MapReply{Nonce: 42, Records: []lisp.MapRecord{rec}}, false},
		{lisp.MapReply{Nonce: 43, Records: []lisp.MapRecord{{TTL: 1, EID: rec.EID, MaskLen: 16}}}, true},
	} {
		b, err := tc.reply.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		nonce, negative, ok := readReply(b)
		if !ok || nonce != tc.reply.Nonce || negative != tc.negative {
			t.Errorf("readReply(%s) = %#x, %v, %v", &tc.reply, nonce, negative, ok)
		}
	}
	notify, err := (&lisp.MapNotify{Nonce: 42, Records: []lisp.MapRecord{rec}}).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{nil, {0x20}, notify} {
		if _, _, ok := readReply(b); ok {
			t.Errorf("readReply(%x) took it for a Map-Reply", b)
		}
	}
}

func TestRegistersVerify(t *testing.T) {
	ps := newPrefixes(10)
	regs, err := newRegisters(ps)
	if err != nil {
		t.Fatal(err)
	}
	if regs.len() != len(ps) {
		t.Fatalf("%d Map-Registers for %d prefixes", regs.len(), len(ps))
	}
	for i := range regs.len() {
		var m lisp.MapRegister
		if err := m.DecodeFromBytes(regs.msg(i)); err != nil {
			t.Fatal(err)
		}
		if err := lisp.Verify(regs.msg(i), []byte(siteKey)); err != nil {
			t.Errorf("Map-Register %d: %v", i, err)
		}
		rec := m.Records[0]
		if m.Nonce != uint64(i+1) || !m.ProxyReply || !m.WantMapNotify || rec.EID.IP() != ps[i].Addr() ||
			int(rec.MaskLen) != ps[i].Bits() || len(rec.Locators) != 1 {
			t.Errorf("Map-Register %d: %s", i, &m)
		}
	}
}
