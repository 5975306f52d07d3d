package http

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
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

// A post's new customers' profiles are read at once, all within
// metaProfilesWait: Meta wants its post answered within seconds, and a
// missing name is better than a redelivery. So a post waits for the Graph
// API at most that long, however many new customers it brings, and one
// read that hangs holds back no other (docs/channels.md "Messenger and
// Instagram").
const (
	metaProfilesWait   = 2 * time.Second
	metaProfileReaders = 16
)

// metaCustomer is a customer of a channel.
type metaCustomer struct {
	channelID, senderID string
}

// metaDeliveries reads one messaging event of the channel's page: the
// customer messages it carries, each to be stored once under its key (the
// mid) and, on external channels, to become message.received or
// postback.received. Echoes of the page's own messages and events that
// carry no customer message (receipts, reactions) deliver nothing. An
// event Meta signed but that cannot be read is dropped and counted, as a
// comment change is (metaChange): redelivering it would not make it
// readable, and an error would hold back the rest of the batch.
func (h *ingressHandlers) metaDeliveries(ch channel.Channel, raw json.RawMessage) []meta.Delivery {
	m, err := meta.ParseMessaging(raw)
	if err != nil {
		h.observer.Ingress(string(ch.Kind), app.IngressInvalid)
		h.log.Warn("meta messaging event dropped", zap.String("channel_id", ch.ID), zap.Error(err))
		return nil
	}
	deliveries := m.Deliveries(ch.ExternalID, time.Now())
	if len(deliveries) == 0 {
		h.observer.Ingress(string(ch.Kind), app.IngressIgnored)
	}
	return deliveries
}

// newCustomerProfiles reads the profiles of the post's customers their
// channel has not heard from before, all at once and within
// metaProfilesWait. Known customers are not read: their stored contact
// keeps its name and picture. A profile Meta does not give in time
// (privacy settings, an expired token, Meta down or slow) is missing from
// the map: the customer is stored without a name, and the delivery never
// fails for it.
func (h *ingressHandlers) newCustomerProfiles(ctx context.Context, entries []metaEntryIn) (map[metaCustomer]meta.Profile, error) {
	if h.metaProfiles == nil {
		return nil, nil
	}
	type read struct {
		customer metaCustomer
		ch       channel.Channel
	}
	var reads []read
	seen := map[metaCustomer]bool{}
	for _, e := range entries {
		for _, deliveries := range e.events {
			c := metaCustomer{channelID: e.ch.ID, senderID: deliveries[0].Inbound.SenderID}
			if seen[c] {
				continue
			}
			seen[c] = true
			_, err := h.app.FindContact(ctx, c.channelID, c.senderID)
			if err == nil {
				continue
			}
			if !errors.Is(err, conversation.ErrContactNotFound) {
				return nil, err
			}
			reads = append(reads, read{customer: c, ch: e.ch})
		}
	}
	profiles := make(map[metaCustomer]meta.Profile, len(reads))
	if len(reads) == 0 {
		return profiles, nil
	}
	rctx, cancel := context.WithTimeout(ctx, metaProfilesWait)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	readers := make(chan struct{}, metaProfileReaders)
	for _, r := range reads {
		wg.Go(func() {
			select {
			case readers <- struct{}{}:
				defer func() { <-readers }()
			case <-rctx.Done():
			}
			// A reader freed as the bound passed starts no read.
			if err := rctx.Err(); err != nil {
				h.profileNotRead(r.customer, err)
				return
			}
			p, err := h.metaProfiles.Profile(rctx, r.ch.Kind, r.ch.Token, r.customer.senderID)
			if err != nil {
				h.profileNotRead(r.customer, err)
				return
			}
			mu.Lock()
			profiles[r.customer] = p
			mu.Unlock()
		})
	}
	wg.Wait()
	return profiles, nil
}

func (h *ingressHandlers) profileNotRead(c metaCustomer, err error) {
	h.log.Warn("meta profile not read", zap.String("channel_id", c.channelID), zap.String("sender_id", c.senderID), zap.Error(err))
}
