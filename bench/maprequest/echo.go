package maprequest

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/net/ipv4"

	"github.com/amptcp/amptcp/lisp"
)

// echoBatch and echoBuffer are lispd's (daemon.batch, daemon.maxDatagram):
// the reference must do the same I/O as lispd, so that the ratio between
// them is what lispd's LISP work costs.
const (
	echoBatch  = 64
	echoBuffer = 65535
)

// MinReplySize is the smallest reply ServeEcho sends: a Map-Reply up to
// the locator count of its first record.
const MinReplySize = replyLocators + 1

// EchoSizes are the sizes of the reference server's answers, those of
// lispd's in the same run.
type EchoSizes struct {
	Reply  int // to an Encapsulated Map-Request, as a Map-Reply
	Notify int // to a Map-Register, as a Map-Notify
}

// Check reports sizes that ServeEcho cannot send.
func (s EchoSizes) Check() error {
	if s.Reply < MinReplySize || s.Reply > echoBuffer || s.Notify < MinReplySize || s.Notify > echoBuffer {
		return fmt.Errorf("reply sizes %d and %d: want %d to %d bytes", s.Reply, s.Notify, MinReplySize, echoBuffer)
	}
	return nil
}

// ServeEcho is the reference server. It answers an Encapsulated
// Map-Request with a datagram shaped like lispd's Map-Reply (type, one
// record with one locator, the request's nonce) and a Map-Register with
// one shaped like its Map-Notify (type, one record, the nonce), of the
// given sizes, using the batched reads and writes of lispd's serving loop
// and nothing of its LISP work: no decoding, lookup, HMAC or state. Other
// datagrams get no answer. It returns nil when conn is closed. The
// echo-server command gives conn lispd's socket buffers
// (udpbatch.ServerBuffer), so that under a burst the two queue alike.
func ServeEcho(conn *net.UDPConn, sizes EchoSizes) error {
	if err := sizes.Check(); err != nil {
		return err
	}
	pc := ipv4.NewPacketConn(conn)
	in := make([]ipv4.Message, echoBatch)
	out := make([]ipv4.Message, echoBatch)
	replies := make([][]byte, echoBatch)
	notifies := make([][]byte, echoBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, echoBuffer)}
		out[i].Buffers = make([][]byte, 1)
		replies[i] = make([]byte, sizes.Reply)
		replies[i][0] = byte(lisp.TypeMapReply << 4)
		replies[i][3] = 1             // one record
		replies[i][replyLocators] = 1 // with one locator
		notifies[i] = make([]byte, sizes.Notify)
		notifies[i][0] = byte(lisp.TypeMapNotify << 4)
		notifies[i][3] = 1
	}
	for {
		n, err := pc.ReadBatch(in, 0)
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			continue // as lispd: a bad datagram must not stop the server
		}
		k := 0
		for _, m := range in[:n] {
			req := m.Buffers[0][:m.N]
			switch {
			case len(req) >= ecmNonce+8 && lisp.MsgType(req[0]>>4) == lisp.TypeECM:
				out[k].Buffers[0] = replies[k]
				copy(replies[k][replyNonce:], req[ecmNonce:ecmNonce+8])
			case len(req) >= 12 && lisp.MsgType(req[0]>>4) == lisp.TypeMapRegister:
				out[k].Buffers[0] = notifies[k]
				copy(notifies[k][4:], req[4:12])
			default:
				continue
			}
			out[k].Addr = m.Addr
			k++
		}
		for sent := 0; sent < k; {
			w, err := pc.WriteBatch(out[sent:k], 0)
			if err != nil {
				break // as lispd: count and drop what the kernel refused
			}
			sent += w
		}
	}
}
