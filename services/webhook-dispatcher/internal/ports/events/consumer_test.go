package events

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
)

// fakeMsg is a JetStream message as a pull consumer hands it out; it
// counts what the consumer does with it.
type fakeMsg struct {
	jetstream.Msg // methods the consumer must not call panic
	subject       string
	data          []byte
	md            jetstream.MsgMetadata
	inProgress    int
	acked         bool
}

func (m *fakeMsg) Subject() string                           { return m.subject }
func (m *fakeMsg) Data() []byte                              { return m.data }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.md, nil }
func (m *fakeMsg) InProgress() error                         { m.inProgress++; return nil }
func (m *fakeMsg) Ack() error                                { m.acked = true; return nil }

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
			c := newConsumer("p.events", 1, attempts, zap.NewNop())
			c.fresh = tt.fresh
			c.handle(msg)
			if msg.inProgress != tt.want || !msg.acked {
				t.Errorf("%d extensions (acked %v), want %d", msg.inProgress, msg.acked, tt.want)
			}
		})
	}
}
