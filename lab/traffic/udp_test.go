package traffic

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// dropRule says whether a relay drops a datagram: a data datagram by its
// sequence number (marker -1), an end marker by its rank (0 for the first).
type dropRule func(seq uint64, marker int) bool

// lossyRelay forwards datagrams from a sender to the sink at to on
// loopback, dropping those that drop names, and returns its address.
func lossyRelay(t *testing.T, to net.Addr, drop dropRule) string {
	t.Helper()
	in, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := net.DialUDP("udp", nil, to.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); out.Close() })
	go func() {
		buf := make([]byte, 65536)
		markers := 0
		for {
			n, err := in.Read(buf)
			if err != nil {
				return // closed by cleanup
			}
			marker := -1
			if buf[4]&udpFlagEnd != 0 {
				marker = markers
				markers++
			}
			if !drop(binary.BigEndian.Uint64(buf[8:]), marker) {
				out.Write(buf[:n])
			}
		}
	}()
	return in.LocalAddr().String()
}

// backgroundThrough sends a 200-datagram Background flow through a relay
// that drops what drop says and returns what the sink made of it.
func backgroundThrough(t *testing.T, drop dropRule) []Result {
	t.Helper()
	sink, err := ListenUDP("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sink.Serve(ctx, nil) }()
	f := Flow{ID: "bg", Kind: Background, Rate: 8e6, Datagram: 1000, Duration: 200 * time.Millisecond}
	snd, err := DialUDP(f, lossyRelay(t, sink.Addr(), drop))
	if err != nil {
		t.Fatal(err)
	}
	sent, err := snd.Run(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Datagrams != 200 {
		t.Fatalf("sent %d datagrams, want 200", sent.Datagrams)
	}
	// The last markers' way through the relay: each case's flow ends
	// with one that arrives.
	for deadline := time.Now().Add(10 * time.Second); len(sink.Results()) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	return sink.Results()
}

// TestBackgroundCountsLossAtTheEnd loses the flow's last datagrams: the
// sink learns from the end markers that they were sent.
func TestBackgroundCountsLossAtTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop dropRule
		lost uint64
	}{
		{"none", func(uint64, int) bool { return false }, 0},
		{"the last 7", func(seq uint64, marker int) bool { return marker < 0 && seq >= 193 }, 7},
		{"the last 7 and all markers but the last", func(seq uint64, marker int) bool {
			return marker < 0 && seq >= 193 || marker >= 0 && marker < endMarkers-1
		}, 7},
		{"some in the middle", func(seq uint64, marker int) bool { return marker < 0 && seq%50 == 10 }, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := backgroundThrough(t, tc.drop)
			if len(res) != 1 {
				t.Fatalf("%d results, want one: %+v", len(res), res)
			}
			r := res[0]
			if r.Datagrams != 200-tc.lost || r.Lost != tc.lost || r.Bytes != r.Datagrams*1000 {
				t.Errorf("sink counted %d datagrams (%d bytes) and %d lost, want %d and %d lost",
					r.Datagrams, r.Bytes, r.Lost, 200-tc.lost, tc.lost)
			}
		})
	}
}
