package lisp_test

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// peekECMs are Encapsulated Map-Requests in the forms PeekRequestEID
// reads: each family inside and outside, source EIDs of each kind, one
// and several ITR-RLOCs, an Instance-ID, several records.
func peekECMs(t testing.TB) [][]byte {
	iid := func(id uint32, a string) lisp.Address {
		return lisp.LCAFAddress(&lisp.InstanceID{IID: id, Address: lisp.MustParseAddress(a)})
	}
	var out [][]byte
	for _, tc := range []struct {
		src, dst string
		srcEID   lisp.Address
		itrs     []lisp.Address
		eids     []lisp.Address
	}{
		{"192.0.2.1:61001", "10.2.0.1:4342", lisp.Address{}, []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
			[]lisp.Address{lisp.MustParseAddress("10.2.0.1")}},
		{"[2001:db8::1]:61001", "[2001:db8:2::1]:4342", lisp.MustParseAddress("2001:db8::1"),
			[]lisp.Address{lisp.MustParseAddress("2001:db8::1"), lisp.MustParseAddress("192.0.2.1")},
			[]lisp.Address{lisp.MustParseAddress("2001:db8:2::1"), lisp.MustParseAddress("10.2.0.1")}},
		{"192.0.2.1:61001", "10.2.0.1:4342", iid(7, "10.1.0.1"), []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
			[]lisp.Address{iid(7, "10.2.0.1")}},
		{"192.0.2.1:61001", "10.2.0.1:4342", lisp.MustParseAddress("10.1.0.1"), []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
			[]lisp.Address{iid(1<<20, "2001:db8:2::1")}},
	} {
		req := &lisp.MapRequest{Nonce: 42, SourceEID: tc.srcEID, ITRRLOCs: tc.itrs}
		for _, e := range tc.eids {
			ip := e.IP()
			if l, ok := e.LCAF().(*lisp.InstanceID); ok {
				ip = l.Address.IP()
			}
			req.Records = append(req.Records, lisp.RequestRecord{EID: e, MaskLen: uint8(ip.BitLen())})
		}
		ecm := &lisp.ECM{Source: netip.MustParseAddrPort(tc.src), Destination: netip.MustParseAddrPort(tc.dst), TTL: 64, Message: req}
		b, err := ecm.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// checkPeek compares PeekRequestEID with decoding the whole message:
// whatever it reads is the first record's EID, and it reads that of every
// ECM a map-resolver answers in the usual forms.
func checkPeek(t *testing.T, b []byte, mustRead bool) {
	iid, eid, ok := lisp.PeekRequestEID(b)
	var m lisp.ECM
	if err := m.DecodeFromBytes(b); err != nil {
		return // a hint for what does not decode may be anything
	}
	req, isReq := m.Message.(*lisp.MapRequest)
	var want netip.Addr
	var wantIID uint32
	if isReq && len(req.Records) > 0 && !m.DDT && !m.ToETR {
		a := req.Records[0].EID
		if l, ok := a.LCAF().(*lisp.InstanceID); ok {
			wantIID, a = l.IID, l.Address
		}
		want = a.IP()
	}
	switch {
	case ok && (eid != want || iid != wantIID):
		t.Errorf("PeekRequestEID(%x) = [%d]%s, the message's first record is [%d]%s", b, iid, eid, wantIID, want)
	case !ok && mustRead && want.IsValid():
		t.Errorf("PeekRequestEID(%x) did not read [%d]%s", b, wantIID, want)
	}
}

func TestPeekRequestEID(t *testing.T) {
	for _, b := range peekECMs(t) {
		checkPeek(t, b, true)
		for n := range len(b) { // truncated: never a wrong EID, never a panic
			checkPeek(t, b[:n], false)
		}
		toETR := append([]byte(nil), b...)
		toETR[0] |= 0x02
		if _, _, ok := lisp.PeekRequestEID(toETR); ok {
			t.Errorf("read an ECM to the ETR: %x", toETR)
		}
	}
}

func FuzzPeekRequestEID(f *testing.F) {
	for _, b := range peekECMs(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPeek(t, b, false) })
}

// peekRegisters are Map-Registers in the forms PeekRegisterPrefix reads:
// each family, in an Instance-ID, with each algorithm, several records.
func peekRegisters(t testing.TB) [][]byte {
	var out [][]byte
	for i, tc := range []struct {
		eid string
		iid uint32
		alg lisp.AuthAlgorithm
	}{
		{"10.1.0.0/16", 0, lisp.AuthHMACSHA256},
		{"2001:db8:1::/48", 0, lisp.AuthHMACSHA1},
		{"10.1.2.3/32", 7, lisp.AuthHMACSHA256},
		{"2001:db8::/32", 1 << 20, lisp.AuthNone},
	} {
		p := netip.MustParsePrefix(tc.eid)
		eid := lisp.IPAddress(p.Addr())
		if tc.iid != 0 {
			eid = lisp.LCAFAddress(&lisp.InstanceID{IID: tc.iid, Address: eid})
		}
		rec := lisp.MapRecord{TTL: 3, EID: eid, MaskLen: uint8(p.Bits()),
			Locators: []lisp.Locator{{Priority: 1, Weight: 1, Address: lisp.MustParseAddress("192.0.2.1")}}}
		m := &lisp.MapRegister{Nonce: uint64(i), Auth: lisp.Auth{Algorithm: tc.alg}, Records: []lisp.MapRecord{rec, rec}}
		b, err := m.AppendSigned(nil, []byte("key"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// checkPeekRegister compares PeekRegisterPrefix with decoding the whole
// message, as checkPeek does.
func checkPeekRegister(t *testing.T, b []byte, mustRead bool) {
	iid, p, ok := lisp.PeekRegisterPrefix(b)
	var m lisp.MapRegister
	if err := m.DecodeFromBytes(b); err != nil {
		return
	}
	var want netip.Prefix
	var wantIID uint32
	if len(m.Records) > 0 {
		a := m.Records[0].EID
		if l, ok := a.LCAF().(*lisp.InstanceID); ok {
			wantIID, a = l.IID, l.Address
		}
		want, _ = a.IP().Prefix(int(m.Records[0].MaskLen))
	}
	switch {
	case ok && (p != want || iid != wantIID):
		t.Errorf("PeekRegisterPrefix(%x) = [%d]%s, the message's first record is [%d]%s", b, iid, p, wantIID, want)
	case !ok && mustRead && want.IsValid():
		t.Errorf("PeekRegisterPrefix(%x) did not read [%d]%s", b, wantIID, want)
	}
}

func TestPeekRegisterPrefix(t *testing.T) {
	for _, b := range peekRegisters(t) {
		checkPeekRegister(t, b, true)
		for n := range len(b) {
			checkPeekRegister(t, b[:n], false)
		}
	}
}

func FuzzPeekRegisterPrefix(f *testing.F) {
	for _, b := range peekRegisters(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPeekRegister(t, b, false) })
}
