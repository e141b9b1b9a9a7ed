package live

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/traffic"
)

var testRun = scenario.Run{ID: "003", Index: 2, Repetition: 2,
	Variant: scenario.Variant{{Dimension: "pm", Value: "subflows 2"}, {Dimension: "cc", Value: "cubic"}}}

// subflowSample is the i-th 100 ms sample of a subflow acknowledging
// mbps Mbit/s since t0.
func subflowSample(t0 time.Time, flow string, subflow uint8, i int, mbps float64) traffic.Record {
	return traffic.Record{Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), Flow: flow, Kind: traffic.KindSubflow,
		Role: traffic.Sender, Subflow: subflow, BytesAcked: uint64(float64(i) * mbps * 1e6 / 8 / 10),
		Local:  netip.MustParseAddrPort(fmt.Sprintf("10.1.0.%d:40000", subflow+1)),
		Remote: netip.MustParseAddrPort("10.2.0.2:5001"), RTT: time.Duration(subflow) * 10 * time.Millisecond, Cwnd: 10 * uint32(subflow)}
}

// feedRun starts testRun at t0 with two subflows of flow f (10 and 5
// Mbit/s, 10 samples each), the receiver's goodput, and p2 going down
// at 300 ms.
func feedRun(s *Server, t0 time.Time) {
	s.RunStarted(testRun, 4)
	s.FlowsStarted(t0)
	for i := 1; i <= 10; i++ {
		s.Record(subflowSample(t0, "f", 1, i, 10))
		s.Record(subflowSample(t0, "f", 2, i, 5))
		s.Record(traffic.Record{Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), Flow: "f", Kind: traffic.KindReceiver,
			Role: traffic.Receiver, Goodput: 15e6})
		if i == 3 {
			s.EventApplied(results.Event{At: 300 * time.Millisecond, AppliedAfter: 301 * time.Millisecond,
				Applied: t0.Add(301 * time.Millisecond), Link: "p2", Action: "down"})
		}
	}
}

// serve returns a Server behind a test HTTP server, and its URL.
func serve(t *testing.T) (*Server, string) {
	s := New("exp")
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func getState(t *testing.T, url string) State {
	t.Helper()
	resp, err := http.Get(url + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/state: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/state: %v", err)
	}
	return st
}

func seriesNamed(run *Run, kind, flow string, subflow uint8) *Series {
	for _, s := range run.Series {
		if s.Kind == kind && s.Flow == flow && s.Subflow == subflow {
			return s
		}
	}
	return nil
}

// checkRate checks that the series has a point per sample after the
// first, 100 ms apart from 0.2 s, at mbps Mbit/s.
func checkRate(t *testing.T, s *Series, mbps float64) {
	t.Helper()
	if s == nil {
		t.Fatal("no such series")
	}
	if len(s.Points) != 9 {
		t.Fatalf("%s %d: %d points, want 9: %+v", s.Flow, s.Subflow, len(s.Points), s.Points)
	}
	for i, p := range s.Points {
		if math.Abs(p.T-float64(i+2)/10) > 1e-9 || math.Abs(p.Mbps-mbps) > 1e-3 {
			t.Errorf("%s %d: point %d is %+v, want %.1f s at %v Mbit/s", s.Flow, s.Subflow, i, p, float64(i+2)/10, mbps)
		}
	}
}

func TestStateHasThroughputAndEvents(t *testing.T) {
	s, url := serve(t)
	t0 := time.Now()
	feedRun(s, t0)

	st := getState(t, url)
	if st.Scenario != "exp" || st.Total != 4 || st.Done != 0 || st.Current == nil {
		t.Fatalf("state: %+v", st)
	}
	run := st.Current
	if run.ID != "003" || run.Index != 2 || run.Repetition != 2 || run.Variant != "pm=subflows 2 cc=cubic" || !run.FlowsStart.Equal(t0) {
		t.Errorf("run: %+v", run)
	}
	sf1, sf2 := seriesNamed(run, SeriesSubflow, "f", 1), seriesNamed(run, SeriesSubflow, "f", 2)
	checkRate(t, sf1, 10)
	checkRate(t, sf2, 5)
	if sf2.Local != "10.1.0.3:40000" || sf2.Remote != "10.2.0.2:5001" || sf2.Points[0].RTT != 20 || sf2.Points[0].Cwnd != 20 {
		t.Errorf("subflow 2: %s>%s, first point %+v; want 10.1.0.3:40000>10.2.0.2:5001, RTT 20 ms, cwnd 20",
			sf2.Local, sf2.Remote, sf2.Points[0])
	}
	recv := seriesNamed(run, SeriesReceiver, "f", 0)
	if recv == nil || len(recv.Points) != 10 || recv.Points[0].Mbps != 15 || recv.Points[9].T != 1 {
		t.Errorf("receiver series: %+v", recv)
	}
	if len(run.Events) != 1 || run.Events[0].Label() != "p2 down" || run.Events[0].AppliedAfter != 301*time.Millisecond {
		t.Errorf("events: %+v", run.Events)
	}
}

func TestCompletionsAndEnd(t *testing.T) {
	s := New("exp")
	t0 := time.Now()
	feedRun(s, t0)
	// The server's result comes first but started later: the client's
	// completion is the one shown, with the most bytes of either end.
	s.Record(traffic.Record{Flow: "f", Kind: traffic.KindResult, Role: traffic.Sender, FlowKind: traffic.Transfer,
		Protocol: traffic.MPTCP, Start: t0.Add(5 * time.Millisecond), Completion: 900 * time.Millisecond, BytesSent: 1 << 20})
	s.Record(traffic.Record{Flow: "f", Kind: traffic.KindResult, Role: traffic.Receiver, FlowKind: traffic.Transfer,
		Protocol: traffic.MPTCP, Start: t0, Completion: 950 * time.Millisecond, BytesReceived: 1<<20 - 10})
	fid := &results.Fidelity{OK: false, Paths: []results.PathFidelity{{Name: "client>server via p1", OK: false}}}
	s.RunEnded(results.Run{ID: "003", Index: 2, Repetition: 2, Started: t0.Add(-5 * time.Second), Ended: t0.Add(2 * time.Second),
		FlowsStart: t0, Fidelity: fid, Events: []results.Event{
			{At: 300 * time.Millisecond, AppliedAfter: 301 * time.Millisecond, Link: "p2", Action: "down"},
			{At: 5 * time.Second, Link: "p2", Action: "up"}}})
	s.Record(subflowSample(t0, "f", 1, 11, 10)) // after the end: a stray

	st := s.State()
	want := Completion{Flow: "f", Kind: "transfer", Protocol: "mptcp", Completion: 950 * time.Millisecond, Bytes: 1 << 20}
	if len(st.Current.Completions) != 1 || !sameCompletion(st.Current.Completions[0], want) {
		t.Errorf("completions: %+v, want %+v", st.Current.Completions, want)
	}
	if st.Done != 1 || st.Flagged != 1 || st.Failed != 0 || st.ETA.IsZero() || st.Strays != 1 {
		t.Errorf("progress: %+v, strays %d", st.Progress, st.Strays)
	}
	if len(st.Current.Events) != 2 || st.Current.Ended.IsZero() || st.Current.Fidelity == nil {
		t.Errorf("ended run: events %+v, ended %v, fidelity %v", st.Current.Events, st.Current.Ended, st.Current.Fidelity)
	}
	if len(st.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(st.Runs))
	}
	r := st.Runs[0]
	if r.ID != "003" || r.Variant != "pm=subflows 2 cc=cubic" || !r.Flagged || len(r.Completions) != 1 || !sameCompletion(r.Completions[0], want) {
		t.Errorf("summary: %+v", r)
	}
}

func sameCompletion(a, b Completion) bool {
	a.start, b.start = time.Time{}, time.Time{}
	return a == b
}

// sseStream reads the updates of an /events stream.
type sseStream struct {
	sc   *bufio.Scanner
	body io.Closer
}

func openEvents(t *testing.T, url string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("/events: %s, %s", resp.Status, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	return &sseStream{sc: sc, body: resp.Body}
}

func (s *sseStream) next(t *testing.T) Update {
	t.Helper()
	for s.sc.Scan() {
		data, ok := strings.CutPrefix(s.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u Update
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatalf("update %s: %v", data, err)
		}
		return u
	}
	t.Fatalf("/events ended: %v", s.sc.Err())
	return Update{}
}

func TestEventsStreamSnapshotThenUpdates(t *testing.T) {
	s, url := serve(t)
	t0 := time.Now()
	feedRun(s, t0)

	ev := openEvents(t, url)
	u := ev.next(t)
	if u.Type != UpdateSnapshot || u.State == nil || u.State.Current == nil || u.State.Current.ID != "003" {
		t.Fatalf("first update: %+v, want the snapshot with run 003", u)
	}
	checkRate(t, seriesNamed(u.State.Current, SeriesSubflow, "f", 1), 10)

	s.Record(subflowSample(t0, "f", 2, 11, 5))
	u = ev.next(t)
	if u.Type != UpdatePoint || u.Series == nil || u.Series.Subflow != 2 || len(u.Series.Points) != 1 ||
		math.Abs(u.Series.Points[0].Mbps-5) > 1e-3 || math.Abs(u.Series.Points[0].T-1.1) > 1e-9 {
		t.Fatalf("update after a sample: %+v (series %+v)", u, u.Series)
	}
	s.EventApplied(results.Event{At: time.Second, AppliedAfter: time.Second, Applied: t0.Add(time.Second), Link: "p2", Action: "up"})
	if u = ev.next(t); u.Type != UpdateEvent || u.Event == nil || u.Event.Label() != "p2 up" {
		t.Fatalf("update after an event: %+v", u)
	}
	s.RunEnded(results.Run{ID: "003", Error: "flow f: boom", Ended: t0.Add(2 * time.Second)})
	if u = ev.next(t); u.Type != UpdateEnd || u.Summary == nil || u.Summary.Error != "flow f: boom" || u.Progress == nil || u.Progress.Failed != 1 {
		t.Fatalf("update at the end: %+v", u)
	}
	s.RunStarted(scenario.Run{ID: "004", Index: 3, Repetition: 2}, 4)
	if u = ev.next(t); u.Type != UpdateRun || u.Run == nil || u.Run.ID != "004" || u.Run.Variant != "default" {
		t.Fatalf("update at the next run: %+v", u)
	}
}

// TestStuckClientDoesNotBlock feeds many records while an /events client
// reads nothing: Record must not wait for it, and the client is cut off.
func TestStuckClientDoesNotBlock(t *testing.T) {
	s, url := serve(t)
	t0 := time.Now()
	s.RunStarted(testRun, 1)
	s.FlowsStarted(t0)

	// A small receive buffer, so that the kernel does not read for it
	// for long.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /events HTTP/1.1\r\nHost: live\r\n\r\n")
	for deadline := time.Now().Add(5 * time.Second); clients(s) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stuck client never subscribed")
		}
	}
	var stuck *client
	s.mu.Lock()
	for c := range s.clients {
		stuck = c
	}
	s.mu.Unlock()

	const samples = 25000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= samples; i++ {
			for sf := uint8(1); sf <= 4; sf++ {
				s.Record(subflowSample(t0, "f", sf, i, 10))
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// Unblock the feeder, so that the server can close.
		go func() {
			for range stuck.updates {
			}
		}()
		t.Fatal("Record blocked behind a client that does not read")
	}
	st := s.State()
	if st.Disconnected != 1 || clients(s) != 0 {
		t.Errorf("%d clients cut off, %d left; want the stuck one cut off", st.Disconnected, clients(s))
	}
	// The series kept their newest points, no more than MaxPoints.
	for _, sr := range st.Current.Series {
		last := sr.Points[len(sr.Points)-1]
		if len(sr.Points) > MaxPoints || len(sr.Points) < MaxPoints*3/4 || math.Abs(last.T-samples/10.0) > 1e-6 {
			t.Errorf("subflow %d: %d points, the last at %v s; want at most %d, the last at %v s", sr.Subflow, len(sr.Points), last.T, MaxPoints, samples/10)
		}
	}
}

func clients(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

func TestRunsAndSeriesAreBounded(t *testing.T) {
	s := New("exp")
	for i := range MaxRuns + 5 {
		run := scenario.Run{ID: fmt.Sprintf("%04d", i+1), Index: i}
		s.RunStarted(run, MaxRuns+5)
		s.RunEnded(results.Run{ID: run.ID, Index: i})
	}
	st := s.State()
	if len(st.Runs) != MaxRuns || st.RunsLeftOut != 5 || st.Runs[0].ID != "0006" || st.Done != MaxRuns+5 {
		t.Errorf("%d runs from %s, %d left out, %d done; want %d from 0006, 5 left out", len(st.Runs), st.Runs[0].ID, st.RunsLeftOut, st.Done, MaxRuns)
	}

	s.RunStarted(testRun, 1)
	t0 := time.Now()
	for sf := range MaxSeries + 3 {
		for i := 1; i <= 2; i++ {
			s.Record(subflowSample(t0, fmt.Sprintf("f%d", sf), 1, i, 1))
		}
	}
	st = s.State()
	if len(st.Current.Series) != MaxSeries || st.Current.SamplesLeftOut != 6 {
		t.Errorf("%d series, %d samples left out; want %d and 6", len(st.Current.Series), st.Current.SamplesLeftOut, MaxSeries)
	}
}

func TestPageIsSelfContained(t *testing.T) {
	_, url := serve(t)
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	html := string(body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`new EventSource("/events")`, "<canvas", "Runs"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, external := range []string{"http://", "https://", "<script src", "<link "} {
		if strings.Contains(html, external) {
			t.Errorf("the page loads something from elsewhere: %q", external)
		}
	}
	if resp, err := http.Get(url + "/nothing"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nothing: %v %v, want 404", resp.Status, err)
	}
}

func TestListenAndClose(t *testing.T) {
	s := New("exp")
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSuffix(url, "/"), "http://127.0.0.1:")
	if !ok || addr == "0" {
		t.Fatalf("Listen's URL is %s, want http://127.0.0.1:PORT/", url)
	}
	if _, err := New("other").Listen("127.0.0.1:" + addr); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("listening on a busy address: %v", err)
	}
	ev := openEvents(t, strings.TrimSuffix(url, "/"))
	if u := ev.next(t); u.Type != UpdateSnapshot || u.State.Current != nil {
		t.Errorf("first update: %+v", u)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for ev.sc.Scan() {
	}
	if _, err := http.Get(url + "state"); err == nil {
		t.Error("still serving after Close")
	}
}
