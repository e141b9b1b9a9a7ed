package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/daemon"
)

func TestDDTStatusText(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &daemon.Status{
		Version: "test", Started: now.Add(-time.Hour),
		DDTNode: []daemon.DelegationStatus{{EID: "10.1.0.0/16", Action: "node-referral",
			Referrals: []string{"192.0.2.11 priority 0 weight 0"}}},
		DDTResolver: &resolver.DDTStatus{
			Root:    []resolver.ReferralRLOC{{Address: "192.0.2.1"}, {Address: "192.0.2.2", Priority: 1, Down: true}},
			Pending: 2,
			Referrals: []resolver.ReferralEntry{
				{EID: "10.1.0.0/16", Action: "node-referral", Source: "192.0.2.1", Expires: now.Add(time.Hour),
					Set: []resolver.ReferralRLOC{{Address: "192.0.2.11", Weight: 50}}},
				{EID: "10.3.0.0/16", Action: "delegation-hole", Source: "192.0.2.1", Expires: now.Add(15 * time.Minute)},
			},
		},
		Counters: daemon.Counters{
			DDT:         &daemon.DDTCounters{Requests: 3, Referrals: map[string]uint64{"node-referral": 3}},
			DDTResolver: &daemon.DDTResolverCounters{Requests: 4, Sent: 9, Refused: map[string]uint64{"loop": 1}},
		},
	}
	var b bytes.Buffer
	writeStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"ddt-node: 1 delegations",
		"  10.1.0.0/16  node-referral\n    referral 192.0.2.11 priority 0 weight 0",
		"ddt: root 192.0.2.1 0/0 up, 192.0.2.2 1/0 down; 2 requests pending; referral cache: 2 entries",
		"  10.1.0.0/16  node-referral, from 192.0.2.1, expires in 1h0m0s  192.0.2.11 0/50 up",
		"  10.3.0.0/16  delegation-hole, from 192.0.2.1, expires in 15m0s\n",
		"  ddt: map-requests 3, referrals sent node-referral 3",
		"  ddt resolver: requests 4 (cache 0 positive, 0 negative), sent 9",
		"refused loop 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
