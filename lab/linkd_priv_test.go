package lab

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/topo"
)

// emulatedTopology is two hosts joined through a router by two emulated
// links: 10 ms each way on one, 20 Mbit/s on the other. h1 is
// 10.255.0.1, h2 10.255.0.6.
const emulatedTopology = `
name: NAME
nodes:
  - {name: h1, role: host}
  - {name: r, role: router}
  - {name: h2, role: host}
links:
  - {ends: [h1, r], delay: 10ms}
  - {ends: [r, h2], rate: 20Mbit}
`

// upEmulated builds the lab of emulatedTopology, taken down at the end of
// the test.
func upEmulated(t testing.TB, suffix string) (*State, Options, *bytes.Buffer) {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-" + suffix
	var progress bytes.Buffer
	opts := Options{Dir: t.TempDir(), Bin: bin, Progress: &progress}
	top, err := topo.Parse([]byte(strings.Replace(emulatedTopology, "NAME", name, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cleanupLab(t, name, opts)
	st, err := Up(context.Background(), top, "", opts)
	if err != nil {
		t.Fatalf("up: %v\nprogress:\n%s", err, progress.String())
	}
	return st, opts, &progress
}

// pinger sends UDP datagrams from h1 to an echo on h2 and times the
// answers.
type pinger struct {
	conn *net.UDPConn
	seq  byte
}

func newPinger(t *testing.T, st *State) *pinger {
	t.Helper()
	var echo, conn *net.UDPConn
	err := (&netns.NS{Name: st.Prefix + "h2"}).Do(func() (err error) {
		echo, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 255, 0, 6), Port: 7})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	err = (&netns.NS{Name: st.Prefix + "h1"}).Do(func() (err error) {
		conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 255, 0, 6), Port: 7})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &pinger{conn: conn}
}

// ping sends n pings, one at a time, each waiting up to wait for its
// answer, and returns the smallest round trip and how many came back.
func (p *pinger) ping(n int, wait time.Duration) (minRTT time.Duration, answered int) {
	buf := make([]byte, 64)
	for range n {
		p.seq++
		start := time.Now()
		p.conn.Write([]byte{p.seq})
		p.conn.SetReadDeadline(start.Add(wait))
		for {
			k, err := p.conn.Read(buf)
			if err != nil {
				break // timed out
			}
			if k == 1 && buf[0] == p.seq { // not a late answer to an earlier one
				rtt := time.Since(start)
				if answered == 0 || rtt < minRTT {
					minRTT = rtt
				}
				answered++
				break
			}
		}
	}
	return minRTT, answered
}

// checkRTT asserts that the smallest of 10 round trips is want, or more
// by less than half of it: never less (a frame left early), and never as
// far as a delay applied twice or a change not applied, which the checks
// below would show. Idle, it is within half a millisecond (the echo's
// ends waking up); on a loaded machine the emulator's loop and the echo
// wake later. How close the emulation comes is linkemu's
// BenchmarkDelay's measurement.
func checkRTT(t *testing.T, p *pinger, want time.Duration) {
	t.Helper()
	rtt, answered := p.ping(10, time.Second)
	t.Logf("round trip %v, want %v (%d of 10 answered)", rtt, want, answered)
	if answered < 8 || rtt < want || rtt >= want+want/2 {
		t.Errorf("round trip %v (%d of 10 answered), want %v to %v", rtt, answered, want, want+want/2)
	}
}

// TestEmulatedLinks builds a lab whose links are emulated: the round
// trip is the links' delay, a link taken down through OpenLinks stops
// the traffic and brought up restores it, a set changes one direction's
// delay, `amptcp lab link` and `amptcp lab status` work, the counters
// show the frames, and down leaves no process, TAP or namespace.
func TestEmulatedLinks(t *testing.T) {
	st, opts, progress := upEmulated(t, "emu")
	if !strings.Contains(progress.String(), "links: 2 up (2 emulated by linkd, 0 veth pairs)") {
		t.Errorf("progress does not say the links are emulated:\n%s", progress)
	}
	linkd, ok := st.linkd()
	if !ok {
		t.Fatalf("no linkd in the state: %+v", st.Processes)
	}
	p := newPinger(t, st)
	p.ping(1, 2*time.Second) // ARP on both links
	checkRTT(t, p, 20*time.Millisecond)

	links, err := OpenLinks(st.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := links.Apply(topo.Event{Link: "r-h2", Action: topo.ActionDown}); err != nil {
		t.Fatal(err)
	}
	if _, answered := p.ping(5, 100*time.Millisecond); answered != 0 {
		t.Errorf("%d of 5 pings answered over a link that is down", answered)
	}
	if err := links.Apply(topo.Event{Link: "r-h2", Action: topo.ActionUp}); err != nil {
		t.Fatal(err)
	}
	checkRTT(t, p, 20*time.Millisecond)

	// 30 ms from h1 to r, still 10 back.
	if err := links.Apply(topo.Event{Link: "h1-r", Action: topo.ActionSet, Direction: "a-to-b", Delay: "30ms"}); err != nil {
		t.Fatal(err)
	}
	checkRTT(t, p, 40*time.Millisecond)
	if err := links.Apply(topo.Event{Link: "h1-r", Action: topo.ActionSet, Rate: "-1Mbit"}); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("a set with a bad rate: %v", err)
	}
	if err := links.Apply(topo.Event{Link: "nope", Action: topo.ActionDown}); err == nil || !strings.Contains(err.Error(), `"nope" is not an emulated link`) {
		t.Errorf("an event on no link: %v", err)
	}
	amptcp := filepath.Join(bin, "amptcp")
	out, err := exec.Command(amptcp, "lab", "link", "-dir", opts.Dir, st.Name, "h1-r", "set", "--direction", "a-to-b", "--delay", "10ms").CombinedOutput()
	if err != nil {
		t.Fatalf("amptcp lab link: %v\n%s", err, out)
	}
	checkRTT(t, p, 20*time.Millisecond)

	stats, err := links.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h1-r", "r-h2"} {
		s, ok := stats[name]
		if !ok {
			t.Errorf("no stats of %s: %v", name, stats)
			continue
		}
		for _, d := range []linkemu.Direction{linkemu.AToB, linkemu.BToA} {
			if c := s.Dir(d); c.FramesIn < 30 || c.Delivered < 30 {
				t.Errorf("%s %s: %d frames in, %d delivered; want the pings' 30 at least", name, d, c.FramesIn, c.Delivered)
			}
		}
	}
	if down := stats["r-h2"].AB.DroppedDown; down < 5 {
		t.Errorf("r-h2 a-to-b dropped %d frames while down, want the 5 pings", down)
	}
	out, err = exec.Command(amptcp, "lab", "status", "-dir", opts.Dir, st.Name).CombinedOutput()
	t.Logf("amptcp lab status:\n%s", out)
	if err != nil || !regexpMatch(`(?m)^\s+r-h2\s+a-to-b\s+in \d+ frames .* down [1-9]`, out) {
		t.Errorf("amptcp lab status (%v) shows no counters of r-h2:\n%s", err, out)
	}

	if err := Down(st.Name, opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	labGone(t, st, opts)
	if alive, _ := running(linkd); alive {
		t.Errorf("linkd (pid %d) still runs", linkd.PID)
	}
}

// TestDownAfterLinkdKilled: a SIGKILLed link daemon takes its TAPs with
// it, and down still removes the rest.
func TestDownAfterLinkdKilled(t *testing.T) {
	st, opts, _ := upEmulated(t, "kld")
	linkd, _ := st.linkd()
	if err := unix.Kill(linkd.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if alive, _ := running(linkd); !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("linkd (pid %d) survives SIGKILL", linkd.PID)
		}
	}
	h, err := handleAt(st.Prefix + "h1")
	if err != nil {
		t.Fatal(err)
	}
	// The kernel removes a TAP when its last descriptor closes.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := h.LinkByName("eth0"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("h1's TAP eth0 outlives linkd")
			break
		}
	}
	h.Close()
	if _, err := OpenLinks(st.Name, opts); err != nil {
		t.Fatal(err) // the lab still has its links on paper
	}
	if err := Down(st.Name, opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	labGone(t, st, opts)
	if _, err := OpenLinks(st.Name, opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenLinks after down: %v", err)
	}
	if _, err := os.Stat(opts.dir(st.Name)); err == nil {
		t.Errorf("%s is left", opts.dir(st.Name))
	}
}

func regexpMatch(pattern string, b []byte) bool { return regexp.MustCompile(pattern).Match(b) }
