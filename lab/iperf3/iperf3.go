// Package iperf3 is the lab's cross-check of its own traffic generator:
// the command lines of an iperf3 test (through `mptcpize run` for MPTCP,
// since iperf3 3.12 has no --mptcp), and the decoding of iperf3's JSON
// report (-J) into lab/traffic result records, so that iperf3's goodput
// lands in the same results, and the same report, as a saturated flow's.
// The lab runs the programs (lab.RunScenario, flows of kind iperf3).
package iperf3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// The programs: iperf3, and mptcpize (Debian package mptcpize), which
// runs a program with a preloaded library that turns its TCP sockets
// into MPTCP ones.
const (
	Program  = "iperf3"
	Mptcpize = "mptcpize"
)

// ServerArgs is the command line of the server of flow f, argv[0] first:
// one test (-1) on port, with its report as JSON.
func ServerArgs(f traffic.Flow, port uint16) []string {
	return wrap(f, "-s", "-1", "-p", strconv.Itoa(int(port)), "-J")
}

// ClientArgs is the command line of the client of flow f, argv[0] first:
// a test of f's duration (whole seconds: iperf3 -t takes no fraction)
// to server with f's congestion control, the server sending for a
// Download (-R).
func ClientArgs(f traffic.Flow, server netip.AddrPort) []string {
	args := []string{"-c", server.Addr().String(), "-p", strconv.Itoa(int(server.Port())),
		"-C", f.CongestionControl, "-t", strconv.Itoa(int(f.Duration / time.Second)), "-J"}
	if f.Direction == traffic.Download {
		args = append(args, "-R")
	}
	return wrap(f, args...)
}

// wrap puts iperf3 under mptcpize for an MPTCP flow.
func wrap(f traffic.Flow, args ...string) []string {
	cmd := append([]string{Program}, args...)
	if f.Protocol == traffic.MPTCP {
		cmd = append([]string{Mptcpize, "run"}, cmd...)
	}
	return cmd
}

// Output is what the lab reads of iperf3's JSON report (-J).
type Output struct {
	Start struct {
		// Connected are the test's data connections, one per stream.
		Connected []Connection `json:"connected"`
	} `json:"start"`
	End struct {
		// SumSent is the sender's view, SumReceived the receiver's,
		// whichever end the client is.
		SumSent     Sum `json:"sum_sent"`
		SumReceived Sum `json:"sum_received"`
		// The congestion controls of the two ends' data sockets, as
		// iperf3 read them back.
		SenderCC   string `json:"sender_tcp_congestion"`
		ReceiverCC string `json:"receiver_tcp_congestion"`
	} `json:"end"`
	// Error is iperf3's own error message; Decode returns it as *Error.
	Error string `json:"error"`
}

// Connection is a data connection as the client saw it.
type Connection struct {
	LocalHost  string `json:"local_host"`
	LocalPort  uint16 `json:"local_port"`
	RemoteHost string `json:"remote_host"`
	RemotePort uint16 `json:"remote_port"`
}

// Sum is one end's totals over the test.
type Sum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	// Retransmits are the sender's retransmitted segments, from
	// TCP_INFO: on an MPTCP socket the kernel answers TCP_INFO for its
	// first subflow only.
	Retransmits uint32 `json:"retransmits"`
}

// Error is an error iperf3 reported (its JSON's "error").
type Error struct {
	Msg string
}

func (e *Error) Error() string { return "iperf3: " + e.Msg }

// DecodeError says why iperf3's output could not be used: it is not
// JSON, or lacks what a finished test reports.
type DecodeError struct {
	Field string // the missing or bad field, e.g. "end.sum_received.seconds"; empty when the JSON is bad
	Err   error
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "iperf3 output: " + e.Err.Error()
	}
	return fmt.Sprintf("iperf3 output: %s: %v", e.Field, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrMissing is the error of a DecodeError for a field a finished test
// reports and the output lacks.
var ErrMissing = errors.New("missing")

// Decode reads iperf3's JSON report. When iperf3 reports an error, Decode
// returns the output with an *Error; output that is not a finished test's
// report gives a *DecodeError.
func Decode(b []byte) (*Output, error) {
	var o Output
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &DecodeError{Err: errors.New("empty")}
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, &DecodeError{Err: err}
	}
	if o.Error != "" {
		return &o, &Error{Msg: o.Error}
	}
	switch {
	case len(o.Start.Connected) == 0:
		return nil, &DecodeError{Field: "start.connected", Err: ErrMissing}
	case o.End.SumSent.Seconds <= 0:
		return nil, &DecodeError{Field: "end.sum_sent.seconds", Err: ErrMissing}
	case o.End.SumReceived.Seconds <= 0:
		return nil, &DecodeError{Field: "end.sum_received.seconds", Err: ErrMissing}
	}
	return &o, nil
}

// DataPort is the client's port of the (first) data connection: the one
// to look for among the namespace's MPTCP sockets.
func (o *Output) DataPort() uint16 { return o.Start.Connected[0].LocalPort }

// Records are flow f's result records, one per end as lab/traffic's
// stream flows write theirs, the client's end first; both start at
// start (when the client was started) and carry protocol, the transport
// the data connection really used, and subflows, the most it had at
// once. The receiver's goodput, BytesReceived over Completion, is
// iperf3's end.sum_received.bits_per_second; the sender's record has
// iperf3's retransmits.
func (o *Output) Records(f traffic.Flow, start time.Time, protocol traffic.Protocol, subflows int) []traffic.Record {
	end := func(role traffic.Role, sum Sum, cc string) traffic.Record {
		d := time.Duration(sum.Seconds * float64(time.Second))
		return traffic.Record{Time: start.Add(d), Flow: f.ID, Kind: traffic.KindResult, Role: role,
			Protocol: protocol, CongestionControl: cc, FlowKind: traffic.Iperf3, Start: start, Completion: d,
			Subflows: uint8(min(subflows, 255))}
	}
	snd := end(traffic.Sender, o.End.SumSent, o.End.SenderCC)
	snd.BytesSent, snd.Retransmits = o.End.SumSent.Bytes, o.End.SumSent.Retransmits
	rcv := end(traffic.Receiver, o.End.SumReceived, o.End.ReceiverCC)
	rcv.BytesReceived = o.End.SumReceived.Bytes
	if f.Direction == traffic.Download {
		return []traffic.Record{rcv, snd}
	}
	return []traffic.Record{snd, rcv}
}

// Failed is the result record of flow f's client when the test that
// ran from start to end failed: at the client's end (the receiver for a
// Download), with err.
func Failed(f traffic.Flow, start, end time.Time, err error) traffic.Record {
	role := traffic.Sender
	if f.Direction == traffic.Download {
		role = traffic.Receiver
	}
	return traffic.Record{Time: end, Flow: f.ID, Kind: traffic.KindResult, Role: role,
		Protocol: f.Protocol, CongestionControl: f.CongestionControl, FlowKind: traffic.Iperf3,
		Start: start, Completion: end.Sub(start), Error: err.Error()}
}
