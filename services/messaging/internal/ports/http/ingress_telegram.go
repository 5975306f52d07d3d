package http

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/telegram"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

const platformTelegram = string(channel.KindTelegram)

// maxTelegramBody bounds an Update; Telegram's are a few KiB (a message of
// 4096 characters with its entities), so this is only a backstop.
const maxTelegramBody = 1 << 20

// telegramIngress takes one Update that Telegram posts to the bot's webhook
// (setWebhook url=.../ingress/telegram/<channel_id>, secret_token=<secret>).
// Every update it accepts gets 200, handled or not: Telegram redelivers
// anything else until it succeeds.
func (h *ingressHandlers) telegramIngress(c echo.Context) error {
	ctx := c.Request().Context()
	ch, err := h.app.ChannelOfKind(ctx, c.Param("channel_id"), channel.KindTelegram)
	if errors.Is(err, channel.ErrNotFound) {
		h.observer.Ingress(platformTelegram, app.IngressNotFound)
		httpx.DropBody(c)
		return errChannelNotFound
	}
	if err != nil {
		return err
	}
	// The secret is checked before the body is read: nothing from an
	// unauthenticated sender is parsed or stored, or waited for.
	if !ch.SecretMatches(c.Request().Header.Get(telegram.SecretHeader)) {
		h.observer.Ingress(platformTelegram, app.IngressUnauthorized)
		httpx.DropBody(c)
		return errs.Unauthorized(telegram.SecretHeader + " is missing or does not match the channel's secret")
	}
	var u telegram.Update
	if err := decodeCustomerJSON(c.Request().Body, maxTelegramBody, &u); err != nil {
		h.observer.Ingress(platformTelegram, app.IngressInvalid)
		return err
	}
	if u.UpdateID == nil {
		h.observer.Ingress(platformTelegram, app.IngressInvalid)
		return errs.InvalidRequest("update_id is required")
	}
	var in *conversation.Inbound
	// At the store's precision: a tap is stamped with its arrival, and the
	// event must carry the time that is stored.
	if msg, ok := u.Inbound(time.Now().UTC().Truncate(time.Microsecond)); ok {
		in = &msg
	}
	if _, err := h.app.Receive(ctx, ch, telegram.UpdateKey(*u.UpdateID), in); err != nil {
		return err
	}
	// A tapped button spins on the customer's screen until it is answered.
	// It is answered after the commit, on a redelivery too (the first
	// answer may be what failed), and never fails the update.
	if q := u.CallbackQuery; q != nil {
		h.app.AnswerButton(ctx, ch, q.ID)
	}
	// An empty body: Telegram would execute a Bot API method named in a JSON
	// answer.
	return c.NoContent(http.StatusOK)
}
