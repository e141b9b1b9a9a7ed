package mptcp

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testnet"
)

// dialIn opens a Client in nd's namespace, closed when t ends.
func dialIn(t *testing.T, nd *testnet.Node) *Client {
	t.Helper()
	var c *Client
	if err := nd.Do(func() (err error) { c, err = Dial(); return err }); err != nil {
		t.Fatalf("dial in %s: %v", nd.Name(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventLog collects what an EventListener receives, from a goroutine,
// and the raw messages behind it.
type eventLog struct {
	name string
	l    *EventListener

	mu     sync.Mutex
	events []Event
	raw    []rawEvent
	err    error
	added  chan struct{} // signalled after each batch
}

type rawEvent struct {
	cmd   uint8
	attrs []byte
}

// listenIn starts an EventListener in nd's namespace and a goroutine that
// collects its events until t ends.
func listenIn(t *testing.T, nd *testnet.Node, name string) *eventLog {
	t.Helper()
	var l *EventListener
	if err := nd.Do(func() (err error) { l, err = ListenEvents(); return err }); err != nil {
		t.Fatalf("listen to events in %s: %v", nd.Name(), err)
	}
	el := &eventLog{name: name, l: l, added: make(chan struct{}, 1)}
	l.raw = func(cmd uint8, attrs []byte) {
		el.mu.Lock()
		el.raw = append(el.raw, rawEvent{cmd, append([]byte(nil), attrs...)})
		el.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			evs, err := l.Receive()
			el.mu.Lock()
			el.events = append(el.events, evs...)
			if err != nil && !errors.Is(err, net.ErrClosed) {
				el.err = err
			}
			el.mu.Unlock()
			select {
			case el.added <- struct{}{}:
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Receive did not return after Close", name)
		}
		if el.err != nil {
			t.Errorf("%s: Receive: %v", name, el.err)
		}
		if n := l.Malformed(); n != 0 {
			t.Errorf("%s: %d malformed events", name, n)
		}
	})
	return el
}

// wait returns the first event from index from on that match accepts,
// failing t after timeout.
func (el *eventLog) wait(t *testing.T, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for seen := 0; ; {
		el.mu.Lock()
		evs := el.events
		el.mu.Unlock()
		for ; seen < len(evs); seen++ {
			if match(evs[seen]) {
				return evs[seen]
			}
		}
		select {
		case <-el.added:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: no %s event within 5 s; got:\n%s", el.name, what, el.dump())
		}
	}
}

func (el *eventLog) dump() string {
	el.mu.Lock()
	defer el.mu.Unlock()
	var b strings.Builder
	for _, ev := range el.events {
		fmt.Fprintf(&b, "  %s\n", ev)
	}
	return b.String()
}

func (el *eventLog) snapshot() ([]Event, []rawEvent) {
	el.mu.Lock()
	defer el.mu.Unlock()
	return append([]Event(nil), el.events...), append([]rawEvent(nil), el.raw...)
}

// monitor runs `ip mptcp monitor` in nd and returns once it receives
// events (the probe listener's LISTENER_CREATED shows in its output).
type monitor struct {
	p     *testnet.Process
	start int // lines before the probe's events are the probe's own
}

func startMonitor(t *testing.T, nd *testnet.Node, probePort int) *monitor {
	t.Helper()
	p := nd.Start(t, "ip", "mptcp", "monitor")
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := nd.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", probePort))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		time.Sleep(20 * time.Millisecond)
		if strings.Contains(p.Output(), "[UNKNOWN 16]") {
			time.Sleep(50 * time.Millisecond) // the last probe's lines
			return &monitor{p: p, start: len(monitorLines(p.Output()))}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ip mptcp monitor in %s shows no events after 5 s:\n%s", nd.Name(), p.Output())
		}
	}
}

func monitorLines(out string) []string {
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "[") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// lines returns the monitor's lines after its probe.
func (m *monitor) lines() []string { return monitorLines(m.p.Output())[m.start:] }

var capture = flag.Bool("capture", false, "write the events that TestUserspacePM receives under testdata/events")

// writeCapture stores each raw event under testdata/events as annotated
// hex, with the line `ip mptcp monitor` printed for it: the vectors of
// TestParseEventCaptured. Run `go test -run TestUserspacePM -capture` as
// root to renew them.
func writeCapture(t *testing.T, name string, raw []rawEvent, monitorLines []string) {
	t.Helper()
	if len(raw) != len(monitorLines) {
		t.Fatalf("capture %s: %d raw events but %d monitor lines:\n%s", name, len(raw), len(monitorLines), strings.Join(monitorLines, "\n"))
	}
	uname, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	dir := filepath.Join("testdata", "events")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	counts := map[EventType]int{}
	for i, r := range raw {
		typ := EventType(r.cmd)
		counts[typ]++
		var b strings.Builder
		fmt.Fprintf(&b, "# source: Linux %s, mptcp_pm_events in namespace %q of TestUserspacePM (go test -capture), raw from the package's listener\n", strings.TrimSpace(string(uname)), name)
		fmt.Fprintf(&b, "# monitor: %s\n", monitorLines[i])
		fmt.Fprintf(&b, "# command %d (%s), version 1; the attributes:\n", r.cmd, typ)
		writeAttrHex(&b, r.attrs)
		file := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.hex", name, typ, counts[typ]))
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAttrHex writes one attribute a line, with its name as a comment.
func writeAttrHex(b *strings.Builder, attrs []byte) {
	walkAttrs("capture", attrs, func(typ uint16, data []byte, off int) error {
		name := eventAttrs[typ].name
		if name == "" {
			name = fmt.Sprintf("attribute %d", typ)
		}
		end := off + (len(data)+3)&^3
		fmt.Fprintf(b, "%x # %s\n", attrs[off-nlaHeaderLen:min(end, len(attrs))], name)
		return nil
	})
}

// captureDiag stores the sock_diag messages of the connection token and
// its subflows under testdata/diag, each with what `ss` printed for the
// socket right after: the vectors of TestParseDiagCaptured. The
// connection must be idle, so that both see the same counters.
func captureDiag(t *testing.T, nd *testnet.Node, token uint32) {
	t.Helper()
	type msg struct {
		file, ssArgs, key string
		b                 []byte
	}
	var msgs []msg
	err := nd.Do(func() error {
		err := diagDump(ipprotoMPTCP, func(b []byte) error {
			if c, err := parseConnection(b); err == nil && c.Token == token {
				msgs = append(msgs, msg{"mptcp-connection.hex", "-Mni", c.Local.String() + " ", append([]byte(nil), b...)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		return diagDump(unix.IPPROTO_TCP, func(b []byte) error {
			if s, ok, err := parseSubflow(b); err == nil && ok && s.Token == token {
				msgs = append(msgs, msg{fmt.Sprintf("tcp-subflow-%d.hex", s.LocalID), "-tni", s.Local.String() + " ", append([]byte(nil), b...)})
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	uname, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	dir := filepath.Join("testdata", "diag")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		out, err := nd.Exec(t, "ss", m.ssArgs, "state", "established")
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(out, m.key)
		if i < 0 {
			t.Fatalf("ss %s has no %s:\n%s", m.ssArgs, m.key, out)
		}
		block := strings.SplitN(out[i:], "\n", 3) // the socket's line and its details
		var b strings.Builder
		fmt.Fprintf(&b, "# source: Linux %s, a sock_diag (inet_diag) dump in TestUserspacePM (go test -capture), after 1 MiB sent\n", strings.TrimSpace(string(uname)))
		fmt.Fprintf(&b, "# ss %s: %s\n", m.ssArgs, strings.Join(strings.Fields(block[0]), " "))
		fmt.Fprintf(&b, "# ss %s: %s\n", m.ssArgs, strings.TrimSpace(block[1]))
		fmt.Fprintf(&b, "# struct inet_diag_msg\n%x\n", m.b[:inetDiagMsgLen])
		walkAttrs("capture", m.b[inetDiagMsgLen:], func(typ uint16, data []byte, off int) error {
			start := inetDiagMsgLen + off - nlaHeaderLen
			end := min(inetDiagMsgLen+off+(len(data)+3)&^3, len(m.b))
			fmt.Fprintf(&b, "# attribute %d\n", typ)
			for row := start; row < end; row += 32 {
				fmt.Fprintf(&b, "%x\n", m.b[row:min(row+32, end)])
			}
			return nil
		})
		if err := os.WriteFile(filepath.Join(dir, m.file), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(msgs) != 3 {
		t.Fatalf("captured %d diag messages, want the connection and its 2 subflows", len(msgs))
	}
}
