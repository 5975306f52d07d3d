package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// chromiumPath is Debian's chromium package (scripts/deps.sh installs it).
const chromiumPath = "/usr/bin/chromium"

// requireChromium skips a browser test where Chromium is not installed, and
// fails it under CI, which must run it.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing; scripts/deps.sh installs it", chromiumPath)
		}
		t.Skipf("%s is missing (apt-get install chromium); skipping the browser test", chromiumPath)
	}
}

// TestWebchatInTheBrowser plays a visitor in headless Chromium against the
// built binaries: the widget page served by messaging, the developer's
// webhook and answers through the gateway. The visitor writes, the
// developer gets a signed message.received, answers with quick replies and
// a carousel, the visitor sees them, taps a chip and a card's button, and
// after a reload finds the same thread and goes on in the same
// conversation.
//
// WEBCHAT_SCREENSHOTS=DIR saves pictures of the widget along the way
// (webchat-*.png), to look at what a visitor sees.
func TestWebchatInTheBrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	images := httptest.NewTLSServer(http.HandlerFunc(serveProductImage))
	t.Cleanup(images.Close)
	// Three new sessions a minute from one address: the visitor's, the
	// launcher's frame (its storage is the embedding site's) and one more.
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "WEBCHAT_SESSIONS_PER_MINUTE=3")

	// The operator: a workspace, its key, a webchat channel in external
	// mode. The developer: a webhook.
	wsID, key := s.developer(t)
	ch := s.addChannel(t, wsID, "external", "--kind", "webchat")
	if ch.Kind != "webchat" {
		t.Fatalf("channel create: %+v", ch)
	}
	rcv := newReceiver(t)
	secret := s.saveWebhook(t, key, rcv.URL)

	b := newBrowser(t)
	widgetURL := s.messagingURL + "/webchat/" + ch.ID + "?title=" + url.QueryEscape("Mug Shop")
	b.run(t, chromedp.Navigate(widgetURL), chromedp.WaitVisible(chromedp.CSS(".status.online")))
	if title := runFor(t, b, chromedp.Text(chromedp.CSS("#chat-title"))); title != "Mug Shop" {
		t.Errorf("title = %q", title)
	}

	// The visitor writes; the developer's webhook gets message.received.
	b.run(t, chromedp.SendKeys(chromedp.CSS("#input"), "Hi! Do you have the blue mug?"), chromedp.Click(chromedp.CSS("#send")))
	first := rcv.WaitForN(t, "message.received", 1)[0]
	verifySignature(t, first, secret)
	checkDeliveryHeaders(t, first, "message.received")
	ev := decodeWebchatEvent(t, first)
	token := runFor(t, b, chromedp.Evaluate[string](`localStorage.getItem('parley.webchat.`+ch.ID+`.token')`))
	visitorID, _, _ := strings.Cut(token, ".")
	dom := b.waitDOM(t, "the visitor's message sent", func(d widgetDOM) bool {
		return len(d.Messages) == 1 && !d.Messages[0].Pending && !d.Messages[0].Failed
	})
	sentID := dom.Messages[0].ID
	d := ev.Data
	if ev.Event != "message.received" || d.WorkspaceID != wsID || d.Platform != "webchat" || d.ConversationID == "" {
		t.Fatalf("event = %+v", ev)
	}
	if d.Channel["kind"] != "webchat" || d.Channel["external_id"] != ch.ExternalID {
		t.Errorf("data.channel = %v", d.Channel)
	}
	if d.Contact["sender_id"] != visitorID || d.Contact["name"] != "Visitor "+visitorID[len(visitorID)-4:] ||
		d.Contact["id"] == "" || d.Contact["profile_pic"] != "" {
		t.Errorf("data.contact = %v (visitor %s)", d.Contact, visitorID)
	}
	if d.Message["text"] != "Hi! Do you have the blue mug?" || d.Message["type"] != "text" || d.Message["external_id"] != sentID ||
		d.Message["id"] == "" || !isUTCTimestamp(fmt.Sprint(d.Message["created_at"])) {
		t.Errorf("data.message = %v (widget id %s)", d.Message, sentID)
	}
	if _, ok := d.Message["attachment"]; ok {
		t.Errorf("attachment on a text message: %v", d.Message)
	}
	conv := d.ConversationID

	// The developer types, then answers with quick replies.
	if status, _, body := s.api(t, key, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": conv}); status != http.StatusOK || body["ok"] != true {
		t.Fatalf("POST /v1/typing = %d %v", status, body)
	}
	b.waitDOM(t, "the typing indicator", func(d widgetDOM) bool { return d.Typing })
	b.screenshot(t, "typing")
	status, _, answer := s.api(t, key, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": conv, "text": "Yes! Which size would you like?", "quick_replies": []string{"Small", "Large"},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/messages = %d %v", status, answer)
	}
	answerID := answer["message"].(map[string]any)["external_id"].(string)
	b.waitDOM(t, "the answer and its chips", func(d widgetDOM) bool {
		return len(d.Messages) == 2 && d.Messages[1].ID == answerID && d.Messages[1].Sender == "user" &&
			d.Messages[1].Text == "Yes! Which size would you like?" && strings.Join(d.Chips, "|") == "Small|Large" && !d.Typing
	})

	b.screenshot(t, "chips")

	// A chip is a message with that text.
	b.run(t, chromedp.Click(chromedp.CSS("#chips .chip:nth-child(2)")))
	chip := decodeWebchatEvent(t, rcv.WaitForN(t, "message.received", 2)[1])
	if chip.Data.ConversationID != conv || chip.Data.Message["text"] != "Large" {
		t.Fatalf("chip event = %+v", chip.Data)
	}
	b.waitDOM(t, "the chip as the visitor's message, chips gone", func(d widgetDOM) bool {
		return len(d.Messages) == 3 && d.Messages[2].Text == "Large" && d.Messages[2].Sender == "contact" && len(d.Chips) == 0
	})

	// A carousel: cards with images at the given ratio, titles, subtitles,
	// buttons.
	status, _, cards := s.api(t, key, http.MethodPost, "/v1/carousel", map[string]any{
		"conversation_id": conv, "ratio": "horizontal",
		"elements": []map[string]any{
			{"title": "Blue mug, large", "subtitle": "Stoneware, 450 ml — $18", "image_url": images.URL + "/blue.png", "buttons": []map[string]any{
				{"type": "postback", "title": "Buy", "payload": "BUY_BLUE_LARGE"},
				{"type": "web_url", "title": "Details", "url": "https://shop.example/mugs/blue"},
			}},
			{"title": "Red mug, large", "subtitle": "Stoneware, 450 ml — $18", "image_url": images.URL + "/red.png", "buttons": []map[string]any{
				{"type": "postback", "title": "Buy", "payload": "BUY_RED_LARGE"},
			}},
		},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/carousel = %d %v", status, cards)
	}
	dom = b.waitDOM(t, "the cards with their images", func(d widgetDOM) bool {
		if len(d.Messages) != 4 || len(d.Messages[3].Cards) != 2 {
			return false
		}
		for _, c := range d.Messages[3].Cards {
			if !c.ImageLoaded {
				return false
			}
		}
		return true
	})
	blue := dom.Messages[3].Cards[0]
	if blue.Title != "Blue mug, large" || blue.Subtitle != "Stoneware, 450 ml — $18" || strings.Join(blue.Buttons, "|") != "Buy|Details" ||
		blue.Link != "https://shop.example/mugs/blue" || blue.Ratio < 1.85 || blue.Ratio > 1.97 {
		t.Fatalf("first card = %+v", blue)
	}
	if red := dom.Messages[3].Cards[1]; red.Title != "Red mug, large" || strings.Join(red.Buttons, "|") != "Buy" {
		t.Fatalf("second card = %+v", red)
	}
	b.screenshot(t, "cards")
	b.screenshotDark(t, "cards-dark")

	// A card's postback button: postback.received with its payload.
	b.run(t, chromedp.Click(chromedp.CSS(`.msg.carousel .card:first-child button.btn`)))
	tap := decodeWebchatEvent(t, rcv.WaitForN(t, "postback.received", 1)[0])
	if tap.Data.ConversationID != conv || tap.Data.Postback["payload"] != "BUY_BLUE_LARGE" || tap.Data.Message["type"] != "postback" ||
		tap.Data.Message["text"] != "Buy" || tap.Data.Platform != "webchat" || !isUTCTimestamp(fmt.Sprint(tap.Data.Postback["received_at"])) {
		t.Fatalf("postback event = %+v", tap.Data)
	}
	before := b.waitDOM(t, "the tap as the visitor's message", func(d widgetDOM) bool {
		return len(d.Messages) == 5 && d.Messages[4].Type == "postback" && d.Messages[4].Text == "Buy" && !d.Messages[4].Pending
	})

	// Reload: the same thread, from the history.
	b.run(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(".status.online")))
	after := b.waitDOM(t, "the thread after the reload", func(d widgetDOM) bool {
		return len(d.Messages) == 5 && len(d.Messages[3].Cards) == 2
	})
	for i := range before.Messages {
		x, y := before.Messages[i], after.Messages[i]
		if x.ID != y.ID || x.Sender != y.Sender || x.Type != y.Type || x.Text != y.Text || len(x.Cards) != len(y.Cards) {
			t.Errorf("message %d before the reload %+v, after %+v", i, x, y)
		}
	}
	b.screenshot(t, "reloaded")
	if len(after.Chips) != 0 {
		t.Errorf("chips after the reload: %v", after.Chips)
	}

	// The visitor goes on (Enter sends): the same conversation and contact.
	b.run(t, chromedp.SendKeys(chromedp.CSS("#input"), "Great, thanks!"+kb.Enter))
	next := decodeWebchatEvent(t, rcv.WaitForN(t, "message.received", 3)[2])
	if next.Data.ConversationID != conv || next.Data.Contact["id"] != d.Contact["id"] || next.Data.Message["text"] != "Great, thanks!" {
		t.Fatalf("after the reload: %+v", next.Data)
	}
	status, _, list := s.api(t, key, http.MethodGet, "/v1/conversations?platform=webchat", nil)
	if convs, _ := list["conversations"].([]any); status != http.StatusOK || len(convs) != 1 {
		t.Fatalf("webchat conversations = %d %v", status, list)
	}
	status, _, msgs := s.api(t, key, http.MethodGet, "/v1/conversations/"+conv+"/messages", nil)
	stored, _ := msgs["messages"].([]any)
	if status != http.StatusOK || len(stored) != 6 {
		t.Fatalf("messages = %d %v", status, msgs)
	}
	if m := stored[3].(map[string]any); m["content"] != "Large" || m["metadata"].(map[string]any)["quick_reply_payload"] != "Large" {
		t.Errorf("the chip's message = %v", m)
	}

	// The token never travels in a URL: the page's requests (history,
	// messages, the event stream) carry it in X-Visitor-Token alone. (The
	// service refuses a token in the query string, so the live updates
	// seen above prove the stream took it from the header.)
	var urls []string
	if err := json.Unmarshal([]byte(runFor(t, b, chromedp.Evaluate[string](
		`JSON.stringify(performance.getEntriesByType('resource').map(e => e.name))`))), &urls); err != nil || len(urls) == 0 {
		t.Fatalf("resource entries %v: %v", urls, err)
	}
	for _, u := range urls {
		if strings.Contains(u, token) || strings.Contains(u, url.QueryEscape(token)) || strings.Contains(u, "token=") {
			t.Errorf("the page requested %s", u)
		}
	}

	// A site embeds the launcher: a chat button that opens the widget in a
	// frame.
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Mugs</title></head><body><h1>Our mugs</h1>`+
			`<script src="%s/webchat/%s/embed.js" async data-title="Mug Shop" data-accent="#0f766e"></script></body></html>`,
			s.messagingURL, ch.ID)
	}))
	t.Cleanup(site.Close)
	launcher := chromedp.CSS(`button[aria-label="Open chat: Mug Shop"]`)
	b.run(t, chromedp.Navigate(site.URL), chromedp.WaitVisible(launcher), chromedp.Click(launcher))
	want := s.messagingURL + "/webchat/" + ch.ID + "?title=Mug+Shop&accent=%230f766e"
	deadline := time.Now().Add(15 * time.Second)
	for {
		tree := runFor(t, b, func(ctx context.Context, tg *chromedp.Target) (page.GetFrameTreeResult, error) {
			return cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
		})
		if kids := tree.FrameTree.ChildFrames; len(kids) == 1 && kids[0].Frame.URL == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher's frame never loaded %s", want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if shown := runFor(t, b, chromedp.Evaluate[string](`document.querySelector('iframe').style.display + ' ' +
		document.querySelector('button[aria-expanded]').getAttribute('aria-expanded')`)); shown != "block true" {
		t.Errorf("open launcher: %q", shown)
	}
	b.screenshot(t, "launcher")
	b.checkConsole(t)

	// Minting visitors is bounded per address: past
	// WEBCHAT_SESSIONS_PER_MINUTE, 429 rate_limited with Retry-After.
	for i := 0; ; i++ {
		status, header, body := s.postWidget(t, "/webchat/"+ch.ID+"/session")
		if status == http.StatusCreated && i < 3 {
			continue
		}
		if status != http.StatusTooManyRequests || body["code"] != "rate_limited" {
			t.Fatalf("session %d = %d %v, want 429 rate_limited by the fourth", i+1, status, body)
		}
		if retry, err := strconv.Atoi(header.Get("Retry-After")); err != nil || retry < 1 || retry > 60 {
			t.Fatalf("Retry-After %q", header.Get("Retry-After"))
		}
		break
	}
}

// postWidget POSTs to the messaging listener as a browser would, without a
// token, and decodes the JSON answer.
func (s *suite) postWidget(t *testing.T, path string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Post(s.messagingURL+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// --- the browser ---

type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// The product images come from a local https server with a
		// self-signed certificate.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(420, 680),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser and must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	b := &browser{ctx: ctx}
	// Script errors and CSP refusals fail the test: the page must run
	// exactly as served. (Network entries, such as the favicon's 404, are
	// not the page's doing.)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") ||
				(m.Type == chromedp.ConsoleError && m.Source != "network") {
				b.problem(m.String())
			}
		}
	}()
	return b
}

func (b *browser) problem(p string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, p)
}

func (b *browser) checkConsole(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(b.problems, "\n"))
	}
}

func (b *browser) run(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// screenshot saves the page as webchat-<name>.png in the directory
// screenshotDir gives for WEBCHAT_SCREENSHOTS, when there is one.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := screenshotDir(t, "WEBCHAT_SCREENSHOTS")
	if dir == "" {
		return
	}
	shot := runFor(t, b, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, "webchat-"+name+".png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// screenshotDark is screenshot with the visitor's system in dark mode.
func (b *browser) screenshotDark(t *testing.T, name string) {
	t.Helper()
	if screenshotDir(t, "WEBCHAT_SCREENSHOTS") == "" {
		return
	}
	media := func(scheme string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		})
	}
	b.run(t, media("dark"))
	time.Sleep(300 * time.Millisecond) // let the colour transitions end
	b.screenshot(t, name)
	b.run(t, media(""))
}

func runFor[T any](t *testing.T, b *browser, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// widgetDOM is what the visitor sees, read from the page.
type widgetDOM struct {
	Messages []struct {
		ID, Sender, Type, Text string
		Pending, Failed        bool
		Cards                  []struct {
			Title, Subtitle, Link string
			Buttons               []string
			ImageLoaded           bool
			Ratio                 float64
		}
	}
	Chips  []string
	Typing bool
}

const readWidget = `JSON.stringify({
  messages: Array.from(document.querySelectorAll('#log .msg')).map(n => ({
    id: n.dataset.id, sender: n.dataset.sender, type: n.dataset.type,
    text: (n.querySelector('.bubble') || {}).textContent || '',
    pending: n.classList.contains('pending'), failed: n.classList.contains('failed'),
    cards: Array.from(n.querySelectorAll('.card')).map(c => {
      const media = c.querySelector('.media'), img = c.querySelector('.media img'), link = c.querySelector('a.btn');
      return {
        title: c.querySelector('.card-title').textContent,
        subtitle: (c.querySelector('.card-sub') || {}).textContent || '',
        buttons: Array.from(c.querySelectorAll('.btn')).map(b => b.textContent),
        link: link ? link.href : '',
        imageLoaded: !!img && img.complete && img.naturalWidth > 0,
        ratio: media.getBoundingClientRect().width / media.getBoundingClientRect().height,
      };
    }),
  })),
  chips: document.getElementById('chips').hidden ? [] : Array.from(document.querySelectorAll('#chips .chip')).map(c => c.textContent),
  typing: !document.getElementById('typing').hidden,
})`

// waitDOM polls the page until cond holds.
func (b *browser) waitDOM(t *testing.T, what string, cond func(widgetDOM) bool) widgetDOM {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var d widgetDOM
	for {
		js := runFor(t, b, chromedp.Evaluate[string](readWidget))
		d = widgetDOM{}
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatalf("widget DOM: %v", err)
		}
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the widget never showed %s; it shows:\n%s", what, js)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --- the developer's receiver ---

func decodeWebchatEvent(t *testing.T, r receiver.Request) customerEvent {
	t.Helper()
	var ev customerEvent
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		t.Fatalf("envelope: %v\n%s", err, r.Body)
	}
	return ev
}

// serveProductImage draws a mug-coloured gradient at 1.91:1, as a shop's
// CDN would serve a product photo.
func serveProductImage(w http.ResponseWriter, r *http.Request) {
	base := color.RGBA{R: 59, G: 130, B: 246, A: 255}
	if strings.Contains(r.URL.Path, "red") {
		base = color.RGBA{R: 239, G: 68, B: 68, A: 255}
	}
	img := image.NewRGBA(image.Rect(0, 0, 382, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 382; x++ {
			f := 0.55 + 0.45*float64(x+y)/582
			img.Set(x, y, color.RGBA{R: uint8(float64(base.R) * f), G: uint8(float64(base.G) * f), B: uint8(float64(base.B) * f), A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(buf.Bytes())
}
