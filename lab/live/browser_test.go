package live

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amptcp/amptcp/internal/headless"
	"github.com/amptcp/amptcp/lab/results"
)

// TestPageDrawsAThousandLinks opens the live view in headless Chromium
// with a topology of 1,000 links and checks from the DOM that every link
// is drawn, within a DOM of bounded size (each link a group, a line and
// a tooltip: no label past 200 links), that a link's load shown changes
// as its counters grow, and that the page asked for nothing but its own
// server. The time to draw is logged; it is bounded only at 30 s, ample
// on a loaded machine (it takes well under a second on an idle one).
func TestPageDrawsAThousandLinks(t *testing.T) {
	s := New("big")
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { s.Close() })
	top := BigTopology(1000)
	s.RunStarted(testRun, 1)
	s.TopologyStarted(top)
	s.FlowsStarted(time.Now())

	b := headless.Start(t, time.Minute)
	start := time.Now()
	err := chromedp.Do(b.Ctx, chromedp.Navigate(ts.URL+"/"), chromedp.WaitReady(chromedp.CSS(`g.link[data-link="l999"]`)))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	links, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("#net g.link").length`))
	if err != nil {
		t.Fatal(err)
	}
	elements, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.getElementsByTagName("*").length`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000 links drawn in %v (load and first draw), %d elements in the DOM", took, elements)
	if links != 1000 {
		t.Fatalf("%d links drawn, want 1000", links)
	}
	if limit := 3*1000 + 3*len(top.Nodes) + 400; elements > limit {
		t.Errorf("%d elements in the DOM, want at most %d", elements, limit)
	}
	if took > 30*time.Second {
		t.Errorf("the page took %v to draw 1,000 links", took)
	}

	// l0 delivers 8 Mbit/s a to b, sampled every 100 ms.
	done := make(chan struct{})
	go func() {
		t0 := time.Now()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			s.LinksSampled([]results.LinkSample{{Time: at, Link: "l0", Direction: "a-to-b", DeliveredBytes: uint64(i) * 100_000}})
		}
	}()
	defer close(done)
	load, err := chromedp.Run(b.Ctx, chromedp.Poll[float64](`(() => { const v = +document.querySelector('g.link[data-link="l0"]').dataset.load; return v > 1 ? v : 0; })()`,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("l0's load never showed: %v", err)
	}
	if load < 6 || load > 10 {
		t.Errorf("l0 shows %.2f Mbit/s, want about 8", load)
	}
	if f := b.Foreign(ts.URL); len(f) > 0 {
		t.Errorf("the page requested %v", f)
	}
}
