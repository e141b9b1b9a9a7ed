package lab

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/tcpinfo"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
)

// elpTopology: site b registers two ELPs, through r1 and r2; both xTRs
// steer by the port sum.
const elpTopology = `name: NAME
nodes:
  - {name: client, role: host}
  - {name: server, role: host}
  - {name: xa, role: xtr, site: a, path-selection: port-sum, mptcp-subflows: off}
  - {name: xb, role: xtr, site: b, path-selection: port-sum, mptcp-subflows: off}
  - {name: r1, role: rtr}
  - {name: r2, role: rtr}
  - {name: ms, role: ms}
sites: [{name: a}, {name: b, elps: [[r1], [r2]]}]
links:
  - {ends: [client, xa]}
  - {ends: [server, xb]}
  - {name: a1, ends: [xa, r1], delay: 1ms}
  - {name: a2, ends: [xa, r2], delay: 1ms}
  - {ends: [r1, xb]}
  - {ends: [r2, xb]}
  - {ends: [xb, ms]}
`

// TestWarmUpReachesEveryPath: after the warm-up, a connection of either
// port-sum parity (through r1 or r2) connects at its first SYN: the RTR
// of its ELP already resolved the site (a cold one drops the SYN, which
// comes again a second later, and an MPTCP connection that loses two
// falls back to TCP). Both ELPs' links carried the warm-up.
func TestWarmUpReachesEveryPath(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-warm"
	top, err := topo.Parse([]byte(strings.ReplaceAll(elpTopology, "NAME", name)))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, opts)
	ctx := context.Background()
	if _, err := Up(ctx, top, "elp.yaml", opts); err != nil {
		t.Fatal(err)
	}
	plan, err := topo.Compile(top, opts.dir(name))
	if err != nil {
		t.Fatal(err)
	}
	links, err := OpenLinks(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := links.Stats()
	if err := warm(ctx, plan, []scenario.Planned{{Flow: scenario.Flow{From: "client", To: "server"}}}); err != nil {
		t.Fatal(err)
	}
	after, _ := links.Stats()
	for _, l := range []string{"a1", "a2"} {
		if after[l].AB.FramesIn == before[l].AB.FramesIn {
			t.Errorf("the warm-up never took %s", l)
		}
	}
	srv := "10.2.0.2:5202"
	var ln net.Listener
	if err := (&netns.NS{Name: plan.Node("server").Namespace}).Do(func() (err error) {
		ln, err = net.Listen("tcp", "0.0.0.0:5202")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, port := range []int{4600, 4601} {
		var retrans uint32
		err := (&netns.NS{Name: plan.Node("client").Namespace}).Do(func() error {
			c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Timeout: 10 * time.Second}).Dial("tcp", srv)
			if err != nil {
				return err
			}
			defer c.Close()
			retrans, err = tcpinfo.Retransmits(c)
			return err
		})
		if err != nil {
			t.Fatalf("from port %d: %v", port, err)
		}
		// A SYN the warm-up's paths did not carry is sent again.
		if retrans != 0 {
			t.Errorf("from port %d (port sum %s): the SYN was sent %d more times: lost on its path", port, []string{"even", "odd"}[port%2], retrans)
		}
	}
}
