package lab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/topo"
)

// A set event changes only what it names, and a bad value names its
// field and changes nothing.
func TestSetParams(t *testing.T) {
	base := linkemu.Params{Rate: 8e6, Delay: 10 * time.Millisecond, QueueBytes: 64000}
	p := base
	loss := 0.05
	if err := setParams(&p, topo.Event{Rate: "20Mbit", Loss: &topo.Loss{Bernoulli: &loss}}, 1500); err != nil {
		t.Fatal(err)
	}
	want := base
	want.Rate, want.Loss = 20e6, linkemu.Loss{Model: linkemu.Bernoulli, P: 0.05}
	if p != want {
		t.Errorf("after set: %+v, want %+v", p, want)
	}
	for _, c := range []struct {
		ev   topo.Event
		want string
	}{
		{topo.Event{Rate: "fast"}, "rate: "},
		{topo.Event{Delay: "-5ms"}, "delay: -5ms is negative"},
		{topo.Event{Queue: "100"}, "queue-bytes: 100 bytes do not hold one frame"},
		{topo.Event{}, "set changes at least one"},
	} {
		p := base
		err := setParams(&p, c.ev, 1500)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("set %+v: %v, want an error with %q", c.ev, err, c.want)
		}
	}
}

// The CLI's arguments become an event, or an error that says which one
// is wrong.
func TestLinkEvent(t *testing.T) {
	ev, err := LinkEvent("a-b", "set", "b-to-a", "", "30ms", "1%", "")
	if err != nil || ev.Action != topo.ActionSet || ev.Direction != "b-to-a" || ev.Delay != "30ms" || ev.Loss == nil || *ev.Loss.Bernoulli != 0.01 {
		t.Errorf("set: %+v, %v", ev, err)
	}
	for _, c := range []struct {
		action, direction, rate, loss, want string
	}{
		{"down", "", "1Mbit", "", "down takes no rate"},
		{"sideways", "", "", "", `"sideways" is not down, up or set`},
		{"up", "left", "", "", `"left" is not a-to-b or b-to-a`},
		{"set", "", "", "lots", `loss: "lots" is not a probability`},
	} {
		if _, err := LinkEvent("a-b", c.action, c.direction, c.rate, "", c.loss, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.action, err, c.want)
		}
	}
}

// The emulated links of docs/lab.md's lab are those with emulation
// settings, with the plan's TAP names and namespaces, each with its own
// seed.
func TestEmulatedLinksOfPlan(t *testing.T) {
	text, err := os.ReadFile(docTopology(t, "demo"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := topo.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := topo.Compile(top, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	links := emulatedLinks(plan)
	var names []string
	seeds := map[uint64]bool{}
	for _, l := range links {
		names = append(names, l.Name)
		seeds[l.Config.Seed] = true
		if err := l.Config.Validate(); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
	if got := strings.Join(names, " "); got != "xtra-core core-xtrb xtra-rtr1" {
		t.Errorf("emulated links %q, want xtra-core core-xtrb xtra-rtr1", got)
	}
	if len(seeds) != len(links) {
		t.Errorf("seeds %v are not one per link", seeds)
	}
	c := links[0].Config
	if c.A != (linkemu.Endpoint{Namespace: "amptcp-lab-demo-xtra", Name: "eth1"}) || c.AB.Rate != 8e6 || c.BA.Delay != 10*time.Millisecond {
		t.Errorf("xtra-core: %+v", c)
	}
	dir := t.TempDir()
	if err := writeLinksFile(dir, links); err != nil {
		t.Fatal(err)
	}
	back, err := readLinksFile(dir)
	if err != nil || len(back) != len(links) || back[2].Config != links[2].Config {
		t.Errorf("links file read back: %+v, %v", back, err)
	}
}

// A lab without a link daemon has no LinkControl.
func TestOpenLinksWithoutEmulatedLinks(t *testing.T) {
	opts := Options{Dir: t.TempDir()}
	st := &State{Name: "plain", Dir: opts.dir("plain"), Processes: []Process{{Node: "xtra", Daemon: "lispd"}}}
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLinks("plain", opts); !errors.Is(err, ErrNoEmulatedLinks) {
		t.Errorf("OpenLinks: %v, want ErrNoEmulatedLinks", err)
	}
	if _, err := OpenLinks("none", opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenLinks of no lab: %v, want ErrNotFound", err)
	}
	if _, err := readLinksFile(filepath.Join(opts.Dir, "plain")); err == nil {
		t.Error("a lab without a links file has links")
	}
}
