package traffic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The stream header: the client's first bytes on every stream flow, so
// that the server knows the flow without any other channel.
//
//	 0               1               2               3
//	+---------------+---------------+---------------+---------------+
//	|                       magic "ATRF"                            |
//	+---------------+---------------+---------------+---------------+
//	|   version 1   |     kind      |   direction   |    cc len     |
//	+---------------+---------------+---------------+---------------+
//	|    id len     |            reserved (zero)                    |
//	+---------------+---------------+---------------+---------------+
//	|                 sampling interval (microseconds)              |
//	+---------------+---------------+---------------+---------------+
//	|                  bytes (Transfer), 64 bits                    |
//	+---------------+---------------+---------------+---------------+
//	|            duration (Saturate, nanoseconds), 64 bits          |
//	+---------------+---------------+---------------+---------------+
//	|   congestion control name (cc len bytes), flow id (id len)    |
//
// All integers are big-endian.
const (
	headerMagic   = "ATRF"
	headerVersion = 1
	headerLen     = 32
)

// ErrBadHeader is wrapped by a HeaderError whose field holds a value
// the header does not allow.
var ErrBadHeader = errors.New("bad value")

// HeaderError says what was wrong with a stream header a client sent.
type HeaderError struct {
	Field string
	Err   error // io.ErrUnexpectedEOF or ErrBadHeader
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("traffic: stream header: %s: %v", e.Field, e.Err)
}
func (e *HeaderError) Unwrap() error { return e.Err }

// appendHeader encodes f's stream header; f must be valid.
func appendHeader(b []byte, f Flow) []byte {
	var h [headerLen]byte
	copy(h[:], headerMagic)
	h[4] = headerVersion
	h[5] = byte(f.Kind)
	h[6] = byte(f.Direction)
	h[7] = byte(len(f.CongestionControl))
	h[8] = byte(len(f.ID))
	binary.BigEndian.PutUint32(h[12:], uint32(f.interval()/time.Microsecond))
	binary.BigEndian.PutUint64(h[16:], uint64(f.Bytes))
	binary.BigEndian.PutUint64(h[24:], uint64(f.Duration))
	b = append(b, h[:]...)
	b = append(b, f.CongestionControl...)
	return append(b, f.ID...)
}

// readHeader reads and checks a stream header.
func readHeader(r io.Reader) (Flow, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Flow{}, &HeaderError{Field: "fixed part", Err: shortRead(err)}
	}
	if string(h[:4]) != headerMagic {
		return Flow{}, &HeaderError{Field: "magic", Err: ErrBadHeader}
	}
	if h[4] != headerVersion {
		return Flow{}, &HeaderError{Field: "version", Err: ErrBadHeader}
	}
	f := Flow{
		Kind:      Kind(h[5]),
		Direction: Direction(h[6]),
		Interval:  time.Duration(binary.BigEndian.Uint32(h[12:])) * time.Microsecond,
		Bytes:     int64(binary.BigEndian.Uint64(h[16:])),
		Duration:  time.Duration(binary.BigEndian.Uint64(h[24:])),
		Protocol:  TCP, // what the server sees is set by the caller
	}
	names := make([]byte, int(h[7])+int(h[8]))
	if _, err := io.ReadFull(r, names); err != nil {
		return Flow{}, &HeaderError{Field: "names", Err: shortRead(err)}
	}
	f.CongestionControl = string(names[:h[7]])
	f.ID = string(names[h[7]:])
	if f.Kind != Transfer && f.Kind != Saturate {
		return Flow{}, &HeaderError{Field: "kind", Err: ErrBadHeader}
	}
	if err := f.Validate(); err != nil {
		return Flow{}, &HeaderError{Field: "flow", Err: fmt.Errorf("%w: %w", ErrBadHeader, err)}
	}
	return f, nil
}

// shortRead names a header cut short as io.ErrUnexpectedEOF.
func shortRead(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
