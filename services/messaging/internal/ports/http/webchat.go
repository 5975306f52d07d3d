package http

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/pkg/ratelimit"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

// The website widget's public routes, on the messaging listener next to
// platform ingress (docs/channels.md "Webchat"):
//
//	GET  /webchat/:channel_id            the widget page (embed it in an iframe)
//	GET  /webchat/:channel_id/embed.js   a launcher: a chat button that opens the widget
//	POST /webchat/:channel_id/session    a new visitor: 201 {visitor_token, visitor_id, expires_at}
//	GET  /webchat/:channel_id/history    the visitor's latest messages, oldest first
//	POST /webchat/:channel_id/messages   {text, client_message_id?, name?, quick_reply_payload?}
//	POST /webchat/:channel_id/postbacks  {payload, client_message_id?, name?}
//	GET  /webchat/:channel_id/events     SSE: ready, message, typing; ": ping" keep-alives
//
// Every route but the page, embed.js and session needs the visitor token,
// in the X-Visitor-Token header and nowhere else: never in a URL, where
// access logs, proxies and the browser's history would keep it. (The
// widget reads the event stream with fetch, which can send the header,
// rather than EventSource, which cannot.) Unknown or non-webchat channels
// are 404 channel_not_found, a bad or expired token 401 unauthorized.
//
// Abuse bounds, counted in Redis so they hold across instances, per client
// address as WebchatDeps.Proxies finds it: new sessions per minute per address;
// messages and taps per minute per visitor and per address; open streams
// per visitor, per address and per channel. Past one: 429 rate_limited
// with Retry-After.

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

// WebchatDeps are what the widget's routes need. The bounds have no
// defaults here: they are settings, whose defaults are the config's.
type WebchatDeps struct {
	App *app.Webchat
	// Bus relays pushes between instances and holds this instance's
	// widget streams.
	Bus *webchatadapter.Bus
	// PingInterval is the SSE keep-alive (SSE_PING_INTERVAL).
	PingInterval time.Duration
	// Limiter counts the per-minute bounds, Streams holds the streams'
	// leases (both in Redis).
	Limiter *ratelimit.Limiter
	Streams *ratelimit.Slots
	// MessagesPerMinute bounds one visitor's messages and taps
	// (WEBCHAT_MESSAGES_PER_MINUTE), AddressMessagesPerMinute one client
	// address's (WEBCHAT_ADDRESS_MESSAGES_PER_MINUTE).
	MessagesPerMinute        int
	AddressMessagesPerMinute int
	// SessionsPerMinute bounds the sessions one client address starts or
	// renews (WEBCHAT_SESSIONS_PER_MINUTE).
	SessionsPerMinute int
	// StreamsPerVisitor, StreamsPerAddress and StreamsPerChannel bound the
	// open streams across instances (WEBCHAT_STREAMS_PER_*); StreamLease is
	// how long a stream's place outlives its instance (WEBCHAT_STREAM_LEASE).
	StreamsPerVisitor int
	StreamsPerAddress int
	StreamsPerChannel int
	StreamLease       time.Duration
	// Proxies say who the client is (TRUSTED_PROXIES).
	Proxies httpx.Proxies
	// FrameAncestors are the sites that may embed the widget, as the CSP
	// frame-ancestors directive takes them (WEBCHAT_FRAME_ANCESTORS).
	FrameAncestors string
}

type webchatHandlers struct {
	app      *app.Webchat
	bus      *webchatadapter.Bus
	deps     WebchatDeps
	observer Observer
	log      *zap.Logger
}

func registerWebchat(e *echo.Echo, d WebchatDeps, observer Observer, log *zap.Logger) {
	if d.PingInterval <= 0 {
		d.PingInterval = 15 * time.Second
	}
	if d.FrameAncestors == "" {
		d.FrameAncestors = "*"
	}
	w := &webchatHandlers{app: d.App, bus: d.Bus, deps: d, observer: observer, log: log}
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

// visitor authenticates the visitor on the channel of the path; a request
// it refuses is answered without its body (httpx.DropBody).
func (w *webchatHandlers) visitor(c echo.Context, token string) (channel.Channel, webchat.Visitor, error) {
	ch, err := w.channel(c)
	if err != nil {
		httpx.DropBody(c)
		return channel.Channel{}, webchat.Visitor{}, err
	}
	v, err := w.app.Visitor(ch, token)
	if err != nil {
		httpx.DropBody(c)
		return channel.Channel{}, webchat.Visitor{}, errs.Unauthorized(VisitorTokenHeader +
			" is missing or not valid for this channel; POST /webchat/{channel_id}/session for a new visitor")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return ch, v, nil
}

// clientKey is the client address as the per-address bounds count it.
func (w *webchatHandlers) clientKey(c echo.Context) string {
	return httpx.LimitKey(w.deps.Proxies.ClientAddr(c.Request()))
}

// limited is 429 rate_limited telling the client when to retry.
func limited(retry time.Duration, format string, args ...any) *errs.Error {
	secs := ratelimit.Seconds(retry)
	return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited, format+"; retry in %d seconds", append(args, secs)...).
		WithHeader(ratelimit.HeaderRetryAfter, strconv.Itoa(secs))
}

// limiterDown answers a request whose bound cannot be counted: refused
// rather than let through unbounded, as the gateway does.
func (w *webchatHandlers) limiterDown(c echo.Context, err error) error {
	w.log.Warn("webchat limiter unavailable", zap.Error(err),
		zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
	return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "the chat is busy; retry shortly").
		WithHeader(ratelimit.HeaderRetryAfter, "2")
}

// allow counts one message or tap of the visitor and of their address, or
// neither when either is at its bound; a request it refuses is answered
// without its body (httpx.DropBody).
func (w *webchatHandlers) allow(c echo.Context, ch channel.Channel, v webchat.Visitor) (err error) {
	defer func() {
		if err != nil {
			httpx.DropBody(c)
		}
	}()
	visitor := ratelimit.Bucket{Name: "webchat:messages:visitor:" + ch.ID + ":" + v.ID, Limit: w.deps.MessagesPerMinute}
	res, err := w.deps.Limiter.AllowAll(c.Request().Context(), visitor,
		ratelimit.Bucket{Name: "webchat:messages:addr:" + w.clientKey(c), Limit: w.deps.AddressMessagesPerMinute})
	switch {
	case err != nil:
		return w.limiterDown(c, err)
	case res.Allowed:
		return nil
	case res.Bucket == visitor.Name:
		return limited(res.RetryAfter(), "at most %d messages per minute", res.Limit)
	default:
		return limited(res.RetryAfter(), "at most %d messages per minute from one address", res.Limit)
	}
}

// bind decodes a JSON body of at most max bytes.
func bind(c echo.Context, max int64, v any) error {
	return httpx.DecodeJSONWithin(c.Request().Body, max, v)
}

// POST /webchat/:channel_id/session
//
// 201 {visitor_token, visitor_id, expires_at}. With a good X-Visitor-Token,
// a fresh token of the same visitor (the widget renews its token while it
// is good); otherwise a new visitor. Nothing is stored: the token is the
// visitor id and its expiry signed with the channel's secret, and the
// contact appears with the first message. Every call counts against the
// address's WEBCHAT_SESSIONS_PER_MINUTE, checked before anything else.
func (w *webchatHandlers) session(c echo.Context) error {
	res, err := w.deps.Limiter.Allow(c.Request().Context(), "webchat:sessions:"+w.clientKey(c), w.deps.SessionsPerMinute)
	if err != nil {
		return w.limiterDown(c, err)
	}
	if !res.Allowed {
		return limited(res.RetryAfter(), "at most %d new chat sessions per minute from one address", res.Limit)
	}
	ch, err := w.channel(c)
	if err != nil {
		return err
	}
	s, err := w.app.Renew(ch, c.Request().Header.Get(VisitorTokenHeader))
	if err != nil {
		s = w.app.NewVisitor(ch)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, messagingapi.WebchatSession{
		VisitorToken: s.Token, VisitorID: s.Visitor.ID, ExpiresAt: httpx.Timestamp(s.ExpiresAt),
	})
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
	out := messagingapi.WebchatHistory{Messages: make([]messagingapi.WebchatMessage, len(msgs))}
	for i, m := range msgs {
		out.Messages[i] = webchatadapter.FromStored(m)
	}
	return c.JSON(http.StatusOK, out)
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
	if err := w.allow(c, ch, v); err != nil {
		return err
	}
	var req messagingapi.VisitorMessage
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
	if err := w.allow(c, ch, v); err != nil {
		return err
	}
	var req messagingapi.VisitorPostback
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
	w.observer.Ingress(string(channel.KindWebchat), outcome)
}

// received answers a stored visitor message and shows it in the visitor's
// other open widgets (tabs, devices).
func (w *webchatHandlers) received(c echo.Context, ch channel.Channel, v webchat.Visitor, got app.Received) error {
	msg := webchatadapter.FromStored(got.Message)
	if got.Duplicate {
		return c.JSON(http.StatusOK, messagingapi.WebchatReceived{Message: msg, Duplicate: true})
	}
	if err := w.bus.Publish(ch.ID, v.ID, messagingapi.WebchatEventMessage, msg); err != nil {
		// Stored and forwarded; only the other tabs miss it until they
		// reload the history.
		w.log.Warn("webchat echo not published", zap.String("channel_id", ch.ID), zap.Error(err))
	}
	return c.JSON(http.StatusCreated, messagingapi.WebchatReceived{Message: msg})
}
