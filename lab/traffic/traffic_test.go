package traffic

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/mptcp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// TestJitter checks the unit gaps against a hand computation: units of
// 10 bytes arriving at 0, 10, 30 and 40 ms have gaps 10, 20, 10 ms,
// mean 13.33 ms, population standard deviation 4.714 ms.
func TestJitter(t *testing.T) {
	a := newArrivals(10)
	a.add(t0, 4)
	a.add(t0.Add(ms(5)), 6) // completes unit 1 at 5 ms
	a.add(t0.Add(ms(15)), 10)
	a.add(t0.Add(ms(35)), 10)
	g := a.takeInterval()
	if g.n != 2 || g.max != ms(20) {
		t.Fatalf("first interval: %d gaps, max %v; want 2, 20ms", g.n, g.max)
	}
	if got, want := g.stddev(), ms(5); absDiff(got, want) > time.Microsecond {
		t.Errorf("stddev of 10, 20 ms: %v; want %v", got, want)
	}
	a.add(t0.Add(ms(45)), 10)
	if g := a.takeInterval(); g.n != 1 || g.stddev() != 0 {
		t.Errorf("second interval: %d gaps, stddev %v; want 1 gap, 0 (too few)", g.n, g.stddev())
	}
	want := time.Duration(math.Sqrt(200.0/9) * float64(time.Millisecond)) // gaps 10, 20, 10
	if got := a.total.stddev(); absDiff(got, want) > time.Microsecond {
		t.Errorf("whole flow: %v; want %v", got, want)
	}
	// One read completing two units: they arrive together, a zero gap.
	b := newArrivals(10)
	b.add(t0, 10)
	b.add(t0.Add(ms(10)), 20)
	if g := b.takeInterval(); g.n != 2 || g.max != ms(10) || g.stddev() != ms(5) {
		t.Errorf("two units in one read: %d gaps, max %v, stddev %v; want 2, 10ms, 5ms", g.n, g.max, g.stddev())
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// TestPacer checks the datagrams due along a flow: 50 Mbit/s of 1,250-byte
// datagrams is 5,000 per second, one every 200 us.
func TestPacer(t *testing.T) {
	p := newPacer(t0, 50e6, 1250, time.Second)
	if p.total != 5000 {
		t.Fatalf("total %d; want 5000", p.total)
	}
	for _, c := range []struct {
		at   time.Duration
		want uint64 // due, having sent all that was due before
	}{
		{-time.Millisecond, 0}, {0, 1}, {ms(0.1), 0}, {ms(1), 5}, {ms(3.3), 11}, {ms(3.3), 0},
		{ms(999.7), 4999 - 17}, {ms(999.9), 1}, {2 * time.Second, 0},
	} {
		n := p.due(t0.Add(c.at))
		if n != c.want {
			t.Errorf("due at %v: %d; want %d", c.at, n, c.want)
		}
		p.sent += n
	}
	if !p.done() {
		t.Errorf("not done after %d of %d", p.sent, p.total)
	}
	// A rate that does not divide evenly: ceil(1.5 datagrams per second x 1 s).
	if q := newPacer(t0, 12, 1, time.Second); q.total != 2 {
		t.Errorf("1.5 datagrams per second for 1 s: total %d; want 2", q.total)
	}
}

// TestRecordJSON pins a sample's JSON line and its round trip.
func TestRecordJSON(t *testing.T) {
	recs := []Record{{
		Time: t0, Flow: "f1", Kind: KindSubflow, Role: Sender, Subflow: 2,
		Local: netip.MustParseAddrPort("10.1.2.1:40000"), Remote: netip.MustParseAddrPort("10.1.2.2:5001"),
		BytesSent: 1000, BytesAcked: 900, RTT: 20 * time.Millisecond, Cwnd: 10, MSS: 1448, DeliveryRate: 8e6,
	}, {
		Time: t0, Flow: "f1", Kind: KindResult, Role: Receiver, Protocol: MPTCP, CongestionControl: "cubic",
		FlowKind: Transfer, Start: t0.Add(-time.Second), Completion: time.Second, BytesReceived: 1 << 20,
	}}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, r := range recs {
		w.Record(r)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-01-02T03:04:05Z","flow":"f1","kind":"subflow","role":"sender","subflow":2,"local":"10.1.2.1:40000","remote":"10.1.2.2:5001","bytes_sent":1000,"bytes_acked":900,"rtt_ns":20000000,"cwnd":10,"mss":1448,"delivery_rate_bps":8000000}
{"time":"2026-01-02T03:04:05Z","flow":"f1","kind":"result","role":"receiver","bytes_received":1048576,"protocol":"mptcp","cc":"cubic","flow_kind":"transfer","start":"2026-01-02T03:04:04Z","completion_ns":1000000000}
`
	if buf.String() != want {
		t.Errorf("JSON lines:\n%s\nwant:\n%s", buf.String(), want)
	}
	got, err := ReadRecords(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != recs[0] || !got[1].Start.Equal(recs[1].Start) || got[1].Completion != time.Second || got[1].Protocol != MPTCP {
		t.Errorf("round trip: %+v; want %+v", got, recs)
	}
	_, err = ReadRecords(strings.NewReader(`{"time":"2026-01-02T03:04:05Z","kind":"subflow"}` + "\n" + `{"kind":"nonsense"}`))
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("bad kind on line 2: %v; want a LineError for line 2", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriterKeepsError(t *testing.T) {
	w := NewWriter(failingWriter{})
	w.Record(Record{Time: t0, Flow: "x", Kind: KindReceiver, Role: Receiver})
	if err := w.Flush(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Flush: %v; want the write's error", err)
	}
	w = NewWriter(io.Discard)
	w.Record(Record{Flow: "y"}) // no kind: cannot be named
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), `flow "y"`) {
		t.Errorf("Flush after a record without kind: %v; want an error naming the flow", err)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	f := Flow{ID: "file-07", Kind: Transfer, Protocol: MPTCP, CongestionControl: "cubic", Direction: Download,
		Bytes: 7 << 18, Interval: 50 * time.Millisecond}
	b := appendHeader(nil, f)
	if len(b) != headerLen+len("cubic")+len("file-07") {
		t.Fatalf("header of %d bytes", len(b))
	}
	got, err := readHeader(bytes.NewReader(b))
	f.Protocol = TCP // the server learns the protocol from its socket
	if err != nil || got != f {
		t.Fatalf("readHeader: %+v, %v; want %+v", got, err, f)
	}
	for _, c := range []struct {
		name  string
		b     []byte
		field string
		err   error
	}{
		{"empty", nil, "fixed part", io.ErrUnexpectedEOF},
		{"short", b[:20], "fixed part", io.ErrUnexpectedEOF},
		{"magic", append([]byte("XTRF"), b[4:]...), "magic", ErrBadHeader},
		{"version", append(append([]byte(nil), b[:4]...), append([]byte{9}, b[5:]...)...), "version", ErrBadHeader},
		{"names cut", b[:len(b)-1], "names", io.ErrUnexpectedEOF},
		{"background", append(append([]byte(nil), b[:5]...), append([]byte{byte(Background)}, b[6:]...)...), "kind", ErrBadHeader},
		{"no cc", appendHeader(nil, Flow{ID: "x", Kind: Saturate, Duration: time.Second}), "flow", ErrBadHeader},
	} {
		_, err := readHeader(bytes.NewReader(c.b))
		var he *HeaderError
		if !errors.As(err, &he) || he.Field != c.field || !errors.Is(err, c.err) {
			t.Errorf("%s: %v; want a HeaderError in %s wrapping %v", c.name, err, c.field, c.err)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := []Flow{
		{ID: "a", Kind: Transfer, Protocol: TCP, CongestionControl: "reno", Bytes: 1},
		{ID: "b", Kind: Saturate, Protocol: MPTCP, CongestionControl: "bbr", Direction: Download, Duration: time.Second},
		{ID: "c", Kind: Background, Rate: 1e6, Duration: time.Second},
	}
	for _, f := range ok {
		if err := f.Validate(); err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
	err := Flow{ID: "d", Kind: Transfer, Protocol: 7, Direction: 3}.Validate()
	for _, want := range []string{"protocol", "congestion_control: missing", "direction", "bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid transfer: %v; want it to name %s", err, want)
		}
	}
	err = Flow{Kind: Background, Datagram: 10}.Validate()
	for _, want := range []string{"id", "rate", "duration", "datagram"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid background flow: %v; want it to name %s", err, want)
		}
	}
}

func TestAllToAll(t *testing.T) {
	eps := []Endpoint{{"a", "10.0.0.1:1"}, {"b", "10.0.0.2:1"}, {"c", "10.0.0.3:1"}}
	pairs := AllToAll(eps, Flow{ID: "bg", Kind: Background, Rate: 1e6})
	var got []string
	for _, p := range pairs {
		got = append(got, p.Flow.ID+"@"+p.To.Addr)
		if p.Flow.Rate != 1e6 || p.From.Name == p.To.Name {
			t.Errorf("pair %+v", p)
		}
	}
	want := "bg/a>b@10.0.0.2:1 bg/a>c@10.0.0.3:1 bg/b>a@10.0.0.1:1 bg/b>c@10.0.0.3:1 bg/c>a@10.0.0.1:1 bg/c>b@10.0.0.2:1"
	if strings.Join(got, " ") != want {
		t.Errorf("AllToAll: %s; want %s", strings.Join(got, " "), want)
	}
}

// TestRecordFullSkipsUnnumbered: a subflow the kernel lists while it is
// still creating it (ID 0, no local address) gives no subflow record and
// is not counted, so that a sample never shows a path that is not one.
func TestRecordFullSkipsUnnumbered(t *testing.T) {
	rec := &Collector{}
	s := &senderSampler{flow: "f1", rec: rec}
	s.recordFull(t0, &mptcp.FullInfo{Subflows: []mptcp.SubflowInfo{
		{ID: 1, Local: netip.MustParseAddrPort("10.1.1.1:40000"), Remote: netip.MustParseAddrPort("10.1.1.2:5001")},
		{ID: 0, Remote: netip.MustParseAddrPort("10.1.2.2:5001")},
	}})
	subs, conns := ofKind(rec.Records(), KindSubflow), ofKind(rec.Records(), KindConnection)
	if len(subs) != 1 || subs[0].Subflow != 1 || len(conns) != 1 || conns[0].Subflows != 1 || s.subflows != 1 {
		t.Errorf("subflow records %+v, connection records %+v, most subflows %d; want subflow 1 only", subs, conns, s.subflows)
	}
}
