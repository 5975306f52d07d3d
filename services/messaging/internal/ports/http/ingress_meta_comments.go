package http

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// metaChange takes one subscribed-field change (feed, comments).
// PLACEHOLDER while the comments work is under way in this session: it
// records the change as ignored. Replaced before this lands.
func (h *Handlers) metaChange(_ context.Context, ch channel.Channel, _ meta.Entry, _ meta.Change) error {
	h.metrics.Ingress(string(ch.Kind), app.IngressIgnored)
	return nil
}
