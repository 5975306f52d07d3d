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
// read are dropped (readMetaEntry). The new customers' profiles are read
// before anything is stored, so that their first message's event names
// them (newCustomerProfiles). Any failure answers 500 so that Meta
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
	entries := make([]metaEntryIn, 0, len(n.Entry))
	for _, raw := range n.Entry {
		e, ok, err := h.readMetaEntry(ctx, kind, raw)
		if err != nil {
			return err
		}
		if ok {
			entries = append(entries, e)
		}
	}
	profiles, err := h.newCustomerProfiles(ctx, entries)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := h.storeMetaEntry(ctx, e, profiles); err != nil {
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

// metaEntryIn is one entry of a post, read: its channel, the customer
// messages its messaging events deliver, and its changes, still raw.
type metaEntryIn struct {
	ch     channel.Channel
	entry  meta.Entry
	events [][]meta.Delivery // each messaging event's deliveries, in order
}

// readMetaEntry reads one entry of a post and finds its channel; ok is
// false for an entry to skip. An entry Meta signed but that cannot be read
// (not an object, messaging that is not an array) is dropped and counted,
// and so is a messaging event (metaDeliveries).
func (h *ingressHandlers) readMetaEntry(ctx context.Context, kind channel.Kind, raw json.RawMessage) (e metaEntryIn, ok bool, err error) {
	entry, err := meta.ParseEntry(raw)
	if err != nil {
		h.observer.Ingress(string(kind), app.IngressInvalid)
		h.log.Warn("meta entry dropped", zap.String("kind", string(kind)), zap.Error(err))
		return metaEntryIn{}, false, nil
	}
	ch, err := h.app.ChannelByExternalID(ctx, kind, entry.ID)
	if errors.Is(err, channel.ErrNotFound) {
		h.observer.Ingress(string(kind), app.IngressNotFound)
		h.log.Info("meta entry for unknown channel skipped", zap.String("kind", string(kind)), zap.String("external_id", entry.ID))
		return metaEntryIn{}, false, nil
	}
	if err != nil {
		return metaEntryIn{}, false, err
	}
	e = metaEntryIn{ch: ch, entry: entry}
	for _, raw := range entry.Messaging {
		if deliveries := h.metaDeliveries(ch, raw); len(deliveries) > 0 {
			e.events = append(e.events, deliveries)
		}
	}
	return e, true, nil
}

// storeMetaEntry stores what one entry delivers: each customer message
// once under its key, with the name and picture read for a new customer
// (profiles), then each comment change.
func (h *ingressHandlers) storeMetaEntry(ctx context.Context, e metaEntryIn, profiles map[metaCustomer]meta.Profile) error {
	for _, deliveries := range e.events {
		for _, d := range deliveries {
			in := d.Inbound
			profile := profiles[metaCustomer{channelID: e.ch.ID, senderID: in.SenderID}]
			in.SenderName, in.ProfilePic = profile.Name, profile.ProfilePic
			if _, err := h.app.Receive(ctx, e.ch, d.Key, &in); err != nil {
				return err
			}
		}
	}
	for _, raw := range e.entry.Changes {
		if err := h.metaChange(ctx, e.ch, e.entry, raw); err != nil {
			return err
		}
	}
	return nil
}
