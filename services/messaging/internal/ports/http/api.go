package http

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/bufpool"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

const workspaceKey = "workspace_id"

// requireWorkspace takes the workspace the gateway authenticated; a request
// without one did not come through the gateway.
func requireWorkspace(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
		if err != nil {
			return err
		}
		c.Set(workspaceKey, ws)
		return next(c)
	}
}

func workspaceOf(c echo.Context) string {
	ws, _ := c.Get(workspaceKey).(string)
	return ws
}

// GET /v1/channels
func (h *apiHandlers) listChannels(c echo.Context) error {
	chans, err := h.app.ListChannels(c.Request().Context(), workspaceOf(c))
	if err != nil {
		return toHTTP(err)
	}
	out := messagingapi.ChannelList{Channels: make([]messagingapi.Channel, len(chans))}
	for i, ch := range chans {
		out.Channels[i] = toAPIChannel(ch)
	}
	return c.JSON(http.StatusOK, out)
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
func (h *apiHandlers) listConversations(c echo.Context) error {
	q := conversation.ConversationQuery{WorkspaceID: workspaceOf(c)}
	if err := paging.Once(c.QueryParams(), "platform"); err != nil {
		return err
	}
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
	out := messagingapi.ConversationPage{Conversations: make([]messagingapi.Conversation, len(page.Conversations)), NextBefore: httpx.OptionalTimestamp(page.NextBefore)}
	for i, conv := range page.Conversations {
		out.Conversations[i] = toAPIConversation(conv)
	}
	// The API's busiest page is encoded by hand (AppendJSON, the same
	// bytes as c.JSON); echo's indented form (?pretty) goes the usual way.
	if _, pretty := c.QueryParams()["pretty"]; pretty || c.Echo().Debug {
		return c.JSON(http.StatusOK, out)
	}
	buf := pageBuffers.Get()
	defer pageBuffers.Put(buf)
	*buf = append(out.AppendJSON(*buf), '\n')
	// Blob copies the page into the response, so buf is free once it
	// returns.
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, *buf)
}

// pageBuffers hold the encoded pages of conversations between requests
// (about 17 KB for 50).
var pageBuffers bufpool.Pool

// GET /v1/conversations/:id/messages?before=&limit=
//
// Newest first, paged like the conversations.
func (h *apiHandlers) listMessages(c echo.Context) error {
	before, limit, err := pageParams(c)
	if err != nil {
		return err
	}
	page, err := h.app.ListMessages(c.Request().Context(), workspaceOf(c), c.Param("id"), before, limit)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.MessagePage{Messages: toAPIMessages(page.Messages), NextBefore: httpx.OptionalTimestamp(page.NextBefore)})
}

// pageParams reads before (RFC 3339) and limit (1..100, default 50), each
// given at most once.
func pageParams(c echo.Context) (*time.Time, int, error) {
	if err := paging.Once(c.QueryParams(), "before", "limit"); err != nil {
		return nil, 0, err
	}
	limit, err := paging.ParseLimit(c.QueryParam("limit"), paging.DefaultLimit, paging.MaxLimit)
	if err != nil {
		return nil, 0, err
	}
	before, err := paging.ParseBefore(c.QueryParam("before"))
	if err != nil {
		return nil, 0, err
	}
	return before, limit, nil
}
