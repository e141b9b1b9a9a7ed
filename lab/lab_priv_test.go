package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
)

// bin holds lispd and amptcp, built once for the package.
var bin string

func TestMain(m *testing.M) {
	testenv.MainWithBinaries(m, &bin, "github.com/amptcp/amptcp/cmd/lispd", "github.com/amptcp/amptcp/cmd/amptcp")
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// docTopology writes the example of docs/lab.md, renamed to name (this
// run's prefix keeps parallel runs apart), to a file.
func docTopology(t *testing.T, name string) string { return docTopologyOf(t, "../docs/lab.md", name) }

// docTopologyOf writes the first topology of a doc, renamed to name.
func docTopologyOf(t *testing.T, doc, name string) string {
	t.Helper()
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
		if strings.Contains(m[1], "nodes:") {
			path := filepath.Join(t.TempDir(), "lab.yaml")
			renamed := regexp.MustCompile(`(?m)^name: \S+`).ReplaceAllString(m[1], "name: "+name)
			if err := os.WriteFile(path, []byte(renamed), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	t.Fatalf("no topology in %s", doc)
	return ""
}

// labGone checks what a user would: no namespace of the lab, none of its
// daemons alive, no directory.
func labGone(t *testing.T, st *State, opts Options) {
	t.Helper()
	if left, _ := netns.List(st.Prefix); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
		for _, ns := range left {
			netns.Delete(ns)
		}
	}
	for _, p := range st.Processes {
		if alive, _ := running(p); alive {
			t.Errorf("%s's %s (pid %d) still runs", p.Node, p.Daemon, p.PID)
		}
	}
	if _, err := os.Stat(opts.dir(st.Name)); err == nil {
		t.Errorf("%s is left", opts.dir(st.Name))
	}
}

// upLab builds the lab of the topology file at path, taken down when the
// test ends, with the test's binaries; progress, if not nil, gets Up's.
func upLab(t *testing.T, name, path string, progress *bytes.Buffer) (*State, Options, *topo.Topology) {
	t.Helper()
	return upLabWith(t, name, path, Options{Progress: progress})
}

// upLabWith is upLab with options of the test's (opts.Progress, if not
// nil, gets Up's); the directory and the binaries are the test's.
func upLabWith(t *testing.T, name, path string, opts Options) (*State, Options, *topo.Topology) {
	t.Helper()
	progress, _ := opts.Progress.(*bytes.Buffer)
	if progress == nil {
		progress = &bytes.Buffer{}
	}
	opts.Dir, opts.Bin, opts.Progress = t.TempDir(), bin, progress
	top, err := topo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cleanupLab(t, name, opts)
	st, err := Up(context.Background(), top, path, opts)
	if err != nil {
		t.Fatalf("up: %v\nprogress:\n%s", err, progress.String())
	}
	return st, opts, top
}

// cleanupLab takes the lab down at the end of the test whatever happened.
func cleanupLab(t testing.TB, name string, opts Options) {
	t.Cleanup(func() {
		if err := Down(name, opts); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// TestUpDown builds docs/lab.md's lab with the real binaries: both xTRs
// register, an MPTCP transfer from client to server arrives intact, and
// down leaves nothing; a second down is no error.
func TestUpDown(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-doc"
	var progress bytes.Buffer
	st, opts, _ := upLab(t, name, docTopology(t, name), &progress)
	if !strings.Contains(progress.String(), "lab "+name+" is up") {
		t.Errorf("progress does not say the lab is up:\n%s", progress.String())
	}

	_, daemons, err := Status(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]string{}
	for _, d := range daemons {
		if !d.Running {
			t.Errorf("%s's %s is not running", d.Node, d.Daemon)
		}
		if len(d.Registrations) > 0 {
			registered[d.Node] = strings.Join(d.Registrations, ",")
		}
	}
	if want := "10.255.0.18:4342 registered"; registered["xtra"] != want || registered["xtrb"] != want {
		t.Errorf("registrations %v, want both xTRs %q", registered, want)
	}
	if len(daemons) != 7 { // 4 lispd, 2 pm, the link daemon
		t.Errorf("%d daemons: %+v", len(daemons), daemons)
	}
	for _, d := range daemons {
		if d.Daemon == linkdDaemon && len(d.Links) != 3 {
			t.Errorf("linkd serves %d links, want the 3 emulated ones: %v", len(d.Links), d.Links)
		}
	}

	// Plain TCP connections first, several, from other ports, so that
	// every path is resolved, as the runner warms a lab for steady state:
	// the routers hold the first packets while they resolve each other's
	// sites, so that nothing is lost either way.
	if err := warmPair(context.Background(), st.Prefix+"client", st.Prefix+"server", netip.Addr{}, nextWarmPorts(), "10.2.0.2:5201"); err != nil {
		t.Fatal(err)
	}
	if err := transfer(st.Prefix+"client", st.Prefix+"server", "10.2.0.2:5201", 1<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := transfer(st.Prefix+"client", st.Prefix+"server", "10.2.0.2:5201", 4<<20, true); err != nil {
		t.Fatal(err)
	}

	if err := Down(name, opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	labGone(t, st, opts)
	if err := Down(name, opts); err != nil {
		t.Errorf("a second down: %v", err)
	}
}

// errFellBack is transfer's error for an MPTCP connection that the server
// saw as plain TCP, its data intact.
var errFellBack = errors.New("the connection fell back to TCP")

// transfer sends n random bytes over MPTCP or TCP from a client in one
// namespace to a server in another, and checks that the server got them,
// over MPTCP if that was asked.
func transfer(clientNS, serverNS, addr string, n int, mptcp bool) error {
	var ln net.Listener
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(mptcp)
	err := (&netns.NS{Name: serverNS}).Do(func() (err error) {
		ln, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	if err != nil {
		return err
	}
	defer ln.Close()
	type result struct {
		sum   [32]byte
		n     int64
		mptcp bool
		err   error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		k, err := io.Copy(h, c)
		mp, _ := c.(*net.TCPConn).MultipathTCP()
		got <- result{sum: [32]byte(h.Sum(nil)), n: k, mptcp: mp, err: err}
	}()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	d := &net.Dialer{Timeout: 15 * time.Second}
	d.SetMultipathTCP(mptcp)
	var c net.Conn
	if err := (&netns.NS{Name: clientNS}).Do(func() (err error) {
		c, err = d.Dial("tcp", addr)
		return err
	}); err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(data); err != nil {
		c.Close()
		return fmt.Errorf("send: %w", err)
	}
	c.Close()
	r := <-got
	switch {
	case r.err != nil:
		return fmt.Errorf("receive: %w", r.err)
	case r.n != int64(n) || r.sum != sha256.Sum256(data):
		return fmt.Errorf("the server got %d bytes, not the %d sent", r.n, n)
	case mptcp && !r.mptcp:
		return errFellBack
	}
	return nil
}

// TestDownAfterKilledUp kills `amptcp lab up` once it has started
// daemons, before it is done: down still removes every namespace and
// stops every daemon it had started.
func TestDownAfterKilledUp(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-kill"
	opts := Options{Dir: t.TempDir(), Bin: bin}
	path := docTopology(t, name)
	cleanupLab(t, name, opts)
	up := exec.Command(filepath.Join(bin, "amptcp"), "lab", "up", "-dir", opts.Dir, "-bin", bin, path)
	var out bytes.Buffer
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it as soon as it has started two daemons.
	var st *State
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s, err := Load(name, opts)
		if err == nil && len(s.Processes) >= 2 {
			st = s
			break
		}
		if time.Now().After(deadline) {
			up.Process.Kill()
			up.Wait()
			t.Fatalf("up started no daemons:\n%s", out.String())
		}
	}
	up.Process.Kill()
	up.Wait()
	if st.Up {
		t.Fatal("up finished before it was killed")
	}
	for _, p := range st.Processes[:2] {
		if alive, _ := running(p); !alive {
			t.Fatalf("%s's %s died with up: nothing to stop", p.Node, p.Daemon)
		}
	}
	if err := Down(name, opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	labGone(t, st, opts)
}

// TestFailedUpTakesItselfDown: when a daemon cannot start (no binaries
// where -bin says: the first to start is the link daemon), up says why
// and leaves nothing behind.
func TestFailedUpTakesItselfDown(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-fail"
	opts := Options{Dir: t.TempDir(), Bin: t.TempDir()}
	path := docTopology(t, name)
	top, err := topo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cleanupLab(t, name, opts)
	_, err = Up(context.Background(), top, path, opts)
	if err == nil || !strings.Contains(err.Error(), "start linkd") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("up with no lispd: %v", err)
	}
	labGone(t, &State{Name: name, Prefix: topo.NamespacePrefix + name + "-"}, opts)
}
