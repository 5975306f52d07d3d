package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/paging"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

// The website widget's public routes, on the messaging listener next to
// platform ingress (ARCHITECTURE.md §5):
//
//	GET  /webchat/:channel_id            the widget page (embed it in an iframe)
//	GET  /webchat/:channel_id/embed.js   a launcher: a chat button that opens the widget
//	POST /webchat/:channel_id/session    a new visitor: 201 {visitor_token, visitor_id}
//	GET  /webchat/:channel_id/history    the visitor's latest messages, oldest first
//	POST /webchat/:channel_id/messages   {text, client_message_id?, name?, quick_reply_payload?}
//	POST /webchat/:channel_id/postbacks  {payload, client_message_id?, name?}
//	GET  /webchat/:channel_id/events     SSE: ready, message, typing; ": ping" keep-alives
//
// Every route but the page and embed.js needs the visitor token, in the
// X-Visitor-Token header (or, for EventSource, which cannot send headers,
// the token query parameter). Unknown or non-webchat channels are 404
// channel_not_found, a bad token 401 unauthorized.

// VisitorTokenHeader carries the visitor token.
const VisitorTokenHeader = "X-Visitor-Token"

// Body bounds of the widget's posts. A message of 4096 characters, each
// escaped as \uXXXX, stays within maxMessageBody.
const (
	maxMessageBody  = 32 << 10
	maxPostbackBody = 8 << 10
	defaultHistory  = 50
	maxHistory      = 100
)

// WebchatOptions wire the widget's routes.
type WebchatOptions struct {
	App *app.Webchat
	// Bus relays pushes between instances and holds this instance's
	// widget streams.
	Bus *webchatadapter.Bus
	// PingInterval is the SSE keep-alive (SSE_PING_INTERVAL).
	PingInterval time.Duration
	// MessagesPerMinute bounds one visitor's messages and taps
	// (WEBCHAT_MESSAGES_PER_MINUTE), per instance.
	MessagesPerMinute int
	// FrameAncestors are the sites that may embed the widget, as the CSP
	// frame-ancestors directive takes them (WEBCHAT_FRAME_ANCESTORS).
	FrameAncestors string
}

type webchatHandlers struct {
	app     *app.Webchat
	bus     *webchatadapter.Bus
	limiter *webchatadapter.Limiter
	opts    WebchatOptions
	metrics *app.Metrics
	log     *zap.Logger
}

func (h *Handlers) registerWebchat(e *echo.Echo) {
	o := h.opts.Webchat
	if o == nil {
		return
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.MessagesPerMinute <= 0 {
		o.MessagesPerMinute = 30
	}
	if o.FrameAncestors == "" {
		o.FrameAncestors = "*"
	}
	w := &webchatHandlers{
		app: o.App, bus: o.Bus, opts: *o, metrics: h.metrics, log: h.log,
		limiter: webchatadapter.NewLimiter(o.MessagesPerMinute, time.Minute),
	}
	g := e.Group("/webchat/:channel_id")
	g.GET("", w.page)
	g.GET("/embed.js", w.embedScript)
	g.POST("/session", w.session)
	g.GET("/history", w.history)
	g.POST("/messages", w.message)
	g.POST("/postbacks", w.postback)
	g.GET("/events", w.events)
}

var errWebchatNotFound = errs.NotFound(CodeChannelNotFound, "no webchat channel with this id")

func (w *webchatHandlers) channel(c echo.Context) (channel.Channel, error) {
	ch, err := w.app.Channel(c.Request().Context(), c.Param("channel_id"))
	if errors.Is(err, channel.ErrNotFound) {
		return channel.Channel{}, errWebchatNotFound
	}
	return ch, err
}

// visitor authenticates the visitor on the channel of the path.
func (w *webchatHandlers) visitor(c echo.Context, token string) (channel.Channel, webchat.Visitor, error) {
	ch, err := w.channel(c)
	if err != nil {
		return channel.Channel{}, webchat.Visitor{}, err
	}
	v, err := w.app.Visitor(ch, token)
	if err != nil {
		return channel.Channel{}, webchat.Visitor{}, errs.Unauthorized(VisitorTokenHeader +
			" is missing or not valid for this channel; POST /webchat/{channel_id}/session for a new visitor")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return ch, v, nil
}

// allow counts one message or tap of the visitor.
func (w *webchatHandlers) allow(ch channel.Channel, v webchat.Visitor) error {
	ok, wait := w.limiter.Allow(ch.ID + "/" + v.ID)
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited,
		"at most %d messages per minute; retry in %d seconds", w.opts.MessagesPerMinute, secs).
		WithHeader("Retry-After", strconv.Itoa(secs))
}

// bind decodes a JSON body of at most max bytes.
func bind(c echo.Context, max int64, v any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, max+1))
	if err != nil {
		return errs.InvalidRequest("request body could not be read")
	}
	if int64(len(body)) > max {
		return errs.Newf(http.StatusRequestEntityTooLarge, errs.CodeRequestTooLarge, "request body must be at most %d bytes", max)
	}
	return httpx.DecodeJSON(bytes.NewReader(body), v)
}

// POST /webchat/:channel_id/session
//
// A new visitor and their token. Nothing is stored: the token is the
// visitor id signed with the channel's secret, and the contact appears with
// the first message.
func (w *webchatHandlers) session(c echo.Context) error {
	ch, err := w.channel(c)
	if err != nil {
		return err
	}
	s := w.app.NewVisitor(ch)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]string{"visitor_token": s.Token, "visitor_id": s.Visitor.ID})
}

// GET /webchat/:channel_id/history?limit=
func (w *webchatHandlers) history(c echo.Context) error {
	ch, v, err := w.visitor(c, c.Request().Header.Get(VisitorTokenHeader))
	if err != nil {
		return err
	}
	limit, err := paging.ParseLimit(c.QueryParam("limit"), defaultHistory, maxHistory)
	if err != nil {
		return err
	}
	msgs, err := w.app.History(c.Request().Context(), ch, v, limit)
	if err != nil {
		return toHTTP(err)
	}
	out := make([]webchatadapter.Message, len(msgs))
	for i, m := range msgs {
		out[i] = webchatadapter.FromStored(m)
	}
	return c.JSON(http.StatusOK, map[string]any{"messages": out})
}

type visitorMessageRequest struct {
	Text              string `json:"text"`
	ClientMessageID   string `json:"client_message_id"`
	Name              string `json:"name"`
	QuickReplyPayload string `json:"quick_reply_payload"`
}

// POST /webchat/:channel_id/messages
//
// 201 {message, duplicate:false} when stored; 200 {message, duplicate:true}
// for a retry of a client_message_id stored before.
func (w *webchatHandlers) message(c echo.Context) (err error) {
	defer func() { w.countRefusal(err) }()
	ch, v, err := w.visitor(c, c.Request().Header.Get(VisitorTokenHeader))
	if err != nil {
		return err
	}
	if err := w.allow(ch, v); err != nil {
		return err
	}
	var req visitorMessageRequest
	if err := bind(c, maxMessageBody, &req); err != nil {
		return err
	}
	got, err := w.app.Say(c.Request().Context(), ch, v, webchat.VisitorMessage{
		Text: req.Text, ClientMessageID: req.ClientMessageID, Name: req.Name, QuickReplyPayload: req.QuickReplyPayload,
	})
	if err != nil {
		return toHTTP(err)
	}
	return w.received(c, ch, v, got)
}

type visitorPostbackRequest struct {
	Payload         string `json:"payload"`
	ClientMessageID string `json:"client_message_id"`
	Name            string `json:"name"`
}

// POST /webchat/:channel_id/postbacks
//
// A tap on a postback button; the payload must be one the conversation
// was sent (400 invalid_request otherwise), and the stored message carries
// that button's title. Answers like messages.
func (w *webchatHandlers) postback(c echo.Context) (err error) {
	defer func() { w.countRefusal(err) }()
	ch, v, err := w.visitor(c, c.Request().Header.Get(VisitorTokenHeader))
	if err != nil {
		return err
	}
	if err := w.allow(ch, v); err != nil {
		return err
	}
	var req visitorPostbackRequest
	if err := bind(c, maxPostbackBody, &req); err != nil {
		return err
	}
	got, err := w.app.Tap(c.Request().Context(), ch, v, webchat.VisitorPostback{
		Payload: req.Payload, ClientMessageID: req.ClientMessageID, Name: req.Name,
	})
	if err != nil {
		return toHTTP(err)
	}
	return w.received(c, ch, v, got)
}

// ingressRateLimited is a visitor message refused for the visitor's rate.
const ingressRateLimited = "rate_limited"

// countRefusal counts a visitor message or tap that was refused before it
// was stored, like the other platforms' ingress refusals. (Receive counts
// what it stores, repeats and its own failures.)
func (w *webchatHandlers) countRefusal(err error) {
	e, ok := errs.As(err)
	if !ok || e.Status >= http.StatusInternalServerError {
		return
	}
	outcome := app.IngressInvalid
	switch e.Status {
	case http.StatusNotFound:
		outcome = app.IngressNotFound
	case http.StatusUnauthorized:
		outcome = app.IngressUnauthorized
	case http.StatusTooManyRequests:
		outcome = ingressRateLimited
	}
	w.metrics.Ingress(string(channel.KindWebchat), outcome)
}

// received answers a stored visitor message and shows it in the visitor's
// other open widgets (tabs, devices).
func (w *webchatHandlers) received(c echo.Context, ch channel.Channel, v webchat.Visitor, got app.Received) error {
	msg := webchatadapter.FromStored(got.Message)
	if got.Duplicate {
		return c.JSON(http.StatusOK, map[string]any{"message": msg, "duplicate": true})
	}
	if err := w.bus.Publish(ch.ID, v.ID, webchatadapter.EventMessage, msg); err != nil {
		// Stored and forwarded; only the other tabs miss it until they
		// reload the history.
		w.log.Warn("webchat echo not published", zap.String("channel_id", ch.ID), zap.Error(err))
	}
	return c.JSON(http.StatusCreated, map[string]any{"message": msg, "duplicate": false})
}

// sseData writes one event's data, one data line per line of the payload
// (JSON has none, but the stream must never be corrupted by one).
func sseData(event string, data []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\n", event)
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}
