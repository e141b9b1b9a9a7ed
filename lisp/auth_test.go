package lisp_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

func signedRegister(t *testing.T, alg lisp.AuthAlgorithm, key string) []byte {
	t.Helper()
	m := &lisp.MapRegister{
		WantMapNotify: true, Nonce: 7,
		Auth:    lisp.Auth{KeyID: 1, Algorithm: alg},
		Records: []lisp.MapRecord{registeredRecord},
		XTRID:   testXTRID,
	}
	b, err := m.AppendSigned(nil, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signing and verifying agree for every supported message and algorithm,
// and the data is the full digest, as deployed implementations send it.
func TestSignVerify(t *testing.T) {
	for _, alg := range []lisp.AuthAlgorithm{lisp.AuthHMACSHA1, lisp.AuthHMACSHA256} {
		notify := &lisp.MapNotify{Nonce: 7, Auth: lisp.Auth{Algorithm: alg}, Records: []lisp.MapRecord{registeredRecord}}
		ack := &lisp.MapNotifyAck{MapNotify: *notify}
		for _, m := range []interface {
			lisp.Message
			AppendSigned(b, key []byte) ([]byte, error)
		}{notify, ack} {
			b, err := m.AppendSigned([]byte("prefix that is not signed"), []byte("k"))
			if err != nil {
				t.Fatal(err)
			}
			b = b[len("prefix that is not signed"):]
			if err := lisp.Verify(b, []byte("k")); err != nil {
				t.Errorf("%s %s: %v", m.Type(), alg, err)
			}
			if want := map[lisp.AuthAlgorithm]int{lisp.AuthHMACSHA1: 20, lisp.AuthHMACSHA256: 32}[alg]; int(b[15]) != want {
				t.Errorf("%s %s: authentication data length %d, want %d", m.Type(), alg, b[15], want)
			}
		}
		if err := lisp.Verify(signedRegister(t, alg, "secret"), []byte("secret")); err != nil {
			t.Errorf("Map-Register %s: %v", alg, err)
		}
	}
}

// A digest truncated to the algorithm's nominal length (96 or 128 bits,
// as RFC-literal peers may send it) verifies too.
func TestVerifyAcceptsTruncatedDigest(t *testing.T) {
	for _, tc := range []struct {
		alg lisp.AuthAlgorithm
		h   func() hash.Hash
		n   int
	}{{lisp.AuthHMACSHA1, sha1.New, 12}, {lisp.AuthHMACSHA256, sha256.New, 16}} {
		m := &lisp.MapRegister{Nonce: 1, Auth: lisp.Auth{Algorithm: tc.alg, Data: make([]byte, tc.n)},
			Records: []lisp.MapRecord{registeredRecord}}
		b, err := m.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(tc.h, []byte("key"))
		mac.Write(b)
		copy(b[16:], mac.Sum(nil)[:tc.n])
		if err := lisp.Verify(b, []byte("key")); err != nil {
			t.Errorf("%s truncated to %d bytes: %v", tc.alg, tc.n, err)
		}
	}
}

func TestVerifyRefusals(t *testing.T) {
	good := signedRegister(t, lisp.AuthHMACSHA256, "secret")
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		msg  []byte
		key  string
		want error
	}{
		{"wrong key", good, "secret2", lisp.ErrAuthFailed},
		{"record changed", with(func(b []byte) []byte { b[len(b)-30] ^= 1; return b }), "secret", lisp.ErrAuthFailed},
		{"xTR-ID changed", with(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "secret", lisp.ErrAuthFailed},
		{"flag changed", with(func(b []byte) []byte { b[2] ^= 0x01; return b }), "secret", lisp.ErrAuthFailed},
		{"data flipped", with(func(b []byte) []byte { b[20] ^= 0x80; return b }), "secret", lisp.ErrAuthFailed},
		{"algorithm 0", signedRegister(t, lisp.AuthNone, ""), "secret", lisp.ErrAuthNone},
		{"algorithm 9", with(func(b []byte) []byte { b[13] = 9; return b }), "secret", lisp.ErrAuthAlgorithm},
		{"SHA-1 length for SHA-256", with(func(b []byte) []byte { b[15] = 20; return b }), "secret", lisp.ErrAuthLength},
		// opencp's hole: a length taken from the packet, here zero, must not
		// make an empty comparison succeed.
		{"zero length", with(func(b []byte) []byte { b[15] = 0; return b }), "secret", lisp.ErrAuthLength},
		{"empty key", good, "", lisp.ErrAuthKey},
		{"not an authenticated type", readVector(t, "msg-map-reply"), "secret", lisp.ErrBadValue},
		{"truncated", good[:20], "secret", io.ErrShortBuffer},
		{"shorter than the header", good[:10], "secret", io.ErrShortBuffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := lisp.Verify(tc.msg, []byte(tc.key)); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAppendSignedRefusesUnknownAlgorithm(t *testing.T) {
	m := &lisp.MapRegister{Auth: lisp.Auth{Algorithm: 3}}
	if _, err := m.AppendSigned(nil, []byte("k")); !errors.Is(err, lisp.ErrAuthAlgorithm) {
		t.Errorf("AppendSigned with algorithm 3 = %v, want ErrAuthAlgorithm", err)
	}
	if _, err := (&lisp.MapRegister{Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256}}).AppendSigned(nil, nil); !errors.Is(err, lisp.ErrAuthKey) {
		t.Errorf("AppendSigned with no key = %v, want ErrAuthKey", err)
	}
}

// An Authenticator keeps its state from message to message and refuses
// messages of another algorithm.
func TestAuthenticatorReuse(t *testing.T) {
	a, err := lisp.NewAuthenticator(lisp.AuthHMACSHA256, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		msg := signedRegister(t, lisp.AuthHMACSHA256, "secret")
		msg[11] = byte(i) // another nonce: the authentication data no longer matches
		if err := a.Verify(msg); !errors.Is(err, lisp.ErrAuthFailed) {
			t.Fatalf("altered message %d: %v", i, err)
		}
		if err := a.Sign(msg); err != nil {
			t.Fatal(err)
		}
		if err := a.Verify(msg); err != nil || lisp.Verify(msg, []byte("secret")) != nil {
			t.Fatalf("message %d re-signed: %v", i, err)
		}
	}
	if err := a.Verify(signedRegister(t, lisp.AuthHMACSHA1, "secret")); !errors.Is(err, lisp.ErrAuthAlgorithm) {
		t.Errorf("SHA-1 message with a SHA-256 authenticator: %v", err)
	}
	if _, err := lisp.NewAuthenticator(lisp.AuthHMACSHA256, nil); !errors.Is(err, lisp.ErrAuthKey) {
		t.Errorf("no key: %v", err)
	}
	msg := signedRegister(t, lisp.AuthHMACSHA256, "secret")
	if n := testing.AllocsPerRun(100, func() { a.Verify(msg) }); n != 0 {
		t.Errorf("Verify with a reused Authenticator allocates %.1f times", n)
	}
}

// The Map-Notify that acknowledges a Map-Register is the one encoding its
// fields gives, with or without an xTR-ID, and signs like it.
func TestAppendNotifyFor(t *testing.T) {
	for _, xtrID := range []*lisp.XTRID{testXTRID, nil} {
		reg := &lisp.MapRegister{ProxyReply: true, MergeRequest: true, WantMapNotify: true, Nonce: 7,
			Auth:    lisp.Auth{KeyID: 1, Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{registeredRecord, registeredRecord}, XTRID: xtrID}
		raw, err := reg.AppendSigned(nil, []byte("key"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := lisp.AppendNotifyFor([]byte("head"), raw, 32)
		if err != nil {
			t.Fatal(err)
		}
		n := lisp.MapNotify{Nonce: 7, Auth: lisp.Auth{KeyID: 1, Algorithm: lisp.AuthHMACSHA256, Data: make([]byte, 32)},
			Records: reg.Records, XTRID: xtrID}
		want, err := n.AppendBinary([]byte("head"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("xTR-ID %v: AppendNotifyFor = %x, want %x", xtrID != nil, got, want)
		}
		if err := lisp.Sign(got[4:], []byte("key")); err != nil || lisp.Verify(got[4:], []byte("key")) != nil {
			t.Errorf("xTR-ID %v: signing the Map-Notify: %v", xtrID != nil, err)
		}
	}
	for _, bad := range [][]byte{nil, signedRegister(t, lisp.AuthHMACSHA256, "key")[:15], {byte(lisp.TypeMapNotify << 4), 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0}} {
		if _, err := lisp.AppendNotifyFor(nil, bad, 32); err == nil {
			t.Errorf("AppendNotifyFor(%x) took it", bad)
		}
	}
	short := signedRegister(t, lisp.AuthHMACSHA256, "key")[:40] // cut in its HMAC
	if _, err := lisp.AppendNotifyFor(nil, short, 32); err == nil {
		t.Error("AppendNotifyFor took a Map-Register cut in its authentication data")
	}
}
