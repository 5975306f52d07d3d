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
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
)

// metaChange takes one subscribed-field change: a new comment from
// Facebook's feed (item comment, verb add) or Instagram's comments becomes
// a stored comment and, on external channels, comment.received. Other
// changes (edits, removals, reactions, posts, other fields) are
// acknowledged and dropped. A change Meta signed but that cannot be read
// (not an object, a comment without its id) is dropped too, and counted:
// redelivering it would not make it readable, and answering with an error
// would hold back the rest of the batch.
func (h *ingressHandlers) metaChange(ctx context.Context, ch channel.Channel, entry meta.Entry, raw json.RawMessage) error {
	change, err := meta.ParseChange(raw)
	var in *comment.Inbound
	if err == nil {
		// At the store's precision: a comment Meta gives no time is
		// stamped with its arrival, and the event must carry what is stored.
		in, err = meta.ParseCommentChange(entry, change, time.Now().UTC().Truncate(time.Microsecond))
	}
	if errors.Is(err, meta.ErrMalformedChange) {
		h.observer.Ingress(string(ch.Kind), app.IngressInvalid)
		h.log.Warn("meta comment change dropped", zap.String("channel_id", ch.ID), zap.String("field", change.Field), zap.Error(err))
		return nil
	}
	if err != nil {
		return err
	}
	_, err = h.app.ReceiveComment(ctx, ch, in)
	return err
}
