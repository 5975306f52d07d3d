package http

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// metaMessaging takes one messaging event (message, echo, postback).
// PLACEHOLDER while the Meta work is under way in this session: it records
// the event as ignored. Replaced by the real handling before this lands.
func (h *Handlers) metaMessaging(_ context.Context, ch channel.Channel, _ meta.Messaging) error {
	h.metrics.Ingress(string(ch.Kind), app.IngressIgnored)
	return nil
}
