package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// POST /admin/channels {workspace_id, kind, external_id?, token?, secret?}
func (h *adminHandlers) createChannel(c echo.Context) error {
	var req messagingapi.NewChannel
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	ch, err := h.app.CreateChannel(c.Request().Context(), channel.NewChannel{
		WorkspaceID: req.WorkspaceID, Kind: req.Kind, ExternalID: req.ExternalID, Token: req.Token, Secret: req.Secret,
	})
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusCreated, messagingapi.AdminChannelAnswer{Channel: toAPIAdminChannel(ch)})
}

// GET /admin/channels?workspace_id=W
func (h *adminHandlers) listChannels(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	chans, err := h.app.ListChannels(c.Request().Context(), ws)
	if err != nil {
		return toHTTP(err)
	}
	out := messagingapi.AdminChannelList{Channels: make([]messagingapi.AdminChannel, len(chans))}
	for i, ch := range chans {
		out.Channels[i] = toAPIAdminChannel(ch)
	}
	return c.JSON(http.StatusOK, out)
}

// GET /admin/channels/:id
func (h *adminHandlers) getChannel(c echo.Context) error {
	ch, err := h.app.GetChannel(c.Request().Context(), c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.AdminChannelAnswer{Channel: toAPIAdminChannel(ch)})
}

// PATCH /admin/channels/:id {ai_mode}
func (h *adminHandlers) setChannelAIMode(c echo.Context) error {
	var req messagingapi.SetChannelAIMode
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	if req.AIMode == nil {
		return errs.InvalidRequest("ai_mode is required (auto, suggest or external)")
	}
	ch, err := h.app.SetChannelAIMode(c.Request().Context(), c.Param("id"), *req.AIMode)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.AdminChannelAnswer{Channel: toAPIAdminChannel(ch)})
}
