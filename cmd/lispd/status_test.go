package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/pce"
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
			}, Sets: []xtr.SetStatus{{Source: "10.9.0.0/24", Expires: now.Add(4 * time.Minute),
				Locators: []xtr.LocatorStatus{{Address: "elp{198.51.100.1(P,S) -> 192.0.2.1(P,S)}", Priority: 1, Weight: 50, Reachable: true}}}}}},
			Bindings: []xtr.BindingStatus{{Flow: "10.9.0.1:40000>10.1.0.5:80", ELP: "elp{198.51.100.1(P,S) -> 192.0.2.1(P,S)}",
				Connection: 0xdef, Seen: true, Bound: now.Add(-time.Minute), Askers: []string{"192.0.2.77", "198.51.100.1"}}},
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
					{Priority: 3, Weight: 1, Reachable: true, Down: "10.77.0.1 is being looked up",
						Hops: []mapcache.Hop{{Address: "10.77.0.1", Lookup: true, Up: true}, {Address: "192.0.2.2", Up: true}}},
					{Priority: 3, Weight: 1, Reachable: true, Up: true, Expanded: []string{"198.51.100.4", "192.0.2.2"},
						Hops: []mapcache.Hop{{Address: "10.78.0.1", Lookup: true, Up: true}, {Address: "192.0.2.2", Up: true}}},
				}},
		},
		Probes: []probe.Locator{
			{Address: "192.0.2.2", Up: true, RTT: 1.4, SRTT: 1.5, Sent: 10, Answered: 10},
			{Address: "198.51.100.3", RTT: 2, SRTT: 2.1, Sent: 10, Answered: 4, Misses: 3},
		},
		Dataplane: &daemon.DataplaneStatus{Counters: map[string]uint64{"itr_encapsulated": 9},
			Subflows: []daemon.SubflowStatus{{Local: "10.1.0.5:40000", Remote: "10.64.1.7:80", Connection: 0xabc, Path: 1, Packets: 3, Bytes: 400},
				{Local: "10.1.0.5:40001", Remote: "10.64.1.7:80", Connection: 0xabc, Path: 0, Pinned: true}}},
		Counters: daemon.Counters{Tunnel: &daemon.TunnelCounters{MapRegisters: 3, MapNotifies: map[string]uint64{"accepted": 3},
			MapReplies: map[string]uint64{"accepted": 1}, ProbesSent: 20, ProbesAnswered: 14,
			Bindings: map[string]uint64{"bound": 2, "ended": 1}, BindingsNow: 1, StatefulSubflows: map[string]uint64{"pinned": 2}}},
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
		"data plane: 2 subflows bound to paths; counters itr_encapsulated 9",
		"    te set for 10.9.0.0/24, expires in 4m0s",
		"      locator elp{198.51.100.1(P,S) -> 192.0.2.1(P,S)}  up  priority/weight 1/50",
		"  1 subflows bound to ELPs:",
		"    10.9.0.1:40000>10.1.0.5:80  elp{198.51.100.1(P,S) -> 192.0.2.1(P,S)}  connection 0xdef, for 1m0s, asked by 192.0.2.77, 198.51.100.1",
		"    path 2  down  priority/weight 3/1  10.77.0.1(L) -> 192.0.2.2  (10.77.0.1 is being looked up)",
		"    path 3  up  priority/weight 3/1  10.78.0.1(L) -> 192.0.2.2  (takes 198.51.100.4 -> 192.0.2.2)",
		"  subflow 10.1.0.5:40001 -> 10.64.1.7:80  connection 0xabc  path 0 (the ETR's)  0 packets, 0 bytes",
		"  subflow 10.1.0.5:40000 -> 10.64.1.7:80  connection 0xabc  path 1  3 packets, 400 bytes",
		"  probes: sent 20, answered 14",
		"  stateful binding: as ETR bound 2, ended 1 (1 now), as ITR pinned 2; multi-layer paths none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q", want)
		}
	}
}

func TestTEStatusText(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &daemon.Status{
		Version: "test", Started: now.Add(-time.Hour),
		Join: &xtr.JoinStatus{RTRs: []xtr.JoinRTR{{Address: "192.0.2.11", RTT: 4.2, Chosen: true}, {Address: "192.0.2.12"}},
			Changed: now.Add(-time.Minute), Reason: "first set", Changes: 1},
		TE: &pce.Status{
			Graph: now.Add(-time.Second), Vertices: 3, Edges: 2,
			Nodes: []pce.NodeStatus{{Name: "a", Role: "xtr", RLOCs: []string{"192.0.2.1"}, EIDs: []string{"10.1.0.0/24"}, Read: now.Add(-time.Second)},
				{Name: "r1", Role: "rtr", RLOCs: []string{"192.0.2.11"}, Metrics: "http://192.0.2.11:9342/metrics", Error: "connection refused"}},
			Matrix: []pce.Link{{From: "a", To: "r1", Address: "192.0.2.11", Up: true, RTT: 40.5, MinRTT: 40.1}, {From: "r1", Address: "203.0.113.9"}},
			Pairs: []pce.PairStatus{{Source: "a", Destination: "b", Changed: now.Add(-90 * time.Second), Reason: "a no longer reaches r2 (192.0.2.12)",
				Changes: 2, Pending: 1, ELPs: []pce.ELPStatus{{PathID: 1, Nodes: []string{"a", "r1", "b"}, Hops: []string{"192.0.2.11", "192.0.2.2"}, RTT: 80}},
				Excluded: []string{"a > r4 > b: rule 1: RTT 300.0 ms beyond 120.0 ms"}}},
			Destinations: []pce.DestStatus{{Name: "b", Slots: []pce.SlotStatus{
				{PathID: 1, Hops: []string{"192.0.2.11", "192.0.2.2"}, Users: 1},
				{PathID: 2, Hops: []string{"192.0.2.12", "192.0.2.2"}, Retired: now.Add(-90 * time.Second)},
				{PathID: 3}}, Pushed: []pce.PushStatus{{EID: "10.2.0.0/24", At: now.Add(-10 * time.Second)}}}},
		},
		Counters: daemon.Counters{TE: &pce.Counters{Scrapes: 9, ScrapeErrors: 1, Computations: 4, Changes: 2, AnswersMasked: 3, AnswersAll: 1, SMRs: 2, Pushes: 4}},
	}
	var b bytes.Buffer
	writeStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"overlay join: through 192.0.2.11 for 1m0s (first set)",
		"  rtr 192.0.2.11  rtt 4.20ms",
		"  rtr 192.0.2.12  down or not measured",
		"te: 2 routers, graph of 2 links built 1s ago",
		"  xtr a  192.0.2.1  eids 10.1.0.0/24  read 1s ago",
		"  rtr r1  192.0.2.11  cannot read http://192.0.2.11:9342/metrics: connection refused",
		"  a -> r1 192.0.2.11  up  40.50ms, least 40.10ms",
		"  r1 -> (no node) 203.0.113.9  down",
		"  a -> b: 1 ELPs, for 1m30s (a no longer reaches r2 (192.0.2.12); 2 changes), a better set found 1 times in a row",
		"    path 1  192.0.2.11 -> 192.0.2.2  rtt 80.00ms  (a > r1 > b)",
		"    left out: a > r4 > b: rule 1: RTT 300.0 ms beyond 120.0 ms",
		"path slots of b (the order of its Map-Replies):",
		"  path 1  192.0.2.11 -> 192.0.2.2  1 sources",
		"  path 2  192.0.2.12 -> 192.0.2.2  retired 1m30s ago",
		"  path 3  free",
		"  te: reads 10 (1 failed), sets computed 4, changed 2; answers 3 with a source's set, 1 with every ELP; smrs sent 2; sets sent to ETRs 4",
		"  sets of 10.2.0.0/24 sent to its ETR 10s ago",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
