package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestConsoleInTheBrowser is the getting-started path done in the operator
// console, in headless Chromium, against the built binaries: a workspace
// operator signs in, creates an API key (read once from the page), saves
// the webhook (the secret read once from the page), sends the test event
// and sees the receiver's 2xx while the receiver verifies its signature
// with that secret, switches a Telegram channel to external, finds the
// customer's message in the delivery log, opens it and replays it. Then
// the paused path: the receiver fails until the webhook pauses, the page
// says so, the operator saves it again (a new secret, shown once) and
// replays the paused period, and the receiver gets the event it missed.
//
// CONSOLE_SCREENSHOTS=DIR keeps the pages at 360 and 1440 px wide
// (console-<page>-<width>.png) in DIR; go test -artifacts keeps them in the
// test's artifact directory; otherwise none are taken (screenshotDir).
func TestConsoleInTheBrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	_, botAPI := telegramfake.Start(t)
	// Three failed deliveries in a row pause the webhook, each retried
	// quickly, so the paused path takes seconds.
	s := startSuite(t, "TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOK_PAUSE_AFTER=3", "WEBHOOK_RETRY_DELAYS=10ms,10ms,10ms")
	console := s.startConsole(t)

	// The platform's part: a workspace, a Telegram channel (in auto mode,
	// as a new channel starts) and the workspace's operator.
	var ws struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
	}
	s.ctl(t, &ws, "workspace", "create", "--name", "Mug Shop "+uuid.NewString()[:8], "--modules", "developer_api", "--rate-per-minute", "100000")
	wsID := ws.Workspace.ID
	ch := s.addChannel(t, wsID, "auto", "--kind", "telegram", "--token", "700100300:AAH-console-e2e-token")
	email, password := "ann-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	s.createOperator(t, email, wsID, password)

	// The developer's receiver answers 204 until the test makes it fail.
	rcv := receiver.New(t, nil, checkDeliveries(t))
	rcv.SetStatus(http.StatusNoContent)
	b := newBrowser(t)
	shots := consoleShots(t)
	page := func(path string) string { return console + "/workspaces/" + wsID + path }

	// Sign in: a workspace operator lands on its workspace.
	b.openSignIn(t, console)
	shots.take(t, b, "login")
	b.run(t, chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), password))
	b.submit(t, `form[action="/login"] button[type=submit]`)
	if loc := runFor(t, b, chromedp.Location()); loc != page("") {
		t.Fatalf("after signing in the browser is at %s, want %s", loc, page(""))
	}
	shots.take(t, b, "workspace")

	// Create a key: shown once, and it works.
	b.run(t, chromedp.Navigate(page("/keys")), chromedp.WaitVisible(chromedp.CSS("#key-name")))
	b.run(t, chromedp.SendKeys(chromedp.CSS("#key-name"), "production"))
	b.submit(t, `form[action$="/keys"] button[type=submit]`)
	key := strings.TrimSpace(runFor(t, b, chromedp.TextContent(chromedp.CSS("#new-key"))))
	if !strings.HasPrefix(key, "pk_") {
		t.Fatalf("the key page shows %q, not a key", key)
	}
	shots.take(t, b, "key-created")
	if status, _, body := s.api(t, key, http.MethodGet, "/v1/conversations", nil); status != http.StatusOK {
		t.Fatalf("GET /v1/conversations with the console's key = %d %v", status, body)
	}

	// Save the webhook: the secret is shown once.
	b.run(t, chromedp.Navigate(page("/webhook")), chromedp.WaitVisible(chromedp.CSS("#url")))
	b.run(t, chromedp.SendKeys(chromedp.CSS("#url"), rcv.URL))
	b.submit(t, `form[action$="/webhook"] button[type=submit]`)
	secret := strings.TrimSpace(runFor(t, b, chromedp.TextContent(chromedp.CSS("#secret"))))
	if secret == "" {
		t.Fatal("the webhook page shows no secret after the save")
	}
	shots.take(t, b, "webhook-saved")

	// The test event: the page shows the receiver's 2xx; the receiver
	// verifies it with the secret the page showed.
	b.submit(t, `form[action$="/webhook/test"] button[type=submit]`)
	test := b.definitions(t, "#test-heading")
	if test["Status"] != "delivered" || test["Response code"] != "204" || test["Error"] != "none" {
		t.Fatalf("the test event's result on the page: %v, want delivered with 204", test)
	}
	verifySignature(t, rcv.WaitFor(t, "test"), secret)
	shots.take(t, b, "webhook-test")

	// Switch the Telegram channel to external.
	b.run(t, chromedp.Navigate(page("/channels")), chromedp.WaitVisible(chromedp.CSS("#mode-"+ch.ID)))
	b.run(t, chromedp.SetValue(chromedp.CSS("#mode-"+ch.ID), "external"))
	b.submit(t, "#channel-"+ch.ID+" button[type=submit]")
	if notice := runFor(t, b, chromedp.TextContent(chromedp.CSS("p.success"))); !strings.Contains(notice, "is now in mode external") {
		t.Fatalf("after Set mode the channels page says %q", notice)
	}
	if mode := runFor(t, b, chromedp.Value(chromedp.CSS("#mode-"+ch.ID))); mode != "external" {
		t.Fatalf("the channel's mode on the page after the switch: %q", mode)
	}
	shots.take(t, b, "channels")

	// A customer writes on Telegram: the developer's receiver gets it,
	// and the delivery log shows it.
	ingress := s.messagingURL + "/ingress/telegram/" + ch.ID
	customerWrites := func(n int, text string) {
		t.Helper()
		postUpdate(t, ingress, ch.Secret, fmt.Sprintf(`{"update_id": %d, "message": {"message_id": %d, "date": %d,
			"from": {"id": 4242, "is_bot": false, "first_name": "Ada", "language_code": "en"},
			"chat": {"id": 4242, "first_name": "Ada", "type": "private"}, "text": %q}}`, n, n, time.Now().Unix(), text))
	}
	customerWrites(1, "Hi! Do you have the blue mug?")
	first := rcv.WaitFor(t, "message.received")
	verifySignature(t, first, secret)
	deliveryID := first.Delivery()
	b.openDelivery(t, shots, page("/deliveries"), deliveryID)
	outcome := b.definitions(t, "#outcome")
	if outcome["Status"] != "delivered" || outcome["Event"] != "message.received" || outcome["Id"] != deliveryID {
		t.Fatalf("the delivery's page: %v", outcome)
	}
	// The payload is shown byte for byte: what the receiver got.
	if payload := runFor(t, b, chromedp.TextContent(chromedp.CSS("pre.payload"))); payload != string(first.Body) {
		t.Fatalf("the delivery's signed payload on the page:\n%s\nthe receiver got:\n%s", payload, first.Body)
	}
	if attempts := b.attempts(t); len(attempts) != 1 || attempts[0]["Attempt"] != "1" || attempts[0]["Response code"] != "204" || attempts[0]["Error"] != "none" {
		t.Fatalf("the delivery's attempts on the page: %v, want one with 204", attempts)
	}
	shots.take(t, b, "delivery")

	// Replay it: the receiver gets that delivery again, and nothing else;
	// the page's attempts then show the second attempt's 204.
	before := len(rcv.Requests())
	b.replay(t, `form[action$="/replay"] button[type=submit]`)
	again := awaitDelivery(t, rcv, deliveryID, 2)
	verifySignature(t, again, secret)
	if !bytes.Equal(again.Body, first.Body) {
		t.Errorf("the replay's body differs from the first delivery's:\n%s\n%s", again.Body, first.Body)
	}
	wait.For(t, 20*time.Second, "the replayed attempt on the delivery's page", func() error {
		b.run(t, chromedp.Navigate(page("/deliveries/"+deliveryID)), chromedp.WaitVisible(chromedp.CSS("#attempts-heading")))
		attempts := b.attempts(t)
		if len(attempts) != 2 || attempts[1]["Attempt"] != "2" || attempts[1]["Response code"] != "204" {
			return fmt.Errorf("attempts %v", attempts)
		}
		return nil
	})
	if got := rcv.Requests()[before:]; len(got) != 1 {
		t.Fatalf("the replay of one delivery sent %d requests (%v), want 1", len(got), got)
	}

	// The paused path: the receiver fails; three failed deliveries in a
	// row pause the webhook. One at a time, so the count is exact.
	rcv.SetStatus(http.StatusServiceUnavailable)
	for n := 2; n <= 4; n++ {
		before := len(rcv.Requests())
		customerWrites(n, fmt.Sprintf("Message %d while the receiver is down", n))
		failing := rcv.Await(t, "a failing delivery", func(got []receiver.Request) bool { return len(got) > before })[before]
		if d := s.settledDelivery(t, key, failing.Delivery()); d["status"] != "failed" {
			t.Fatalf("delivery %d while the receiver fails: %v", n, d)
		}
	}
	if st := s.webhookStatus(t, key); st != "paused" {
		t.Fatalf("after 3 failed deliveries the webhook is %q, want paused", st)
	}
	// While paused, the next message is logged skipped and not sent.
	customerWrites(5, "Is anyone there?")
	var skippedID string
	wait.For(t, 20*time.Second, "the message while paused logged skipped", func() error {
		skipped := s.deliveries(t, key, "status=skipped")
		if len(skipped) == 0 {
			return fmt.Errorf("nothing skipped yet")
		}
		skippedID, _ = skipped[0]["id"].(string)
		return nil
	})
	if n := len(receiver.OfDelivery(rcv.Requests(), skippedID)); n != 0 {
		t.Fatalf("the paused webhook's receiver got the skipped delivery %d times", n)
	}

	// The webhook page says paused, with the last failure's 503.
	b.run(t, chromedp.Navigate(page("/webhook")), chromedp.WaitVisible(chromedp.CSS("#paused-heading")))
	if state := b.definitions(t, "#state-heading"); state["Status"] != "paused" || state["URL"] != rcv.URL || state["Failures"] != "3 in a row" {
		t.Fatalf("the paused webhook's status on the page: %v", state)
	}
	if reason := runFor(t, b, chromedp.TextContent(chromedp.CSS("section.paused"))); !strings.Contains(reason, "response code 503") ||
		!strings.Contains(reason, "paused after 3 failed deliveries in a row") {
		t.Fatalf("the paused section does not name the last failure's 503:\n%s", reason)
	}
	shots.take(t, b, "webhook-paused")

	// Save again: a new secret, shown once, and the offer to replay the
	// paused period.
	rcv.SetStatus(http.StatusNoContent)
	b.submit(t, `form[action$="/webhook/resave"] button[type=submit]`)
	newSecret := strings.TrimSpace(runFor(t, b, chromedp.TextContent(chromedp.CSS("#secret"))))
	if newSecret == "" || newSecret == secret {
		t.Fatalf("the re-save shows secret %q (the old one was %q)", newSecret, secret)
	}
	if state := b.definitions(t, "#state-heading"); state["Status"] != "active" {
		t.Fatalf("after the re-save the webhook's status on the page: %v", state)
	}
	shots.take(t, b, "webhook-resaved")
	b.replay(t, `#replay-heading ~ form button[type=submit]`)
	missed := awaitDelivery(t, rcv, skippedID, 1)
	verifySignature(t, missed, newSecret)
	if !strings.Contains(string(missed.Body), "Is anyone there?") {
		t.Errorf("the replayed skipped delivery:\n%s", missed.Body)
	}
	shots.take(t, b, "deliveries-replayed")
	b.checkConsole(t)
}

// createOperator creates an operator of workspace workspaceID, or with
// workspaceID "" a platform operator (of every workspace), with parleyctl,
// the password on stdin as an operator types it.
func (s *suite) createOperator(t *testing.T, email, workspaceID, password string) {
	t.Helper()
	args := []string{"operator", "create", "--email", email, "--password-stdin"}
	if workspaceID != "" {
		args = append(args, "--workspace", workspaceID)
	}
	cmd := exec.Command(filepath.Join(binDir, "parleyctl"), args...)
	cmd.Env = s.environ
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("parleyctl operator create: %v\n%s", err, out)
	}
}

// replay presses the replay button at css and checks the page says the
// replay is queued.
func (b *browser) replay(t *testing.T, css string) {
	t.Helper()
	b.submit(t, css)
	if notice := runFor(t, b, chromedp.TextContent(chromedp.CSS("p.success"))); !strings.Contains(notice, "Replay queued") {
		t.Fatalf("after pressing %s the page says %q", css, notice)
	}
}

// awaitDelivery waits until rcv has got delivery id n times and returns
// the n-th.
func awaitDelivery(t *testing.T, rcv *receiver.Receiver, id string, n int) receiver.Request {
	t.Helper()
	got := rcv.Await(t, fmt.Sprintf("delivery %s %d times", id, n), func(got []receiver.Request) bool {
		return len(receiver.OfDelivery(got, id)) >= n
	})
	return receiver.OfDelivery(got, id)[n-1]
}

// openSignIn opens the sign-in page of the console at console on a wide
// screen.
func (b *browser) openSignIn(t *testing.T, console string) {
	t.Helper()
	b.run(t, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(console+"/login"), chromedp.WaitVisible(chromedp.CSS("#email")))
}

// signIn fills the open sign-in form and sends it; where the browser
// lands is the caller's to check.
func (b *browser) signIn(t *testing.T, email, password string) {
	t.Helper()
	b.run(t, chromedp.SetValue(chromedp.CSS("#email"), email), chromedp.SetValue(chromedp.CSS("#password"), password))
	b.submit(t, `form[action="/login"] button[type=submit]`)
}

// submit clicks the submit button (or link) at css and waits until the page its
// form posted to has loaded (the old page's marker is gone). The
// navigation the click starts may cut the click's own call, or a check of
// the old page, short ("Inspected target navigated or closed"): such an
// error only means "not loaded yet", and the last one is reported if no
// page loads.
func (b *browser) submit(t *testing.T, css string) {
	t.Helper()
	runFor(t, b, chromedp.Evaluate[bool](`window.__stale = true`))
	try := func(a chromedp.Action[bool]) (bool, error) {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		return chromedp.Run(ctx, a)
	}
	click := func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		return chromedp.Do(ctx, chromedp.Click(chromedp.CSS(css)))
	}
	lastErr := click()
	deadline := time.Now().Add(20 * time.Second)
	for {
		loaded, err := try(chromedp.Evaluate[bool](`window.__stale !== true && document.readyState === 'complete'`))
		if err == nil && loaded {
			return
		}
		if err != nil {
			lastErr = err
		}
		// A live page may replace the button between its lookup and the
		// click ("Could not find node with given id"): nothing was
		// pressed, so it is pressed again on the page as it is now.
		if err == nil && lastErr != nil && strings.Contains(lastErr.Error(), "Could not find node with given id") {
			lastErr = click()
		}
		if time.Now().After(deadline) {
			t.Fatalf("pressing %s never loaded another page (last error: %v)", css, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// definitions reads the <dl> of the section headed by the element at css,
// term by term.
func (b *browser) definitions(t *testing.T, css string) map[string]string {
	t.Helper()
	js := `(() => { const out = {}; const dl = document.querySelector(` + "`" + css + "`" + `).closest('section').querySelector('dl');
	  dl.querySelectorAll('dt').forEach(dt => { out[dt.textContent.trim()] = dt.nextElementSibling.textContent.trim(); }); return out; })()`
	return runFor(t, b, chromedp.Evaluate[map[string]string](js))
}

// attempts reads the delivery page's attempts table, row by row, each
// cell by its column's label.
func (b *browser) attempts(t *testing.T) []map[string]string {
	t.Helper()
	js := `(() => { const rows = []; const section = document.querySelector('#attempts-heading').closest('section');
	  section.querySelectorAll('tbody tr').forEach(tr => { const row = {};
	    tr.querySelectorAll('[data-label]').forEach(c => { row[c.dataset.label] = c.textContent.trim(); }); rows.push(row); });
	  return rows; })()`
	return runFor(t, b, chromedp.Evaluate[[]map[string]string](js))
}

// openDelivery opens the delivery log until it lists delivery id (the
// dispatcher records it as it delivers), takes its screenshots and follows
// the delivery's link to its page.
func (b *browser) openDelivery(t *testing.T, shots screenshots, logURL, id string) {
	t.Helper()
	link := `a[href$="/deliveries/` + id + `"]`
	wait.Until(t, 20*time.Second, "the delivery log listing delivery "+id, func() bool {
		b.run(t, chromedp.Navigate(logURL), chromedp.WaitVisible(chromedp.CSS("#filter-heading")))
		return runFor(t, b, chromedp.Evaluate[bool](`document.querySelector('`+link+`') !== null`))
	})
	shots.take(t, b, "deliveries")
	b.submit(t, link)
}

// screenshots is where a console test keeps its pictures; "" keeps none.
type screenshots string

// consoleShots is screenshotDir with CONSOLE_SCREENSHOTS.
func consoleShots(t *testing.T) screenshots {
	return screenshots(screenshotDir(t, "CONSOLE_SCREENSHOTS"))
}

// screenshotDir is where a browser test keeps its pictures: the directory
// the environment variable env names, else, when the test binary runs with
// -artifacts, the test's artifact directory; otherwise "" and none are
// taken, as WEBCHAT_SCREENSHOTS's rule has it. Without -artifacts that
// directory is a temporary one deleted when the test ends, and a full-page
// screenshot is slow browser work: dozens of them for nobody to see.
func screenshotDir(t *testing.T, env string) string {
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	return ""
}

// take saves the whole page at 360 and at 1440 px wide as
// console-<name>-<width>.png, and leaves the browser at 1440; with no
// directory it does nothing, the browser's width included.
func (dir screenshots) take(t *testing.T, b *browser, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	for _, w := range []int64{360, 1440} {
		b.run(t, chromedp.EmulateViewport(w, 900))
		shot := runFor(t, b, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(string(dir), fmt.Sprintf("console-%s-%d.png", name, w)), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
