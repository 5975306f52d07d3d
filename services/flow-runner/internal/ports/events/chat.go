// Package events answers the chat turns (events.v1.ChatTurn) messaging
// publishes to the chat stream, through one durable pull consumer that
// every flow-runner instance shares (docs/chat.md "Order and exactly one
// answer"). A turn is acked once answered (or found answered before); one
// that must wait for its conversation's other work is handed back for a
// moment; a transient failure is nak'ed and comes back; a turn that cannot
// be read is terminated.
package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Answerer answers one chat turn (app.App.AnswerTurn).
type Answerer interface {
	AnswerTurn(ctx context.Context, t app.Turn) error
}

// Config describes the consumer.
type Config struct {
	// Stream is the chat stream (natsx.ChatStream of the events stream).
	Stream natsx.EventsStream
	// Durable names the consumer all instances share.
	Durable string
	// Concurrency bounds the turns this instance answers at once.
	Concurrency int
	// AckWait is how long a turn in the hands of an instance that died
	// waits before it is handed to another; a turn being answered has its
	// deadline extended every third of it.
	AckWait time.Duration
}

// Hand-back delays of a turn that must wait: behind its conversation's
// turn another instance is answering, or behind an earlier turn not
// answered yet, it waits a moment; behind a delay node, until the delay
// is over, looking again at most every maxDelayWait.
const (
	busyWait     = 50 * time.Millisecond
	maxDelayWait = 30 * time.Second
)

// Start makes sure the chat stream and the durable consumer exist, then
// starts answering.
func Start(ctx context.Context, js jetstream.JetStream, cfg Config, a Answerer, log *zap.Logger) (*natsx.Consumer, error) {
	if _, err := cfg.Stream.EnsureChat(ctx, js); err != nil {
		return nil, err
	}
	// A turn is handed out again until it is answered: it waits for its
	// turn as long as it must.
	cons, err := cfg.Stream.EnsureDurable(ctx, js, natsx.Durable{
		Name:          cfg.Durable,
		Description:   "flow-runner: the built-in AI answers customer messages",
		AckWait:       cfg.AckWait,
		MaxAckPending: 4096,
	})
	if err != nil {
		return nil, err
	}
	h := handler{a: a, ackWait: cfg.AckWait}
	return natsx.Consume(cons, cfg.Concurrency, h.handle, log)
}

type handler struct {
	a       Answerer
	ackWait time.Duration
}

func (h handler) handle(ctx context.Context, msg jetstream.Msg) error {
	var ev eventsv1.ChatTurn
	if err := proto.Unmarshal(msg.Data(), &ev); err != nil {
		return natsx.Permanent(fmt.Errorf("decode chat turn: %w", err))
	}
	var stored time.Time
	if md, err := msg.Metadata(); err == nil {
		stored = md.Timestamp
	}
	t, err := turn(&ev, stored)
	if err != nil {
		return natsx.Permanent(err)
	}
	// A run may take its whole budget: the turn stays this instance's
	// while it answers.
	stop := keepAlive(msg, h.ackWait/3)
	err = h.a.AnswerTurn(ctx, t)
	stop()
	var atDelay *app.WaitingAtDelay
	switch {
	case errors.Is(err, catalog.ErrConversationBusy), errors.Is(err, app.ErrTurnEarly):
		return natsx.Later(busyWait, err)
	case errors.As(err, &atDelay):
		return natsx.Later(min(max(time.Until(atDelay.Until), busyWait), maxDelayWait), err)
	case errors.Is(err, app.ErrWorkspaceNotFound):
		// Retrying would wait for a workspace that is gone.
		return natsx.Permanent(err)
	}
	return err
}

// keepAlive tells the server every interval that msg is still being
// worked on, until stop is called.
func keepAlive(msg jetstream.Msg, every time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// turn reads a chat turn as the use case takes it. stored is when the
// chat stream stored it (zero when unknown): the time of a turn without
// created_at, which messaging always sets. Read as the epoch, such a turn
// would be answered at once without its predecessor and continue a
// waiting run however long expired; read as the time it is handled, it
// would move on each redelivery, and never outwait a predecessor that
// never came. The stream's time is a moment after the message's, and the
// same at every delivery.
func turn(ev *eventsv1.ChatTurn, stored time.Time) (app.Turn, error) {
	if ev.GetId() == "" || ev.GetWorkspaceId() == "" || ev.GetConversationId() == "" || ev.GetSeq() < 1 || ev.GetMessage() == nil {
		return app.Turn{}, fmt.Errorf("chat turn %q lacks its id, workspace, conversation, seq or message", ev.GetId())
	}
	if ev.GetMode() != app.ModeAuto && ev.GetMode() != app.ModeSuggest {
		return app.Turn{}, fmt.Errorf("chat turn %s: mode %q is neither auto nor suggest", ev.GetId(), ev.GetMode())
	}
	created := stored
	if ev.CreatedAt != nil {
		created = ev.GetCreatedAt().AsTime()
	}
	if created.IsZero() {
		return app.Turn{}, fmt.Errorf("chat turn %s has no created_at, and its time in the stream is unknown", ev.GetId())
	}
	m := run.CustomerMessage{ID: ev.GetMessage().GetId(), Text: ev.GetMessage().GetText(), Type: ev.GetMessage().GetType()}
	if ev.Postback != nil {
		m.Postback = ev.GetPostback().GetPayload()
	}
	return app.Turn{
		ID: ev.GetId(), WorkspaceID: ev.GetWorkspaceId(), ConversationID: ev.GetConversationId(),
		Seq: ev.GetSeq(), Mode: ev.GetMode(),
		Chat: run.Chat{
			ConversationID: ev.GetConversationId(), ChannelID: ev.GetChannelId(), ChannelKind: ev.GetChannel().GetKind(),
			ContactID: ev.GetContact().GetId(), ContactName: ev.GetContact().GetName(),
		},
		Message:   m,
		CreatedAt: created.UTC(),
	}, nil
}
