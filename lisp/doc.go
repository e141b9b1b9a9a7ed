// Package lisp encodes and decodes the wire formats of the Locator/ID
// Separation Protocol: the control messages of RFC 9301 (Map-Request,
// Map-Reply, Map-Register, Map-Notify, Map-Notify-Ack, the Encapsulated
// Control Message) and RFC 8111 (Map-Referral), the addresses they carry
// including the LCAF types of RFC 8060, the data-plane header of RFC 9300,
// and the HMAC authentication of Map-Register and Map-Notify.
//
// It is pure code: bytes in, values out, no sockets. Every message has
// DecodeFromBytes, Len and AppendBinary; Parse decodes any control
// message by its type. Decoders are strict and total: on input that is
// truncated, whose lengths or counts lie, that nests LCAFs deeper than
// MaxLCAFDepth or that holds values the format forbids, they return a
// *ParseError naming the message, the field path and the offset, and they
// never panic or allocate more than the input justifies. Decoded values
// never alias the input. LCAF types this package does not interpret are
// kept whole as *RawLCAF, so decoding and encoding again loses nothing.
//
// docs/wire.md lists what is supported, section by section, and the
// choices made to interoperate with deployed implementations.
package lisp
