package http

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

const workspaceKey = "workspace_id"

// requireWorkspace takes the workspace the gateway authenticated; a request
// without one did not come through the gateway.
func requireWorkspace(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ws := rpc.WorkspaceID(c.Request().Context())
		if !channel.IsID(ws) {
			return errs.Unauthorized("the request carries no authenticated workspace")
		}
		c.Set(workspaceKey, strings.ToLower(ws))
		return next(c)
	}
}

func workspaceOf(c echo.Context) string {
	ws, _ := c.Get(workspaceKey).(string)
	return ws
}

// GET /v1/channels
func (h *Handlers) listChannels(c echo.Context) error {
	chans, err := h.app.ListChannels(c.Request().Context(), workspaceOf(c))
	if err != nil {
		return toHTTP(err)
	}
	out := make([]channelJSON, len(chans))
	for i, ch := range chans {
		out[i] = toChannelJSON(ch)
	}
	return c.JSON(http.StatusOK, map[string]any{"channels": out})
}

// GET /v1/conversations?platform=&before=&limit=
//
// Most recent message first. next_before is the cursor: pass it as before
// to get the following page; it is null on the last page. Conversations
// whose last messages share a timestamp are never split across pages, so
// the walk meets each conversation exactly once: a page stops before such a
// group when the group would run past limit, and next_before is then one
// microsecond above the group's timestamp. Only when one group alone holds
// more than limit conversations does a page carry the whole group and
// exceed limit.
func (h *Handlers) listConversations(c echo.Context) error {
	q := conversation.ConversationQuery{WorkspaceID: workspaceOf(c)}
	if p := c.QueryParam("platform"); p != "" {
		kind, ok := channel.ParseKind(p)
		if !ok {
			return errs.InvalidRequest("platform must be one of messenger, instagram, telegram, webchat")
		}
		q.Platform = kind
	}
	var err error
	if q.Before, q.Limit, err = pageParams(c); err != nil {
		return err
	}
	page, err := h.app.ListConversations(c.Request().Context(), q)
	if err != nil {
		return toHTTP(err)
	}
	out := make([]conversationJSON, len(page.Conversations))
	for i, conv := range page.Conversations {
		out[i] = toConversationJSON(conv)
	}
	return c.JSON(http.StatusOK, map[string]any{"conversations": out, "next_before": optionalTimestamp(page.NextBefore)})
}

// GET /v1/conversations/:id/messages?before=&limit=
//
// Newest first, paged like the conversations.
func (h *Handlers) listMessages(c echo.Context) error {
	before, limit, err := pageParams(c)
	if err != nil {
		return err
	}
	page, err := h.app.ListMessages(c.Request().Context(), workspaceOf(c), c.Param("id"), before, limit)
	if err != nil {
		return toHTTP(err)
	}
	out := make([]messageJSON, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = toMessageJSON(m)
	}
	return c.JSON(http.StatusOK, map[string]any{"messages": out, "next_before": optionalTimestamp(page.NextBefore)})
}

// pageParams reads before (RFC 3339) and limit (1..100, default 50).
func pageParams(c echo.Context) (*time.Time, int, error) {
	limit := conversation.DefaultPageSize
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > conversation.MaxPageSize {
			return nil, 0, errs.InvalidRequest("limit must be an integer from 1 to %d", conversation.MaxPageSize)
		}
		limit = n
	}
	s := c.QueryParam("before")
	if s == "" {
		return nil, limit, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && strings.Contains(s, " ") {
		// An unencoded "+01:00" offset arrives as " 01:00".
		t, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(s, " ", "+"))
	}
	if err != nil {
		return nil, 0, errs.InvalidRequest("before must be an RFC 3339 timestamp such as 2026-11-22T10:00:00Z")
	}
	// The store keeps microseconds: "before" a time between two microseconds
	// includes the earlier one.
	if r := t.Sub(t.Truncate(time.Microsecond)); r > 0 {
		t = t.Add(time.Microsecond - r)
	}
	t = t.UTC()
	return &t, limit, nil
}
