package pm

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mptcp"
)

// fakeKernel records the commands and refuses ports marked in use.
type fakeKernel struct {
	mu        sync.Mutex
	creates   []createCmd
	destroys  []destroyCmd
	announces []mptcp.Addr
	backups   []backupCmd
	inUse     map[uint16]bool
	createErr error
	limits    mptcp.Limits
}

type createCmd struct {
	token  uint32
	local  mptcp.Addr
	remote netip.AddrPort
}

type destroyCmd struct {
	token         uint32
	local, remote netip.AddrPort
}

func (k *fakeKernel) CreateSubflow(token uint32, local mptcp.Addr, remote netip.AddrPort) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inUse[local.Port] {
		return &mptcp.CommandError{Cmd: mptcp.CmdSubflowCreate, Errno: unix.EADDRINUSE}
	}
	if k.createErr != nil {
		return k.createErr
	}
	k.creates = append(k.creates, createCmd{token, local, remote})
	return nil
}

func (k *fakeKernel) DestroySubflow(token uint32, local, remote netip.AddrPort) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.destroys = append(k.destroys, destroyCmd{token, local, remote})
	return nil
}

func (k *fakeKernel) Announce(token uint32, a mptcp.Addr) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.announces = append(k.announces, a)
	return nil
}

func (k *fakeKernel) Limits() (mptcp.Limits, error) { return k.limits, nil }

type backupCmd struct {
	token         uint32
	local, remote netip.AddrPort
	backup        bool
}

func (k *fakeKernel) SetBackup(token uint32, local, remote netip.AddrPort, backup bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.backups = append(k.backups, backupCmd{token, local, remote, backup})
	return nil
}

// created returns the creates since the last call.
func (k *fakeKernel) created() []createCmd {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.creates
	k.creates = nil
	return c
}

func (k *fakeKernel) destroyed() []destroyCmd {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.destroys
	k.destroys = nil
	return d
}

// fakeDiag answers sock_diag reads with what the test set.
type fakeDiag struct {
	mu    sync.Mutex
	conns []ConnInfo
	subs  []SubflowInfo
	reads int
}

func (d *fakeDiag) Connections() ([]ConnInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	return append([]ConnInfo(nil), d.conns...), nil
}

func (d *fakeDiag) Subflows() ([]SubflowInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	return append([]SubflowInfo(nil), d.subs...), nil
}

func (d *fakeDiag) set(conns []ConnInfo, subs []SubflowInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns, d.subs = conns, subs
}

// fakeEvents is an event stream the test feeds.
type fakeEvents struct {
	ch        chan fakeBatch
	closed    chan struct{}
	once      sync.Once
	malformed uint64
	mu        sync.Mutex
}

type fakeBatch struct {
	events    []mptcp.Event
	err       error
	malformed uint64
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{ch: make(chan fakeBatch, 16), closed: make(chan struct{})}
}

func (f *fakeEvents) Receive() ([]mptcp.Event, error) {
	select {
	case b := <-f.ch:
		f.mu.Lock()
		f.malformed += b.malformed
		f.mu.Unlock()
		return b.events, b.err
	case <-f.closed:
		return nil, net.ErrClosed
	}
}

func (f *fakeEvents) Malformed() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.malformed
}

func (f *fakeEvents) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

// clock is a fake clock that tests move.
type clock struct{ t time.Time }

func (c *clock) now() time.Time            { return c.t }
func (c *clock) add(d time.Duration)       { c.t = c.t.Add(d) }
func newClock() *clock                     { return &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }
func ap(s string) netip.AddrPort           { return netip.MustParseAddrPort(s) }
func addr(s string) netip.Addr             { return netip.MustParseAddr(s) }
func sum(local, remote netip.AddrPort) int { return int(local.Port()) + int(remote.Port()) }

// testEngine is an engine on fakes, driven by the test.
type testEngine struct {
	*engine
	t       *testing.T
	k       *fakeKernel
	diag    *fakeDiag
	clock   *clock
	lookups []Query
}

// newTestEngine returns an engine for a configuration in YAML, whose
// host has the addresses 10.1.0.1 and 10.1.1.1 and the ports 40000-40999.
func newTestEngine(t *testing.T, yaml string) *testEngine {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	te := &testEngine{t: t, k: &fakeKernel{inUse: map[uint16]bool{}}, diag: &fakeDiag{}, clock: newClock()}
	e := newEngine(cfg, testLogger(t))
	e.k, e.diag, e.now = te.k, te.diag, te.clock.now
	e.rand = func(int) int { return 0 }
	e.localAddrs = func() []netip.Addr { return []netip.Addr{addr("10.1.0.1"), addr("10.1.1.1")} }
	e.ports = func() portRange { return portRange{40000, 40999} }
	e.lookup = func(q Query) { te.lookups = append(te.lookups, q) }
	te.engine = e
	return te
}

// The first subflow of the test connections.
var (
	clientAddr = ap("10.1.0.1:33000")
	serverAddr = ap("10.2.0.1:5201")
)

// connect plays CREATED and ESTABLISHED of a client connection.
func (te *testEngine) connect(token uint32) {
	te.event(mptcp.Event{Type: mptcp.EventCreated, Token: token, Local: clientAddr, Remote: serverAddr})
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: token, Local: clientAddr, Remote: serverAddr})
}

// establish plays SUB_ESTABLISHED for created subflows.
func (te *testEngine) establish(token uint32, cs ...createCmd) {
	for _, c := range cs {
		te.event(mptcp.Event{Type: mptcp.EventSubEstablished, Token: token,
			Local: netip.AddrPortFrom(c.local.IP, c.local.Port), Remote: c.remote, LocalID: c.local.ID})
	}
}

func localOf(c createCmd) netip.AddrPort { return netip.AddrPortFrom(c.local.IP, c.local.Port) }

// noCreates fails the test if subflows were created since the last look.
func (te *testEngine) noCreates(when string) {
	te.t.Helper()
	if cs := te.k.created(); len(cs) != 0 {
		te.t.Errorf("created %v %s", cs, when)
	}
}
