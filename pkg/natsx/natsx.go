// Package natsx connects to NATS and sets up the JetStream stream of
// customer events (ARCHITECTURE.md §3).
package natsx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Connect opens a NATS connection that reconnects for ever, logging the
// changes, so a restarted nats-server never takes a service down.
func Connect(url, name string, log *zap.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", c.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", zap.String("subject", subject), zap.Error(err))
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("reach nats: %w", err)
	}
	return nc, nil
}

// Stream settings of EVENTS: events are kept as long as the delivery log
// (14 days), and a publish repeated within the window under the same
// Nats-Msg-Id is stored once.
const (
	EventsMaxAge      = 14 * 24 * time.Hour
	EventsDedupWindow = 10 * time.Minute
)

// EventsStream describes the stream of customer events.
type EventsStream struct {
	Name          string // EVENTS_STREAM, "EVENTS" in production
	SubjectPrefix string // EVENTS_SUBJECT_PREFIX, "events" in production
}

// Subject is where an event of kind eventType for a workspace is published.
func (s EventsStream) Subject(workspaceID, eventType string) string {
	return s.SubjectPrefix + "." + workspaceID + "." + eventType
}

// WorkspaceSubjects matches every event of one workspace.
func (s EventsStream) WorkspaceSubjects(workspaceID string) string {
	return s.SubjectPrefix + "." + workspaceID + ".>"
}

// Ensure creates the stream, or brings an existing one to these settings.
func (s EventsStream) Ensure(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:        s.Name,
		Description: "Parley customer events, delivered to webhooks",
		Subjects:    []string{s.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      EventsMaxAge,
		Duplicates:  EventsDedupWindow,
		Discard:     jetstream.DiscardOld,
	}
	stream, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", s.Name, err)
	}
	return stream, nil
}

// Ready reports whether the connection is usable, for readiness probes.
func Ready(nc *nats.Conn) error {
	if nc == nil || !nc.IsConnected() {
		return errors.New("nats not connected")
	}
	return nil
}
