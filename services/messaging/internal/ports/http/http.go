// Package http is the messaging service's HTTP surface: platform ingress on
// the public listener, the public /v1 routes the gateway forwards over the
// rpc "api" endpoint, and parleyctl's /admin routes over "admin". Handlers
// translate JSON to use-case calls and domain errors to *errs.Error.
package http

import (
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/services/messaging/internal/app"
)

// Handlers serves every route of the service.
type Handlers struct {
	app     *app.App
	metrics *app.Metrics
}

// New returns the handlers over a.
func New(a *app.App, metrics *app.Metrics) *Handlers {
	if metrics == nil {
		metrics = app.NewMetrics(nil)
	}
	return &Handlers{app: a, metrics: metrics}
}

// RegisterPublic adds the platform ingress routes (public listener).
func (h *Handlers) RegisterPublic(e *echo.Echo) {
	e.POST("/ingress/telegram/:channel_id", h.telegramIngress)
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
}

// RegisterAdmin adds the operator routes (rpc endpoint "admin").
func (h *Handlers) RegisterAdmin(e *echo.Echo) {
	e.POST("/admin/channels", h.createChannel)
	e.GET("/admin/channels", h.adminListChannels)
	e.PATCH("/admin/channels/:id", h.setChannelAIMode)
}
