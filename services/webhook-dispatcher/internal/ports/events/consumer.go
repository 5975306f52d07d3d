// Package events consumes customer events from the JetStream stream EVENTS
// through one durable pull consumer that every dispatcher instance shares
// (docs/architecture.md "Delivery semantics"), and hands each to the
// delivery use case. A message is acked only after its outcome is stored;
// a message that can never be delivered is terminated; anything transient
// is nak'ed with a delay and comes back (natsx.Consume settles them).
package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Handler delivers one event; see app.App.DeliverEvent for what its errors
// mean. redelivered says the stream handed the message out before: an
// earlier round may have sent it and recorded it.
type Handler interface {
	DeliverEvent(ctx context.Context, ev *eventsv1.Event, redelivered bool, keepAlive func()) error
}

// Config describes the consumer.
type Config struct {
	Stream natsx.EventsStream
	// Durable names the consumer all instances share.
	Durable string
	// InHand bounds the events this instance holds at once: being sent,
	// waiting between attempts, or waiting for a place. How many
	// attempts are in flight is the use case's bound, not the
	// consumer's.
	InHand int
	// AckWait must exceed a delivery's longest round of attempts.
	AckWait time.Duration
	// Fresh, when positive, spares a message handed out for the first
	// time less than Fresh after it was stored the extension of its ack
	// deadline before its first attempt (one message to the server per
	// delivery): it was handed out after it was stored, so more than
	// AckWait - Fresh of its ack wait is ahead, and with AckWait longer
	// than a full round plus Fresh the whole round fits. Retries extend
	// as always, and so does a wait for a place (the use case calls
	// keepAlive at least every half round while it waits). Zero: every
	// attempt extends.
	Fresh time.Duration
}

// MaxAckPending bounds the events handed out and not yet acked, across all
// instances: the consumer stops giving out more when receivers are slow.
// It is well above what healthy deliveries hold (their rate times their
// latency: tens), so that the events of webhooks that hang, which wait in
// hand until their circuits open (up to WEBHOOK_ATTEMPT_TIMEOUT times
// DISPATCHER_CIRCUIT_AFTER / DISPATCHER_WEBHOOK_CONCURRENCY rounds), do
// not use it up and stop the consumer for everyone.
const MaxAckPending = 8192

// Start makes sure the stream and the durable consumer exist, then starts
// consuming (natsx.Consume: at most InHand events in hand, graceful Stop).
func Start(ctx context.Context, js jetstream.JetStream, cfg Config, h Handler, log *zap.Logger) (*natsx.Consumer, error) {
	if _, err := cfg.Stream.Ensure(ctx, js); err != nil {
		return nil, err
	}
	cons, err := cfg.Stream.EnsureDurable(ctx, js, natsx.Durable{
		Name:          cfg.Durable,
		Description:   "webhook dispatcher: delivers customer events to webhooks",
		AckWait:       cfg.AckWait,
		MaxAckPending: MaxAckPending,
	})
	if err != nil {
		return nil, err
	}
	return natsx.Consume(cons, cfg.InHand, newEvents(cfg.Stream.SubjectPrefix, cfg.Fresh, h, log).handle, log)
}

// events turns a stream message into a delivery: it decodes the event,
// checks it, and sorts the outcome for natsx.Consume (a malformed event is
// permanent; anything else that fails comes back).
type events struct {
	h      Handler
	log    *zap.Logger
	prefix string        // <prefix>. of the subjects
	fresh  time.Duration // Config.Fresh
}

func newEvents(prefix string, fresh time.Duration, h Handler, log *zap.Logger) *events {
	return &events{h: h, log: log, prefix: prefix + ".", fresh: fresh}
}

// handle is the natsx.Handler of the events.
func (e *events) handle(ctx context.Context, msg jetstream.Msg) error {
	var ev eventsv1.Event
	if err := proto.Unmarshal(msg.Data(), &ev); err != nil {
		return natsx.Permanent(fmt.Errorf("malformed event: %w", err))
	}
	if ws := e.subjectWorkspace(msg.Subject()); ws != ev.GetWorkspaceId() {
		return natsx.Permanent(fmt.Errorf("malformed event %s: subject names workspace %q, event %q", ev.GetId(), ws, ev.GetWorkspaceId()))
	}
	spare := e.fresh > 0 && firstAndFresh(msg, e.fresh)
	keepAlive := func() {
		if spare {
			spare = false
			return
		}
		if err := msg.InProgress(); err != nil {
			e.log.Debug("extend ack deadline", zap.String("delivery_id", ev.GetId()), zap.Error(err))
		}
	}
	err := e.h.DeliverEvent(ctx, &ev, redelivered(msg), keepAlive)
	switch {
	case errors.Is(err, delivery.ErrMalformedEvent):
		return natsx.Permanent(err)
	case err != nil:
		return fmt.Errorf("delivery %s of workspace %s: %w", ev.GetId(), ev.GetWorkspaceId(), err)
	}
	return nil
}

// firstAndFresh reports whether msg is handed out for the first time, less
// than fresh after the stream stored it.
func firstAndFresh(msg jetstream.Msg, fresh time.Duration) bool {
	md, err := msg.Metadata()
	if err != nil || md.NumDelivered != 1 {
		return false
	}
	age := time.Since(md.Timestamp)
	return age >= 0 && age < fresh
}

// redelivered reports whether msg was handed out before; a message whose
// metadata cannot be read is taken as redelivered, which only costs a
// read of the log.
func redelivered(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	return err != nil || md.NumDelivered > 1
}

// subjectWorkspace is <workspace_id> of <prefix>.<workspace_id>.<event>.
func (e *events) subjectWorkspace(subject string) string {
	rest, ok := strings.CutPrefix(subject, e.prefix)
	if !ok {
		return ""
	}
	ws, _, _ := strings.Cut(rest, ".")
	return ws
}
