package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/probe"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/daemon"
)

func TestTunnelStatusText(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &daemon.Status{
		Version: "test", Started: now.Add(-time.Hour), Listen: []string{"192.0.2.1:4342"},
		XTR: &xtr.Status{ITRs: 2,
			Mappings: []xtr.MappingStatus{{EID: "10.1.0.0/16", TTL: "24h0m0s", Locators: []xtr.LocatorStatus{
				{Address: "192.0.2.1", Priority: 1, Weight: 50, Reachable: true},
				{Address: "elp{198.51.100.1(P) -> 192.0.2.1}", Priority: 1, Weight: 50},
			}}},
			MapServers: []xtr.MapServerStatus{{Address: "192.0.2.9:4342", State: "registered", Registers: 3, Notifies: 3,
				LastNotify: now.Add(-20 * time.Second)}},
		},
		MapResolvers: []mapcache.ResolverState{{Address: "192.0.2.9:4342"},
			{Address: "192.0.2.10:4342", Down: true, DownSince: now.Add(-5 * time.Second)}},
		MapCache: []mapcache.Entry{
			{EIDPrefix: "10.1.0.0/16", Action: "natively-forward", Local: true},
			{InstanceID: 7, EIDPrefix: "10.64.1.0/24", Action: "encapsulate", Source: "192.0.2.9:4342", TTLLeft: 3600,
				Paths: []mapcache.Path{
					{Priority: 1, Weight: 70, Up: true, Reachable: true, Hops: []mapcache.Hop{{Address: "192.0.2.2", Up: true, RTT: 1.5}}},
					{Priority: 2, Weight: 30, Reachable: true, Hops: []mapcache.Hop{{Address: "198.51.100.3", Probe: true, Strict: true},
						{Address: "192.0.2.2", Up: true, RTT: 1.5}}},
				}},
		},
		Probes: []probe.Locator{
			{Address: "192.0.2.2", Up: true, RTT: 1.4, SRTT: 1.5, Sent: 10, Answered: 10},
			{Address: "198.51.100.3", RTT: 2, SRTT: 2.1, Sent: 10, Answered: 4, Misses: 3},
		},
		Dataplane: &daemon.DataplaneStatus{Counters: map[string]uint64{"itr_encapsulated": 9},
			Subflows: []daemon.SubflowStatus{{Local: "10.1.0.5:40000", Remote: "10.64.1.7:80", Connection: 0xabc, Path: 1, Packets: 3, Bytes: 400}}},
		Counters: daemon.Counters{Tunnel: &daemon.TunnelCounters{MapRegisters: 3, MapNotifies: map[string]uint64{"accepted": 3},
			MapReplies: map[string]uint64{"accepted": 1}, ProbesSent: 20, ProbesAnswered: 14}},
	}
	var b bytes.Buffer
	writeStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"xtr: 1 mappings, 2 ITRs asked lately",
		"map-resolvers (asked in this order, those down last): 192.0.2.9:4342 up, 192.0.2.10:4342 down for 5s",
		"    locator elp{198.51.100.1(P) -> 192.0.2.1}  down  priority/weight 1/50",
		"  map-server 192.0.2.9:4342  registered (forward to this ETR), 3 Map-Registers, 3 Map-Notifies, 0 failures, last Map-Notify 20s ago",
		"  10.1.0.0/16  natively-forward (this site)",
		"  [7]10.64.1.0/24  encapsulate, from 192.0.2.9:4342, expires in 1h0m0s",
		"    path 0  up  priority/weight 1/70  192.0.2.2 1.50ms",
		"    path 1  down  priority/weight 2/30  198.51.100.3(P,S) down -> 192.0.2.2 1.50ms",
		"  198.51.100.3  down  rtt 2.00ms srtt 2.10ms  4/10 answered, 3 missed in a row",
		"data plane: 1 subflows bound to paths; counters itr_encapsulated 9",
		"  subflow 10.1.0.5:40000 -> 10.64.1.7:80  connection 0xabc  path 1  3 packets, 400 bytes",
		"  probes: sent 20, answered 14",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q", want)
		}
	}
}
