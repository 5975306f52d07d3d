package events

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// fakeMsg is a JetStream message as a pull consumer hands it out; it
// counts the extensions of its ack deadline.
type fakeMsg struct {
	jetstream.Msg // methods the handler must not call panic
	subject       string
	data          []byte
	md            jetstream.MsgMetadata
	inProgress    int
}

func (m *fakeMsg) Subject() string                           { return m.subject }
func (m *fakeMsg) Data() []byte                              { return m.data }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.md, nil }
func (m *fakeMsg) InProgress() error                         { m.inProgress++; return nil }

// The ack deadline is extended before every attempt, except the first
// attempt of a message handed out for the first time soon after it was
// stored: its whole round fits in the ack wait still ahead of it.
func TestKeepAliveSparesOnlyFreshFirstDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fresh     time.Duration
		delivered uint64
		age       time.Duration
		want      int // extensions over 3 attempts
	}{
		{"fresh first delivery", 30 * time.Second, 1, time.Second, 2},
		{"redelivered", 30 * time.Second, 2, time.Second, 3},
		{"stored long before", 30 * time.Second, 1, 31 * time.Second, 3},
		{"stamped in the future", 30 * time.Second, 1, -time.Second, 3},
		{"not configured", 0, 1, time.Second, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := uuid.NewString()
			data, err := proto.Marshal(&eventsv1.Event{Id: uuid.NewString(), Type: "message.received", WorkspaceId: ws})
			if err != nil {
				t.Fatal(err)
			}
			msg := &fakeMsg{
				subject: "p.events." + ws + ".message.received",
				data:    data,
				md:      jetstream.MsgMetadata{NumDelivered: tt.delivered, Timestamp: time.Now().Add(-tt.age)},
			}
			attempts := HandlerFunc(func(_ context.Context, _ *eventsv1.Event, keepAlive func()) error {
				for range 3 {
					keepAlive()
				}
				return nil
			})
			err = newEvents("p.events", tt.fresh, attempts, zap.NewNop()).handle(context.Background(), msg)
			if msg.inProgress != tt.want || err != nil {
				t.Errorf("%d extensions (error %v), want %d", msg.inProgress, err, tt.want)
			}
		})
	}
}

// A malformed event is permanent (terminated, never retried); a failure to
// settle a good one is not (nak'ed, redelivered later).
func TestOutcomesAreSortedForTheConsumer(t *testing.T) {
	t.Parallel()
	ws := uuid.NewString()
	good, err := proto.Marshal(&eventsv1.Event{Id: uuid.NewString(), Type: "message.received", WorkspaceId: ws})
	if err != nil {
		t.Fatal(err)
	}
	subject := "p.events." + ws + ".message.received"
	tests := []struct {
		name          string
		subject       string
		data          []byte
		deliver       error
		wantPermanent bool
	}{
		{"not an event", subject, []byte("\xff\xff"), nil, true},
		{"subject names another workspace", "p.events." + uuid.NewString() + ".message.received", good, nil, true},
		{"refused by the delivery", subject, good, fmt.Errorf("render: %w", delivery.ErrMalformedEvent), true},
		{"storage down", subject, good, errors.New("connection refused"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deliver := HandlerFunc(func(context.Context, *eventsv1.Event, func()) error { return tt.deliver })
			msg := &fakeMsg{subject: tt.subject, data: tt.data, md: jetstream.MsgMetadata{NumDelivered: 1}}
			err := newEvents("p.events", 0, deliver, zap.NewNop()).handle(context.Background(), msg)
			if err == nil || natsx.IsPermanent(err) != tt.wantPermanent {
				t.Fatalf("handle = %v (permanent %v), want an error, permanent %v", err, natsx.IsPermanent(err), tt.wantPermanent)
			}
		})
	}
}

// The handler learns whether the stream handed the message out before (it
// then reads the log before sending); metadata it cannot read counts as
// redelivered, which only costs that read.
func TestRedeliveredIsToldToTheHandler(t *testing.T) {
	t.Parallel()
	ws := uuid.NewString()
	data, err := proto.Marshal(&eventsv1.Event{Id: uuid.NewString(), Type: "message.received", WorkspaceId: ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		delivered uint64
		want      bool
	}{{1, false}, {2, true}, {7, true}} {
		var got bool
		h := handlerOf(func(_ context.Context, _ *eventsv1.Event, redelivered bool, _ func()) error {
			got = redelivered
			return nil
		})
		msg := &fakeMsg{subject: "p.events." + ws + ".message.received", data: data, md: jetstream.MsgMetadata{NumDelivered: tt.delivered}}
		if err := newEvents("p.events", 0, h, zap.NewNop()).handle(context.Background(), msg); err != nil || got != tt.want {
			t.Errorf("handed out %d times: redelivered %v (error %v), want %v", tt.delivered, got, err, tt.want)
		}
	}
}

// handlerOf adapts a function that takes every argument to Handler.
type handlerOf func(ctx context.Context, ev *eventsv1.Event, redelivered bool, keepAlive func()) error

func (f handlerOf) DeliverEvent(ctx context.Context, ev *eventsv1.Event, redelivered bool, keepAlive func()) error {
	return f(ctx, ev, redelivered, keepAlive)
}
