package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Iperf is what one iperf3 client run reported with -J, reduced to what
// the bench uses.
type Iperf struct {
	Version string `json:"version"` // "iperf 3.12"
	Streams int    `json:"streams"`
	// Seconds and Bytes are the receiver's: what arrived, in the time it
	// took. ReceivedBitsPerSecond is the goodput the bench ranks by.
	Seconds               float64 `json:"seconds"`
	Bytes                 uint64  `json:"bytes"`
	ReceivedBitsPerSecond float64 `json:"received_bits_per_second"`
	SentBitsPerSecond     float64 `json:"sent_bits_per_second"`
	Retransmits           uint64  `json:"retransmits"`
	// CPU is iperf3's own: the share of one core each end's process used.
	SenderCPU   float64 `json:"sender_cpu_percent"`
	ReceiverCPU float64 `json:"receiver_cpu_percent"`
	// Congestion is the congestion control each end used.
	SenderCongestion   string `json:"sender_congestion"`
	ReceiverCongestion string `json:"receiver_congestion"`
}

// iperfJSON is the part of `iperf3 -J`'s output (iperf 3.12, TCP) that
// ParseIperf reads.
type iperfJSON struct {
	Start struct {
		Version   string `json:"version"`
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
			Reverse    int    `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	End struct {
		SumSent     *iperfSum `json:"sum_sent"`
		SumReceived *iperfSum `json:"sum_received"`
		CPU         struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
		SenderCongestion   string `json:"sender_tcp_congestion"`
		ReceiverCongestion string `json:"receiver_tcp_congestion"`
	} `json:"end"`
	Error string `json:"error"`
}

type iperfSum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   uint64  `json:"retransmits"`
}

// ParseIperf reads the JSON output of an iperf3 TCP client run (-J), in
// the client's direction (not -R). An error iperf3 reported in it is
// returned as an error with iperf3's message.
func ParseIperf(b []byte) (*Iperf, error) {
	var j iperfJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("read iperf3's output: %w", err)
	}
	if j.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", j.Error)
	}
	ts := j.Start.TestStart
	switch {
	case ts.Protocol != "TCP":
		return nil, fmt.Errorf("read iperf3's output: protocol %q, want TCP", ts.Protocol)
	case ts.Reverse != 0:
		return nil, errors.New("read iperf3's output: a reverse (-R) run")
	case j.End.SumSent == nil || j.End.SumReceived == nil:
		return nil, errors.New("read iperf3's output: no end.sum_sent or end.sum_received")
	case j.End.SumReceived.Seconds <= 0:
		return nil, errors.New("read iperf3's output: the receiver measured no time")
	}
	sent, recv := j.End.SumSent, j.End.SumReceived
	return &Iperf{
		Version: j.Start.Version, Streams: ts.NumStreams,
		Seconds: recv.Seconds, Bytes: recv.Bytes,
		ReceivedBitsPerSecond: recv.BitsPerSecond, SentBitsPerSecond: sent.BitsPerSecond,
		Retransmits: sent.Retransmits,
		SenderCPU:   j.End.CPU.HostTotal, ReceiverCPU: j.End.CPU.RemoteTotal,
		SenderCongestion: j.End.SenderCongestion, ReceiverCongestion: j.End.ReceiverCongestion,
	}, nil
}
