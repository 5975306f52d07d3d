// Package http is the messaging service's HTTP surfaces, one constructor
// each: NewPublic is what it serves on its own address (platform ingress
// and the website widget), NewAPI the public /v1 routes the gateway
// forwards over the rpc "api" endpoint, NewAdmin the /admin routes of
// parleyctl, the console and the flow-runner over "admin". Handlers bind and render the
// bodies of pkg/api/messaging and translate domain errors to *errs.Error;
// the rules are the app's.
package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"io"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/app"
)

// Observer counts what the ports refuse before the app sees it: platform
// deliveries and widget messages, by the app's Ingress* outcomes.
type Observer interface {
	Ingress(platform, outcome string)
}

// PublicDeps are what the public listener's routes need.
type PublicDeps struct {
	App      *app.App
	Observer Observer
	Log      *zap.Logger
	// MetaAppSecret verifies X-Hub-Signature-256 (META_APP_SECRET).
	MetaAppSecret string
	// MetaVerifyToken answers hub.challenge (META_VERIFY_TOKEN).
	MetaVerifyToken string
	// MetaProfiles reads new Messenger and Instagram customers' names and
	// pictures; nil leaves them empty.
	MetaProfiles MetaProfiles
	// Webchat serves the website widget.
	Webchat WebchatDeps
}

// NewPublic returns the public listener's routes: platform ingress and the
// website widget (the service adds the probes).
func NewPublic(d PublicDeps) *echo.Echo {
	e := httpx.NewEcho(d.Log)
	in := &ingressHandlers{app: d.App, observer: d.Observer, log: d.Log, metaAppSecret: d.MetaAppSecret,
		metaVerifyToken: d.MetaVerifyToken, metaProfiles: d.MetaProfiles}
	e.POST("/ingress/telegram/:channel_id", in.telegramIngress)
	e.GET("/ingress/meta", in.metaVerify)
	e.POST("/ingress/meta", in.metaIngress)
	registerWebchat(e, d.Webchat, d.Observer, d.Log)
	return e
}

// ingressHandlers take the platforms' deliveries.
type ingressHandlers struct {
	app             *app.App
	observer        Observer
	log             *zap.Logger
	metaAppSecret   string
	metaVerifyToken string
	metaProfiles    MetaProfiles
}

// secretEqual compares secrets in constant time, whatever their lengths.
func secretEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// APIDeps are what the /v1 routes need.
type APIDeps struct {
	App *app.App
	// SendKeys hold the send routes' Idempotency-Keys; a keyed send
	// without them is 503.
	SendKeys SendKeys
	Log      *zap.Logger
}

// NewAPI returns the public /v1 routes (rpc endpoint "api"); the gateway
// has authenticated the workspace.
func NewAPI(d APIDeps) *echo.Echo {
	e := httpx.NewEcho(d.Log)
	h := &apiHandlers{app: d.App, sendKeys: d.SendKeys, log: d.Log}
	g := e.Group("/v1", requireWorkspace)
	g.GET("/channels", h.listChannels)
	g.GET("/conversations", h.listConversations)
	g.GET("/conversations/:id/messages", h.listMessages)
	g.POST("/messages", h.sendMessage)
	g.POST("/image", h.sendImage)
	g.POST("/carousel", h.sendCarousel)
	g.POST("/typing", h.sendTyping)
	g.GET("/comments/:id", h.getComment)
	g.POST("/comments/:id/reply", h.replyToComment)
	g.POST("/comments/:id/private-reply", h.privateReplyToComment)
	return e
}

// apiHandlers serve the /v1 routes.
type apiHandlers struct {
	app      *app.App
	sendKeys SendKeys
	log      *zap.Logger
}

// AdminDeps are what the operator routes need.
type AdminDeps struct {
	App *app.App
	// ChatKeys hold the keys of the chat runs' sends and drafts; a send or
	// draft without them is 503.
	ChatKeys ChatKeys
	Log      *zap.Logger
}

// NewAdmin returns the operator routes (rpc endpoint "admin"): channels
// for parleyctl and the console, conversations for the flow-runner's chat
// runs and the console's inbox.
func NewAdmin(d AdminDeps) *echo.Echo {
	e := httpx.NewEcho(d.Log)
	h := &adminHandlers{app: d.App, chatKeys: d.ChatKeys, log: d.Log}
	e.POST("/admin/channels", h.createChannel)
	e.GET("/admin/channels", h.listChannels)
	e.GET("/admin/channels/:id", h.getChannel)
	e.PATCH("/admin/channels/:id", h.setChannelAIMode)

	e.GET("/admin/conversations", h.listInbox)
	e.GET("/admin/conversations/:id", h.getConversation)
	e.GET("/admin/conversations/:id/messages", h.listMessages)
	e.POST("/admin/conversations/:id/messages", h.sendOperatorMessage)
	e.POST("/admin/conversations/:id/ai-messages", h.sendAIMessage)
	e.PUT("/admin/conversations/:id/suggestion", h.draftSuggestion)
	e.GET("/admin/conversations/:id/suggestion", h.getSuggestion)
	e.POST("/admin/conversations/:id/suggestion/send", h.sendSuggestion)
	e.DELETE("/admin/conversations/:id/suggestion", h.discardSuggestion)
	e.POST("/admin/conversations/:id/handover", h.changeConversation(h.handOver))
	e.POST("/admin/conversations/:id/resume-ai", h.changeConversation(h.resumeAI))
	e.POST("/admin/conversations/:id/tags", h.changeConversation(h.addTags))
	e.PUT("/admin/conversations/:id/assignee", h.changeConversation(h.assign))
	e.POST("/admin/conversations/:id/unanswered", h.changeConversation(h.markUnanswered))
	return e
}

// adminHandlers serve the /admin routes.
type adminHandlers struct {
	app      *app.App
	chatKeys ChatKeys
	log      *zap.Logger
}

// decodeCustomerJSON decodes a platform's JSON body of at most limit
// bytes, each NUL character in it replaced by U+FFFD: PostgreSQL cannot
// store a NUL, and a customer's message must not be refused, and
// redelivered forever by its platform, for one (docs/channels.md "What Parley keeps of
// a customer's text").
func decodeCustomerJSON(r io.Reader, limit int64, v any) error {
	body, err := httpx.ReadBody(r, limit)
	if err != nil {
		return err
	}
	return httpx.UnmarshalJSON(httpx.ReplaceNULEscapes(body), v)
}
