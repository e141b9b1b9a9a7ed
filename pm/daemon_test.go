package pm

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/mptcp"
)

// fakePM is net.mptcp.path_manager.
type fakePM struct {
	mu   sync.Mutex
	name string
	sets []string
}

func (p *fakePM) PathManager() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.name, nil
}

func (p *fakePM) SetPathManager(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name = name
	p.sets = append(p.sets, name)
	return nil
}

// fakeMapper answers every lookup with a mapping of n RLOCs.
type fakeMapper struct{ n int }

func (m fakeMapper) Lookup(_ context.Context, q Query) (Mapping, error) {
	eid := q.EID
	p, _ := eid.Prefix(24)
	return Mapping{EID: mapping.NewEID(0, p), TTL: time.Minute, RLOCs: m.n}, nil
}

// daemonTest is a Daemon running on fakes.
type daemonTest struct {
	d      *Daemon
	k      *fakeKernel
	diag   *fakeDiag
	events *fakeEvents
	pm     *fakePM
	links  chan struct{}
	socket string
	stop   func() error
}

func runDaemon(t *testing.T, yaml string, diag *fakeDiag) *daemonTest {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Socket = filepath.Join(t.TempDir(), "pm.sock")
	dt := &daemonTest{k: &fakeKernel{inUse: map[uint16]bool{}, limits: mptcp.Limits{Subflows: 8}}, diag: diag, events: newFakeEvents(),
		pm: &fakePM{name: "kernel"}, links: make(chan struct{}, 1), socket: cfg.Control.Socket}
	dt.d, err = New(cfg, Deps{
		Kernel: dt.k, Diag: dt.diag, Events: dt.events, PathManager: dt.pm, Links: dt.links, Mapper: fakeMapper{2},
		LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{addr("10.1.0.1")}, nil },
		PortRange:  func() (uint16, uint16, error) { return 50000, 50999, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dt.d.Run(ctx) }()
	var once sync.Once
	var runErr error
	dt.stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { dt.stop() })
	waitFor(t, "the control socket", func() bool { _, err := QueryStatus(dt.socket); return err == nil })
	return dt
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (dt *daemonTest) creates() int {
	dt.k.mu.Lock()
	defer dt.k.mu.Unlock()
	return len(dt.k.creates)
}

// Run switches the namespace to the userspace path manager, adopts what
// exists, follows the events, and restores the path manager on exit.
func TestDaemonRun(t *testing.T) {
	diag := &fakeDiag{}
	diag.set([]ConnInfo{{Token: 5, Local: ap("10.1.0.1:34000"), Remote: serverAddr, State: tcpEstablished}},
		[]SubflowInfo{{Token: 5, Local: ap("10.1.0.1:34000"), Remote: serverAddr, State: tcpEstablished}})
	dt := runDaemon(t, "policy: ndiffports\nsubflows: 2\n", diag)
	if n := dt.creates(); n != 1 {
		t.Errorf("%d creates on start, want 1 for the adopted connection", n)
	}
	dt.events.ch <- fakeBatch{events: []mptcp.Event{
		{Type: mptcp.EventCreated, Token: 6, Local: clientAddr, Remote: serverAddr},
		{Type: mptcp.EventEstablished, Token: 6, Local: clientAddr, Remote: serverAddr},
	}}
	waitFor(t, "a create for the new connection", func() bool { return dt.creates() == 2 })

	st, err := QueryStatus(dt.socket)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Connections) != 2 || st.Connections[0].Token != 5 || st.Connections[1].Plan.N != 2 ||
		st.PathManager != "kernel" || st.Counters.Events["established"] != 1 {
		t.Errorf("status %+v", st)
	}
	if err := dt.stop(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dt.pm.sets) != "[userspace kernel]" {
		t.Errorf("path manager set to %v, want userspace then kernel back", dt.pm.sets)
	}
	if c := dt.d.Counters(); c.Created != 2 {
		t.Errorf("counters after Run: %+v", c)
	}
}

// Lost events make the daemon read the state again from sock_diag;
// malformed ones are counted. Neither stops it.
func TestDaemonLostAndMalformedEvents(t *testing.T) {
	diag := &fakeDiag{}
	dt := runDaemon(t, "policy: ndiffports\nsubflows: 2\n", diag)
	diag.set([]ConnInfo{{Token: 8, Local: clientAddr, Remote: serverAddr, State: tcpEstablished}},
		[]SubflowInfo{{Token: 8, Local: clientAddr, Remote: serverAddr, State: tcpEstablished}})
	dt.events.ch <- fakeBatch{err: fmt.Errorf("%w: no buffer space", mptcp.ErrEventsLost), malformed: 3}
	waitFor(t, "the connection found by the resync", func() bool { return dt.creates() == 1 })
	c := dt.d.Counters()
	if c.Resyncs != 1 || c.Malformed != 3 {
		t.Errorf("resyncs %d malformed %d, want 1 and 3", c.Resyncs, c.Malformed)
	}
	dt.events.ch <- fakeBatch{events: []mptcp.Event{{Type: mptcp.EventClosed, Token: 8}}}
	waitFor(t, "the connection to close", func() bool { return dt.d.Counters().Connections == 0 })
}

// amptcp lookups run on their own goroutines and come back to the
// engine; a link event repairs at once.
func TestDaemonLookupsAndLinks(t *testing.T) {
	dt := runDaemon(t, amptcpConfig, &fakeDiag{})
	dt.events.ch <- fakeBatch{events: []mptcp.Event{{Type: mptcp.EventEstablished, Token: 6, Local: clientAddr, Remote: serverAddr}}}
	// Both sites have 2 RLOCs: 4 subflows, 3 to create.
	waitFor(t, "the amptcp plan's creates", func() bool { return dt.creates() == 3 })
	dt.k.mu.Lock()
	dt.k.createErr = &mptcp.CommandError{Cmd: mptcp.CmdSubflowCreate, Errno: 101}
	dt.k.mu.Unlock()
	// The subflows never establish; a link event resends them at once.
	dt.links <- struct{}{}
	waitFor(t, "the pending creates destroyed", func() bool { return len(dt.k.destroyed()) > 0 })
}

// The text status names the plan, its reasons and each subflow's path.
func TestStatusText(t *testing.T) {
	te := newTestEngine(t, amptcpConfig)
	te.connect(1)
	te.lookupDone(Query{EID: serverAddr.Addr(), From: clientAddr.Addr()}, peerMapping, time.Millisecond, nil)
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, localMapping, time.Millisecond, nil)
	cs := te.k.created()
	te.establish(1, cs...)
	st := Status{Policy: PolicyAMPTCP, PathManager: "kernel", Connections: te.status(nil, []SubflowInfo{
		{Token: 1, Local: clientAddr, Remote: serverAddr, BytesAcked: 1234, RTT: 20 * time.Millisecond},
	})}
	var b bytes.Buffer
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"policy amptcp, 1 connection",
		"connection 00000001 10.1.0.1:33000 -> 10.2.0.1:5201 client open",
		"plan amptcp: 2 subflows: equation (2): L 1×2 = 2",
		"peer mapping 10.2.0.0/24: 2 RLOCs",
		"path = (sport+dport) mod 2 toward the peer, mod 1 back",
		fmt.Sprintf("0     10.1.0.1:33000  10.2.0.1:5201  0   %d/0   up     1234   20ms", sum(clientAddr, serverAddr)%2),
		fmt.Sprintf("1     %s  10.2.0.1:5201  1   %d/0   up     0      0s", localOf(cs[0]), sum(localOf(cs[0]), serverAddr)%2),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
