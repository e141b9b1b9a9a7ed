package dataplane_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/tcpinfo"
)

var siteBKey = dataplane.Key{Prefix: netip.MustParsePrefix("10.2.0.0/24")}

// takeHeld takes what xtrA hands over to hold until quiet passes without
// a packet, or fails after a while without any.
func takeHeld(t *testing.T, d *dataplane.Dataplane, quiet time.Duration) []dataplane.Held {
	t.Helper()
	var out []dataplane.Held
	deadline := time.After(10 * time.Second)
	for {
		wait := quiet
		if len(out) == 0 {
			wait = 10 * time.Second
		}
		select {
		case h := <-d.Held():
			out = append(out, h)
		case <-time.After(wait):
			return out
		case <-deadline:
			if len(out) == 0 {
				t.Fatalf("nothing held: %v", nonZero(counters(t, d)))
			}
			return out
		}
	}
}

// releaseAll releases held packets as the map-cache does: the entry as
// Hold while they go, then as it is.
func releaseAll(t *testing.T, d *dataplane.Dataplane, held []dataplane.Held) {
	t.Helper()
	e := twoRLOCs("192.0.2.2", "192.0.2.6") // xtrB's
	e.Action = dataplane.Hold
	put(t, d, "10.2.0.0/24", e)
	if err := d.Release(held); err != nil {
		t.Fatal(err)
	}
	e.Action = dataplane.Encapsulate
	put(t, d, "10.2.0.0/24", e)
}

// With miss: hold, xtrA hands a SYN to an EID it has no mapping for to
// the control plane instead of dropping it; released once the entry is
// there, the SYN is encapsulated and the connection opens without a
// retransmission. Then, with the entry gone in the middle of a transfer,
// the GSO super-packets the host sends are held as they are and, once
// released, arrive intact (their checksums unfinished, as the host left
// them, and completed on the way).
func TestHoldReleasesTheFirstPackets(t *testing.T) {
	s := newSites(t, config.Dataplane{Miss: "hold"})
	s.dpA.Delete(siteBKey)
	ln, got := hashingServer(t, s.hostB, "10.2.0.1:0")
	defer ln.Close()
	dialed := make(chan net.Conn, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := s.hostA.Dial(ctx, &net.Dialer{}, "tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()

	syn := takeHeld(t, s.dpA, 50*time.Millisecond)
	if len(syn) != 1 || syn[0].EID != netip.MustParseAddr("10.2.0.1") {
		t.Fatalf("held %+v, want the SYN to 10.2.0.1", syn)
	}
	releaseAll(t, s.dpA, syn)
	c := <-dialed
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	if r, err := tcpinfo.Retransmits(c); err != nil || r != 0 {
		t.Errorf("the connection opened after %d retransmissions (%v)", r, err)
	}

	s.dpA.Delete(siteBKey)
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	wrote := make(chan error, 1)
	go func() {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err := c.Write(data)
		c.(*net.TCPConn).CloseWrite()
		wrote <- err
	}()
	held := takeHeld(t, s.dpA, 100*time.Millisecond)
	largest := 0
	for _, h := range held {
		largest = max(largest, h.Len())
	}
	releaseAll(t, s.dpA, held)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		if h != sha256.Sum256(data) {
			t.Error("the server received other bytes than were sent")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the transfer did not end")
	}
	t.Logf("held %d packets of up to %d bytes", len(held), largest)
	if largest <= 1500 {
		t.Errorf("held packets of at most %d bytes: the host's super-packets were cut", largest)
	}
	cA := counters(t, s.dpA)
	if cA["itr_held"] < uint64(1+len(held)) || cA["itr_released"] < uint64(1+len(held)) || cA["itr_held_lost"] != 0 {
		t.Errorf("xtrA %v", nonZero(cA))
	}
}
