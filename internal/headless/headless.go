// Package headless runs the tests of the lab's live view in a real
// browser: headless Chromium (Debian's chromium, which make deps
// installs), driven over the Chrome DevTools protocol with chromedp.
package headless

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/amptcp/amptcp/internal/testenv"
)

// Browser is a tab of a headless Chromium of the test's own (a fresh
// profile, closed with the test), and the URLs it has requested.
type Browser struct {
	Ctx context.Context

	mu       sync.Mutex
	requests []string
}

// Start starts Chromium for t, or skips t (fails it under
// AMPTCP_REQUIRE_PRIV=1) when it is not installed. Every action on Ctx
// times out after limit.
func Start(t *testing.T, limit time.Duration) *Browser {
	t.Helper()
	path := testenv.RequireTool(t, "chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, limit)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc() // ends the browser's process
	})
	b := &Browser{Ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.requests = append(b.requests, r.Request.URL)
			b.mu.Unlock()
		}
	})
	if err == nil {
		_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	}
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// Foreign returns the URLs the page requested outside origin (a
// self-contained page requests none).
func (b *Browser) Foreign(origin string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, u := range b.requests {
		if !strings.HasPrefix(u, origin) && !strings.HasPrefix(u, "data:") {
			out = append(out, u)
		}
	}
	return out
}
