package mptcp

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/hextext"
)

// monitorNames are the names iproute2 6.1's `ip mptcp monitor` prints;
// it shows the events it does not know as "UNKNOWN <n>".
var monitorNames = map[string]EventType{
	"CREATED": EventCreated, "ESTABLISHED": EventEstablished, "CLOSED": EventClosed,
	"ANNOUNCED": EventAnnounced, "REMOVED": EventRemoved,
	"SF_ESTABLISHED": EventSubEstablished, "SF_CLOSED": EventSubClosed, "SF_PRIO": EventSubPriority,
}

var (
	monitorHead  = regexp.MustCompile(`^\[\s*([A-Z_]+)(?: (\d+))?\]`)
	monitorField = regexp.MustCompile(`(\w+)=(\S+)`)
)

// diffMonitor compares an event with the line `ip mptcp monitor` printed
// for it (an independent decoder) and says what differs, or "".
func diffMonitor(ev Event, line string) string {
	m := monitorHead.FindStringSubmatch(line)
	if m == nil {
		return "cannot read the monitor's line"
	}
	if m[1] == "UNKNOWN" {
		// iproute2 6.1 knows neither these events nor their attributes.
		if n, _ := strconv.Atoi(m[2]); EventType(n) != ev.Type {
			return fmt.Sprintf("type %s, monitor says %s", ev.Type, m[0])
		}
		return ""
	}
	if typ, ok := monitorNames[m[1]]; !ok || typ != ev.Type {
		return fmt.Sprintf("type %s, monitor says %s", ev.Type, m[0])
	}
	var diffs []string
	check := func(key, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, monitor %s", key, got, want))
		}
	}
	num := func(v string, base int) string {
		n, err := strconv.ParseUint(v, base, 64)
		if err != nil {
			return "bad number " + v
		}
		return strconv.FormatUint(n, 10)
	}
	addr := func(v string) string {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return "bad address " + v
		}
		return a.Unmap().String()
	}
	seen := map[string]bool{}
	for _, f := range monitorField.FindAllStringSubmatch(line, -1) {
		key, v := f[1], f[2]
		seen[key] = true
		switch key {
		case "token":
			check(key, fmt.Sprint(ev.Token), num(v, 16))
		case "remid":
			check(key, fmt.Sprint(ev.RemoteID), num(v, 10))
		case "locid":
			check(key, fmt.Sprint(ev.LocalID), num(v, 10))
		case "saddr4", "saddr6":
			check(key, ev.Local.Addr().String(), addr(v))
		case "daddr4", "daddr6":
			check(key, ev.Remote.Addr().String(), addr(v))
		case "sport":
			check(key, fmt.Sprint(ev.Local.Port()), num(v, 10))
		case "dport":
			check(key, fmt.Sprint(ev.Remote.Port()), num(v, 10))
		case "backup":
			check(key, fmt.Sprint(map[bool]int{false: 0, true: 1}[ev.Backup]), num(v, 10))
		case "error":
			check(key, fmt.Sprint(ev.Error), num(v, 10))
		case "flags":
			check(key, fmt.Sprint(ev.Flags), num(v, 16))
		case "ifindex":
			check(key, fmt.Sprint(ev.IfIndex), num(v, 10))
		case "reset_reason":
			check(key, fmt.Sprint(ev.ResetReason), num(v, 10))
		case "reset_flags":
			check(key, fmt.Sprint(ev.ResetFlags), num(v, 16))
		case "timeout":
			check(key, fmt.Sprint(ev.Timeout), num(v, 10))
		default:
			diffs = append(diffs, "monitor field "+key+" not compared")
		}
	}
	// What the monitor does not print must be absent from the event too.
	if !seen["token"] && ev.Token != 0 {
		diffs = append(diffs, "token set, monitor shows none")
	}
	if !seen["saddr4"] && !seen["saddr6"] && ev.Local.Addr().IsValid() {
		diffs = append(diffs, "local address set, monitor shows none")
	}
	if !seen["daddr4"] && !seen["daddr6"] && ev.Remote.Addr().IsValid() {
		diffs = append(diffs, "remote address set, monitor shows none")
	}
	return strings.Join(diffs, "; ")
}

// capturedEvent is one file of testdata/events.
type capturedEvent struct {
	file    string
	cmd     uint8
	attrs   []byte
	monitor string
}

func readCapturedEvents(tb testing.TB) []capturedEvent {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "events", "*.hex"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no captured events under testdata/events: %v", err)
	}
	var evs []capturedEvent
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		ce := capturedEvent{file: filepath.Base(file)}
		for l := range strings.SplitSeq(string(text), "\n") {
			if s, ok := strings.CutPrefix(l, "# monitor: "); ok {
				ce.monitor = s
			}
			if s, ok := strings.CutPrefix(l, "# command "); ok {
				n, err := strconv.Atoi(strings.Fields(s)[0])
				if err != nil {
					tb.Fatalf("%s: %v", file, err)
				}
				ce.cmd = uint8(n)
			}
		}
		if ce.attrs, err = hextext.Decode(string(text)); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		if ce.cmd == 0 || ce.monitor == "" {
			tb.Fatalf("%s: needs '# command N' and '# monitor: ...' lines", file)
		}
		evs = append(evs, ce)
	}
	return evs
}

// TestParseEventCaptured decodes every event the kernel sent during
// TestUserspacePM and compares it with what `ip mptcp monitor` printed.
func TestParseEventCaptured(t *testing.T) {
	seen := map[EventType]bool{}
	for _, ce := range readCapturedEvents(t) {
		ev, err := ParseEvent(ce.cmd, ce.attrs)
		if err != nil {
			t.Errorf("%s: %v", ce.file, err)
			continue
		}
		seen[ev.Type] = true
		// The monitor shows nothing of these but their type.
		if (ev.Type == EventListenerCreated || ev.Type == EventListenerClosed) && (ev.Local.Port() == 0 || !ev.Local.Addr().IsValid() || ev.Token != 0) {
			t.Errorf("%s: %s; want a local address and port, no token", ce.file, ev)
		}
		if diff := diffMonitor(ev, ce.monitor); diff != "" {
			t.Errorf("%s: %s\n  decoded: %s\n  monitor: %s", ce.file, diff, ev, ce.monitor)
		}
	}
	for typ := range eventNames {
		if !seen[typ] {
			t.Errorf("no captured %s event", typ)
		}
	}
}

// TestParseEventFields pins what the monitor cannot show: unmapping,
// the server flag, and the two byte orders of ports.
func TestParseEventFields(t *testing.T) {
	attrs := hexBytes(t, `
		08000100 efbeadde           # token 0xdeadbeef
		06000200 0a000000           # family AF_INET6
		14000600 00000000 00000000 0000ffff 0a000102 # saddr6 ::ffff:10.0.1.2
		14000800 fd000000 00000000 00000000 00000001 # daddr6 fd00::1
		06000900 1388 0000          # sport 5000, network order
		06000a00 9c42 0000          # dport 40002
		06000d00 0200 0000          # flags: server side
		08000f00 03000000           # if_idx 3
		05000b00 01 000000          # backup
		08006300 01020304           # attribute 99: unknown, skipped
	`)
	ev, err := ParseEvent(uint8(EventSubEstablished), attrs)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		Type: EventSubEstablished, Token: 0xdeadbeef,
		Local:  netip.MustParseAddrPort("10.0.1.2:5000"),
		Remote: netip.MustParseAddrPort("[fd00::1]:40002"),
		Server: true, Flags: EventFlagServerSide, IfIndex: 3, Backup: true,
	}
	if ev != want {
		t.Fatalf("ParseEvent:\n got %+v\nwant %+v", ev, want)
	}
	// The older SERVER_SIDE attribute means the same.
	ev, err = ParseEvent(uint8(EventCreated), hexBytes(t, "05001200 01000000"))
	if err != nil || !ev.Server {
		t.Fatalf("SERVER_SIDE attribute: %+v, %v", ev, err)
	}
}

func TestParseEventMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmd   uint8
		attrs string
		want  error
	}{
		{"command 0", 0, "08000100 01000000", ErrBadValue},
		{"short header", 1, "0800", ErrTruncated},
		{"length past the end", 1, "0c000100 01000000", ErrTruncated},
		{"length below the header", 1, "02000100", ErrBadLength},
		{"token of 2 bytes", 1, "06000100 0100 0000", ErrBadLength},
		{"sport of 4 bytes", 10, "08000900 01020304", ErrBadLength},
		{"saddr6 of 15 bytes", 10, "13000600 00000000 00000000 00000000 000000 00", ErrBadLength},
		{"second attribute cut", 2, "08000100 01000000 0800", ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEvent(tc.cmd, hexBytes(t, tc.attrs))
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tc.want) {
				t.Fatalf("ParseEvent: %v; want a *ParseError wrapping %v", err, tc.want)
			}
		})
	}
}

// TestParseEventTruncated cuts every captured event at every length:
// each cut either decodes or fails with a *ParseError, never panics.
func TestParseEventTruncated(t *testing.T) {
	for _, ce := range readCapturedEvents(t) {
		for n := range len(ce.attrs) {
			_, err := ParseEvent(ce.cmd, ce.attrs[:n])
			var pe *ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("%s cut at %d: %v is not a *ParseError", ce.file, n, err)
			}
		}
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, ce := range readCapturedEvents(f) {
		f.Add(ce.cmd, ce.attrs)
	}
	f.Fuzz(func(t *testing.T, cmd uint8, attrs []byte) {
		ev, err := ParseEvent(cmd, attrs)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		_ = ev.String()
		if ev.Type != EventType(cmd) {
			t.Fatalf("type %d from command %d", ev.Type, cmd)
		}
		if ev.Local.Addr().Is4In6() || ev.Remote.Addr().Is4In6() {
			t.Fatalf("mapped address left in %s", ev)
		}
	})
}

func hexBytes(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hextext.Decode(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkParseEvent(b *testing.B) {
	var ce capturedEvent
	for _, c := range readCapturedEvents(b) {
		if EventType(c.cmd) == EventSubEstablished {
			ce = c
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(ce.attrs)))
	for b.Loop() {
		if _, err := ParseEvent(ce.cmd, ce.attrs); err != nil {
			b.Fatal(err)
		}
	}
}
