package lisp_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/hextext"
	"github.com/amptcp/amptcp/lisp"
)

func mustHex(s string) []byte {
	b, err := hextext.Decode(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Each malformed input is refused with a *ParseError that names the
// message, the field and the offset, and wraps the reason.
func TestMalformedMessages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wire   string
		msg    string
		field  string
		offset int
		err    error
	}{
		{
			name: "empty", wire: "",
			msg: "LISP message", field: "type", offset: 0, err: io.ErrShortBuffer,
		},
		{
			name: "unknown message type", wire: "90000000",
			msg: "LISP message", field: "type", offset: 0, err: lisp.ErrUnknownType,
		},
		{
			name: "Info-Request is not decoded", wire: "70000000",
			msg: "LISP message", field: "type", offset: 0, err: lisp.ErrUnknownType,
		},
		{
			name: "record count lies", // says 2 records, carries 1
			wire: "10000002 0123456789abcdef 00010a010001 0001c0000201 0018 0001 0a020000",
			msg:  "Map-Request", field: "records[1].reserved", offset: 32, err: io.ErrShortBuffer,
		},
		{
			name: "ITR-RLOC count lies", // IRC=1: two ITR-RLOCs, carries one and a record
			wire: "10000101 0123456789abcdef 00010a010001 0001c0000201 0018 0001 0a020000",
			msg:  "Map-Request", field: "ITR-RLOCs[1].AFI", offset: 24, err: lisp.ErrUnknownType,
		},
		{
			name: "IPv4 mask-len over 32",
			wire: "10000001 0123456789abcdef 00010a010001 0001c0000201 0021 0001 0a020000",
			msg:  "Map-Request", field: "records[0].EID mask-len", offset: 25, err: lisp.ErrBadValue,
		},
		{
			name: "IPv6 mask-len over 128 in a Map-Reply record",
			wire: "20000001 0000000000000000 00000001 0081 0000 0000 0002 20010db8000000000000000000000000",
			msg:  "Map-Reply", field: "records[0].EID mask-len", offset: 17, err: lisp.ErrBadValue,
		},
		{
			name: "trailing byte",
			wire: "20000001 aabbccddeeff0011 0000000f 00084000 0000 0001 0a000000 ff",
			msg:  "Map-Reply", field: "end of message", offset: 28, err: lisp.ErrTrailingData,
		},
		{
			name: "locator count lies",
			wire: "20000001 0000000000000000 000005a0 02101000 0000 0001 0a010000 0132ff00 0001 0001 c0000201",
			msg:  "Map-Reply", field: "records[0].locators[1].priorities, weights and flags", offset: 40, err: io.ErrShortBuffer,
		},
		{
			name: "unknown AFI",
			wire: "20000001 0000000000000000 000005a0 01101000 0000 0001 0a010000 0132ff00 0001 0003 c0000201",
			msg:  "Map-Reply", field: "records[0].locators[0].AFI", offset: 34, err: lisp.ErrUnknownType,
		},
		{
			name: "LCAF length beyond the message",
			wire: "20000001 0000000000000000 000005a0 01101000 0000 0001 0a010000 0132ff00 0001 4003 0000 0a00 0040 0000 0001 c0000201",
			msg:  "Map-Reply", field: "records[0].locators[0].LCAF length", offset: 42, err: io.ErrShortBuffer,
		},
		{
			name: "LCAF length longer than its body", // IID LCAF says 12, its IID and address take 10
			wire: "20000001 0000000000000000 00000001 00100000 0000 4003 0000 0200 000c 000003e8 0001 0a020000 ffff",
			msg:  "Map-Reply", field: "records[0].EID.Instance-ID.LCAF length", offset: 28, err: lisp.ErrBadLength,
		},
		{
			name: "LCAF length shorter than its body", // ELP says 6: the hop's IPv4 address is cut
			wire: "20000001 0000000000000000 00000001 01100000 0000 0001 0a020000 0132ff00 0001 4003 0000 0a00 0006 0000 0001 c0000201",
			msg:  "Map-Reply", field: "records[0].locators[0].ELP.hops[0].IPv4 address", offset: 46, err: io.ErrShortBuffer,
		},
		{
			name: "LCAF length with a byte left over", // AFI List of one IPv4 address and a spare byte
			wire: "20000001 0000000000000000 00000001 00100000 0000 4003 0000 0100 0007 0001 0a020000 00",
			msg:  "Map-Reply", field: "records[0].EID.AFI-List.addresses[1].AFI", offset: 36, err: io.ErrShortBuffer,
		},
		{
			name: "distinguished name without NUL",
			wire: "20000001 0000000000000000 00000001 00000000 0000 0011 73697465",
			msg:  "Map-Reply", field: "records[0].EID.distinguished name", offset: 24, err: io.ErrShortBuffer,
		},
		{
			name: "authentication data longer than the message",
			wire: "30000000 0000000000000000 00020020 e93a62a2",
			msg:  "Map-Register", field: "authentication data", offset: 16, err: io.ErrShortBuffer,
		},
		{
			name: "Map-Register with an xTR-ID cut short",
			wire: "32000000 0000000000000000 00000000 0102030405060708",
			msg:  "Map-Register", field: "xTR-ID", offset: 16, err: io.ErrShortBuffer,
		},
		{
			name: "Map-Notify for an RTR",
			wire: "44000000 0000000000000000 00000000",
			msg:  "Map-Notify", field: "R bit", offset: 0, err: lisp.ErrUnknownType,
		},
		{
			name: "ECM inner IP version",
			wire: "80000000 55000000",
			msg:  "ECM", field: "inner IP version", offset: 4, err: lisp.ErrBadValue,
		},
		{
			name: "ECM inner protocol is TCP",
			wire: "80000000 4500001c 00000000 40060000 c0000201 0a020001 d43110f6 00080000",
			msg:  "ECM", field: "inner IPv4 protocol", offset: 13, err: lisp.ErrBadValue,
		},
		{
			name: "ECM inner fragment",
			wire: "80000000 4500001c 00002000 40110000 c0000201 0a020001 d43110f6 00080000",
			msg:  "ECM", field: "inner IPv4 fragment", offset: 10, err: lisp.ErrBadValue,
		},
		{
			name: "ECM inner total length lies",
			wire: "80000000 45000040 00000000 40110000 c0000201 0a020001 d43110f6 00080000",
			msg:  "ECM", field: "inner IPv4 total length", offset: 6, err: lisp.ErrBadLength,
		},
		{
			name: "ECM inner UDP length lies",
			wire: "80000000 4500001d 00000000 40110000 c0000201 0a020001 d43110f6 00080000 10",
			msg:  "ECM", field: "inner UDP length", offset: 28, err: lisp.ErrBadLength,
		},
		{
			name: "ECM inside an ECM",
			wire: "80000000 45000020 00000000 40110000 c0000201 0a020001 d43110f6 000c0000 80000000",
			msg:  "ECM", field: "message type", offset: 32, err: lisp.ErrBadValue,
		},
		{
			name: "ECM with a malformed inner Map-Request",
			wire: "80000000 4500002e 00000000 40110000 c0000201 0a020001 d43110f6 001a0000 10000001 0123456789abcdef 0003 00000000",
			msg:  "ECM", field: "Map-Request.source EID.AFI", offset: 44, err: lisp.ErrUnknownType,
		},
		{
			name: "Map-Referral signature cut short",
			wire: "60000001 0000000000000000 0000000f 00107800 1000 0001 0a090000 0000000f 6a000000",
			msg:  "Map-Referral", field: "records[0].signatures[0].signature inception", offset: 36, err: io.ErrShortBuffer,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := mustHex(tc.wire)
			m, err := lisp.Parse(wire)
			if err == nil {
				t.Fatalf("Parse accepted it: %s", m)
			}
			checkParseError(t, err, tc.msg, tc.field, tc.offset, tc.err)
		})
	}
}

func checkParseError(t *testing.T, err error, msg, field string, offset int, reason error) {
	t.Helper()
	var pe *lisp.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if pe.Msg != msg || pe.Field != field || pe.Offset != offset || !errors.Is(err, reason) {
		t.Errorf("error %q\n got msg %q field %q offset %d\nwant msg %q field %q offset %d, wrapping %v",
			err, pe.Msg, pe.Field, pe.Offset, msg, field, offset, reason)
	}
}

// LCAFs nested deeper than MaxLCAFDepth are refused when decoding and
// when encoding.
func TestLCAFDepthLimit(t *testing.T) {
	nest := func(depth int) lisp.Address {
		a := lisp.MustParseAddress("10.0.0.1")
		for range depth {
			a = lisp.LCAFAddress(&lisp.InstanceID{IID: 1, Address: a})
		}
		return a
	}
	ok := nest(lisp.MaxLCAFDepth)
	wire, err := ok.AppendBinary(nil)
	if err != nil {
		t.Fatalf("encode at the limit: %v", err)
	}
	if _, _, err := lisp.DecodeAddress(wire); err != nil {
		t.Fatalf("decode at the limit: %v", err)
	}
	if _, err := nest(lisp.MaxLCAFDepth + 1).AppendBinary(nil); err == nil {
		t.Error("encoding one level past the limit succeeded")
	}
	// Wrap the wire form by hand one level deeper.
	deeper := append(mustHex("4003 0000 0200"), byte((len(wire)+4)>>8), byte(len(wire)+4))
	deeper = append(append(deeper, 0, 0, 0, 1), wire...)
	_, _, err = lisp.DecodeAddress(deeper)
	checkParseError(t, err, "address", strings.Repeat("Instance-ID.", lisp.MaxLCAFDepth)+"LCAF Instance-ID",
		8*lisp.MaxLCAFDepth+4*lisp.MaxLCAFDepth, lisp.ErrTooDeep)
}

// Every proper prefix of every message vector is refused, and with a
// *ParseError. (One prefix of the probe is lispers.net's form of the I
// bit, a 16-byte xTR-ID without site-ID, and is accepted.)
func TestTruncatedVectorsRefused(t *testing.T) {
	for name := range messageVectors {
		wire := readVector(t, name)
		for n := range len(wire) {
			m, err := lisp.Parse(wire[:n])
			if name == "msg-map-request-probe" && n == len(wire)-8 {
				if err != nil || m.(*lisp.MapRequest).XTRID.SiteID != 0 {
					t.Errorf("%s: 16-byte xTR-ID form refused: %v", name, err)
				}
				continue
			}
			var pe *lisp.ParseError
			if err == nil || !errors.As(err, &pe) {
				t.Errorf("%s cut to %d of %d bytes: Parse = %v, %v", name, n, len(wire), m, err)
			}
		}
	}
}

// Counts from the wire do not drive allocation beyond what the input can
// hold: 255 records claiming 255 locators each, in 200 bytes.
func TestLyingCountsAllocateLittle(t *testing.T) {
	wire := mustHex("200000ff 0000000000000000")
	for range 15 {
		wire = append(wire, mustHex("00000001 ff200000 0000 0001 0a000001")...)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := lisp.Parse(wire); !errors.Is(err, io.ErrShortBuffer) {
			t.Fatalf("Parse = %v, want a short-buffer error", err)
		}
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / 100; perCall > 16<<10 {
		t.Errorf("decoding %d bytes allocated %d bytes per call", len(wire), perCall)
	}
}

// Encoding refuses values that do not fit their fields, naming them.
func TestEncodeRefusesOutOfRange(t *testing.T) {
	ip := lisp.MustParseAddress
	rec := func(f func(*lisp.MapRecord)) *lisp.MapReply {
		r := lisp.MapRecord{EID: ip("10.0.0.0"), MaskLen: 8}
		f(&r)
		return &lisp.MapReply{Records: []lisp.MapRecord{r}}
	}
	for _, tc := range []struct {
		name string
		msg  lisp.Message
		want string
	}{
		{"no ITR-RLOC", &lisp.MapRequest{}, "0 ITR-RLOCs"},
		{"33 ITR-RLOCs", &lisp.MapRequest{ITRRLOCs: make([]lisp.Address, 33)}, "33 ITR-RLOCs"},
		{"mask-len 33", rec(func(r *lisp.MapRecord) { r.MaskLen = 33 }), "mask-len 33"},
		{"map-version 4096", rec(func(r *lisp.MapRecord) { r.MapVersion = 4096 }), "map-version 4096"},
		{"action 8", rec(func(r *lisp.MapRecord) { r.Action = 8 }), "action 8"},
		{"256 locators", rec(func(r *lisp.MapRecord) { r.Locators = make([]lisp.Locator, 256) }), "256 locators"},
		{"name with NUL", rec(func(r *lisp.MapRecord) { r.EID, r.MaskLen = lisp.NameAddress("a\x00b"), 0 }), "contains NUL"},
		{"24-bit TOS", rec(func(r *lisp.MapRecord) {
			r.EID, r.MaskLen = lisp.LCAFAddress(&lisp.AppData{TOS: 1 << 24}), 0
		}), "exceeds 24 bits"},
		{"ECM without message", &lisp.ECM{}, "no message"},
		{"ECM in ECM", &lisp.ECM{Message: &lisp.ECM{}}, "cannot encapsulate an ECM"},
		{"ECM without addresses", &lisp.ECM{Message: mapRequestBasic}, "address missing"},
		{"ECM mixed families", &lisp.ECM{
			Source:      netip.MustParseAddrPort("192.0.2.1:4342"),
			Destination: netip.MustParseAddrPort("[2001:db8::1]:4342"),
			Message:     mapRequestBasic,
		}, "must both be IPv4 or both IPv6"},
		{"16 signatures", &lisp.MapReferral{Records: []lisp.ReferralRecord{{
			EID: ip("10.0.0.0"), Signatures: make([]lisp.Signature, 16),
		}}}, "16 signatures"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.msg.AppendBinary(nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AppendBinary = %x, %v; want an error containing %q", b, err, tc.want)
			}
		})
	}
}

func TestDataHeaderRefusals(t *testing.T) {
	var h lisp.DataHeader
	err := h.DecodeFromBytes(mustHex("90000000 00000000"))
	checkParseError(t, err, "data header", "N and V bits", 0, lisp.ErrBadValue)
	err = h.DecodeFromBytes(mustHex("80000000 000000"))
	checkParseError(t, err, "data header", "header", 7, io.ErrShortBuffer)
	// E without N is ignored, as RFC 9300 says a receiver does.
	if err := h.DecodeFromBytes(mustHex("20000000 00000000")); err != nil || h.EchoNonceRequest {
		t.Errorf("E without N: %v, %+v", err, h)
	}
	// A LISP-GPE header without N or V ignores the 16 bits before the
	// next protocol, as reserved bits are.
	if err := h.DecodeFromBytes(mustHex("0cffff01 00000100")); err != nil || h != (lisp.DataHeader{
		GPE: true, IIDPresent: true, NextProtocol: lisp.NextIPv4, InstanceID: 1,
	}) {
		t.Errorf("reserved bits of LISP-GPE: %v, %+v", err, h)
	}
	for _, bad := range []lisp.DataHeader{
		{NoncePresent: true, MapVersionPresent: true},
		{EchoNonceRequest: true},
		{NoncePresent: true, Nonce: 1 << 24},
		{MapVersionPresent: true, DestMapVersion: 1 << 12},
		{IIDPresent: true, InstanceID: 1 << 24},
		{IIDPresent: true, LSBs: 256},
		{KeyID: 4},
		{GPE: true, NoncePresent: true, Nonce: 1 << 16},
		{GPE: true, MapVersionPresent: true, SourceMapVersion: 1},
		{MapVersionPresent: true, GPEMapVersion: 1},
		{NextProtocol: lisp.NextIPv4},
	} {
		if b, err := bad.AppendBinary(nil); err == nil {
			t.Errorf("AppendBinary(%+v) = %x, want an error", bad, b)
		}
	}
}

// What the decoder returns does not change when the input buffer is
// reused afterwards.
func TestDecodedValuesDoNotAliasInput(t *testing.T) {
	for _, name := range []string{"msg-map-register", "msg-map-reply-elp", "msg-map-referral"} {
		wire := readVector(t, name)
		buf := bytes.Clone(wire)
		m, err := lisp.Parse(buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 0xff
		}
		got, err := m.AppendBinary(nil)
		if err != nil || !bytes.Equal(got, wire) {
			t.Errorf("%s: after overwriting the input, encode = %x, %v", name, got, err)
		}
	}
	for _, name := range []string{"lcaf-raw-geo", "lcaf-json", "addr-name"} {
		wire := readVector(t, name)
		buf := bytes.Clone(wire)
		a, _, err := lisp.DecodeAddress(buf)
		if err != nil {
			t.Fatal(err)
		}
		clear(buf)
		if got, err := a.AppendBinary(nil); err != nil || !bytes.Equal(got, wire) {
			t.Errorf("%s: after clearing the input, encode = %x, %v", name, got, err)
		}
	}
}
