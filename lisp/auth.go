package lisp

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
)

// AuthAlgorithm is the Algorithm ID of a Map-Register, Map-Notify or
// Map-Notify-Ack (RFC 9301 §5.6, IANA "LISP Algorithm ID Numbers").
type AuthAlgorithm uint8

// The algorithms this package signs and verifies with. The RFC 9301
// HKDF variants (3 and 4) are not supported.
const (
	AuthNone       AuthAlgorithm = 0 // no authentication
	AuthHMACSHA1   AuthAlgorithm = 1 // HMAC-SHA-1-96
	AuthHMACSHA256 AuthAlgorithm = 2 // HMAC-SHA-256-128
)

func (a AuthAlgorithm) String() string {
	switch a {
	case AuthNone:
		return "none"
	case AuthHMACSHA1:
		return "hmac-sha1-96"
	case AuthHMACSHA256:
		return "hmac-sha256-128"
	}
	return "algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Auth is the authentication section of Map-Register, Map-Notify and
// Map-Notify-Ack:
//
//	|    Key ID     | Algorithm ID  |  Authentication Data Length   |
//	~                     Authentication Data                       ~
//
// Key ID selects one of the shared keys of a site; RFC 6833 had a 16-bit
// Key ID holding the algorithm, which is the same bytes with Key ID 0.
type Auth struct {
	KeyID     uint8
	Algorithm AuthAlgorithm
	Data      []byte
}

// Errors from Verify. A wrong key or altered message gives ErrAuthFailed.
var (
	ErrAuthNone      = errors.New("message is not authenticated (algorithm 0)")
	ErrAuthAlgorithm = errors.New("unsupported authentication algorithm")
	ErrAuthLength    = errors.New("authentication data length does not match the algorithm")
	ErrAuthKey       = errors.New("empty authentication key")
	ErrAuthFailed    = errors.New("authentication data does not match")
)

// authDataOffset is where the authentication data starts in the messages
// that carry it: after the header word, the nonce and the Key ID,
// Algorithm ID and length word.
const authDataOffset = 16

// digest describes an algorithm: its hash and the lengths of its
// authentication data on the wire.
type digest struct {
	hash func() hash.Hash
	// full is the whole HMAC, which we send: OOR, lispers.net and
	// Wireshark carry 20 bytes for HMAC-SHA-1-96 and 32 for
	// HMAC-SHA-256-128. truncated is the length the algorithm's name
	// promises, which we also accept.
	full, truncated int
}

func (a AuthAlgorithm) digest() (digest, error) {
	switch a {
	case AuthHMACSHA1:
		return digest{sha1.New, sha1.Size, 12}, nil
	case AuthHMACSHA256:
		return digest{sha256.New, sha256.Size, 16}, nil
	case AuthNone:
		return digest{}, ErrAuthNone
	}
	return digest{}, fmt.Errorf("%w: %s", ErrAuthAlgorithm, a)
}

func (a Auth) len() int { return 4 + len(a.Data) }

func (a Auth) appendTo(b []byte, msg string) ([]byte, error) {
	if len(a.Data) > 0xffff {
		return nil, encodeError(msg, "%d bytes of authentication data exceed the 16-bit length", len(a.Data))
	}
	b = append(b, a.KeyID, byte(a.Algorithm))
	b = binary.BigEndian.AppendUint16(b, uint16(len(a.Data)))
	return append(b, a.Data...), nil
}

func (r *reader) auth(a *Auth) {
	a.KeyID = r.u8("key ID")
	a.Algorithm = AuthAlgorithm(r.u8("algorithm ID"))
	n := int(r.u16("authentication data length"))
	// Decoding into the same message again reuses its storage, as the
	// map-server's loop does.
	a.Data = append(a.Data[:0], r.take(n, "authentication data")...)
	if len(a.Data) == 0 {
		a.Data = nil
	}
}

// Verify checks the authentication data of an encoded Map-Register,
// Map-Notify or Map-Notify-Ack against key: the HMAC of the whole message
// with the authentication data zeroed, compared in constant time. The
// length of the data must be the full digest or the truncated one of the
// algorithm; no other length is trusted. Callers choose key by the
// message's Key ID and refuse algorithm 0 (ErrAuthNone) unless their policy
// allows unauthenticated registration. A server verifying many messages
// with one key reuses an Authenticator instead.
func Verify(msg, key []byte) error {
	a, err := authenticatorFor(msg, key)
	if err != nil {
		return err
	}
	return a.Verify(msg)
}

// Sign writes the authentication data of an encoded Map-Register,
// Map-Notify or Map-Notify-Ack in place. The message must carry a data
// field of the full digest length, as AppendSigned encodes it.
func Sign(msg, key []byte) error {
	a, err := authenticatorFor(msg, key)
	if err != nil {
		return err
	}
	return a.Sign(msg)
}

// authenticatorFor is a one-message Authenticator for msg's algorithm.
func authenticatorFor(msg, key []byte) (*Authenticator, error) {
	if _, _, err := authParams(msg); err != nil {
		return nil, err
	}
	return NewAuthenticator(AuthAlgorithm(msg[13]), key)
}

// Authenticator signs and verifies messages with one key and algorithm,
// keeping its HMAC state from message to message: building one costs more
// than hashing a Map-Register. It is not safe for concurrent use.
type Authenticator struct {
	alg AuthAlgorithm
	d   digest
	mac hash.Hash
	sum [sha256.Size]byte
}

// NewAuthenticator returns an Authenticator for key and alg.
func NewAuthenticator(alg AuthAlgorithm, key []byte) (*Authenticator, error) {
	d, err := alg.digest()
	if err != nil {
		return nil, err
	}
	if len(key) == 0 {
		return nil, ErrAuthKey
	}
	return &Authenticator{alg: alg, d: d, mac: hmac.New(d.hash, key)}, nil
}

// Algorithm is the algorithm the Authenticator signs and verifies with.
func (a *Authenticator) Algorithm() AuthAlgorithm { return a.alg }

// DataLen is the length of the authentication data it signs with: the
// full digest.
func (a *Authenticator) DataLen() int { return a.d.full }

// Verify checks msg as the function Verify does; msg must use the
// Authenticator's algorithm.
func (a *Authenticator) Verify(msg []byte) error {
	d, n, err := a.params(msg)
	if err != nil {
		return err
	}
	if !hmac.Equal(msg[authDataOffset:authDataOffset+n], a.hmac(d, msg, n)[:n]) {
		return ErrAuthFailed
	}
	return nil
}

// Sign signs msg in place as the function Sign does.
func (a *Authenticator) Sign(msg []byte) error {
	d, n, err := a.params(msg)
	if err != nil {
		return err
	}
	if n != d.full {
		return fmt.Errorf("%w: %d bytes, sign with the full %d", ErrAuthLength, n, d.full)
	}
	copy(msg[authDataOffset:], a.hmac(d, msg, n))
	return nil
}

func (a *Authenticator) params(msg []byte) (digest, int, error) {
	d, n, err := authParams(msg)
	if err == nil && AuthAlgorithm(msg[13]) != a.alg {
		err = fmt.Errorf("%w: message uses %s, key is for %s", ErrAuthAlgorithm, AuthAlgorithm(msg[13]), a.alg)
	}
	return d, n, err
}

// hmac is the HMAC of msg with its n bytes of authentication data taken
// as zero, without copying the message.
func (a *Authenticator) hmac(d digest, msg []byte, n int) []byte {
	a.mac.Reset()
	a.mac.Write(msg[:authDataOffset])
	a.mac.Write(zeroAuth[:n])
	a.mac.Write(msg[authDataOffset+n:])
	return a.mac.Sum(a.sum[:0])
}

// authParams reads the algorithm and data length of an encoded message.
func authParams(msg []byte) (digest, int, error) {
	if len(msg) < authDataOffset {
		return digest{}, 0, &ParseError{Msg: "authenticated message", Field: "authentication data length", Offset: len(msg), Err: errShort}
	}
	switch t := MsgType(msg[0] >> 4); t {
	case TypeMapRegister, TypeMapNotify, TypeMapNotifyAck:
	default:
		return digest{}, 0, &ParseError{Msg: t.String(), Field: "type", Err: fmt.Errorf("%w: %s carries no authentication data", ErrBadValue, t)}
	}
	d, err := AuthAlgorithm(msg[13]).digest()
	if err != nil {
		return digest{}, 0, err
	}
	n := int(binary.BigEndian.Uint16(msg[14:16]))
	if n != d.full && n != d.truncated {
		return digest{}, 0, fmt.Errorf("%w: %d bytes for %s, want %d or %d",
			ErrAuthLength, n, AuthAlgorithm(msg[13]), d.full, d.truncated)
	}
	if len(msg) < authDataOffset+n {
		return digest{}, 0, &ParseError{Msg: MsgType(msg[0] >> 4).String(), Field: "authentication data", Offset: authDataOffset, Err: errShort}
	}
	return d, n, nil
}

var zeroAuth [sha256.Size]byte

// appendSigned encodes m, whose authentication section is a, with
// authentication data computed from key, and records the data in a. With
// AuthNone it encodes an unauthenticated message and ignores key.
func appendSigned(b []byte, m Message, a *Auth, key []byte) ([]byte, error) {
	if a.Algorithm == AuthNone {
		a.Data = nil
		return m.AppendBinary(b)
	}
	d, err := a.Algorithm.digest()
	if err != nil {
		return nil, fmt.Errorf("lisp: sign %s: %w", m.Type(), err)
	}
	a.Data = make([]byte, d.full)
	start := len(b)
	if b, err = m.AppendBinary(b); err != nil {
		return nil, err
	}
	if err := Sign(b[start:], key); err != nil {
		return nil, fmt.Errorf("lisp: sign %s: %w", m.Type(), err)
	}
	copy(a.Data, b[start+authDataOffset:])
	return b, nil
}
