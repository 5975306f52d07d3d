package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/metafake"
)

// TestConsoleInbox: an operator answers a suggest channel's conversation
// in the console's inbox, in headless Chromium against the built
// binaries: the customer's Telegram message appears live on the list and
// on the conversation's page, the AI's draft is edited and sent (the
// customer gets the edited text, stored as sender user), a reply typed in
// the box reaches the API's messages as sender user, Hand over silences
// the AI and Resume AI brings it back (also after the flow's handover
// node); a reply with buttons reaches Telegram as buttons; both pages
// pass axe.
func TestConsoleInbox(t *testing.T) {
	t.Parallel()
	axe, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (scripts/vendor-axe.sh vendors it): %v", err)
	}
	requireChromium(t)
	cs := startChatSuite(t)
	console := cs.startConsole(t)
	sh := cs.shop(t, "suggest", 100)
	sh.setFlow(t, echoFlow)
	email, password := "ann-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	cs.createOperator(t, email, sh.ws, password)
	ops := cs.services(t)

	b := newBrowser(t)
	shots := consoleShots(t)
	a := &axeRun{t: t, b: b, source: string(axe), shots: shots}
	page := func(path string) string { return console + "/workspaces/" + sh.ws + path }
	b.openSignIn(t, console)
	b.signIn(t, email, password)
	// visible waits until the page shows text inside css, without a
	// reload.
	visible := func(what, css, text string) time.Duration {
		t.Helper()
		start := time.Now()
		waitFor(t, 15*time.Second, func() bool {
			got, err := evalFor[string](b, fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(e => e.textContent).join("\n")`, css))
			return err == nil && strings.Contains(got, text)
		}, func() string { return what + ": the page never showed " + text })
		return time.Since(start)
	}
	live := func() {
		t.Helper()
		waitFor(t, 10*time.Second, func() bool {
			ok, err := evalFor[bool](b, `document.body.getAttribute("data-live-ready") === "1"`)
			return err == nil && ok
		}, func() string { return "the page's event stream never opened" })
	}
	marker := func() { runFor(t, b, chromedp.Evaluate[bool](`window.__same = true`)) }
	sameDocument := func(what string) {
		t.Helper()
		if !runFor(t, b, chromedp.Evaluate[bool](`window.__same === true`)) {
			t.Fatalf("%s: the page was reloaded", what)
		}
	}

	// The list, empty, live: the customer's message appears without a
	// reload, its text escaped, then the AI's suggestion's badge.
	b.run(t, chromedp.Navigate(page("/conversations")), chromedp.WaitVisible(chromedp.CSS("#live-list")))
	live()
	marker()
	const from = 9100
	sh.writes(t, 1, from, "Where is my <b>mug</b>?")
	took := visible("new message on the list", ".conv .last", "Where is my <b>mug</b>?")
	t.Logf("the customer's message appeared on the list %v after it was posted", took)
	if took > 2*time.Second {
		t.Errorf("the new message took %v to appear on the list, want about a second", took)
	}
	visible("suggestion badge", ".conv .badges", "Suggestion waiting")
	sameDocument("the list")
	if n, _ := evalFor[int](b, `document.querySelectorAll(".conv b").length`); n != 0 {
		t.Fatal("the customer's text was drawn as HTML on the list")
	}
	shots.take(t, b, "inbox")
	a.check("inbox")

	// The conversation page: the draft waits; edit and send it.
	conv := sh.conversation(t, from)
	b.run(t, chromedp.Navigate(page("/conversations/"+conv)), chromedp.WaitVisible(chromedp.CSS("#suggestion-title")))
	visible("the draft", ".suggestion .msg-text", "You said Where is my <b>mug</b>?")
	shots.take(t, b, "conversation")
	a.check("conversation")
	b.submit(t, `a[href$="?edit=1#suggestion-title"]`)
	b.run(t, chromedp.SetValue(chromedp.CSS("#sg-text-0"), "Your mug ships today."))
	b.submit(t, `.suggestion form button[type=submit]`)
	visible("the notice", "p.success", "The suggestion was sent as your reply.")
	if n, _ := evalFor[int](b, `document.querySelectorAll("#suggestion-title").length`); n != 0 {
		t.Fatal("the suggestion still waits after it was sent")
	}
	if got := sh.waitSent(t, from, 1); got[0] != "Your mug ships today." {
		t.Fatalf("the customer got %q, want the edited text", got)
	}
	msgs := sh.messages(t, conv)
	if last := msgs[len(msgs)-1]; last["sender"] != "user" || last["content"] != "Your mug ships today." {
		t.Fatalf("the sent suggestion is stored as %v", last)
	}

	// A reply typed in the box: sender user in the API's messages.
	b.run(t, chromedp.SetValue(chromedp.CSS("#reply-text"), "Anything else?"))
	b.submit(t, `form[action$="/reply"] button[type=submit]`)
	visible("the reply on the page", ".msg-user .msg-text", "Anything else?")
	if got := sh.waitSent(t, from, 2); got[1] != "Anything else?" {
		t.Fatalf("the customer got %q", got)
	}
	msgs = sh.messages(t, conv)
	if last := msgs[len(msgs)-1]; last["sender"] != "user" || last["content"] != "Anything else?" || last["metadata"].(map[string]any)["operator"] != email {
		t.Fatalf("the operator's reply is stored as %v", last)
	}

	// A reply with buttons: the customer gets Telegram's inline keyboard
	// (a link, and a button sending its title back), stored as sender user
	// with its buttons.
	b.run(t, chromedp.Click(chromedp.CSS(`#reply summary`)), chromedp.SetValue(chromedp.CSS("#reply-text"), "Track it here:"),
		chromedp.SetValue(chromedp.CSS("#reply-buttons"), "Track https://shop.example/track/77\nTalk to us"))
	b.submit(t, `form[action$="/reply"] button[type=submit]`)
	visible("the reply's buttons on the page", ".msg-user .btns", "Talk to us")
	var keyboard string
	waitFor(t, 20*time.Second, func() bool {
		for _, c := range cs.bot.Calls() {
			if c.Token == sh.token && c.Method == "sendMessage" && c.Params["text"] == "Track it here:" {
				raw, _ := json.Marshal(c.Params["reply_markup"])
				keyboard = string(raw)
				return true
			}
		}
		return false
	}, func() string { return "the bot never sent the reply with buttons" })
	if want := `{"inline_keyboard":[[{"text":"Track","url":"https://shop.example/track/77"}],[{"callback_data":"Talk to us","text":"Talk to us"}]]}`; keyboard != want {
		t.Fatalf("the reply's reply_markup = %s, want %s", keyboard, want)
	}
	msgs = sh.messages(t, conv)
	if last := msgs[len(msgs)-1]; last["sender"] != "user" || last["content"] != "Track it here:" || len(last["metadata"].(map[string]any)["buttons"].([]any)) != 2 {
		t.Fatalf("the reply with buttons is stored as %v", last)
	}

	// Live on the page: the customer's next message and its draft.
	live()
	marker()
	sh.writes(t, 2, from, "No, thanks")
	visible("the customer's message on the page", ".msg-contact .msg-text", "No, thanks")
	visible("the new draft on the page", ".suggestion .msg-text", "You said No, thanks")
	sameDocument("the conversation")

	// Hand over: the AI is silent; the customer's message is stored and
	// takes no turn.
	b.submit(t, `form[action$="/discard-suggestion"] button`)
	b.submit(t, `form[action$="/handover"] button`)
	visible("handed over", "#live-state", "Handed over")
	live()
	sh.writes(t, 3, from, "Hello? A person please")
	visible("the customer's message after the handover", ".msg-contact .msg-text", "A person please")
	st, err := ops.Conversation(context.Background(), sh.ws, conv)
	if err != nil || st.AI != "handed_over" || st.SuggestionWaiting {
		t.Fatalf("after the handover: %+v, %v", st, err)
	}
	b.run(t, chromedp.Navigate(page("/conversations?handed_over=1")), chromedp.WaitVisible(chromedp.CSS("#live-list")))
	visible("the handed-over filter", ".conv .badges", "Handed over")

	// Resume AI: the next customer message is answered (drafted) again.
	b.run(t, chromedp.Navigate(page("/conversations/"+conv)), chromedp.WaitVisible(chromedp.CSS("#reply-text")))
	b.submit(t, `form[action$="/resume-ai"] button`)
	visible("resumed", "p.success", "The AI answers this conversation again")
	live()
	sh.writes(t, 4, from, "back again")
	visible("the draft after Resume AI", ".suggestion .msg-text", "You said back again")
	for _, m := range sh.messages(t, conv) {
		if strings.Contains(fmt.Sprint(m["content"]), "A person please") && m["sender"] != "contact" {
			t.Fatalf("the handed-over message was answered: %v", m)
		}
	}

	// The chat runs are linked to their traces.
	b.run(t, chromedp.Navigate(page("/conversations/"+conv)), chromedp.WaitVisible(chromedp.CSS("#runs-title")))
	visible("the chat runs", "#live-runs", "tokens")
	b.submit(t, `#live-runs a`)
	visible("a chat run's trace", "h1", "Run ")

	// A conversation the flow's handover node hands over shows so on the
	// list, live; Resume AI has the customer's next message answered
	// (drafted) by the AI again.
	const second = 9101
	sh.setFlow(t, handoverFlow)
	b.run(t, chromedp.Navigate(page("/conversations")), chromedp.WaitVisible(chromedp.CSS("#live-list")))
	live()
	sh.writes(t, 5, second, "I want a person")
	visible("the flow's handover on the list", "#live-list .badge-handover", "Handed over")
	conv2 := sh.conversation(t, second)
	visible("the handed-over row", "#conv-"+conv2+" .badges", "Handed over")
	if st, err := ops.Conversation(context.Background(), sh.ws, conv2); err != nil || st.AI != "handed_over" {
		t.Fatalf("after the handover node: %+v, %v", st, err)
	}
	sh.setFlow(t, echoFlow)
	b.run(t, chromedp.Navigate(page("/conversations/"+conv2)), chromedp.WaitVisible(chromedp.CSS("#reply-text")))
	visible("handed over on the page", "#live-state", "Handed over")
	b.submit(t, `form[action$="/resume-ai"] button`)
	visible("resumed", "p.success", "The AI answers this conversation again")
	live()
	sh.writes(t, 6, second, "still there?")
	visible("the AI's draft after Resume AI", ".suggestion .msg-text", "You said still there?")

	// Another workspace's conversation is the 404 page of one that does
	// not exist.
	b.run(t, chromedp.Navigate(page("/conversations/"+uuid.NewString())))
	missing := runFor(t, b, chromedp.Evaluate[string](`document.querySelector("main").textContent`))
	other := cs.shop(t, "suggest", 10)
	other.writes(t, 1, 9200, "elsewhere")
	otherConv := other.conversation(t, 9200)
	b.run(t, chromedp.Navigate(page("/conversations/"+otherConv)))
	if got := runFor(t, b, chromedp.Evaluate[string](`document.querySelector("main").textContent`)); got != missing || !strings.Contains(got, "no such conversation") {
		t.Fatalf("another workspace's conversation shows %q, an unknown one %q", got, missing)
	}
}

// TestConsoleInboxReplyWindow: on Messenger, with the 24-hour window
// shrunk to an hour (MESSAGING_WINDOW=1h) and the customers' messages
// stamped by the platform, the conversation page says the window closed
// above the reply box before the operator types, and a reply sent anyway
// is refused in words with the typed text kept, Meta hearing nothing; on
// an open window the page says until when, and when Meta refuses the send
// because the window closed meanwhile, the page says so, the text kept,
// and the kept text is sent once Meta takes it.
func TestConsoleInboxReplyWindow(t *testing.T) {
	t.Parallel()
	axe, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (scripts/vendor-axe.sh vendors it): %v", err)
	}
	requireChromium(t)
	const pageID, stalePSID, freshPSID = "106372195099077", "6843201900000077", "6843201900000078"
	m := startMetaSuite(t, "messenger", pageID, "MESSAGING_WINDOW=1h")
	console := m.startConsole(t)
	email, password := "win-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	m.createOperator(t, email, m.workspace, password)
	m.deliver(t, metaPost("page", pageID, metaMessage(pageID, stalePSID, time.Now().Add(-2*time.Hour), map[string]any{"mid": "m_inbox_stale", "text": "Anyone there?"})))
	stale := m.waitEvent(t, "message.received", "Anyone there?").Data.ConversationID
	m.deliver(t, metaPost("page", pageID, metaMessage(pageID, freshPSID, time.Now(), map[string]any{"mid": "m_inbox_fresh", "text": "Is it in stock?"})))
	fresh := m.waitEvent(t, "message.received", "Is it in stock?").Data.ConversationID

	b := newBrowser(t)
	a := &axeRun{t: t, b: b, source: string(axe), shots: consoleShots(t)}
	page := func(conv string) string { return console + "/workspaces/" + m.workspace + "/conversations/" + conv }
	b.openSignIn(t, console)
	b.signIn(t, email, password)
	text := func(css string) string {
		t.Helper()
		return runFor(t, b, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, css)))
	}
	typed := func() string {
		return runFor(t, b, chromedp.Evaluate[string](`document.querySelector("#reply-text").value`))
	}
	sends := len(m.sends())

	// Closed before the operator types: said above the box.
	b.run(t, chromedp.Navigate(page(stale)), chromedp.WaitVisible(chromedp.CSS("#reply-text")))
	if note := text("#window-note"); !strings.Contains(note, "24-hour window closed") || !strings.Contains(note, "takes no reply until the customer writes again") {
		t.Fatalf("the closed window's note: %q", note)
	}
	if !runFor(t, b, chromedp.Evaluate[bool](`!!(document.querySelector("#window-note").compareDocumentPosition(document.querySelector("#reply-text")) & Node.DOCUMENT_POSITION_FOLLOWING)`)) {
		t.Fatal("the closed window is said after the reply box")
	}
	// A reply typed anyway: refused in words, the text kept, nothing sent.
	b.run(t, chromedp.SetValue(chromedp.CSS("#reply-text"), "Sorry for the wait"))
	b.submit(t, `form[action$="/reply"] button[type=submit]`)
	if got := text("p.error"); !strings.Contains(got, "Your reply was not sent. The platform's 24-hour window closed") {
		t.Fatalf("the refusal says %q", got)
	}
	if got := typed(); got != "Sorry for the wait" {
		t.Fatalf("the reply box holds %q after the refusal", got)
	}
	a.check("conversation-window-closed")
	if n := len(m.sends()); n != sends {
		t.Fatalf("meta got %d sends outside the window", n-sends)
	}

	// Open: the page says until when. Meta then refuses the send, its
	// window closed meanwhile: said in words, the text kept.
	b.run(t, chromedp.Navigate(page(fresh)), chromedp.WaitVisible(chromedp.CSS("#reply-text")))
	if note := text("#window-note"); !strings.Contains(note, "The platform takes replies until") {
		t.Fatalf("the open window's note: %q", note)
	}
	m.graph.FailNext("/me/messages", metafake.OutsideWindow())
	b.run(t, chromedp.SetValue(chromedp.CSS("#reply-text"), "It is, in blue"))
	b.submit(t, `form[action$="/reply"] button[type=submit]`)
	if got := text("p.error"); !strings.Contains(got, "Your reply was not sent. The platform's 24-hour window closed") {
		t.Fatalf("meta's refusal says %q", got)
	}
	if got := typed(); got != "It is, in blue" {
		t.Fatalf("the reply box holds %q after meta's refusal", got)
	}
	// The kept text sent again, now taken.
	b.submit(t, `form[action$="/reply"] button[type=submit]`)
	if got := text("p.success"); got != "Your reply was sent." {
		t.Fatalf("after sending the kept text the page says %q", got)
	}
	if got := m.lastSend(t); !strings.Contains(got, `"text":"It is, in blue"`) || !strings.Contains(got, freshPSID) {
		t.Fatalf("meta got %s", got)
	}
}

// evalFor evaluates script in the browser's page, its error returned
// rather than failing the test: a page that is loading answers later.
func evalFor[T any](b *browser, script string) (T, error) {
	c, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(c, chromedp.Evaluate[T](script))
}
