package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestAPIReferenceInTheBrowser opens the gateway's API reference (/docs) in
// headless Chromium, on a wide screen and on a phone's, and waits until Redoc
// has drawn the title of every operation and webhook of the OpenAPI document
// the gateway serves; it follows the link of POST /v1/messages, and on the
// wide screen searches for it (Redoc's search runs in a worker). Every
// request the page made must have gone to the gateway and been answered
// without error, and the page must have run without a script error or a
// refusal by its Content-Security-Policy.
//
// It saves reference-<width>.png (the screen of POST /v1/messages) and
// reference-<width>-full.png (the whole page) in REFERENCE_SCREENSHOTS=DIR,
// or else, under go test -artifacts, in the test's artifact directory
// (screenshotDir); otherwise it takes none.
// docs/img/reference-1440.png and -360.png are the one-screen pictures.
func TestAPIReferenceInTheBrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := startSuite(t)
	gateway, err := url.Parse(s.gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	// The document the page shows, as any client gets it: without a key,
	// then 304 for its ETag (http.DefaultClient checks both answers against
	// the document). The gateway's unit tests hold it to pkg/openapi's
	// bytes; here it is the one whose titles the page must show.
	doc := getDocument(t, s.gatewayURL, "")
	if doc.StatusCode != http.StatusOK || doc.Header.Get("Content-Type") != "application/json" || doc.Header.Get("ETag") == "" {
		t.Fatalf("GET /v1/openapi.json = %d, Content-Type %q, ETag %q", doc.StatusCode, doc.Header.Get("Content-Type"), doc.Header.Get("ETag"))
	}
	if again := getDocument(t, s.gatewayURL, doc.Header.Get("ETag")); again.StatusCode != http.StatusNotModified || len(again.body) != 0 {
		t.Fatalf("GET /v1/openapi.json with its ETag = %d, %d bytes; want 304", again.StatusCode, len(again.body))
	}
	titles, shown := documentTitles(t, doc.body, "post", "/messages")

	b := newBrowser(t)
	var (
		mu       sync.Mutex
		requests []string // "<url>" of every request the page made
		failures []string // answers >= 400 and requests that failed
	)
	note := func(list *[]string, s string) { mu.Lock(); *list = append(*list, s); mu.Unlock() }
	go func() {
		for ev, err := range chromedp.Events(b.ctx, network.RequestWillBeSent) {
			if err != nil {
				return
			}
			note(&requests, ev.Request.URL)
		}
	}()
	go func() {
		for ev, err := range chromedp.Events(b.ctx, network.ResponseReceived) {
			if err != nil {
				return
			}
			if ev.Response.Status >= 400 {
				note(&failures, fmt.Sprintf("%d %s", ev.Response.Status, ev.Response.URL))
			}
		}
	}()
	go func() {
		for ev, err := range chromedp.Events(b.ctx, network.LoadingFailed) {
			if err != nil {
				return
			}
			// Leaving a page cancels what it still had in flight; a
			// refusal is never a cancellation.
			if ev.Canceled && ev.BlockedReason == "" {
				continue
			}
			note(&failures, fmt.Sprintf("request %s failed: %s %s", ev.RequestID, ev.ErrorText, ev.BlockedReason))
		}
	}()
	// The page's own record of what its policy refused, beside the console.
	b.run(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.refused = [];
document.addEventListener('securitypolicyviolation', e => window.refused.push(e.violatedDirective + ' ' + e.blockedURI));`,
		})
		return err
	}))

	dir := screenshotDir(t, "REFERENCE_SCREENSHOTS")
	wanted, _ := json.Marshal(titles)
	for _, width := range []int64{1440, 360} {
		b.run(t, chromedp.EmulateViewport(width, 900), chromedp.Navigate(s.gatewayURL+"/docs"))
		// Drawn: every title is on the page.
		waitPage(t, b, fmt.Sprintf("at %d px every title of the document shown", width),
			fmt.Sprintf(`%s.every(title => document.body.innerText.includes(title))`, wanted),
			fmt.Sprintf(`%s.filter(title => !document.body.innerText.includes(title))`, wanted))
		// The screen of one operation, with its samples beside it, reached
		// by its link as a reader would (Redoc follows the address's
		// fragment), once the menu shows it and its transitions have ended.
		b.run(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`location.hash = document.querySelector('[data-section-id$="operation/%s"]').dataset.sectionId`, shown.OperationID)))
		waitPage(t, b, fmt.Sprintf("at %d px the menu on %s", width, shown.OperationID),
			fmt.Sprintf(`document.querySelector('li[data-item-id$="operation/%s"] > label.active') !== null &&
				document.getAnimations().every(a => a.playState !== 'running')`, shown.OperationID),
			`({active: [...document.querySelectorAll('li[data-item-id] > label.active')].map(l => l.parentElement.dataset.itemId),
				running: document.getAnimations().filter(a => a.playState === 'running').length})`)
		if refused := runFor(t, b, chromedp.Evaluate[[]string](`window.refused`)); len(refused) > 0 {
			t.Errorf("at %d px the Content-Security-Policy refused: %v", width, refused)
		}
		for _, shot := range []struct {
			name    string
			capture chromedp.Action[[]byte]
		}{
			{fmt.Sprintf("reference-%d.png", width), chromedp.CaptureScreenshot()},
			{fmt.Sprintf("reference-%d-full.png", width), chromedp.FullScreenshot(100)},
		} {
			if dir == "" {
				break
			}
			file := filepath.Join(dir, shot.name)
			if err := os.WriteFile(file, runFor(t, b, shot.capture), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", file)
		}
		if width == 1440 {
			// Search runs in Redoc's worker, which the policy must let start:
			// the longest word of the title finds the operation.
			words := strings.FieldsFunc(shown.Summary, func(r rune) bool { return !unicode.IsLetter(r) })
			term := slices.MaxFunc(words, func(a, b string) int { return len(a) - len(b) })
			b.run(t, chromedp.SendKeys(chromedp.CSS(`input[aria-label="Search"]`), term))
			waitPage(t, b, fmt.Sprintf("searching %q finds %q", term, shown.Summary),
				fmt.Sprintf(`[...document.querySelectorAll('[data-role="search:results"] li')].some(r => r.getAttribute('aria-label') === %q)`, shown.Summary),
				`[...document.querySelectorAll('[data-role="search:results"] li')].map(r => r.getAttribute('aria-label'))`)
		}
	}

	b.checkConsole(t)
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Errorf("the page's %s", f)
	}
	if len(requests) == 0 {
		t.Fatal("no request seen")
	}
	for _, r := range requests {
		if origin, ok := requestOrigin(r); ok && origin != gateway.Scheme+"://"+gateway.Host {
			t.Errorf("the page asked %s, beyond the gateway (%s)", r, s.gatewayURL)
		}
	}
	for _, want := range []string{"/docs", "/v1/openapi.json"} {
		if !slices.ContainsFunc(requests, func(r string) bool { u, _ := url.Parse(r); return u.Path == want }) {
			t.Errorf("the page never asked for %s; it asked for %v", want, requests)
		}
	}
}

// waitPage waits up to 30 s until predicate, a script, is true on the page;
// if it never is, it fails t with what, and what diagnosis, another script,
// finds.
func waitPage(t *testing.T, b *browser, what, predicate, diagnosis string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate)); err != nil {
		found := runFor(t, b, chromedp.Evaluate[any](diagnosis))
		t.Fatalf("never %s (%v): %v", what, err, found)
	}
}

type documentAnswer struct {
	*http.Response
	body []byte
}

// getDocument GETs /v1/openapi.json, with If-None-Match: etag unless "".
func getDocument(t *testing.T, gatewayURL, etag string) documentAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, gatewayURL+"/v1/openapi.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return documentAnswer{resp, body}
}

// requestOrigin is where a request went: a data: address goes nowhere, a
// blob: address (Redoc's search worker) is its page's.
func requestOrigin(address string) (string, bool) {
	if strings.HasPrefix(address, "data:") {
		return "", false
	}
	address = strings.TrimPrefix(address, "blob:")
	u, err := url.Parse(address)
	if err != nil {
		return address, true
	}
	return u.Scheme + "://" + u.Host, true
}

// operation is what the page shows of one operation.
type operation struct {
	OperationID string `json:"operationId"`
	Summary     string `json:"summary"`
}

// documentTitles are the summaries of an OpenAPI document's operations and
// webhooks, which Redoc shows as their titles, and the operation at method
// and path.
func documentTitles(t *testing.T, document []byte, method, path string) (titles []string, shown operation) {
	t.Helper()
	type pathItems map[string]map[string]json.RawMessage
	var doc struct {
		Paths    pathItems `json:"paths"`
		Webhooks pathItems `json:"webhooks"`
	}
	if err := json.Unmarshal(document, &doc); err != nil {
		t.Fatal(err)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	for _, items := range []pathItems{doc.Paths, doc.Webhooks} {
		for p, item := range items {
			for m, raw := range item {
				if !slices.Contains(methods, m) {
					continue // the path item's own fields: parameters, summary, …
				}
				var op operation
				if err := json.Unmarshal(raw, &op); err != nil {
					t.Fatalf("%s %s: %v", m, p, err)
				}
				if op.Summary != "" && !slices.Contains(titles, op.Summary) {
					titles = append(titles, op.Summary)
				}
			}
		}
	}
	if raw, ok := doc.Paths[path][method]; ok {
		if err := json.Unmarshal(raw, &shown); err != nil {
			t.Fatal(err)
		}
	}
	if len(titles) == 0 || shown.OperationID == "" || shown.Summary == "" {
		t.Fatalf("the OpenAPI document has no operation with a summary, or no operationId and summary for %s %s", method, path)
	}
	slices.Sort(titles)
	return titles, shown
}
