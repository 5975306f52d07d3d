package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// axeTags are the rule sets every console page must pass: WCAG 2.0 and
// 2.1 at levels A and AA, and axe's best practices.
var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"}

// consoleWidths are the widths the console must look right at: a small
// phone and a desktop.
var consoleWidths = []int64{360, 1440}

// TestConsoleAccessibility runs axe-core (e2e/testdata/axe, vendored by
// scripts/vendor-axe.sh) in every page of the operator console, at 360
// and at 1440 px wide, in headless Chromium against the built binaries,
// and fails listing each violation (rule, impact, element, help). axe is
// injected through the DevTools protocol, as a tester's console would, so
// the pages keep their strict Content-Security-Policy. It also checks
// that no page scrolls sideways at 360 px, and the sign-in form's keyboard
// path: the skip link first, then email, password and the submit button
// in that order, each with a visible focus outline.
//
// The workspace is seeded with what each page shows when in use: API keys,
// channels, a webhook with a delivered and a failed delivery, a published
// flow with a run, a knowledge-base document. The inbox is checked here
// empty, filtered and for a missing conversation; with conversations in
// it, by TestConsoleInbox and TestConsoleInboxReplyWindow.
func TestConsoleAccessibility(t *testing.T) {
	t.Parallel()
	axe, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (scripts/vendor-axe.sh vendors it): %v", err)
	}
	checkAxePinned(t, axe)
	requireChromium(t)
	// One retry, quickly: a failing delivery is failed within milliseconds,
	// and far from pausing the webhook.
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "WEBHOOK_RETRY_DELAYS=10ms")
	console := s.startConsole(t)

	// The workspace and everything its pages list.
	wsID, key := s.flowDeveloper(t)
	s.addChannel(t, wsID, "external", "--kind", "webchat")
	rcv := receiver.New(t, nil)
	rcv.SetStatus(http.StatusNoContent)
	s.saveWebhook(t, key, rcv.URL)
	s.publishEvents(t, messageReceived(wsID, 1))
	delivered := rcv.WaitFor(t, "message.received").Delivery()
	s.settledDelivery(t, key, delivered)
	// The first delivery has settled, so the next request is the second's.
	rcv.SetStatus(http.StatusServiceUnavailable)
	before := len(rcv.Requests())
	s.publishEvents(t, messageReceived(wsID, 2))
	failedID := rcv.Await(t, "a failing delivery", func(got []receiver.Request) bool { return len(got) > before })[before].Delivery()
	if d := s.settledDelivery(t, key, failedID); d["status"] != "failed" {
		t.Fatalf("the delivery to the failing receiver: %v", d)
	}
	flowID := s.publishFlow(t, wsID, greetingFlow)
	status, _, inv := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"vip": true}})
	runID, _ := inv["run_id"].(string)
	if status != http.StatusOK || runID == "" {
		t.Fatalf("invoke = %d %v", status, inv)
	}
	var doc struct {
		ID string `json:"id"`
	}
	s.ctl(t, &doc, "kb", "add", "--workspace", wsID, "--title", "Store policy",
		"--file", filepath.Join("..", "services", "flow-runner", "internal", "domain", "knowledge", "testdata", "store_policy_en.md"))
	var second struct {
		ID string `json:"id"`
	}
	s.ctl(t, &second, "apikey", "create", "--workspace", wsID)
	email, password := "pat-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	s.createOperator(t, email, "", password)

	b := newBrowser(t)
	a := &axeRun{t: t, b: b, source: string(axe), shots: consoleShots(t)}
	page := func(path string) string { return console + "/workspaces/" + wsID + path }

	// Sign-in: checked, then its keyboard path, then used.
	b.openSignIn(t, console)
	a.check("sign-in")
	checkSignInKeyboard(t, b)
	// A refused sign-in: the error, tied to the field.
	b.signIn(t, email, "not the password")
	a.check("sign-in-refused")
	b.signIn(t, email, password)
	if loc := runFor(t, b, chromedp.Location()); loc != console+"/workspaces" {
		t.Fatalf("after signing in the browser is at %s, want the workspace list", loc)
	}

	pages := []struct{ name, url, ready string }{
		{"workspaces", console + "/workspaces", "main table"},
		{"workspace", page(""), "#plan"},
		{"keys", page("/keys"), "#key-name"},
		{"keys-confirm-revoke", page("/keys?revoke=" + second.ID), "#confirm-revoke"},
		{"channels", page("/channels"), "#ch-kind"},
		{"webhook", page("/webhook"), "#url"},
		{"deliveries", page("/deliveries"), "#filter-heading"},
		{"flows", page("/flows"), "main h1"},
		{"flow", page("/flows/" + flowID), "main h1"},
		{"run", page("/flows/" + flowID + "/runs/" + runID), "main h1"},
		{"flow-deactivate-confirm", page("/flows/" + flowID + "/deactivate"), "main h1"},
		{"run-not-found", page("/flows/" + flowID + "/runs?run_id=" + uuid.NewString()), "main h1"},
		{"inbox-empty", page("/conversations"), "#live-list"},
		{"inbox-filtered", page("/conversations?handed_over=1&mine=1"), "#live-list"},
		{"conversation-not-found", page("/conversations/" + uuid.NewString()), "main h1"},
		{"kb", page("/kb"), "#add-heading"},
		{"kb-confirm-delete", page("/kb/" + doc.ID + "/delete"), "main h1"},
		{"not-found", console + "/no-such-page", "main h1"},
		{"missing-workspace", console + "/workspaces/" + uuid.NewString(), "main h1"},
		{"missing-delivery", page("/deliveries/" + uuid.NewString()), "main h1"},
	}
	for _, p := range pages {
		b.run(t, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		a.check(p.name)
	}

	// A delivery's page: the failed one, through its link in the log.
	b.run(t, chromedp.Navigate(page("/deliveries")), chromedp.WaitVisible(chromedp.CSS("#filter-heading")))
	b.submit(t, `a[href*="/deliveries/`+failedID+`"]`)
	a.check("delivery-failed")

	// A created key's page, shown once after the form.
	b.run(t, chromedp.Navigate(page("/keys")), chromedp.WaitVisible(chromedp.CSS("#key-name")))
	b.run(t, chromedp.SendKeys(chromedp.CSS("#key-name"), "a11y"))
	b.submit(t, `form[action$="/keys"] button[type=submit]`)
	a.check("key-created")

	// The webhook saved again (its new secret shown once), then its test
	// event failing at the receiver, which still answers 503.
	b.run(t, chromedp.Navigate(page("/webhook")), chromedp.WaitVisible(chromedp.CSS("#url")))
	b.run(t, chromedp.SetValue(chromedp.CSS("#url"), rcv.URL))
	b.submit(t, `form[action$="/webhook"] button[type=submit]`)
	a.check("webhook-saved")
	b.submit(t, `form[action$="/webhook/test"] button[type=submit]`)
	a.check("webhook-test-failed")

	// A flow refused at publish: the problem shown on the node at fault.
	b.run(t, chromedp.Navigate(page("/flows")), chromedp.WaitVisible(chromedp.CSS("#document")))
	b.run(t, chromedp.SetValue(chromedp.CSS("#document"), `{"name": "x", "triggers": ["api"], "nodes": [
		{"id": "start", "type": "start", "next": "call"},
		{"id": "call", "type": "http", "method": "GET", "url": "https://example.com", "timeout_ms": 20000}]}`))
	b.submit(t, `form[action$="/flows"] button[type=submit]`)
	a.check("flow-refused")

	// A form refused: the channel form with its field errors.
	b.run(t, chromedp.Navigate(page("/channels")), chromedp.WaitVisible(chromedp.CSS("#ch-kind")))
	b.run(t, chromedp.SetValue(chromedp.CSS("#ch-kind"), "messenger"))
	b.submit(t, `form[action$="/channels"] button[type=submit]`)
	a.check("channels-refused")

	// The checker itself: a field without a label, added to a page, is
	// found, so a page with no violations was really checked.
	runFor(t, b, chromedp.Evaluate[chromedp.Void](`document.querySelector('main').insertAdjacentHTML('beforeend', '<input id="a11y-unlabelled">')`))
	if got := a.violations(); !strings.Contains(fmt.Sprint(got), "#a11y-unlabelled") {
		t.Errorf("axe did not find the unlabelled field added to the page: %v", got)
	}

	b.checkConsole(t)
}

// checkAxePinned checks that axe, the checked-in axe.min.js, has the
// sha256 scripts/vendor-axe.sh pins (its AXE_SHA256= line): the script
// checks what it fetches, and only this checks the file as it is checked
// in, changed by hand or by a bad merge, before every page is judged by it.
func checkAxePinned(t *testing.T, axe []byte) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "scripts", "vendor-axe.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var pin string
	for line := range strings.Lines(string(script)) {
		if v, ok := strings.CutPrefix(line, "AXE_SHA256="); ok {
			pin = strings.TrimSpace(v)
		}
	}
	if pin == "" {
		t.Fatal("scripts/vendor-axe.sh has no AXE_SHA256= line, the pin of axe.min.js")
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(axe)); got != pin {
		t.Fatalf("e2e/testdata/axe/axe.min.js has sha256 %s, not the %s scripts/vendor-axe.sh pins: run the script to vendor it again", got, pin)
	}
}

// axeRun checks the browser's current page with axe-core.
type axeRun struct {
	t      *testing.T
	b      *browser
	source string
	shots  screenshots
}

// axeViolation is one rule a page breaks, with the elements breaking it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	URL    string `json:"helpUrl"`
	Nodes  []struct {
		Target  string `json:"target"`
		Summary string `json:"summary"`
	} `json:"nodes"`
}

// check runs axe in the page at each of consoleWidths and checks that
// nothing scrolls sideways at the narrowest; each failure is reported
// with the page's name and width, and the test goes on to the next page.
// The page is kept at both widths (console-a11y-<name>-<width>.png, see
// consoleShots) for a person to look at.
func (a *axeRun) check(name string) {
	t, b := a.t, a.b
	t.Helper()
	for _, w := range consoleWidths {
		b.run(t, chromedp.EmulateViewport(w, 900))
		if vs := a.violations(); len(vs) > 0 {
			var sb strings.Builder
			for _, v := range vs {
				fmt.Fprintf(&sb, "\n  %s (%s): %s <%s>", v.ID, v.Impact, v.Help, v.URL)
				for _, n := range v.Nodes {
					fmt.Fprintf(&sb, "\n    %s\n      %s", n.Target, strings.ReplaceAll(n.Summary, "\n", "\n      "))
				}
			}
			t.Errorf("page %s at %d px (%s) breaks %d accessibility rules:%s", name, w, runFor(t, b, chromedp.Location()), len(vs), sb.String())
		}
		if w == consoleWidths[0] {
			if over := runFor(t, b, chromedp.Evaluate[[]string](sideways)); len(over) > 0 {
				t.Errorf("page %s scrolls sideways at %d px:\n  %s", name, w, strings.Join(over, "\n  "))
			}
		}
	}
	a.shots.take(t, b, "a11y-"+name)
}

// violations runs axe in the page as it is now, injecting it first if
// the page does not have it yet.
func (a *axeRun) violations() []axeViolation {
	t, b := a.t, a.b
	t.Helper()
	if !runFor(t, b, chromedp.Evaluate[bool](`typeof window.axe === 'object'`)) {
		runFor(t, b, chromedp.Evaluate[chromedp.Void](a.source))
	}
	tags, _ := json.Marshal(axeTags)
	script := `axe.run(document, {runOnly: {type: 'tag', values: ` + string(tags) + `}, resultTypes: ['violations']})
	  .then(r => JSON.stringify({passes: r.passes.length, violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
	    nodes: v.nodes.map(n => ({target: n.target.map(String).join(' '), summary: n.failureSummary}))}))}))`
	var result struct {
		Passes     int            `json:"passes"`
		Violations []axeViolation `json:"violations"`
	}
	raw := runFor(t, b, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(raw), &result); err != nil {
		t.Fatalf("axe's answer: %v\n%s", err, raw)
	}
	// A page where axe passed nothing was not checked.
	if result.Passes == 0 {
		t.Fatalf("axe passed no rule in %s: it did not run", runFor(t, b, chromedp.Location()))
	}
	return result.Violations
}

// sideways is empty when the page does not scroll sideways; otherwise it
// names the page's width and the first elements past the window's right
// edge (but those inside a box that clips or scrolls them, such as a
// table's, or hidden off-screen on purpose).
const sideways = `(() => {
  const width = document.scrollingElement.scrollWidth, inner = window.innerWidth;
  if (width <= inner) return [];
  const clipped = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') return true;
    }
    return false;
  };
  const wide = [], inside = [];
  document.querySelectorAll('body *').forEach(el => {
    const r = el.getBoundingClientRect();
    if (r.right <= inner + 0.5 || el.closest('.visually-hidden, .skip')) return;
    (clipped(el) ? inside : wide).push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className ? '.' + String(el.className).trim().split(/\s+/).join('.') : '') +
      ' (right edge at ' + Math.round(r.right) + ' px): ' + el.textContent.trim().slice(0, 40));
  });
  // Without an element of its own past the edge, name those in boxes.
  return ['scrollWidth ' + width + ' > innerWidth ' + inner].concat((wide.length ? wide : inside).slice(0, 10));
})()`

// checkSignInKeyboard checks the sign-in page's keyboard path: it opens
// with the email field focused, Tab goes on to the password and the
// submit button, and from the page's top to the skip link first; each
// stop shows a focus outline (the stylesheet's :focus-visible style).
func checkSignInKeyboard(t *testing.T, b *browser) {
	t.Helper()
	if focused := runFor(t, b, chromedp.Evaluate[string](`document.activeElement.id`)); focused != "email" {
		t.Errorf("the sign-in page opens with %q focused, want the email field", focused)
	}
	if !runFor(t, b, chromedp.Evaluate[bool](`Array.from(document.styleSheets).some(s =>
	  Array.from(s.cssRules).some(r => (r.selectorText || '').includes(':focus-visible')))`)) {
		t.Error("the console's stylesheet has no :focus-visible style")
	}
	// From the email field the keyboard goes on to the password and the
	// button, leaves the page (the browser's own controls: the body is
	// focused), comes back at its top to the skip link and the console's
	// name, and returns to the email field.
	type stop struct {
		Name    string `json:"name"`
		Visible bool   `json:"visible"`
		Outline string `json:"outline"`
	}
	var names []string
	for range 6 {
		b.run(t, chromedp.KeyEvent(kb.Tab))
		s := runFor(t, b, chromedp.Evaluate[stop](`(() => {
		  const el = document.activeElement, cs = getComputedStyle(el);
		  const name = el.id ? '#' + el.id : el.tagName.toLowerCase() + (el === document.body ? '' : ' "' + el.textContent.trim() + '"');
		  return {name: name, visible: el.matches(':focus-visible') && cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2,
		    outline: cs.outlineStyle + ' ' + cs.outlineWidth + ' ' + cs.outlineColor};
		})()`))
		if s.Name == "body" {
			continue
		}
		names = append(names, s.Name)
		if !s.Visible {
			t.Errorf("tabbing to %s on the sign-in page shows no focus outline (outline %s)", s.Name, s.Outline)
		}
	}
	got, want := strings.Join(names, " -> "), `#password -> button "Sign in" -> a "Skip to content" -> a "Parley console" -> #email`
	if got != want {
		t.Errorf("Tab on the sign-in page from the email field goes\n  %s\nwant\n  %s", got, want)
	}
}
