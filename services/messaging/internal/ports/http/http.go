// Package http is the messaging service's HTTP surface: platform ingress on
// the public listener, the public /v1 routes the gateway forwards over the
// rpc "api" endpoint, and parleyctl's /admin routes over "admin". Handlers
// translate JSON to use-case calls and domain errors to *errs.Error.
package http

import (
	"crypto/sha256"
	"crypto/subtle"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/messaging/internal/app"
)

// Options are the ingress secrets the handlers check, and what the
// routes hold across instances.
type Options struct {
	// MetaAppSecret verifies X-Hub-Signature-256 (META_APP_SECRET).
	MetaAppSecret string
	// MetaVerifyToken answers hub.challenge (META_VERIFY_TOKEN).
	MetaVerifyToken string
	// MetaProfiles reads new Messenger and Instagram customers' names and
	// pictures; nil leaves them empty.
	MetaProfiles MetaProfiles
	// Webchat serves the website widget; nil leaves its routes out.
	Webchat *WebchatOptions
	// SendKeys hold the send routes' Idempotency-Keys; a keyed send
	// without them is 503.
	SendKeys SendKeys
}

// Handlers serves every route of the service.
type Handlers struct {
	app     *app.App
	metrics *app.Metrics
	opts    Options
	log     *zap.Logger
}

// New returns the handlers over a.
func New(a *app.App, metrics *app.Metrics, opts Options, log *zap.Logger) *Handlers {
	if metrics == nil {
		metrics = app.NewMetrics(nil)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Handlers{app: a, metrics: metrics, opts: opts, log: log}
}

// RegisterPublic adds the platform ingress routes (public listener).
func (h *Handlers) RegisterPublic(e *echo.Echo) {
	e.POST("/ingress/telegram/:channel_id", h.telegramIngress)
	e.GET("/ingress/meta", h.metaVerify)
	e.POST("/ingress/meta", h.metaIngress)
	h.registerWebchat(e)
}

// secretEqual compares secrets in constant time, whatever their lengths.
func secretEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// RegisterAPI adds the public /v1 routes (rpc endpoint "api"); the gateway
// has authenticated the workspace.
func (h *Handlers) RegisterAPI(e *echo.Echo) {
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
}

// RegisterAdmin adds the operator routes (rpc endpoint "admin").
func (h *Handlers) RegisterAdmin(e *echo.Echo) {
	e.POST("/admin/channels", h.createChannel)
	e.GET("/admin/channels", h.adminListChannels)
	e.PATCH("/admin/channels/:id", h.setChannelAIMode)
}
