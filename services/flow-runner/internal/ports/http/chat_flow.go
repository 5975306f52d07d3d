package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ids"
)

// A channel's chat flow (parleyctl channel set-flow): PUT assigns one, GET
// reads the one that answers now, DELETE clears it. Each answers the
// channel's chat flow as it then is.

// channelParam is the route's channel id.
func channelParam(c echo.Context) (string, error) {
	id := c.Param("channel_id")
	if !ids.Valid(id) {
		return "", errs.InvalidID("channel_id", "channel")
	}
	return id, nil
}

func chatFlowAnswer(ws, channelID, flowID string) flowrunnerapi.ChatFlowAnswer {
	return flowrunnerapi.ChatFlowAnswer{ChatFlow: flowrunnerapi.ChatFlow{WorkspaceID: ws, ChannelID: channelID, FlowID: flowID}}
}

func (h *handlers) setChatFlow(c echo.Context) error {
	channelID, err := channelParam(c)
	if err != nil {
		return err
	}
	var req flowrunnerapi.ChatFlow
	if err := httpx.DecodeJSON(c.Request().Body, &req); err != nil {
		return err
	}
	if !ids.Valid(req.WorkspaceID) {
		return errs.InvalidID("workspace_id", "workspace")
	}
	if req.ChannelID != "" && req.ChannelID != channelID {
		return errs.InvalidRequest("channel_id: %q is not the channel of the path", req.ChannelID)
	}
	if req.FlowID == "" {
		return errs.InvalidRequest("flow_id is required; DELETE clears the channel's chat flow")
	}
	if err := h.app.SetChatFlow(c.Request().Context(), req.WorkspaceID, channelID, req.FlowID); err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, chatFlowAnswer(req.WorkspaceID, channelID, req.FlowID))
}

func (h *handlers) getChatFlow(c echo.Context) error {
	channelID, err := channelParam(c)
	if err != nil {
		return err
	}
	ws, err := workspaceQuery(c)
	if err != nil {
		return err
	}
	flowID, err := h.app.ChatFlow(c.Request().Context(), ws, channelID)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, chatFlowAnswer(ws, channelID, flowID))
}

func (h *handlers) clearChatFlow(c echo.Context) error {
	channelID, err := channelParam(c)
	if err != nil {
		return err
	}
	ws, err := workspaceQuery(c)
	if err != nil {
		return err
	}
	if err := h.app.ClearChatFlow(c.Request().Context(), ws, channelID); err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, chatFlowAnswer(ws, channelID, ""))
}
