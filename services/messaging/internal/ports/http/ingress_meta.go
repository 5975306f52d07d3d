package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// maxMetaBody bounds a Meta webhook post; Meta batches, but stays far below.
const maxMetaBody = 4 << 20

// GET /ingress/meta: Meta's subscription check. It sends hub.mode=subscribe,
// the verify token configured in the app dashboard, and a challenge to echo.
func (h *ingressHandlers) metaVerify(c echo.Context) error {
	if c.QueryParam("hub.mode") != "subscribe" || h.metaVerifyToken == "" ||
		!secretEqual(c.QueryParam("hub.verify_token"), h.metaVerifyToken) {
		return errs.New(http.StatusForbidden, "verification_failed", "hub.verify_token does not match META_VERIFY_TOKEN")
	}
	return c.String(http.StatusOK, c.QueryParam("hub.challenge"))
}

// POST /ingress/meta: Messenger and Instagram events. The signature is
// checked over the raw body before anything is parsed or stored. Each entry
// goes to the channel whose external_id is the entry's id; entries of pages
// Parley does not know are skipped, and entries and events that cannot be
// read are dropped (metaEntry). Any failure answers 500 so that Meta
// redelivers; every delivery is deduplicated, so a redelivery stores
// nothing twice.
func (h *ingressHandlers) metaIngress(c echo.Context) error {
	raw, err := httpx.ReadBody(c.Request().Body, maxMetaBody)
	if err != nil {
		return err
	}
	if !meta.VerifySignature(h.metaAppSecret, raw, c.Request().Header.Get(meta.SignatureHeader)) {
		h.observer.Ingress(platformMeta, app.IngressUnauthorized)
		return errs.Unauthorized(meta.SignatureHeader + " is missing or does not sign this body with META_APP_SECRET")
	}
	var n meta.Notification
	if err := json.Unmarshal(httpx.ReplaceNULEscapes(raw), &n); err != nil {
		h.observer.Ingress(platformMeta, app.IngressInvalid)
		return errs.InvalidRequest("request body is not a Meta webhook notification")
	}
	kind, ok := metaKinds[n.Object]
	if !ok {
		// Other products' webhooks (user, permissions...) are not ours.
		h.observer.Ingress(platformMeta, app.IngressIgnored)
		return c.NoContent(http.StatusOK)
	}
	ctx := c.Request().Context()
	for _, raw := range n.Entry {
		if err := h.metaEntry(ctx, kind, raw); err != nil {
			return err
		}
	}
	return c.NoContent(http.StatusOK)
}

const platformMeta = "meta"

// metaKinds maps a notification's object to the channel kind it addresses.
var metaKinds = map[string]channel.Kind{
	meta.ObjectPage:      channel.KindMessenger,
	meta.ObjectInstagram: channel.KindInstagram,
}

// metaEntry takes one entry of a post. An entry Meta signed but that
// cannot be read (not an object, messaging that is not an array) is
// dropped and counted, as a messaging event is (metaMessaging).
func (h *ingressHandlers) metaEntry(ctx context.Context, kind channel.Kind, raw json.RawMessage) error {
	entry, err := meta.ParseEntry(raw)
	if err != nil {
		h.observer.Ingress(string(kind), app.IngressInvalid)
		h.log.Warn("meta entry dropped", zap.String("kind", string(kind)), zap.Error(err))
		return nil
	}
	ch, err := h.app.ChannelByExternalID(ctx, kind, entry.ID)
	if errors.Is(err, channel.ErrNotFound) {
		h.observer.Ingress(string(kind), app.IngressNotFound)
		h.log.Info("meta entry for unknown channel skipped", zap.String("kind", string(kind)), zap.String("external_id", entry.ID))
		return nil
	}
	if err != nil {
		return err
	}
	for _, raw := range entry.Messaging {
		if err := h.metaMessaging(ctx, ch, raw); err != nil {
			return err
		}
	}
	for _, raw := range entry.Changes {
		if err := h.metaChange(ctx, ch, entry, raw); err != nil {
			return err
		}
	}
	return nil
}
