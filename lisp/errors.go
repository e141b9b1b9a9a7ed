package lisp

import (
	"errors"
	"fmt"
	"io"
)

// The reasons a decoder refuses its input; a *ParseError wraps one of them.
// Truncated input wraps io.ErrShortBuffer.
var (
	// ErrBadLength: a length or count field disagrees with the data.
	ErrBadLength = errors.New("length field disagrees with the data")
	// ErrBadValue: a field holds a value the format does not allow.
	ErrBadValue = errors.New("value out of range")
	// ErrUnknownType: a message type or AFI this package cannot size.
	ErrUnknownType = errors.New("unknown type")
	// ErrTooDeep: LCAFs nested deeper than MaxLCAFDepth.
	ErrTooDeep = errors.New("LCAF nesting too deep")
	// ErrTrailingData: bytes after the end of a complete message.
	ErrTrailingData = errors.New("trailing data after the message")
)

// ParseError says what input a decoder refused, and where.
type ParseError struct {
	Msg    string // the message or header being decoded, e.g. "Map-Request"
	Field  string // the field path, e.g. "records[0].locators[1].afi"
	Offset int    // byte offset of the field from the start of the input
	Err    error  // io.ErrShortBuffer or one of the Err values above
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("lisp: %s: %s at offset %d: %v", e.Msg, e.Field, e.Offset, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// errShort is the error for input that ends inside a field.
var errShort = io.ErrShortBuffer

// encodeError reports a value that cannot be put on the wire.
func encodeError(msg, format string, args ...any) error {
	return fmt.Errorf("lisp: encode %s: %s", msg, fmt.Sprintf(format, args...))
}
