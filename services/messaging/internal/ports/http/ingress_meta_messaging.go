package http

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// MetaProfiles reads a Messenger or Instagram customer's name and picture
// with the page's token (meta.Graph.Profile).
type MetaProfiles interface {
	Profile(ctx context.Context, kind channel.Kind, token, userID string) (meta.Profile, error)
}

// metaProfileTimeout bounds a profile read: Meta wants the webhook answered
// within seconds, and a missing name is better than a redelivery.
const metaProfileTimeout = 5 * time.Second

// metaMessaging takes one messaging event of the channel's page: each
// customer message it carries is stored once under its key (the mid) and,
// on external channels, becomes message.received or postback.received.
// Echoes of the page's own messages and events that carry no customer
// message (receipts, reactions) are skipped. An event Meta signed but that
// cannot be read is dropped and counted, as a comment change is
// (metaChange): redelivering it would not make it readable, and an error
// would hold back the rest of the batch.
func (h *ingressHandlers) metaMessaging(ctx context.Context, ch channel.Channel, raw json.RawMessage) error {
	m, err := meta.ParseMessaging(raw)
	if err != nil {
		h.observer.Ingress(string(ch.Kind), app.IngressInvalid)
		h.log.Warn("meta messaging event dropped", zap.String("channel_id", ch.ID), zap.Error(err))
		return nil
	}
	deliveries := m.Deliveries(ch.ExternalID, time.Now())
	if len(deliveries) == 0 {
		h.observer.Ingress(string(ch.Kind), app.IngressIgnored)
		return nil
	}
	profile, err := h.metaProfile(ctx, ch, m.Sender.ID)
	if err != nil {
		return err
	}
	for _, d := range deliveries {
		in := d.Inbound
		in.SenderName, in.ProfilePic = profile.Name, profile.ProfilePic
		if _, err := h.app.Receive(ctx, ch, d.Key, &in); err != nil {
			return err
		}
	}
	return nil
}

// metaProfile reads the profile of a customer the channel has not heard
// from before; for known customers it returns nothing, and the stored
// contact keeps its name and picture. A profile Meta does not give (privacy
// settings, an expired token, Meta down) leaves them empty and never fails
// the delivery.
func (h *ingressHandlers) metaProfile(ctx context.Context, ch channel.Channel, senderID string) (meta.Profile, error) {
	if h.metaProfiles == nil {
		return meta.Profile{}, nil
	}
	_, err := h.app.FindContact(ctx, ch.ID, senderID)
	if err == nil {
		return meta.Profile{}, nil
	}
	if !errors.Is(err, conversation.ErrContactNotFound) {
		return meta.Profile{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, metaProfileTimeout)
	defer cancel()
	p, err := h.metaProfiles.Profile(pctx, ch.Kind, ch.Token, senderID)
	if err != nil {
		h.log.Warn("meta profile not read", zap.String("channel_id", ch.ID), zap.String("sender_id", senderID), zap.Error(err))
		return meta.Profile{}, nil
	}
	return p, nil
}
