package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// testTopology: two hosts, two xTRs joined by p1 and p2 (10 Mbit/s, 2
// ms) and a veth to a map-server; p2 goes down at 300 ms and p1's delay
// is set to 30 ms at 400 ms.
func testTopology(t *testing.T) *topo.Topology {
	t.Helper()
	tp, err := topo.Parse([]byte(`name: net
nodes:
  - {name: client, role: host}
  - {name: server, role: host}
  - {name: xa, role: xtr, site: a}
  - {name: xb, role: xtr, site: b}
  - {name: ms, role: ms}
sites: [{name: a}, {name: b}]
links:
  - {ends: [client, xa]}
  - {ends: [server, xb]}
  - {name: p1, ends: [xa, xb], rate: 10Mbit, delay: 2ms}
  - {name: p2, ends: [xa, xb], rate: 10Mbit, delay: 2ms, loss: {bernoulli: 0.01}}
  - {ends: [xb, ms]}
timeline:
  - {at: 300ms, link: p2, action: down}
  - {at: 400ms, link: p1, delay: 30ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// linkSamples is a round of counters at t: p1 delivered bytes[0] a to b
// and bytes[1] b to a since the lab came up.
func linkSamples(t time.Time, link string, ab, ba uint64) []results.LinkSample {
	return []results.LinkSample{
		{Time: t, Link: link, Direction: "a-to-b", DeliveredBytes: ab},
		{Time: t, Link: link, Direction: "b-to-a", DeliveredBytes: ba},
	}
}

// TestTopologyState: the run's topology as /state carries it: every
// node placed in the unit square, the links with their emulation; the
// loads from the counters' deltas; the scheduled events' changes.
func TestTopologyState(t *testing.T) {
	s, url := serve(t)
	t0 := time.Now()
	s.RunStarted(testRun, 4)
	s.TopologyStarted(testTopology(t))
	s.FlowsStarted(t0)
	s.LinksSampled(linkSamples(t0, "p1", 1000, 0))
	s.LinksSampled(linkSamples(t0.Add(100*time.Millisecond), "p1", 1000+100_000, 5000)) // 8 and 0.4 Mbit/s
	s.EventApplied(results.Event{At: 300 * time.Millisecond, AppliedAfter: 301 * time.Millisecond, Link: "p2", Action: "down"})
	s.EventApplied(results.Event{At: 400 * time.Millisecond, AppliedAfter: 401 * time.Millisecond, Link: "p1", Action: "set", Detail: "delay 30ms"})

	st := getState(t, url)
	top := st.Topology
	if top == nil || len(top.Nodes) != 5 || len(top.Links) != 5 {
		t.Fatalf("topology %+v", top)
	}
	for _, n := range top.Nodes {
		if !(n.X >= 0 && n.X <= 1 && n.Y >= 0 && n.Y <= 1) {
			t.Errorf("node %s at %v, %v: outside the unit square", n.Name, n.X, n.Y)
		}
	}
	p1, p2, veth := top.Links[2], top.Links[3], top.Links[4]
	if p1.Name != "p1" || !p1.Emulated || p1.Rate != 10e6 || p1.Delay != 30*time.Millisecond || p1.Down {
		t.Errorf("p1 %+v: want emulated, 10 Mbit/s, its delay set to 30 ms, up", p1)
	}
	if math.Abs(p1.Load[0]-8) > 0.01 || math.Abs(p1.Load[1]-0.4) > 0.01 {
		t.Errorf("p1's load %v, want 8 and 0.4 Mbit/s", p1.Load)
	}
	if !p2.Down || math.Abs(p2.Loss-0.01) > 1e-9 || veth.Emulated || top.Nodes[p1.A].Name != "xa" || top.Nodes[p1.B].Name != "xb" {
		t.Errorf("p2 %+v (want down, loss 1 %%), veth %+v", p2, veth)
	}
}

// TestLayoutSpreadsNodes: no two nodes of a ring of 20 are placed on top
// of each other, and the same topology is placed the same twice.
func TestLayoutSpreadsNodes(t *testing.T) {
	tp := ring(20)
	a, b := newTopology(tp), newTopology(tp)
	for i := range a.Nodes {
		if a.Nodes[i] != b.Nodes[i] {
			t.Fatalf("node %d placed at %+v then %+v", i, a.Nodes[i], b.Nodes[i])
		}
		for j := range i {
			if d := math.Hypot(a.Nodes[i].X-a.Nodes[j].X, a.Nodes[i].Y-a.Nodes[j].Y); d < 0.02 {
				t.Errorf("nodes %d and %d are %.3f apart", i, j, d)
			}
		}
	}
}

// ring is a topology of n routers in a ring, each with an emulated link
// to the next.
func ring(n int) *topo.Topology {
	t := &topo.Topology{Name: "ring"}
	for i := range n {
		t.Nodes = append(t.Nodes, topo.Node{Name: fmt.Sprintf("r%d", i), Role: topo.RoleRouter})
		t.Links = append(t.Links, topo.Link{Name: fmt.Sprintf("l%d", i), Ends: []string{fmt.Sprintf("r%d", i), fmt.Sprintf("r%d", (i+1)%n)}, Rate: "10Mbit"})
	}
	return t
}

// BigTopology is a topology of about links links: a grid of routers,
// each joined to its right and lower neighbours by emulated links.
func BigTopology(links int) *topo.Topology {
	side := int(math.Ceil(math.Sqrt(float64(links) / 2)))
	t := &topo.Topology{Name: "big"}
	name := func(i, j int) string { return fmt.Sprintf("r%d-%d", i, j) }
	for i := range side {
		for j := range side {
			t.Nodes = append(t.Nodes, topo.Node{Name: name(i, j), Role: topo.RoleRouter})
		}
	}
	for i := range side {
		for j := range side {
			for _, d := range [][2]int{{0, 1}, {1, 0}} {
				if i+d[0] < side && j+d[1] < side && len(t.Links) < links {
					t.Links = append(t.Links, topo.Link{Name: fmt.Sprintf("l%d", len(t.Links)),
						Ends: []string{name(i, j), name(i+d[0], j+d[1])}, Rate: "100Mbit", Delay: "1ms"})
				}
			}
		}
	}
	return t
}

// A topology of 1,000 links is placed and sent in bounded time and
// size: what the page gets at the start of a run.
func BenchmarkTopology1000(b *testing.B) {
	tp := BigTopology(1000)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		top := newTopology(tp)
		js, err := json.Marshal(top)
		if err != nil {
			b.Fatal(err)
		}
		size = len(js)
	}
	b.ReportMetric(float64(size)/1000, "kB/topology")
}

// TestControl: a control request without the page's token is refused,
// one while no run's flows run is refused, one for a veth link too; one
// with the token reaches the runner's apply with the event it asked for,
// and the link's new state goes to the clients.
func TestControl(t *testing.T) {
	s, url := serve(t)
	s.RunStarted(testRun, 4)
	s.TopologyStarted(testTopology(t))
	post := func(token, body string) (int, ControlAnswer) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/control", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a ControlAnswer
		json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a
	}
	token := pageToken(t, url)
	if code, a := post("", `{"link":"p1","action":"down"}`); code != http.StatusForbidden || a.OK {
		t.Errorf("without the token: %d %+v, want 403", code, a)
	}
	if code, _ := post("0123", `{"link":"p1","action":"down"}`); code != http.StatusForbidden {
		t.Errorf("a wrong token: %d, want 403", code)
	}
	if code, a := post(token, `{"link":"p1","action":"down"}`); code != http.StatusConflict || !strings.Contains(a.Error, "no run's flows are running") {
		t.Errorf("no run under way: %d %+v, want 409", code, a)
	}
	var got []topo.Event
	s.ControlAvailable(func(ev topo.Event) error {
		got = append(got, ev)
		if ev.Delay == "-1ms" {
			return fmt.Errorf("delay: -1ms is negative")
		}
		return nil
	})
	if code, a := post(token, `{"link":"client-xa","action":"down"}`); code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, "not an emulated link") {
		t.Errorf("a veth link: %d %+v, want 422", code, a)
	}
	if code, a := post(token, `{"link":"p1","action":"set","direction":"a-to-b","delay":"30ms","loss":"2%"}`); code != http.StatusOK || !a.OK {
		t.Errorf("set p1: %d %+v", code, a)
	}
	if code, a := post(token, `{"link":"p1","action":"set","delay":"-1ms"}`); code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, "negative") {
		t.Errorf("a bad delay: %d %+v, want the runner's refusal", code, a)
	}
	if code, _ := post(token, `{"link":"p1","action":"down"}`); code != http.StatusOK {
		t.Errorf("down p1: %d", code)
	}
	if len(got) != 3 || got[0].Direction != "a-to-b" || got[0].Delay != "30ms" || got[0].Loss == nil || *got[0].Loss.Bernoulli != 0.02 || got[2].Action != topo.ActionDown {
		t.Errorf("events applied %+v", got)
	}
	st := getState(t, url)
	if p1 := st.Topology.Links[2]; !p1.Down || p1.Delay != 30*time.Millisecond || !st.Control {
		t.Errorf("p1 after the controls: %+v, control %v", p1, st.Control)
	}
	s.ControlAvailable(nil)
	if code, _ := post(token, `{"link":"p1","action":"up"}`); code != http.StatusConflict {
		t.Errorf("after the flows: %d, want 409", code)
	}
}

var tokenRE = regexp.MustCompile(`<meta name="amptcp-token" content="([0-9a-f]{32})">`)

// pageToken reads the control token from the page, as a browser does.
func pageToken(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := tokenRE.FindSubmatch(b)
	if m == nil {
		t.Fatal("no control token in the page")
	}
	if bytes.Contains(b, []byte("CONTROL-TOKEN")) {
		t.Error("the page's placeholder is left")
	}
	return string(m[1])
}

// TestClaimsInState: the claims as last evaluated are in /state.
func TestClaimsInState(t *testing.T) {
	s, url := serve(t)
	v := 1.19
	s.ClaimsEvaluated([]claims.Result{{ID: "000-a", Figure: "Fig. 8", Verdict: claims.Pass, Value: &v, N: 2}})
	if st := getState(t, url); len(st.Claims) != 1 || st.Claims[0].ID != "000-a" || st.Claims[0].Verdict != claims.Pass {
		t.Errorf("claims %+v", st.Claims)
	}
}
