package mapserver

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"unsafe"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Map-Registers handled at once by several loops, as lispd -cpus N does,
// each keep the locators they registered: the storage they were decoded
// into is reused by the next, never shared with a registration. Refreshes
// that change the locators replace them; those that do not keep them.
func TestConcurrentRegisters(t *testing.T) {
	s, _ := newServer(t)
	const loops, each = 4, 200
	rloc := func(i, round int) lisp.Address {
		return lisp.IPAddress(netip.AddrFrom4([4]byte{198, 18 + byte(round), byte(i >> 8), byte(i)}))
	}
	eid := func(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 8+i/256, i%256) }
	msgs := make([][]byte, 0, 2*loops*each)
	for round := range 2 {
		for i := range loops * each {
			// Two locators in the first round, one in the second: a
			// refresh with other locators, and one of another length.
			rec := record(eid(i), rloc(i, round))
			if round == 0 {
				rec = record(eid(i), rloc(i, round), rloc(i+1, round))
			}
			msgs = append(msgs, register(t, &lisp.MapRegister{ProxyReply: true, WantMapNotify: true,
				XTRID: &lisp.XTRID{ID: [16]byte{byte(i >> 8), byte(i)}}, Records: []lisp.MapRecord{rec}}, "key-a"))
		}
	}
	for round := range 2 {
		var wg sync.WaitGroup
		done := make(chan struct{})
		readers := readWhileRegistering(t, s, loops*each, eid, done)
		for l := range loops {
			wg.Go(func() {
				var out control.Outbox
				for i := l; i < loops*each; i += loops {
					out.Reset()
					s.HandleRegister(msgs[round*loops*each+i], etr1, &out)
					if out.Len() != 1 {
						t.Errorf("round %d: %s refused", round, eid(i))
					}
				}
			})
		}
		wg.Wait()
		close(done)
		readers.Wait()
		for i := range loops * each {
			ans := resolve(t, s, 0, mapping.NewEID(0, netip.MustParsePrefix(eid(i))).Prefix.Addr())
			want := []lisp.Address{rloc(i, round)}
			if round == 0 {
				want = append(want, rloc(i+1, round))
			}
			if ans.Kind != mapping.Mapping || len(ans.Record.Locators) != len(want) || !checkWire(t, ans) {
				t.Fatalf("round %d: %s: %+v", round, eid(i), ans)
			}
			for j, w := range want {
				if !ans.Record.Locators[j].Address.Equal(w) {
					t.Fatalf("round %d: %s has %s, want %s", round, eid(i), &ans.Record, w)
				}
			}
		}
	}
	// A refresh with the same locators keeps those registered.
	before := s.Resolve(0, netip.MustParseAddr("10.8.0.1")).Record.Locators
	var out control.Outbox
	s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, XTRID: &lisp.XTRID{ID: [16]byte{0, 0}},
		Records: []lisp.MapRecord{record(eid(0), rloc(0, 1))}}, "key-a"), etr1, &out)
	after := s.Resolve(0, netip.MustParseAddr("10.8.0.1")).Record.Locators
	if len(after) != 1 || &after[0] != &before[0] {
		t.Errorf("a refresh replaced the locators %v with the same %v", before, after)
	}
}

// readWhileRegistering answers Map-Requests for the n EIDs, as the
// map-resolver's loops do while others register, until done: each
// answer is one whole record of the EID asked for (the race detector
// watches the slots' copies of the records).
func readWhileRegistering(t *testing.T, s *Server, n int, eid func(int) string, done chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		var b []byte
		for i := 0; ; i = (i + 1) % n {
			select {
			case <-done:
				return
			default:
			}
			p := netip.MustParsePrefix(eid(i))
			reply := lisp.MapReply{Nonce: 1}
			b, _ = reply.AppendHeader(b[:0], 1)
			b, ok := s.AppendMapping(b, 0, p.Addr())
			if !ok {
				continue // not registered yet
			}
			var got lisp.MapReply
			if err := got.DecodeFromBytes(b); err != nil || len(got.Records) != 1 || got.Records[0].EID.IP() != p.Addr() {
				t.Errorf("%s answered with %x (%v)", p, b, err)
				return
			}
		}
	})
	return &wg
}

// A registration with its first ETR and locator stays within 352 bytes,
// one of the runtime's size classes: a field more takes the next, 384,
// for every registration.
func TestRegistrationSize(t *testing.T) {
	if n := unsafe.Sizeof(Registration{}); n > 352 {
		t.Errorf("a registration is %d bytes", n)
	}
}
