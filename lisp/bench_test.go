package lisp_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// Each benchmark that has a target has a Reference twin measured in the
// same run: the floor the work cannot go below (loading the bytes,
// copying them, one HMAC). Targets: the data header under 20 ns
// and 0 allocations each way; Map-Request and Map-Reply with 8 locators
// and 4 ELPs of 4 hops decoded in under 1 µs.

var sink any

// benchRecord is an EID-record with 8 RLOCs and 4 ELPs of 4 hops, the
// ELPs sent the lispers.net way (AFI 0 and the ELP in an AFI List).
func benchRecord() lisp.MapRecord {
	rec := lisp.MapRecord{TTL: 1440, EID: lcaf(&lisp.InstanceID{IID: 1000, Address: ip("10.2.0.0")}), MaskLen: 16, Authoritative: true}
	for i := range 8 {
		rec.Locators = append(rec.Locators, rloc(1, 12, "R", ip(fmt.Sprintf("192.0.2.%d", i+1))))
	}
	for e := range 4 {
		elp := &lisp.ELP{}
		for h := range 4 {
			elp.Hops = append(elp.Hops, lisp.ELPHop{Address: ip(fmt.Sprintf("198.51.%d.%d", e, h+1)), RLOCProbe: true})
		}
		rec.Locators = append(rec.Locators, rloc(2, 25, "R", lcaf(&lisp.AFIList{Addresses: []lisp.Address{{}, lcaf(elp)}})))
	}
	return rec
}

func benchMessages() map[string]lisp.Message {
	rec := benchRecord()
	return map[string]lisp.Message{
		"MapReply": &lisp.MapReply{Nonce: 1, Records: []lisp.MapRecord{rec}},
		"MapRequest": &lisp.MapRequest{
			Probe: true, Nonce: 1, SourceEID: ip("10.1.0.1"),
			ITRRLOCs: []lisp.Address{ip("192.0.2.100")},
			Records:  []lisp.RequestRecord{{EID: ip("10.2.0.1"), MaskLen: 32}},
			MapReply: &rec,
		},
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, m := range benchMessages() {
		wire, err := m.AppendBinary(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				sink, _ = lisp.Parse(wire)
			}
		})
		// Decoding into the same value again reuses its slices, as a
		// server loop does.
		b.Run(name+"Reuse", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				if err := m.DecodeFromBytes(wire); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"Reference", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				sink = bytes.Clone(wire)
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for name, m := range benchMessages() {
		buf := make([]byte, 0, m.Len())
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(m.Len()))
			for b.Loop() {
				var err error
				if buf, err = m.AppendBinary(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDataHeader(b *testing.B) {
	wire := readVector(b, "data-nonce-iid")
	h := dataVectors["data-nonce-iid"]
	buf := make([]byte, 0, lisp.DataHeaderLen)
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		var got lisp.DataHeader
		for b.Loop() {
			if err := got.DecodeFromBytes(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = h.AppendBinary(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Reference", func(b *testing.B) {
		var w0, w1 uint32
		for b.Loop() {
			w0 = binary.BigEndian.Uint32(wire)
			w1 = binary.BigEndian.Uint32(wire[4:])
		}
		sink = w0 ^ w1
	})
}

func BenchmarkMapRegisterHMACSHA256(b *testing.B) {
	key := []byte("amptcp-site-key")
	m := &lisp.MapRegister{
		WantMapNotify: true, Nonce: 1,
		Auth:    lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
		Records: []lisp.MapRecord{registeredRecord},
		XTRID:   testXTRID,
	}
	wire, err := m.AppendSigned(nil, key)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, len(wire))
	b.Run("Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = m.AppendSigned(buf[:0], key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := lisp.Verify(wire, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A server keeps one Authenticator per key.
	b.Run("VerifyReused", func(b *testing.B) {
		a, err := lisp.NewAuthenticator(lisp.AuthHMACSHA256, key)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := a.Verify(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mac := hmac.New(sha256.New, key)
			mac.Write(wire)
			sink = mac.Sum(nil)
		}
	})
}

// The data-plane header codec allocates nothing, either way.
func TestDataHeaderAllocatesNothing(t *testing.T) {
	wire := readVector(t, "data-nonce-iid")
	h := dataVectors["data-nonce-iid"]
	buf := make([]byte, 0, lisp.DataHeaderLen)
	var got lisp.DataHeader
	if n := testing.AllocsPerRun(1000, func() {
		if err := got.DecodeFromBytes(wire); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("DecodeFromBytes: %.1f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		var err error
		if buf, err = h.AppendBinary(buf[:0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendBinary: %.1f allocations, want 0", n)
	}
}

// Decoding Encapsulated Map-Requests into the same value, as the
// map-resolver's loop does, allocates nothing.
func TestECMDecodeReuseAllocatesNothing(t *testing.T) {
	wire := readVector(t, "msg-ecm-ipv4")
	var m lisp.ECM
	if err := m.DecodeFromBytes(wire); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := m.DecodeFromBytes(wire); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decoding an ECM again allocates %.1f times", n)
	}
	if !reflect.DeepEqual(&m, messageVectors["msg-ecm-ipv4"]) {
		t.Errorf("reused decode = %s", &m)
	}
}
