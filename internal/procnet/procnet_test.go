package procnet

import (
	"strings"
	"testing"
)

// A namespace's /proc/net/tcp6 while `mptcpize run iperf3 -s -1 -p 5304`
// listened in it (0x14B8), with an established connection added to port
// 5305 (0x14B9), which is not listening.
const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:14B8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2958046 2 00000000ccf772c4 100 0 0 10 0
   1: 0000000000000000FFFF00000200090A:14B9 0000000000000000FFFF00000100090A:D0F0 01 00000000:00000000 00:00000000 00000000     0        0 2958050 2 00000000ccf772c5 20 4 30 10 -1
`

func TestListensOn(t *testing.T) {
	for port, want := range map[uint16]bool{5304: true, 5305: false, 5201: false} {
		if got := ListensOn([]byte(procTCP6), port); got != want {
			t.Errorf("ListensOn(port %d) = %v, want %v", port, got, want)
		}
	}
	if ListensOn([]byte(strings.SplitN(procTCP6, "\n", 2)[0]), 5304) {
		t.Error("a table of only its header listens")
	}
}

// Counters reads the calling thread's namespace's tables, in both
// formats.
func TestCounters(t *testing.T) {
	c, err := Counters("/proc/thread-self/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Tcp.InCsumErrors", "Udp.InCsumErrors", "Ip.Forwarding", "Udp6InCsumErrors"} {
		if _, ok := c[name]; !ok {
			t.Errorf("no %s in %d counters", name, len(c))
		}
	}
}
