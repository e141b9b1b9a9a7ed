package tcpinfo

import (
	"net"
	"testing"
)

// A connection over loopback retransmits nothing; what is not TCP is
// refused.
func TestRetransmits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := Retransmits(c); err != nil || n != 0 {
		t.Errorf("Retransmits = %d, %v", n, err)
	}
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, err := Retransmits(u); err == nil {
		t.Error("a UDP socket gave TCP_INFO")
	}
}
