package maprequest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/amptcp/amptcp/internal/udpbatch"
	"github.com/amptcp/amptcp/lisp"
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
	if s.Reply < MinReplySize || s.Reply > udpbatch.ServerDatagram || s.Notify < MinReplySize || s.Notify > udpbatch.ServerDatagram {
		return fmt.Errorf("reply sizes %d and %d: want %d to %d bytes", s.Reply, s.Notify, MinReplySize, udpbatch.ServerDatagram)
	}
	return nil
}

// ServeEcho is the reference server. It answers an Encapsulated
// Map-Request with a datagram shaped like lispd's Map-Reply (type, one
// record with one locator, the request's nonce) and a Map-Register with
// one shaped like its Map-Notify (type, one record, the nonce), of the
// given sizes, with the batched reads and writes of lispd's serving loop
// (udpbatch, its batch size, buffers and polling) and nothing of its LISP
// work: no decoding, lookup, HMAC or state. Other datagrams get no answer.
// It returns nil when conn is closed. The echo-server command gives conn
// lispd's socket buffers (udpbatch.ServerBuffer), so that under a burst
// the two queue alike.
func ServeEcho(conn *net.UDPConn, sizes EchoSizes) error {
	if err := sizes.Check(); err != nil {
		return err
	}
	c, err := udpbatch.New(conn, udpbatch.ServerBatch, udpbatch.ServerDatagram, udpbatch.ServerSpin)
	if err != nil {
		return err
	}
	replies := make([][]byte, udpbatch.ServerBatch)
	notifies := make([][]byte, udpbatch.ServerBatch)
	for i := range replies {
		replies[i] = make([]byte, sizes.Reply)
		replies[i][0] = byte(lisp.TypeMapReply << 4)
		replies[i][3] = 1             // one record
		replies[i][replyLocators] = 1 // with one locator
		notifies[i] = make([]byte, sizes.Notify)
		notifies[i][0] = byte(lisp.TypeMapNotify << 4)
		notifies[i][3] = 1
	}
	dsts := make([]netip.AddrPort, 0, udpbatch.ServerBatch)
	payloads := make([][]byte, 0, udpbatch.ServerBatch)
	for {
		n, err := c.Read()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			continue // as lispd: a bad datagram must not stop the server
		}
		dsts, payloads = dsts[:0], payloads[:0]
		for i := range n {
			req, from, truncated := c.Datagram(i)
			if truncated {
				continue
			}
			k := len(payloads)
			switch {
			case len(req) >= ecmNonce+8 && lisp.MsgType(req[0]>>4) == lisp.TypeECM:
				copy(replies[k][replyNonce:], req[ecmNonce:ecmNonce+8])
				payloads = append(payloads, replies[k])
			case len(req) >= 12 && lisp.MsgType(req[0]>>4) == lisp.TypeMapRegister:
				copy(notifies[k][4:], req[4:12])
				payloads = append(payloads, notifies[k])
			default:
				continue
			}
			dsts = append(dsts, from)
		}
		if len(dsts) > 0 {
			c.Write(dsts, payloads) // as lispd: what the kernel refused is dropped
		}
	}
}
