package http

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// The inbox (docs/console.md "The inbox"): the list of conversations and a
// conversation's page, every action a plain form answered by a redirect
// to the page that shows its effect, and an event stream per page that
// tells its script to redraw when messaging says a conversation changed.

// InboxChanges subscribes to messaging's notices of a workspace's
// conversation changes; adapters.InboxChanges implements it over NATS.
type InboxChanges interface {
	Subscribe(workspaceID string, fn func(messagingapi.InboxChange)) (stop func(), err error)
}

// inboxPing is how often an idle inbox stream sends a comment, so proxies
// keep it open and a gone browser is noticed.
const inboxPing = 15 * time.Second

// codeConversationNotFound is a conversation the workspace does not have.
const codeConversationNotFound = "conversation_not_found"

func (c *Console) mountInbox(ws *echo.Group) {
	ws.GET("/conversations", c.inboxPage)
	ws.GET("/conversations/events", c.inboxEvents)
	ws.GET("/conversations/:conv", c.conversationPage)
	ws.POST("/conversations/:conv/reply", c.replyToConversation)
	ws.POST("/conversations/:conv/suggestion/send", c.sendSuggestion)
	ws.POST("/conversations/:conv/:change", c.changeConversation)
	ws.GET("/runs/:runId", c.chatRunPage)
}

func conversationPath(workspaceID, conversationID string) string {
	return workspacePath(workspaceID) + "/conversations/" + url.PathEscape(conversationID)
}

// inboxFilter is the list's filters as the form and its links carry them.
type inboxFilter struct {
	ChannelID  string
	Unanswered bool
	Suggestion bool
	HandedOver bool
	Mine       bool
}

// query is the filter as a query string, for the older page's link.
func (f inboxFilter) query() url.Values {
	q := url.Values{}
	if f.ChannelID != "" {
		q.Set("channel_id", f.ChannelID)
	}
	for k, on := range map[string]bool{"unanswered": f.Unanswered, "suggestion": f.Suggestion, "handed_over": f.HandedOver, "mine": f.Mine} {
		if on {
			q.Set(k, "1")
		}
	}
	return q
}

// inboxRow is one conversation of the list.
type inboxRow struct {
	ID         string
	Path       string
	Channel    string
	Contact    string
	Last       string
	LastSender string
	When       string
	Unanswered string
	Suggestion bool
	HandedOver bool
	Tags       []string
	Assignee   string
}

// inboxView is the list page.
type inboxView struct {
	Rows     []inboxRow
	Channels []messagingapi.AdminChannel
	Filter   inboxFilter
	Filtered bool
	// Older is the link to the next page, "" on the last.
	Older string
	// Live is the page's event stream.
	Live string
}

// inboxPage lists the workspace's conversations, newest message first.
func (c *Console) inboxPage(ctx echo.Context) error {
	id := ctx.Param("id")
	op := operatorOf(ctx)
	v := c.view(ctx, "Inbox")
	v.Workspace, v.Current = id, "inbox"
	q := ctx.QueryParams()
	on := func(k string) bool { return q.Get(k) != "" && q.Get(k) != "0" }
	iv := inboxView{Filter: inboxFilter{ChannelID: q.Get("channel_id"), Unanswered: on("unanswered"), Suggestion: on("suggestion"), HandedOver: on("handed_over"), Mine: on("mine")},
		Live: workspacePath(id) + "/conversations/events"}
	iv.Filtered = iv.Filter != inboxFilter{}
	v.Page = iv
	chans, err := c.app.Channels(ctx.Request().Context(), op, id)
	if err != nil {
		return c.serviceError(ctx, "inbox", v, err)
	}
	iv.Channels = chans
	f := adminclient.InboxFilter{Before: q.Get("before"), ChannelID: iv.Filter.ChannelID, Unanswered: iv.Filter.Unanswered,
		SuggestionWaiting: iv.Filter.Suggestion, HandedOver: iv.Filter.HandedOver}
	if iv.Filter.Mine {
		f.Assignee = op.Email
	}
	if f.ChannelID != "" && !slices.ContainsFunc(chans, func(ch messagingapi.AdminChannel) bool { return ch.ID == f.ChannelID }) {
		// Not a channel of this workspace: no conversation is on it.
		v.Page = iv
		return c.render(ctx, http.StatusOK, "inbox", v)
	}
	page, err := c.app.Inbox(ctx.Request().Context(), op, id, f)
	if err != nil {
		v.Page = iv
		return c.serviceError(ctx, "inbox", v, err)
	}
	labels := map[string]string{}
	for _, ch := range chans {
		labels[ch.ID] = channelLabel(ch)
	}
	for _, conv := range page.Conversations {
		row := inboxRow{ID: conv.ID, Path: conversationPath(id, conv.ID), Channel: labels[conv.ChannelID], Contact: contactName(conv.Contact),
			When: displayTime(conv.LastMessageAt), Unanswered: conv.Unanswered, Suggestion: conv.SuggestionWaiting,
			HandedOver: conv.AI == messagingapi.ConversationHandedOver, Tags: conv.Tags, Assignee: conv.Assignee}
		if row.Channel == "" {
			row.Channel = conv.Platform
		}
		if m := conv.LastMessage; m != nil {
			row.Last, row.LastSender = summary(*m), senderLabel(m.Sender)
		}
		iv.Rows = append(iv.Rows, row)
	}
	if page.NextBefore != nil {
		older := iv.Filter.query()
		older.Set("before", *page.NextBefore)
		iv.Older = workspacePath(id) + "/conversations?" + older.Encode()
	}
	v.Page = iv
	return c.render(ctx, http.StatusOK, "inbox", v)
}

// contactName is how a contact is named: the name the platform gave, or
// its id there.
func contactName(ct messagingapi.Contact) string {
	if strings.TrimSpace(ct.Name) != "" {
		return ct.Name
	}
	return "Customer " + ct.SenderID
}

// senderLabel names a message's sender for operators.
func senderLabel(sender string) string {
	switch sender {
	case messagingapi.SenderContact:
		return "Customer"
	case messagingapi.SenderAI:
		return "AI"
	case messagingapi.SenderUser:
		return "Operator"
	}
	return sender
}

// summary is one line saying what a message is, for the list.
func summary(m messagingapi.Message) string {
	switch {
	case m.Type == "carousel":
		return "Carousel"
	case m.Content == "" || m.Type == "image" && strings.HasPrefix(m.Content, "https://"):
		return strings.ToUpper(m.Type[:1]) + m.Type[1:]
	}
	return m.Content
}

// messageMeta is what the inbox draws of a message's metadata.
type messageMeta struct {
	Buttons      []messagingapi.Button `json:"buttons"`
	QuickReplies []string              `json:"quick_replies"`
	Elements     []messagingapi.Card   `json:"elements"`
	ImageURL     string                `json:"image_url"`
	Attachment   *struct {
		URL  string `json:"url"`
		Type string `json:"type"`
	} `json:"attachment"`
	Operator string `json:"operator"`
	RunID    string `json:"run_id"`
}

// messageRow is one message as the conversation page draws it.
type messageRow struct {
	messageMeta
	ID     string
	Sender string
	Who    string
	Type   string
	Text   string
	// Image is the URL of an image sent or received, drawn as a link: the
	// page loads nothing from outside the console.
	Image string
	When  string
}

func toMessageRow(m messagingapi.Message) messageRow {
	r := messageRow{ID: m.ID, Sender: m.Sender, Who: senderLabel(m.Sender), Type: m.Type, Text: m.Content, When: displayTime(m.CreatedAt)}
	if b, err := json.Marshal(m.Metadata); err == nil {
		_ = json.Unmarshal(b, &r.messageMeta)
	}
	switch {
	case r.ImageURL != "":
		r.Image, r.Text = r.ImageURL, ""
	case r.Attachment != nil && r.Attachment.URL != "":
		r.Image = r.Attachment.URL
	}
	if r.Sender == messagingapi.SenderUser && r.Operator != "" {
		r.Who = "Operator " + r.Operator
	}
	return r
}

// suggestionRow is one message of the waiting suggestion, with its place
// for the edit form.
type suggestionRow struct {
	messagingapi.OutboundMessage
	Index int
}

// conversationView is the conversation page.
type conversationView struct {
	State    messagingapi.ConversationState
	Contact  string
	Channel  string
	Path     string
	Messages []messageRow
	Older    string
	Newer    string
	// Suggestion is the waiting suggestion's messages; Editing draws them
	// in an edit form.
	Suggestion      []suggestionRow
	SuggestionRunID string
	// SuggestionSeen is the drawn draft's app.SuggestionMark, which its
	// forms send back.
	SuggestionSeen string
	Editing        bool
	HandedOver     bool
	// WindowEnds is when the platform's window closes, "" when it has
	// none; WindowClosed says it has.
	WindowEnds   string
	WindowClosed bool
	Runs         []flowrunnerapi.RunSummary
	RunsMissing  bool
	RunsPath     string
	Reply        replyForm
	Notice       string
	Live         string
}

// replyForm is the reply box as the operator filled it in.
type replyForm struct {
	Text         string
	QuickReplies string
	Buttons      string
}

// conversationPage draws a conversation: its messages, the waiting
// suggestion, the reply box and the chat state's controls.
func (c *Console) conversationPage(ctx echo.Context) error {
	return c.drawConversation(ctx, http.StatusOK, "", replyForm{})
}

// drawConversation draws the page with status and message (a refusal of
// the last action) and the reply box as typed.
func (c *Console) drawConversation(ctx echo.Context, status int, message string, reply replyForm) error {
	id, convID := ctx.Param("id"), ctx.Param("conv")
	op := operatorOf(ctx)
	v := c.view(ctx, "Conversation")
	v.Workspace, v.Current = id, "inbox"
	q := ctx.QueryParams()
	conv, err := c.app.Conversation(ctx.Request().Context(), op, id, convID, q.Get("before"))
	if errors.Is(err, app.ErrConversationNotFound) {
		return conversationNotFound()
	}
	if err != nil {
		return c.serviceError(ctx, "conversation", v, err)
	}
	s := conv.State
	cv := conversationView{State: s, Contact: contactName(s.Contact), Channel: s.Platform, Path: conversationPath(id, convID),
		HandedOver: s.AI == messagingapi.ConversationHandedOver, Runs: conv.Runs, RunsMissing: conv.RunsUnavailable != nil,
		RunsPath: workspacePath(id) + "/runs/", Reply: reply, Notice: inboxNotice(q.Get("done")),
		Live: workspacePath(id) + "/conversations/events"}
	if chans, err := c.app.Channels(ctx.Request().Context(), op, id); err == nil {
		for _, ch := range chans {
			if ch.ID == s.ChannelID {
				cv.Channel = channelLabel(ch)
			}
		}
	}
	for i := len(conv.Messages.Messages) - 1; i >= 0; i-- {
		cv.Messages = append(cv.Messages, toMessageRow(conv.Messages.Messages[i]))
	}
	if conv.Messages.NextBefore != nil {
		cv.Older = cv.Path + "?before=" + url.QueryEscape(*conv.Messages.NextBefore)
	}
	if q.Get("before") != "" {
		cv.Newer = cv.Path
	}
	if sg := conv.Suggestion; sg != nil {
		cv.SuggestionRunID, cv.SuggestionSeen = sg.RunID, app.SuggestionMark(*sg)
		for i, m := range sg.Messages {
			cv.Suggestion = append(cv.Suggestion, suggestionRow{OutboundMessage: m, Index: i})
		}
		cv.Editing = q.Get("edit") != ""
	}
	if s.ReplyWindowEndsAt != nil {
		cv.WindowEnds = displayTime(*s.ReplyWindowEndsAt)
		if t, err := time.Parse(time.RFC3339Nano, *s.ReplyWindowEndsAt); err == nil && !t.After(c.now()) {
			cv.WindowClosed = true
		}
	}
	if conv.RunsUnavailable != nil {
		c.log.Warn("chat runs not listed", zap.String("conversation_id", convID), zap.Error(conv.RunsUnavailable))
	}
	v.Title = cv.Contact + " · Conversation"
	v.Status, v.Message, v.Page = status, message, cv
	return c.render(ctx, status, "conversation", v)
}

// noSuggestion says why a suggestion the page showed cannot be sent.
const noSuggestion = "No suggestion waits any more: another operator sent or discarded it, or a newer one replaced it."

// newerSuggestion says why the draft the page showed is not what waits.
const newerSuggestion = "a newer one replaced the one you read. Read it below, then send, edit or discard it."

func conversationNotFound() error {
	return errs.NotFound(codeConversationNotFound, "this workspace has no such conversation: go back to the inbox and choose one from it")
}

// inboxNotice says what the action that redirected here did.
func inboxNotice(done string) string {
	switch done {
	case "sent":
		return "Your reply was sent."
	case "suggestion-sent":
		return "The suggestion was sent as your reply."
	case app.ChangeDiscardSuggestion:
		return "The suggestion was discarded."
	case app.ChangeHandOver:
		return "Handed over: the AI does not answer this conversation until you resume it."
	case app.ChangeResumeAI:
		return "The AI answers this conversation again, from the customer's next message."
	case app.ChangeAddTags:
		return "Tags added."
	case app.ChangeAssign:
		return "Assignee saved."
	}
	return ""
}

// lines splits a box's text into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// buttonsOf reads the buttons box: one a line, "Title https://…" a link,
// any other line a postback whose payload is its title.
func buttonsOf(s string) []messagingapi.Button {
	var out []messagingapi.Button
	for _, l := range lines(s) {
		if i := strings.LastIndex(l, " "); i > 0 && strings.HasPrefix(l[i+1:], "https://") {
			out = append(out, messagingapi.Button{Type: "web_url", Title: strings.TrimSpace(l[:i]), URL: l[i+1:]})
			continue
		}
		out = append(out, messagingapi.Button{Type: "postback", Title: l, Payload: l})
	}
	return out
}

// replyToConversation sends the reply box's message.
func (c *Console) replyToConversation(ctx echo.Context) error {
	id, convID := ctx.Param("id"), ctx.Param("conv")
	form := replyForm{Text: ctx.FormValue("text"), QuickReplies: ctx.FormValue("quick_replies"), Buttons: ctx.FormValue("buttons")}
	m := messagingapi.OutboundMessage{Type: "text", Text: form.Text, QuickReplies: lines(form.QuickReplies), Buttons: buttonsOf(form.Buttons)}
	_, err := c.app.Reply(ctx.Request().Context(), operatorOf(ctx), id, convID, formID(ctx), m)
	sent := conversationPath(id, convID) + "?done=sent#reply"
	if repeated, answer := c.formRepeat(ctx, err, func(string) string { return sent }, "the conversation's messages below", func(status int, message string) error {
		return c.drawConversation(ctx, status, message, replyForm{})
	}); repeated {
		return answer
	}
	if err != nil {
		return c.inboxActionError(ctx, err, "Your reply was not sent", form)
	}
	return ctx.Redirect(http.StatusSeeOther, sent)
}

// sendSuggestion sends the waiting suggestion, as drafted or, from the
// edit form (edited=1), with each text as edited.
func (c *Console) sendSuggestion(ctx echo.Context) error {
	id, convID := ctx.Param("id"), ctx.Param("conv")
	op := operatorOf(ctx)
	var edited []messagingapi.OutboundMessage
	if ctx.FormValue("edited") != "" {
		conv, err := c.app.Conversation(ctx.Request().Context(), op, id, convID, "")
		if errors.Is(err, app.ErrConversationNotFound) {
			return conversationNotFound()
		}
		if err != nil {
			return c.inboxActionError(ctx, err, "The suggestion was not sent", replyForm{})
		}
		if conv.Suggestion == nil {
			return c.drawConversation(ctx, http.StatusNotFound, noSuggestion, replyForm{})
		}
		for i, m := range conv.Suggestion.Messages {
			if m.Type != "carousel" {
				m.Text = ctx.FormValue("text_" + strconv.Itoa(i))
			}
			edited = append(edited, m)
		}
	}
	_, err := c.app.SendSuggestion(ctx.Request().Context(), op, id, convID, ctx.FormValue("seen"), edited)
	switch {
	case errors.Is(err, app.ErrNoSuggestion):
		return c.drawConversation(ctx, http.StatusNotFound, "The suggestion was not sent. "+noSuggestion, replyForm{})
	case errors.Is(err, app.ErrSuggestionReplaced):
		return c.drawConversation(ctx, http.StatusConflict, "The suggestion was not sent: "+newerSuggestion, replyForm{})
	case err != nil:
		return c.inboxActionError(ctx, err, "The suggestion was not sent", replyForm{})
	}
	return ctx.Redirect(http.StatusSeeOther, conversationPath(id, convID)+"?done=suggestion-sent")
}

// changeConversation makes a change to the conversation's chat state:
// discard the suggestion, hand over, resume the AI, add tags, assign.
func (c *Console) changeConversation(ctx echo.Context) error {
	id, convID := ctx.Param("id"), ctx.Param("conv")
	change := app.ConversationChange{Action: ctx.Param("change"), Assignee: strings.TrimSpace(ctx.FormValue("assignee")), Seen: ctx.FormValue("seen")}
	for _, t := range strings.Split(ctx.FormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			change.Tags = append(change.Tags, t)
		}
	}
	if change.Action == app.ChangeAssign && ctx.FormValue("me") != "" {
		change.Assignee = operatorOf(ctx).Email
	}
	_, err := c.app.ChangeConversation(ctx.Request().Context(), operatorOf(ctx), id, convID, change)
	if errors.Is(err, app.ErrUnknownChange) {
		return errs.NotFound(errs.CodeNotFound, "no such page")
	}
	if errors.Is(err, app.ErrSuggestionReplaced) {
		return c.drawConversation(ctx, http.StatusConflict, "The suggestion was not discarded: "+newerSuggestion, replyForm{})
	}
	if err != nil {
		return c.inboxActionError(ctx, err, "Nothing was changed", replyForm{})
	}
	return ctx.Redirect(http.StatusSeeOther, conversationPath(id, convID)+"?done="+url.QueryEscape(change.Action))
}

// inboxActionError draws the conversation page with an action's refusal
// in words (what was not done, and why), the reply box as typed; a
// conversation not the workspace's is the 404 page.
func (c *Console) inboxActionError(ctx echo.Context, err error, notDone string, form replyForm) error {
	if errors.Is(err, app.ErrConversationNotFound) {
		return conversationNotFound()
	}
	if errors.Is(err, app.ErrWorkspaceNotFound) {
		return toHTTP(err)
	}
	e, message, ok := c.refusal(ctx, "conversation", err)
	if !ok {
		return err
	}
	switch e.Code {
	case "outside_messaging_window":
		message = "The platform's 24-hour window closed: it takes no reply until the customer writes again."
	case errs.CodeInvalidRequest:
		message = fullStop(e.Message)
	}
	return c.drawConversation(ctx, e.Status, notDone+". "+message, form)
}

// chatRunPage is a run's trace, whatever its kind: a conversation's chat
// runs link here.
func (c *Console) chatRunPage(ctx echo.Context) error {
	v := c.view(ctx, "Run")
	v.Workspace, v.Current = ctx.Param("id"), "inbox"
	t, err := c.app.ChatRunTrace(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), ctx.Param("runId"))
	if errors.Is(err, app.ErrRunNotFound) {
		return errs.NotFound("run_not_found", "this workspace has no such run: check its id")
	}
	if err != nil {
		return c.serviceError(ctx, "run", v, err)
	}
	// The conversation page's links name the conversation to go back to.
	back := workspacePath(ctx.Param("id")) + "/conversations"
	if conv := ctx.QueryParam("conversation"); app.IsID(conv) {
		back = conversationPath(ctx.Param("id"), conv)
	} else if t.Run.FlowID != "" {
		back = flowPath(ctx, t.Run.FlowID)
	}
	v.Title = "Run " + t.Run.ID
	v.Page = traceView(t, back)
	return c.render(ctx, http.StatusOK, "run", v)
}

// inboxEvents is the inbox pages' event stream: a "change" event, its data
// the conversation's id, each time messaging says one of the workspace's
// conversations changed. The page's script redraws what it shows.
func (c *Console) inboxEvents(ctx echo.Context) error {
	id := ctx.Param("id")
	if _, err := c.app.Workspace(ctx.Request().Context(), operatorOf(ctx), id); err != nil {
		return c.serviceError(ctx, "error", c.view(ctx, "Inbox"), err)
	}
	if c.inboxChanges == nil {
		return errs.New(http.StatusServiceUnavailable, "unavailable", "live updates are off on this console: reload the page to see new messages")
	}
	changes := make(chan string, 64)
	stop, err := c.inboxChanges.Subscribe(id, func(ch messagingapi.InboxChange) {
		select {
		case changes <- ch.ConversationID:
		default:
			// The page is far behind: one redraw catches it up anyway.
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	sse := httpx.StartSSE(ctx.Response())
	if sse.Raw([]byte("retry: 2000\n\n")) != nil || sse.Event("ready", []byte("{}")) != nil {
		return nil
	}
	ping := time.NewTicker(inboxPing)
	defer ping.Stop()
	r := ctx.Request()
	// The stream ends with its session: nothing more is sent once the
	// operator signed out or the session expired.
	live := func() bool {
		ok, err := c.app.SessionLive(r.Context(), tokenOf(ctx))
		if err != nil {
			c.log.Warn("inbox stream: read session", zap.Error(err), zap.String("request_id", requestIDOf(ctx)))
		}
		return ok
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-ping.C:
			if !live() || sse.Comment("ping") != nil {
				return nil
			}
		case conv := <-changes:
			if !live() || sse.Event("change", []byte(conv)) != nil {
				return nil
			}
		}
	}
}
