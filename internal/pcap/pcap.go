// Package pcap writes capture files in the classic libpcap format, with raw
// IP packets (LINKTYPE_RAW), for handing packets to tshark and Wireshark.
package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/internal/inet"
)

const (
	magic      = 0xa1b2c3d4 // microsecond timestamps
	linkRaw    = 101        // LINKTYPE_RAW: packets start with the IP header
	maxSnapLen = 65535
)

// Writer writes packets to a capture file.
type Writer struct {
	w    io.Writer
	next time.Time
}

// NewWriter writes the file header and returns a Writer whose packets are
// stamped one millisecond apart from start.
func NewWriter(w io.Writer, start time.Time) (*Writer, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], magic)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], maxSnapLen)
	binary.LittleEndian.PutUint32(h[20:], linkRaw)
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return &Writer{w: w, next: start}, nil
}

// WritePacket appends one raw IP packet.
func (w *Writer) WritePacket(pkt []byte) error {
	if len(pkt) > maxSnapLen {
		return fmt.Errorf("packet of %d bytes exceeds the snap length", len(pkt))
	}
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(w.next.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(w.next.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(pkt)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(pkt)))
	w.next = w.next.Add(time.Millisecond)
	if _, err := w.w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.w.Write(pkt)
	return err
}

// WriteUDP appends a UDP datagram with its IP header.
func (w *Writer) WriteUDP(src, dst netip.AddrPort, payload []byte) error {
	pkt := append(make([]byte, inet.HeaderLen(src.Addr())), payload...)
	if err := inet.PutUDP(pkt, src, dst, 64, 0); err != nil {
		return err
	}
	return w.WritePacket(pkt)
}
