package main

import (
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
)

// inboxAcme is Acme signed in as ann, with a Messenger channel in suggest
// mode and a conversation on it whose contact wrote what is given.
func inboxAcme(t *testing.T, state messagingapi.ConversationState, messages ...messagingapi.Message) (h *harness, own, conv string, b *browser) {
	t.Helper()
	h, own, b = signedInToAcme(t)
	ch := h.messaging.channel(own, "messenger", "106372195099001", messagingapi.AIModeSuggest)
	conv = h.messaging.conversation(own, ch, state, messages...)
	return h, own, conv, b
}

// hostile is contact-supplied text that would run or bold if drawn as
// HTML.
const hostile = `<script>alert(1)</script><b>bold</b>`

// TestInboxEscapesContactText: the contact's name, messages and captions,
// the buttons and cards of sent messages and the AI's draft are drawn as
// text on the list and the conversation's page, never as HTML, and a
// javascript: link from a platform is never a link.
func TestInboxEscapesContactText(t *testing.T) {
	t.Parallel()
	state := messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "6843", Name: "Eve " + hostile}},
		Tags: []string{"vip" + hostile}, Assignee: "ann@example.com"}
	h, own, conv, b := inboxAcme(t, state,
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "name " + hostile},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "image", Content: "caption " + hostile,
			Metadata: map[string]any{"attachment": map[string]any{"type": "image", "url": "javascript:alert(2)"}}},
		messagingapi.Message{Sender: messagingapi.SenderAI, Type: "text", Content: "button " + hostile,
			Metadata: map[string]any{"buttons": []any{map[string]any{"type": "postback", "title": "title " + hostile, "payload": "x"}},
				"quick_replies": []any{"quick " + hostile}}},
		messagingapi.Message{Sender: messagingapi.SenderAI, Type: "carousel", Content: "",
			Metadata: map[string]any{"elements": []any{map[string]any{"title": "card " + hostile, "subtitle": "sub " + hostile}}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "last " + hostile},
	)
	h.messaging.suggest(conv, messagingapi.Suggestion{RunID: uuid.NewString(), Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "draft " + hostile}}})

	escaped := "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"
	list := b.get("/workspaces/" + own + "/conversations")
	if list.status != http.StatusOK {
		t.Fatalf("the list = %d: %s", list.status, list.body)
	}
	mustContain(t, list, "Eve "+escaped, "last "+escaped, "vip"+escaped, "Suggestion waiting")
	page := b.get("/workspaces/" + own + "/conversations/" + conv)
	if page.status != http.StatusOK {
		t.Fatalf("the conversation = %d: %s", page.status, page.body)
	}
	mustContain(t, page, "Eve "+escaped, "name "+escaped, "caption "+escaped, "title "+escaped, "quick "+escaped,
		"card "+escaped, "sub "+escaped, "draft "+escaped, "vip"+escaped)
	for what, r := range map[string]response{"the list": list, "the conversation": page} {
		for _, raw := range []string{"<script>alert", "<b>bold", "javascript:"} {
			if strings.Contains(r.body, raw) {
				t.Errorf("%s draws %q as HTML:\n%s", what, raw, r.body)
			}
		}
	}
	// The edit form keeps the draft as text in its box.
	edit := b.get("/workspaces/" + own + "/conversations/" + conv + "?edit=1")
	mustContain(t, edit, `name="text_0" rows="4">draft `+escaped+`</textarea>`)
}

// draftWaits is Acme signed in as ann, with a conversation whose
// customer wrote "Hello?" and the AI's draft "Hi" waiting: the
// conversation page's path and its csrf_token.
func draftWaits(t *testing.T) (h *harness, path, token string, b *browser) {
	t.Helper()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "6843", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Hello?"})
	h.messaging.suggest(conv, messagingapi.Suggestion{Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "Hi"}}})
	path = "/workspaces/" + own + "/conversations/" + conv
	return h, path, b.pageCSRF(path), b
}

// inboxPosts are the conversation page's actions, each with a form that
// would pass.
var inboxPosts = map[string]url.Values{
	"reply":              {"text": {"Hello"}},
	"suggestion/send":    {},
	"discard-suggestion": {},
	"handover":           {},
	"resume-ai":          {},
	"tags":               {"tags": {"vip"}},
	"assignee":           {"me": {"1"}},
}

// TestInboxActionsRefuseForgedPosts: each action of the conversation page
// is refused (403, in words) without the page's csrf_token or from
// another origin, and nothing reaches messaging; with both it passes.
func TestInboxActionsRefuseForgedPosts(t *testing.T) {
	t.Parallel()
	h, path, token, b := draftWaits(t)
	checked := 0
	for _, route := range routes() {
		action, ok := strings.CutPrefix(route.Path, "/workspaces/:id/conversations/:conv/")
		if route.Method != http.MethodPost || !ok {
			continue
		}
		if action == ":change" {
			continue // each change is its own entry of inboxPosts
		}
		if _, known := inboxPosts[action]; !known {
			t.Fatalf("POST %s is not in inboxPosts: add it with a form that passes", route.Path)
		}
	}
	for action, form := range inboxPosts {
		checked++
		forged := []struct {
			name    string
			form    url.Values
			headers map[string]string
		}{
			{"no token", form, nil},
			{"wrong token", with(form, "csrf_token", strings.Repeat("A", len(token))), nil},
			{"another origin", with(form, "csrf_token", token), map[string]string{"Origin": "https://evil.example"}},
		}
		for _, f := range forged {
			r := b.do(http.MethodPost, path+"/"+action, f.form, f.headers)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "out of date or came from another site") {
				t.Fatalf("%s with %s = %d: %s", action, f.name, r.status, r.body)
			}
		}
		if got := h.messaging.inboxChanges(); len(got) != 0 {
			t.Fatalf("forged posts of %s reached messaging: %v", action, got)
		}
	}
	// The page's own post passes.
	if r := b.do(http.MethodPost, path+"/handover", url.Values{"csrf_token": {token}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("handover with the page's token = %d: %s", r.status, r.body)
	}
	if got := h.messaging.inboxChanges(); len(got) != 1 || got[0] != "POST /admin/conversations/:id/handover" {
		t.Fatalf("messaging got %v", got)
	}
	if checked == 0 {
		t.Fatal("no inbox action checked")
	}
}

// with is form with key set to value, form left as it was.
func with(form url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = v
	}
	out.Set(key, value)
	return out
}

// postAction posts form to the action of the conversation page at path,
// as its form would with the page's CSRF token, and wants the page back
// saying notice.
func postAction(t *testing.T, b *browser, path, action string, form url.Values, notice string) {
	t.Helper()
	r := b.do(http.MethodPost, path+"/"+action, with(form, "csrf_token", b.pageCSRF(path)), nil)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location(), path+"?done=") {
		t.Fatalf("%s %v = %d (%s): %s", action, form, r.status, r.location(), r.body)
	}
	mustContain(t, b.get(r.location()), notice)
}

// TestInboxListBadges: each row of the list carries its conversation's
// badges: unanswered, suggestion waiting, handed over, its tags and its
// assignee; a conversation in none of those states carries none. Each
// says who wrote the last message.
func TestInboxListBadges(t *testing.T) {
	t.Parallel()
	h, own, busy, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}},
		AI: messagingapi.ConversationHandedOver, HandoverReason: "handover node h", Unanswered: messagingapi.UnansweredAILimitReached,
		Tags: []string{"vip", "refund"}, Assignee: "ann@example.com"},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "where is my mug"})
	h.messaging.suggest(busy, messagingapi.Suggestion{RunID: uuid.NewString(), Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "Today"}}})
	quiet := h.messaging.conversation(own, h.messaging.channel(own, "telegram", "7001", messagingapi.AIModeAuto),
		messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "2", Name: "Bob"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "thanks"},
		messagingapi.Message{Sender: messagingapi.SenderAI, Type: "text", Content: "You are welcome"})

	list := b.get("/workspaces/" + own + "/conversations")
	if list.status != http.StatusOK {
		t.Fatalf("the list = %d: %s", list.status, list.body)
	}
	// row is conversation id's item of the list.
	row := func(id string) string {
		t.Helper()
		start := strings.Index(list.body, `id="conv-`+id+`"`)
		if start < 0 {
			t.Fatalf("the list lacks conversation %s:\n%s", id, list.body)
		}
		rest := list.body[start:]
		if end := strings.Index(rest[1:], `<li class="conv`); end >= 0 {
			rest = rest[:end+1]
		}
		return rest
	}
	got := row(busy)
	for _, badge := range []string{">Unanswered<", ">Suggestion waiting<", ">Handed over<", ">#vip<", ">#refund<", ">Assigned to ann@example.com<"} {
		if !strings.Contains(got, badge) {
			t.Errorf("the row of a conversation in every state lacks %q:\n%s", badge, got)
		}
	}
	if got := row(quiet); strings.Contains(got, "badge") {
		t.Errorf("the row of a conversation in no state has badges:\n%s", got)
	}
	// Each row says who wrote its last message.
	for id, want := range map[string]string{busy: `<span class="from">Customer:</span> where is my mug`, quiet: `<span class="from">AI:</span> You are welcome`} {
		if got := row(id); !strings.Contains(got, want) {
			t.Errorf("the row lacks %q:\n%s", want, got)
		}
	}
}

// TestInboxSuggestionActions: Send sends the waiting suggestion as
// drafted (no messages of the console's own), Send from the edit form
// sends each text as edited, Discard drops it; each as the signed-in
// operator, back on the conversation's page saying so.
func TestInboxSuggestionActions(t *testing.T) {
	t.Parallel()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "where is my mug"})
	path := "/workspaces/" + own + "/conversations/" + conv
	draft := messagingapi.Suggestion{RunID: uuid.NewString(), Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "It ships today."}, {Type: "text", Text: "Anything else?"}}}
	sent := func() messagingapi.SendSuggestion {
		t.Helper()
		h.messaging.mu.Lock()
		defer h.messaging.mu.Unlock()
		all := h.messaging.inbox.sentSuggestions
		if len(all) == 0 {
			t.Fatal("no suggestion send reached messaging")
		}
		return all[len(all)-1]
	}

	h.messaging.suggest(conv, draft)
	postAction(t, b, path, "suggestion/send", url.Values{}, "The suggestion was sent as your reply.")
	if got := sent(); got.WorkspaceID != own || got.Operator == "" || got.Messages != nil {
		t.Fatalf("Send as drafted asked messaging for %+v, want the draft as it is", got)
	}

	h.messaging.suggest(conv, draft)
	postAction(t, b, path, "suggestion/send", url.Values{"edited": {"1"}, "text_0": {"It ships tomorrow."}, "text_1": {"Anything else, Ada?"}}, "The suggestion was sent as your reply.")
	want := []messagingapi.OutboundMessage{{Type: "text", Text: "It ships tomorrow."}, {Type: "text", Text: "Anything else, Ada?"}}
	if got := sent(); !reflect.DeepEqual(got.Messages, want) {
		t.Fatalf("Send from the edit form sent %+v, want %+v", got.Messages, want)
	}

	h.messaging.suggest(conv, draft)
	postAction(t, b, path, "discard-suggestion", url.Values{}, "The suggestion was discarded.")
	if got := h.messaging.inboxChanges(); got[len(got)-1] != "DELETE /admin/conversations/:id/suggestion" {
		t.Fatalf("Discard asked messaging for %v", got)
	}
	if page := b.get(path); strings.Contains(page.body, "It ships today.") {
		t.Fatalf("the discarded suggestion is still shown:\n%s", page.body)
	}
}

// TestInboxTagsAndAssignee: the conversation page's Tags box adds its
// comma-separated tags; the assignee box assigns the operator typed,
// Assign to me the signed-in one, and an empty box unassigns.
func TestInboxTagsAndAssignee(t *testing.T) {
	t.Parallel()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "hi"})
	path := "/workspaces/" + own + "/conversations/" + conv
	state := func() messagingapi.ConversationState {
		h.messaging.mu.Lock()
		defer h.messaging.mu.Unlock()
		return h.messaging.inbox.conversations[conv].state
	}

	postAction(t, b, path, "tags", url.Values{"tags": {" vip, refund ,, "}}, "Tags added.")
	if got := state().Tags; !reflect.DeepEqual(got, []string{"vip", "refund"}) {
		t.Fatalf("tags %q, want vip and refund", got)
	}
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"assignee": {" bob@example.com "}}, "bob@example.com"},
		{url.Values{"me": {"1"}}, "ann@example.com"},
		{url.Values{"assignee": {""}}, ""},
	} {
		postAction(t, b, path, "assignee", tc.form, "Assignee saved.")
		if got := state().Assignee; got != tc.want {
			t.Fatalf("assignee after %v = %q, want %q", tc.form, got, tc.want)
		}
	}
}

// TestInboxListFilters: each filter of the list keeps the conversations
// it names: one channel's, unanswered, with a suggestion waiting, handed
// over, assigned to the signed-in operator; several filters keep those in
// all of them.
func TestInboxListFilters(t *testing.T) {
	t.Parallel()
	h, own, unanswered, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}},
		Unanswered: messagingapi.UnansweredAILimitReached, Assignee: "ann@example.com"})
	tg := h.messaging.channel(own, "telegram", "7001", messagingapi.AIModeAuto)
	contact := func(name string) messagingapi.Conversation {
		return messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: name, Name: name}}
	}
	waiting := h.messaging.conversation(own, tg, messagingapi.ConversationState{Conversation: contact("Bob")})
	h.messaging.suggest(waiting, messagingapi.Suggestion{RunID: uuid.NewString(), Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "Hi"}}})
	handed := h.messaging.conversation(own, tg, messagingapi.ConversationState{Conversation: contact("Cy"), AI: messagingapi.ConversationHandedOver})
	others := h.messaging.conversation(own, tg, messagingapi.ConversationState{Conversation: contact("Di"), Assignee: "bob@example.com"})
	h.messaging.mu.Lock()
	channel := h.messaging.inbox.conversations[waiting].state.ChannelID
	h.messaging.mu.Unlock()

	all := []string{unanswered, waiting, handed, others}
	for query, want := range map[string][]string{
		"":                                   all,
		"?channel_id=" + channel:             {waiting, handed, others},
		"?unanswered=1":                      {unanswered},
		"?suggestion=1":                      {waiting},
		"?handed_over=1":                     {handed},
		"?mine=1":                            {unanswered},
		"?channel_id=" + channel + "&mine=1": {},
	} {
		list := b.get("/workspaces/" + own + "/conversations" + query)
		if list.status != http.StatusOK {
			t.Fatalf("the list%s = %d: %s", query, list.status, list.body)
		}
		for _, id := range all {
			if shown, wanted := strings.Contains(list.body, `id="conv-`+id+`"`), slices.Contains(want, id); shown != wanted {
				t.Errorf("the list%s shows conversation %s: %v, want %v", query, id, shown, wanted)
			}
		}
	}
}

// TestInboxConversationSenders: the conversation's page tells the
// customer's messages, the AI's (sender ai) and the operators' (sender
// user, with the operator's email) apart.
func TestInboxConversationSenders(t *testing.T) {
	t.Parallel()
	_, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "from the customer"},
		messagingapi.Message{Sender: messagingapi.SenderAI, Type: "text", Content: "from the AI", Metadata: map[string]any{"run_id": uuid.NewString()}},
		messagingapi.Message{Sender: messagingapi.SenderUser, Type: "text", Content: "from an operator", Metadata: map[string]any{"operator": "ann@example.com"}},
		messagingapi.Message{Sender: messagingapi.SenderUser, Type: "text", Content: "from the API"})
	page := b.get("/workspaces/" + own + "/conversations/" + conv)
	if page.status != http.StatusOK {
		t.Fatalf("the conversation = %d: %s", page.status, page.body)
	}
	// item is the page's message whose text is text.
	item := func(text string) string {
		t.Helper()
		end := strings.Index(page.body, `<p class="msg-text">`+text+`</p>`)
		start := strings.LastIndex(page.body[:max(end, 0)], `<li class="msg `)
		if end < 0 || start < 0 {
			t.Fatalf("the page lacks the message %q:\n%s", text, page.body)
		}
		return page.body[start:end]
	}
	for text, want := range map[string]string{
		"from the customer": `<li class="msg msg-contact"`,
		"from the AI":       `<li class="msg msg-ai"`,
		"from an operator":  `<li class="msg msg-user"`,
		"from the API":      `<li class="msg msg-user"`,
	} {
		if got := item(text); !strings.HasPrefix(got, want) {
			t.Errorf("the message %q is drawn as %q, want %s", text, got, want)
		}
	}
	for text, who := range map[string]string{"from the customer": "Customer", "from the AI": "AI", "from an operator": "Operator ann@example.com", "from the API": "Operator"} {
		if got := item(text); !strings.Contains(got, `<span class="who-label">`+who+`</span>`) {
			t.Errorf("the message %q is labelled %q, want %q", text, got, who)
		}
	}
}

// TestInboxAnotherWorkspacesConversation: another workspace's conversation
// is not on the list, and its page and every action on it are the same 404
// page as a conversation that does not exist; nothing changes it.
func TestInboxAnotherWorkspacesConversation(t *testing.T) {
	t.Parallel()
	h, own, mine, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "mine"})
	globex := h.workspace("Globex")
	theirs := h.messaging.conversation(globex, h.messaging.channel(globex, "telegram", "7001", messagingapi.AIModeAuto),
		messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "2", Name: "Grace of Globex"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "their secret"})
	base := "/workspaces/" + own + "/conversations/"
	token := b.pageCSRF(base + mine)

	list := b.get("/workspaces/" + own + "/conversations")
	mustContain(t, list, "Ada", "mine")
	if strings.Contains(list.body, "Grace") || strings.Contains(list.body, theirs) {
		t.Fatalf("the list shows another workspace's conversation: %s", list.body)
	}
	page := func(method, conv, action string, form url.Values) string {
		t.Helper()
		r := b.do(method, base+conv+action, form, nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "no such conversation") {
			t.Fatalf("%s %s%s = %d: %s", method, conv, action, r.status, r.body)
		}
		if strings.Contains(r.body, "Grace") || strings.Contains(r.body, "their secret") {
			t.Fatalf("%s %s%s shows the other workspace's conversation", method, conv, action)
		}
		return strings.ReplaceAll(r.body, conv, "ID")
	}
	if a, b := page(http.MethodGet, theirs, "", nil), page(http.MethodGet, uuid.NewString(), "", nil); a != b {
		t.Fatalf("another workspace's conversation differs from a missing one's:\n%s\n---\n%s", a, b)
	}
	for action, form := range inboxPosts {
		form = with(form, "csrf_token", token)
		if a, b := page(http.MethodPost, theirs, "/"+action, form), page(http.MethodPost, uuid.NewString(), "/"+action, form); a != b {
			t.Fatalf("%s on another workspace's conversation differs from a missing one's:\n%s\n---\n%s", action, a, b)
		}
	}
	// Their suggestion, sent from the edit form or opened in it.
	h.messaging.suggest(theirs, messagingapi.Suggestion{Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "their draft"}}})
	edited := url.Values{"csrf_token": {token}, "edited": {"1"}, "text_0": {"sent anyway"}}
	if a, b := page(http.MethodPost, theirs, "/suggestion/send", edited), page(http.MethodPost, uuid.NewString(), "/suggestion/send", edited); a != b {
		t.Fatalf("Send edited on another workspace's conversation differs from a missing one's:\n%s\n---\n%s", a, b)
	}
	if a, b := page(http.MethodGet, theirs, "?edit=1", nil), page(http.MethodGet, uuid.NewString(), "?edit=1", nil); a != b || strings.Contains(a, "their draft") {
		t.Fatalf("another workspace's edit form differs from a missing one's:\n%s\n---\n%s", a, b)
	}
	// Their channel as the list's filter: nothing of theirs.
	h.messaging.mu.Lock()
	theirChannel := h.messaging.inbox.conversations[theirs].state.ChannelID
	h.messaging.mu.Unlock()
	if r := b.get("/workspaces/" + own + "/conversations?channel_id=" + theirChannel); r.status != http.StatusOK || strings.Contains(r.body, "Grace") || strings.Contains(r.body, theirs) {
		t.Fatalf("the list filtered by another workspace's channel = %d: %s", r.status, r.body)
	}
	h.messaging.mu.Lock()
	defer h.messaging.mu.Unlock()
	if h.messaging.inbox.conversations[theirs].suggestion == nil {
		t.Fatal("another workspace's suggestion was sent or discarded")
	}
	if st := h.messaging.inbox.conversations[theirs].state; len(st.Tags) != 0 || st.Assignee != "" || len(h.messaging.inbox.replies) != 0 {
		t.Fatalf("another workspace's conversation was changed: %+v, replies %v", st, h.messaging.inbox.replies)
	}
}

// TestInboxReplyWindow: on Messenger the page says until when the
// platform takes replies, and once the 24-hour window has closed it says
// so above the reply box before the operator types; a reply refused
// because it closed meanwhile is shown in words with the text kept.
func TestInboxReplyWindow(t *testing.T) {
	t.Parallel()
	open := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339Nano)
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}, ReplyWindowEndsAt: &open},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Hello?"})
	path := "/workspaces/" + own + "/conversations/" + conv
	page := b.get(path)
	mustContain(t, page, `id="window-note">The platform takes replies until`)
	if strings.Contains(page.body, "window closed") {
		t.Fatalf("an open window is said closed: %s", page.body)
	}

	// The window closes meanwhile: messaging refuses the send.
	h.messaging.mu.Lock()
	h.messaging.inbox.sendRefusal = errs.New(http.StatusConflict, "outside_messaging_window", "the 24-hour messaging window is closed")
	h.messaging.mu.Unlock()
	typed := "Sorry for the wait <3"
	r := b.do(http.MethodPost, path+"/reply", url.Values{"csrf_token": {csrf(t, page)}, "text": {typed}, "quick_replies": {"Yes\nNo"}}, nil)
	if r.status != http.StatusConflict {
		t.Fatalf("a reply refused outside the window = %d: %s", r.status, r.body)
	}
	mustContain(t, r, "Your reply was not sent. The platform&#39;s 24-hour window closed: it takes no reply until the customer writes again.",
		`>Sorry for the wait &lt;3</textarea>`, ">Yes\nNo</textarea>", "<details open>")

	// Closed before the operator opens the page: said above the box.
	closed := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	h.messaging.mu.Lock()
	h.messaging.inbox.conversations[conv].state.ReplyWindowEndsAt = &closed
	h.messaging.mu.Unlock()
	page = b.get(path)
	mustContain(t, page, `<p class="notice" id="window-note">The platform's 24-hour window closed at`, "it takes no reply until the customer writes again.")
	if note, box := strings.Index(page.body, `id="window-note"`), strings.Index(page.body, `id="reply-text"`); note < 0 || box < note {
		t.Fatal("the closed window is not said before the reply box")
	}
}

// TestInboxReplyWithButtons: the reply box's buttons (one a line, "Title
// https://…" a link) and quick replies go to messaging's send path as the
// message's buttons and quick replies, with the operator's email.
func TestInboxReplyWithButtons(t *testing.T) {
	t.Parallel()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Where is it?"})
	path := "/workspaces/" + own + "/conversations/" + conv
	r := b.do(http.MethodPost, path+"/reply", url.Values{"csrf_token": {b.pageCSRF(path)}, "text": {"Here"},
		"buttons": {"Track it https://shop.example/track/77\r\n\r\n Talk to us \r\n"}}, nil)
	if r.status != http.StatusSeeOther || r.location() != path+"?done=sent#reply" {
		t.Fatalf("reply = %d %q: %s", r.status, r.location(), r.body)
	}
	r = b.do(http.MethodPost, path+"/reply", url.Values{"csrf_token": {b.pageCSRF(path)}, "text": {"Which one?"}, "quick_replies": {"Red\nBlue"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("reply with quick replies = %d: %s", r.status, r.body)
	}
	h.messaging.mu.Lock()
	replies := append([]messagingapi.SendOperatorMessage(nil), h.messaging.inbox.replies...)
	h.messaging.mu.Unlock()
	want := []messagingapi.Button{{Type: "web_url", Title: "Track it", URL: "https://shop.example/track/77"}, {Type: "postback", Title: "Talk to us", Payload: "Talk to us"}}
	if len(replies) != 2 || replies[0].Operator != "ann@example.com" || replies[0].WorkspaceID != own || replies[0].Message.Text != "Here" ||
		len(replies[0].Message.Buttons) != 2 || replies[0].Message.Buttons[0] != want[0] || replies[0].Message.Buttons[1] != want[1] {
		t.Fatalf("messaging got %+v", replies)
	}
	if qr := replies[1].Message.QuickReplies; len(qr) != 2 || qr[0] != "Red" || qr[1] != "Blue" || replies[1].Message.Buttons != nil {
		t.Fatalf("the quick replies went as %+v", replies[1].Message)
	}
	mustContain(t, b.get(path+"?done=sent"), "Your reply was sent.", "Operator ann@example.com", "Which one?")
}

// TestInboxChatRunOfAnotherWorkspace: a conversation's chat run opens
// from the workspace it ran in, with the way back to the conversation;
// another workspace's run, named under one's own, is the same 404 page as
// a run that does not exist, and shows nothing of it.
func TestInboxChatRunOfAnotherWorkspace(t *testing.T) {
	t.Parallel()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Hello?"})
	globex := h.workspace("Globex")
	mine, theirs := uuid.NewString(), uuid.NewString()
	h.flows.mu.Lock()
	h.flows.traces[own+" "+mine] = flowrunnerapi.Trace{Run: flowrunnerapi.Run{ID: mine, Status: "completed", StartedAt: "2026-11-24T04:00:00Z"},
		NodeRuns: []flowrunnerapi.NodeRun{{NodeID: "assistant", NodeType: "ai", StartedAt: "2026-11-24T04:00:00Z", Output: map[string]any{"text": "our answer"}}}}
	h.flows.traces[globex+" "+theirs] = flowrunnerapi.Trace{Run: flowrunnerapi.Run{ID: theirs, Status: "completed", StartedAt: "2026-11-24T04:00:00Z"},
		NodeRuns: []flowrunnerapi.NodeRun{{NodeID: "globex-secret-node", NodeType: "ai", StartedAt: "2026-11-24T04:00:00Z", Output: map[string]any{"text": "their answer"}}}}
	h.flows.mu.Unlock()
	base := "/workspaces/" + own + "/runs/"

	r := b.get(base + mine + "?conversation=" + conv)
	if r.status != http.StatusOK {
		t.Fatalf("our chat run = %d: %s", r.status, r.body)
	}
	mustContain(t, r, "<code>"+mine+"</code>", "assistant", `href="/workspaces/`+own+`/conversations/`+conv+`"`)

	notFound := func(id string) string {
		t.Helper()
		r := b.get(base + id + "?conversation=" + conv)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such run") {
			t.Fatalf("run %s = %d: %s", id, r.status, r.body)
		}
		if strings.Contains(r.body, "globex-secret-node") || strings.Contains(r.body, "their answer") {
			t.Fatalf("another workspace's run shows under ours: %s", r.body)
		}
		return strings.ReplaceAll(r.body, id, "ID")
	}
	if a, b := notFound(theirs), notFound(uuid.NewString()); a != b {
		t.Fatalf("another workspace's run differs from a missing one:\n%s\n---\n%s", a, b)
	}
	// Under the other workspace's id: that workspace is not ours.
	if r := b.get("/workspaces/" + globex + "/runs/" + theirs); r.status != http.StatusNotFound || strings.Contains(r.body, "globex-secret-node") {
		t.Fatalf("the other workspace's run under its own id = %d: %s", r.status, r.body)
	}
}
