package lisp_test

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// The fuzz targets check that decoding never panics and that whatever
// decodes also encodes, to bytes that decode to the same value and encode
// to themselves again. make fuzz runs them; crashers found go under
// testdata/fuzz/<target>/ and run with every go test.

func vectorsWithPrefix(f *testing.F, prefix string) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "vectors", prefix+"*.hex"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no %s vectors: %v", prefix, err)
	}
	var seeds [][]byte
	for _, file := range files {
		seeds = append(seeds, readVector(f, strings.TrimSuffix(filepath.Base(file), ".hex")))
	}
	return seeds
}

func FuzzParse(f *testing.F) {
	for _, seed := range vectorsWithPrefix(f, "msg-") {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		m, err := lisp.Parse(wire)
		if err != nil {
			return
		}
		_ = m.String()
		enc, err := m.AppendBinary(nil)
		if err != nil {
			t.Fatalf("decoded %x but cannot encode it: %v\n%s", wire, err, m)
		}
		if m.Len() != len(enc) {
			t.Fatalf("Len() = %d, encoding has %d bytes", m.Len(), len(enc))
		}
		again, err := lisp.Parse(enc)
		if err != nil {
			t.Fatalf("cannot decode own encoding %x: %v", enc, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("decode(encode(m)) != m:\n%s\n%s", again, m)
		}
		enc2, err := again.AppendBinary(nil)
		if err != nil || !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding is not stable: %x then %x (%v)", enc, enc2, err)
		}
	})
}

// fuzzLCAF fuzzes the decoder of one LCAF type: the fuzzer chooses the
// header's reserved bytes and the body, the type is fixed.
func fuzzLCAF(f *testing.F, typ lisp.LCAFType) {
	for _, seed := range vectorsWithPrefix(f, "lcaf-") {
		if seed[4] == byte(typ) {
			f.Add(seed[2], seed[3], seed[5], seed[8:])
		}
	}
	f.Add(byte(0), byte(0), byte(0), []byte{})
	f.Fuzz(func(t *testing.T, rsvd1, flags, rsvd2 byte, body []byte) {
		if len(body) > 0xffff {
			return
		}
		wire := append([]byte{0x40, 0x03, rsvd1, flags, byte(typ), rsvd2, byte(len(body) >> 8), byte(len(body))}, body...)
		checkAddressRoundTrip(t, wire)
	})
}

func checkAddressRoundTrip(t *testing.T, wire []byte) {
	a, n, err := lisp.DecodeAddress(wire)
	if err != nil {
		return
	}
	_ = a.String()
	enc, err := a.AppendBinary(nil)
	if err != nil {
		t.Fatalf("decoded %x but cannot encode it: %v", wire[:n], err)
	}
	if a.Len() != len(enc) {
		t.Fatalf("Len() = %d, encoding has %d bytes", a.Len(), len(enc))
	}
	again, m, err := lisp.DecodeAddress(enc)
	if err != nil || m != len(enc) || !reflect.DeepEqual(again, a) || !again.Equal(a) {
		t.Fatalf("decode(encode(a)) = %s, %d, %v; want %s", again, m, err, a)
	}
}

func FuzzLCAFAFIList(f *testing.F)         { fuzzLCAF(f, lisp.LCAFAFIList) }
func FuzzLCAFInstanceID(f *testing.F)      { fuzzLCAF(f, lisp.LCAFInstanceID) }
func FuzzLCAFASNumber(f *testing.F)        { fuzzLCAF(f, lisp.LCAFASNumber) }
func FuzzLCAFAppData(f *testing.F)         { fuzzLCAF(f, lisp.LCAFAppData) }
func FuzzLCAFNATTraversal(f *testing.F)    { fuzzLCAF(f, lisp.LCAFNATTraversal) }
func FuzzLCAFELP(f *testing.F)             { fuzzLCAF(f, lisp.LCAFELP) }
func FuzzLCAFSourceDest(f *testing.F)      { fuzzLCAF(f, lisp.LCAFSourceDest) }
func FuzzLCAFReplicationList(f *testing.F) { fuzzLCAF(f, lisp.LCAFReplicationList) }
func FuzzLCAFJSON(f *testing.F)            { fuzzLCAF(f, lisp.LCAFJSON) }
func FuzzLCAFKeyValue(f *testing.F)        { fuzzLCAF(f, lisp.LCAFKeyValue) }

// FuzzAddress covers every AFI and the LCAF types kept raw.
func FuzzAddress(f *testing.F) {
	for _, prefix := range []string{"addr-", "lcaf-"} {
		for _, seed := range vectorsWithPrefix(f, prefix) {
			f.Add(seed)
		}
	}
	f.Fuzz(checkAddressRoundTrip)
}

func FuzzDataHeader(f *testing.F) {
	for _, seed := range vectorsWithPrefix(f, "data-") {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		var h lisp.DataHeader
		if h.DecodeFromBytes(wire) != nil {
			return
		}
		enc, err := h.AppendBinary(nil)
		if err != nil {
			t.Fatalf("decoded %x to %+v but cannot encode it: %v", wire[:8], h, err)
		}
		var again lisp.DataHeader
		if err := again.DecodeFromBytes(enc); err != nil || again != h {
			t.Fatalf("decode(encode(h)) = %+v, %v; want %+v", again, err, h)
		}
	})
}

// FuzzVerify checks that Verify is total on any input and never accepts
// a message that was not signed with the key.
func FuzzVerify(f *testing.F) {
	for name := range vectorKeys {
		f.Add(readVector(f, name))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		if lisp.Verify(wire, []byte("a key the fuzzer does not know")) == nil {
			t.Fatalf("Verify accepted %x", wire)
		}
	})
}
