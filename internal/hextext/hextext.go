// Package hextext reads bytes written as annotated hex: hex digits in any
// grouping, with comments from '#' to the end of the line. The golden
// vectors are written this way, and `amptcp decode` reads it.
package hextext

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Decode returns the bytes that text spells.
func Decode(text string) ([]byte, error) {
	var out []byte
	var carry string // an odd digit left at the end of a line
	for n, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		digits := carry + strings.Join(strings.Fields(line), "")
		carry = ""
		if len(digits)%2 == 1 {
			digits, carry = digits[:len(digits)-1], digits[len(digits)-1:]
		}
		b, err := hex.DecodeString(digits)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, b...)
	}
	if carry != "" {
		return nil, fmt.Errorf("odd number of hex digits")
	}
	return out, nil
}
