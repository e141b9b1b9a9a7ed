package traffic

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Protocol is the transport of a stream flow.
type Protocol uint8

// The transports: MPTCP (IPPROTO_MPTCP, which falls back to TCP when the
// peer does not answer in MPTCP) and plain TCP.
const (
	MPTCP Protocol = iota + 1
	TCP
)

var protocolNames = []string{MPTCP: "mptcp", TCP: "tcp"}

func (p Protocol) String() string               { return enumString(protocolNames, p) }
func (p Protocol) MarshalText() ([]byte, error) { return enumMarshal(protocolNames, p) }
func (p *Protocol) UnmarshalText(b []byte) error {
	return enumUnmarshal(protocolNames, "protocol", b, p)
}

// Kind is what a flow does.
type Kind uint8

// The kinds of flow.
const (
	// Transfer sends Flow.Bytes bytes once ([A-MPTCP]'s file series); its
	// completion time is what it measures.
	Transfer Kind = iota + 1
	// Saturate sends as fast as the connection takes for Flow.Duration,
	// as iperf does.
	Saturate
	// Background sends UDP datagrams at Flow.Rate for Flow.Duration
	// ([SDN-MPTCP]'s background traffic); it has no congestion control.
	Background
	// Iperf3 names the records of an iperf3 run that the lab made
	// (lab/iperf3), a cross-check of Saturate; this package does not run
	// it, and Flow.Validate refuses it.
	Iperf3
)

var kindNames = []string{Transfer: "transfer", Saturate: "saturate", Background: "background", Iperf3: "iperf3"}

func (k Kind) String() string                { return enumString(kindNames, k) }
func (k Kind) MarshalText() ([]byte, error)  { return enumMarshal(kindNames, k) }
func (k *Kind) UnmarshalText(b []byte) error { return enumUnmarshal(kindNames, "kind", b, k) }

// Direction says which end of a stream flow sends the data.
type Direction uint8

// The directions. A download is [A-MPTCP]'s case: the client fetches a
// file from a server in the data centre.
const (
	Upload   Direction = iota // the client (the end that dials) sends
	Download                  // the server sends
)

var directionNames = []string{Upload: "upload", Download: "download"}

func (d Direction) String() string               { return enumString(directionNames, d) }
func (d Direction) MarshalText() ([]byte, error) { return enumMarshal(directionNames, d) }
func (d *Direction) UnmarshalText(b []byte) error {
	return enumUnmarshal(directionNames, "direction", b, d)
}

// DefaultInterval is how often flows are sampled unless Flow.Interval
// says otherwise.
const DefaultInterval = 100 * time.Millisecond

// DefaultDatagram is the UDP payload size of a Background flow unless
// Flow.Datagram says otherwise: 1,400 bytes keep the IP packet (1,428
// bytes) under the 1,464-byte MTU of an EID behind a LISP tunnel.
const DefaultDatagram = 1400

// Flow describes one flow. The same value goes to both ends: the client
// sends it to the server in its first bytes (see Dial).
type Flow struct {
	// ID names the flow in the records; at most 255 bytes.
	ID   string
	Kind Kind
	// Protocol and CongestionControl apply to stream flows (Transfer,
	// Saturate). CongestionControl ("cubic", "reno", "bbr") is required:
	// the kernel's default here is bbr, and an experiment that compares
	// congestion controls must never depend on a default.
	Protocol          Protocol
	CongestionControl string
	Direction         Direction
	// Bytes is the size of a Transfer.
	Bytes int64
	// Duration is how long a Saturate or Background flow sends.
	Duration time.Duration
	// Rate is a Background flow's rate in bits per second of UDP payload
	// (as iperf3 -b counts).
	Rate float64
	// Datagram is a Background flow's UDP payload size; 0 means
	// DefaultDatagram.
	Datagram int
	// Interval is the sampling period; 0 means DefaultInterval.
	Interval time.Duration
	// Local is the client's source address (a multi-homed host's address
	// on the link the flow starts on); any when left out.
	Local netip.Addr
}

// Limits of a Flow's fields, set by the stream header's encoding and by
// what a datagram can carry.
const (
	maxIDLen       = 255
	maxCCLen       = 15 // TCP_CA_NAME_MAX - 1
	minDatagram    = udpHeaderLen
	maxDatagram    = 65507
	minStreamBytes = 1
)

// Validate returns every problem of f at once, each naming its field.
func (f Flow) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("flow %q: %s: %s", f.ID, field, fmt.Sprintf(format, a...)))
	}
	if f.ID == "" || len(f.ID) > maxIDLen {
		bad("id", "need 1 to %d bytes, have %d", maxIDLen, len(f.ID))
	}
	if f.Interval < 0 {
		bad("interval", "negative")
	}
	switch f.Kind {
	case Transfer, Saturate:
		if f.Protocol != MPTCP && f.Protocol != TCP {
			bad("protocol", "need mptcp or tcp")
		}
		if f.CongestionControl == "" {
			bad("congestion_control", "missing (the kernel's default is bbr: set it explicitly)")
		} else if len(f.CongestionControl) > maxCCLen || strings.ContainsRune(f.CongestionControl, 0) {
			bad("congestion_control", "%q is not a congestion control name", f.CongestionControl)
		}
		if f.Direction != Upload && f.Direction != Download {
			bad("direction", "need upload or download")
		}
		if f.Kind == Transfer && f.Bytes < minStreamBytes {
			bad("bytes", "need at least %d, have %d", minStreamBytes, f.Bytes)
		}
		if f.Kind == Saturate && f.Duration <= 0 {
			bad("duration", "need a positive duration")
		}
	case Background:
		if f.Rate <= 0 {
			bad("rate", "need a positive rate")
		}
		if f.Duration <= 0 {
			bad("duration", "need a positive duration")
		}
		if f.Datagram != 0 && (f.Datagram < minDatagram || f.Datagram > maxDatagram) {
			bad("datagram", "need %d to %d bytes, have %d", minDatagram, maxDatagram, f.Datagram)
		}
	default:
		bad("kind", "need transfer, saturate or background")
	}
	return errors.Join(errs...)
}

func (f Flow) interval() time.Duration {
	if f.Interval > 0 {
		return f.Interval
	}
	return DefaultInterval
}

func (f Flow) datagram() int {
	if f.Datagram > 0 {
		return f.Datagram
	}
	return DefaultDatagram
}

// enumString, enumMarshal and enumUnmarshal serve the small enums above,
// whose names are indexed by value (index 0 unused unless the zero value
// is meaningful).
func enumString[T ~uint8](names []string, v T) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%d", uint8(v))
}

func enumMarshal[T ~uint8](names []string, v T) ([]byte, error) {
	if int(v) < len(names) && names[v] != "" {
		return []byte(names[v]), nil
	}
	return nil, fmt.Errorf("traffic: no name for value %d", uint8(v))
}

func enumUnmarshal[T ~uint8](names []string, what string, b []byte, v *T) error {
	for i, n := range names {
		if n != "" && n == string(b) {
			*v = T(i)
			return nil
		}
	}
	return fmt.Errorf("traffic: unknown %s %q", what, b)
}
