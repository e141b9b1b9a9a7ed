package lisp

import (
	"encoding/binary"
	"fmt"
)

// reader decodes big-endian fields from b[off:end]. Offsets are absolute in
// b, so errors name the offset in the caller's input however deep the
// decoding is. The first failure sticks: it empties the window (end = off),
// so later reads find nothing and return zero values, and err says what
// failed and where. Callers check err at loop boundaries and add their
// part of the field path on the way out.
type reader struct {
	b     []byte
	off   int
	end   int
	msg   string
	depth int // LCAF nesting depth
	err   *ParseError

	// Slabs the LCAFs of one message take their storage from.
	elps  []elpBlock
	lists []afiListBlock
}

// slabSize is how many LCAF blocks a slab holds: a mapping with several
// paths then costs one allocation per few paths instead of two per path,
// and a mapping with one path wastes a few hundred bytes.
const slabSize = 4

// fromSlab returns the next zero element of *slab, refilling it when empty.
func fromSlab[T any](slab *[]T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, slabSize)
	}
	v := &(*slab)[0]
	*slab = (*slab)[1:]
	return v
}

func newReader(b []byte, msg string) reader {
	return reader{b: b, end: len(b), msg: msg}
}

// failAt records the first error.
func (r *reader) failAt(off int, field string, err error) {
	if r.err == nil {
		r.err = &ParseError{Msg: r.msg, Field: field, Offset: off, Err: err}
	}
	r.end = r.off
}

func (r *reader) fail(field string, err error) { r.failAt(r.off, field, err) }

// prefix prepends a path element to the field of the recorded error.
func (r *reader) prefix(format string, args ...any) {
	if r.err != nil {
		r.err.Field = fmt.Sprintf(format, args...) + r.err.Field
	}
}

// error returns the recorded error as an error interface (nil if none).
func (r *reader) error() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

func (r *reader) remaining() int { return r.end - r.off }

// take returns the next n bytes (n >= 0), or nil after recording a
// short-buffer error. The bytes alias the input: copy what is kept.
func (r *reader) take(n int, field string) []byte {
	if n > r.end-r.off {
		r.short(field)
		return nil
	}
	r.off += n
	return r.b[r.off-n : r.off]
}

// short records that the input ends inside field. It is kept out of line
// so that the field readers below stay small enough to inline.
//
//go:noinline
func (r *reader) short(field string) { r.fail(field, errShort) }

func (r *reader) u8(field string) uint8 {
	if r.end-r.off < 1 {
		r.short(field)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16(field string) uint16 {
	if r.end-r.off < 2 {
		r.short(field)
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32(field string) uint32 {
	if r.end-r.off < 4 {
		r.short(field)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(field string) uint64 {
	if r.end-r.off < 8 {
		r.short(field)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// copyBytes returns a copy of the next n bytes: decoded values never alias
// the input, which callers are free to reuse.
func (r *reader) copyBytes(n int, field string) []byte {
	v := r.take(n, field)
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

// limit narrows the reader to the next n bytes, a length-delimited part.
// It returns the end to restore with unlimit.
func (r *reader) limit(n int, field string) (outer int) {
	outer = r.end
	if n > r.end-r.off {
		r.fail(field, errShort)
		return outer
	}
	r.end = r.off + n
	return outer
}

// unlimit checks that the part was consumed exactly, blaming the length
// field at lengthAt if not, and restores the end (unless decoding failed:
// the window stays empty).
func (r *reader) unlimit(outer, lengthAt int, field string) {
	if r.err == nil && r.off != r.end {
		r.failAt(lengthAt, field, ErrBadLength)
	}
	if r.err == nil {
		r.end = outer
	}
}

// finish checks that nothing follows a complete message.
func (r *reader) finish() {
	if r.err == nil && r.off != r.end {
		r.fail("end of message", ErrTrailingData)
	}
}

// capacity bounds a slice preallocation by a count from the wire: no more
// elements than the remaining bytes could hold at minSize bytes each, so a
// lying count cannot make us allocate more than the input justifies.
func (r *reader) capacity(count, minSize int) int {
	return min(count, r.remaining()/minSize)
}
