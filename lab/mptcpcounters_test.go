package lab

import (
	"maps"
	"testing"
)

func TestMPTCPCounters(t *testing.T) {
	netstat := "TcpExt: SyncookiesSent EmbryonicRsts\nTcpExt: 3 4\n" +
		"MPTcpExt: MPCapableSYNRX MPCapableFallbackACK DssFallback\nMPTcpExt: 12 0 1\n"
	got := mptcpCounters(netstat)
	if want := map[string]uint64{"MPCapableSYNRX": 12, "DssFallback": 1}; !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := mptcpCounters("MPTcpExt: A B\n"); len(got) != 0 {
		t.Errorf("names without values: %v", got)
	}
}
