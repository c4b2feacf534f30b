//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds a headless-capable Chromium; "" if there is none.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotPath is where the page test keeps its screenshot, after the
// test too: $DLM_SCREENSHOT, else dlm-admin-page.png in the temporary
// directory (overwritten by the next run).
func screenshotPath() string {
	if p := os.Getenv("DLM_SCREENSHOT"); p != "" {
		return p
	}
	return filepath.Join(os.TempDir(), "dlm-admin-page.png")
}

// browser starts headless Chromium (driven by chromedp) for t, skipping t
// when there is none (failing instead with DLM_BROWSER_REQUIRED set). It
// returns the browser's context, ended when t is, and the errors its
// console has logged so far.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := chromiumPath()
	if path == "" && os.Getenv("DLM_BROWSER_REQUIRED") != "" {
		t.Fatal("DLM_BROWSER_REQUIRED is set but no Chromium is installed (apt-get install chromium)")
	}
	if path == "" {
		t.Skip("headless Chromium not found (Debian: apt-get install chromium; .ci/run installs it): the admin page is not checked in a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 1100),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)

	var mu sync.Mutex
	var consoleErrors []string
	note := func(s string) {
		mu.Lock()
		consoleErrors = append(consoleErrors, s)
		mu.Unlock()
	}
	if err := chromedp.Listen(bctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				note("console." + string(ev.Type) + ": " + strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			note("exception: " + msg)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				note(fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatalf("browser: %v", err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(consoleErrors)
	}
}

// waitRefreshed waits until app.js has replaced the page's content twice,
// so that the DOM checked is what the script rendered.
func waitRefreshed(t *testing.T, bctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`Number(document.body.dataset.refreshes) >= 2`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page did not refresh itself twice within 20 s: %v", err)
	}
}

// elementText is the rendered text of the element with the given id,
// without surrounding space.
func elementText(t *testing.T, bctx context.Context, id string) string {
	t.Helper()
	s, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		t.Fatalf("#%s: %v", id, err)
	}
	return strings.TrimSpace(s)
}

// checkPageInBrowser opens an agent's page in headless Chromium and checks
// the rendered DOM after the page has refreshed itself at least once:
// the header's cluster name, every member listed, the epoch, and the held
// lock on resource with its token; and that the console logged no error.
func checkPageInBrowser(t *testing.T, adminURL string, members []string, epoch uint64, resource string, token uint64) {
	bctx, consoleErrors := browser(t)
	err := chromedp.Do(bctx,
		chromedp.Navigate(adminURL+"/"),
		chromedp.WaitVisible(chromedp.ID("members")),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	waitRefreshed(t, bctx)
	text := func(id string) string { return elementText(t, bctx, id) }
	membersText, epochText, stateText, locksText := text("members"), text("epoch"), text("state"), text("locks")
	refreshes, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS("body"), "data-refreshes"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := screenshotPath()
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s/ after %s refreshes: %s (%d bytes)", adminURL, refreshes.Value, shot, len(png))
	for _, m := range members {
		if !strings.Contains(membersText, m) {
			t.Errorf("the rendered members table lacks %s:\n%s", m, membersText)
		}
	}
	if got := text("cluster-id"); got != "dlm" {
		t.Errorf("the header names cluster %q, want dlm", got)
	}
	if strings.TrimSpace(epochText) != fmt.Sprint(epoch) {
		t.Errorf("the page shows epoch %q, want %d", epochText, epoch)
	}
	if strings.TrimSpace(stateText) != "serving" {
		t.Errorf("the page shows state %q", stateText)
	}
	for _, want := range []string{resource, "granted", "EX", fmt.Sprint(token), "t4"} {
		if !strings.Contains(locksText, want) {
			t.Errorf("the rendered locks table lacks %q:\n%s", want, locksText)
		}
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the console logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// checkMembershipInBrowser logs in to an agent's page with its admin token
// in headless Chromium, as an operator does, and checks what the page
// renders after refreshing itself: the membership card says want (e.g.
// "v4: a1 a2 a3 a4 a5") and no change in progress, and the members table
// lists each member.
func checkMembershipInBrowser(t *testing.T, adminURL, token, want string, members []string) {
	bctx, consoleErrors := browser(t)
	err := chromedp.Do(bctx,
		chromedp.Navigate(adminURL+"/login"), // "/" answers the same form, as a 401 the console would log
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("membership")),
	)
	if err != nil {
		t.Fatalf("browser: log in and open the page: %v", err)
	}
	waitRefreshed(t, bctx)
	text := func(id string) string { return elementText(t, bctx, id) }
	if got := text("membership"); got != want {
		t.Errorf("the page's membership card says %q, want %q", got, want)
	}
	old, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("membership-old") !== null`))
	if err != nil {
		t.Fatal(err)
	}
	if old {
		t.Errorf("the page says a change is in progress: %q", text("membership-old"))
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(os.TempDir(), "dlm-admin-members.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s/ after logging in: %s (%d bytes)", adminURL, shot, len(png))
	rows := text("members")
	for _, m := range members {
		if !strings.Contains(rows, m) {
			t.Errorf("the rendered members table lacks %s:\n%s", m, rows)
		}
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the console logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
