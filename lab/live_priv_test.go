package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amptcp/amptcp/internal/headless"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/live"
	"github.com/amptcp/amptcp/lab/results"
)

const liveScenario = `name: NAME
topology: lab.yaml
flows:
  - {name: bulk, from: client, to: server, kind: saturated, duration: 20s, direction: download}
variants:
  pm: [subflows 2]
  cc: [cubic]
fidelity: false
timeout: 1m
`

// TestLiveViewInABrowser runs a short scenario with the live view and
// drives it from headless Chromium as a person would: the topology is
// drawn, a link's load shown grows as the download runs over it, and
// clicking the link and then "fail" takes it down in the link emulator
// (its counters show the frames it dropped while down) and in the run's
// record (a manual event), until "restore".
func TestLiveViewInABrowser(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-live"
	s := loadRunScenario(t, name, liveScenario)
	labOpts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, labOpts)
	view := live.New(name)
	url, err := view.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { view.Close() })
	// The browser starts before the run: on a busy machine its start
	// takes seconds, which the download's 20 s must not lose.
	b := headless.Start(t, 2*time.Minute)
	out := filepath.Join(t.TempDir(), "results")
	ran := make(chan error, 1)
	go func() {
		ran <- RunScenario(context.Background(), s, RunOptions{Lab: labOpts, Out: out, ScenarioFile: "exp.yaml", Observer: view})
	}()

	if err := chromedp.Do(b.Ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS(`#net g.link[data-link="p2"]`))); err != nil {
		t.Fatalf("the topology was not drawn: %v", err)
	}
	nodes, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("#net g.node").length`))
	if err != nil || nodes != 5 {
		t.Errorf("%d nodes drawn (%v), want 5", nodes, err)
	}
	// The download's subflows take p1 and p2 (their port sums differ):
	// whichever shows a load first is failed.
	busy, err := chromedp.Run(b.Ctx, chromedp.Poll[string](`(() => {
		for (const g of document.querySelectorAll("#net g.link")) if (+g.dataset.load > 1 && g.dataset.link.startsWith("p")) return g.dataset.link;
		return "";
	})()`, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("no link's load showed: %v", err)
	}
	links, err := OpenLinks(name, labOpts)
	if err != nil {
		t.Fatal(err)
	}
	before, err := links.Stats()
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(b.Ctx,
		chromedp.Click(chromedp.CSS(`#net g.link[data-link="`+busy+`"] line`)),
		chromedp.WaitVisible(chromedp.ID("ctl")),
		chromedp.WaitEnabled(chromedp.ID("b-down")),
		chromedp.Click(chromedp.ID("b-down")),
	)
	if err != nil {
		t.Fatal(err)
	}
	status, err := chromedp.Run(b.Ctx, chromedp.Poll[string](`(() => { const s = document.getElementById("ctl-status").textContent; return s.includes(":") ? s : ""; })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || status != busy+" down: applied" {
		t.Fatalf("after fail: %q (%v), want %q", status, err, busy+" down: applied")
	}
	time.Sleep(time.Second)
	after, err := links.Stats()
	if err != nil {
		t.Fatal(err)
	}
	b0, a0 := before[busy], after[busy]
	if dropped := a0.AB.DroppedDown + a0.BA.DroppedDown - b0.AB.DroppedDown - b0.BA.DroppedDown; dropped == 0 {
		t.Errorf("%s dropped nothing while down: the click did not reach the emulator", busy)
	}
	shown, err := chromedp.Run(b.Ctx, chromedp.Poll[string](`document.querySelector('#net g.link[data-link="`+busy+`"]').dataset.state === "down" ? "down" : ""`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil || shown != "down" {
		t.Errorf("the page does not show %s down: %q, %v", busy, shown, err)
	}
	if err := chromedp.Do(b.Ctx, chromedp.Click(chromedp.ID("b-up"))); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	res, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	var manual []string
	for _, ev := range res.Runs[0].Events {
		if ev.Manual {
			manual = append(manual, ev.Link+" "+ev.Action+" "+ev.Error)
		}
	}
	if got := strings.Join(manual, ", "); !strings.HasPrefix(got, busy+" down , "+busy+" up") {
		t.Errorf("manual events of the run: %q, want %s down and up", got, busy)
	}
}
