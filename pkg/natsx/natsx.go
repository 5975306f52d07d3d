// Package natsx connects to NATS, sets up the JetStream stream of customer
// events (docs/architecture.md "Customer events: the outbox and the EVENTS
// stream") and the streams named after it with their durable consumers,
// each on EVENTS_REPLICAS servers (EnsureDurable: the consumers follow
// their stream), says where they are (Placement), and runs the pull
// consumers that read them (Consume: bounded work, permanent and transient
// failures, graceful stop).
package natsx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
)

// Connect opens a NATS connection with the connection's credentials and TLS
// (config.NATSSecurity). The first connect is retried until NATS answers or
// ctx ends, so start order does not matter; a refusal that retrying cannot
// cure (bad credentials, a TLS or file error) fails at once. Once up, the
// connection reconnects for ever, logging the changes, so a restarted
// nats-server never takes a service down.
//
// While disconnected nothing is buffered: a publish or request fails at once
// (nats.ErrReconnectBufExceeded) instead of waiting out its timeout in the
// client's reconnect buffer, so callers answer 503 within moments and retry.
func Connect(ctx context.Context, conn config.Connections, name string, log *zap.Logger) (*nats.Conn, error) {
	opts, err := options(conn, name, log)
	if err != nil {
		return nil, err
	}
	wait := 250 * time.Millisecond
	var lastLogged time.Time
	for {
		nc, err := nats.Connect(conn.NATSURL, opts...)
		if err == nil {
			return nc, nil
		}
		if !retryable(err) {
			return nil, fmt.Errorf("reach nats: %w", err)
		}
		if time.Since(lastLogged) >= 10*time.Second {
			log.Warn("waiting for nats", zap.String("url", config.RedactURL(conn.NATSURL)), zap.Error(err))
			lastLogged = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reach nats: %w (gave up: %w)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// A connection is stale after stalePings unanswered pings sent
// stalePingInterval apart.
const (
	stalePingInterval = 2 * time.Second
	stalePings        = 3
)

func options(conn config.Connections, name string, log *zap.Logger) ([]nats.Option, error) {
	sec := conn.NATSSecurity
	if err := sec.Validate(); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(2 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(-1),
		// A server that stops answering without closing the connection (a
		// frozen process, a cut network) is left for another of the
		// cluster's after 6-8 s, instead of the client's default 4 minutes.
		nats.PingInterval(stalePingInterval),
		nats.MaxPingsOutstanding(stalePings),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			// Not ConnectedUrlRedacted: it shows a token given as the
			// URL's user.
			log.Info("nats reconnected", zap.String("url", config.RedactURL(c.ConnectedUrl())))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", zap.String("subject", subject), zap.Error(err))
		}),
	}
	switch {
	case sec.NATSCreds != "":
		opts = append(opts, nats.UserCredentials(sec.NATSCreds))
	case sec.NATSUser != "":
		opts = append(opts, nats.UserInfo(sec.NATSUser, sec.NATSPassword))
	case sec.NATSToken != "":
		opts = append(opts, nats.Token(sec.NATSToken))
	}
	if sec.NATSTLSCA != "" {
		opts = append(opts, nats.RootCAs(sec.NATSTLSCA))
	}
	if sec.NATSTLSCert != "" {
		opts = append(opts, nats.ClientCert(sec.NATSTLSCert, sec.NATSTLSKey))
	}
	return opts, nil
}

// retryable tells a server that is not there yet (refused, unreachable,
// timed out) from one that answered and said no.
func retryable(err error) bool {
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	// Only a failed dial: not any error with Timeout/Temporary methods (a
	// missing credentials file has a syscall.Errno underneath), nor a TLS
	// alert from a server that refused our certificate (an OpError too, of
	// Op "remote error").
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// Unavailable reports whether err means NATS could not be reached at all
// (disconnected, reconnecting, or closed), as opposed to a slow or missing
// responder: the caller should answer 503 at once.
func Unavailable(err error) bool {
	return errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrConnectionDraining) ||
		errors.Is(err, nats.ErrDisconnected)
}

// Stream settings of EVENTS: events are kept as long as the delivery log
// (14 days), and a publish repeated within the window under the same
// Nats-Msg-Id is stored once.
const (
	EventsMaxAge      = 14 * 24 * time.Hour
	EventsDedupWindow = 10 * time.Minute
)

// EventsStream describes the stream of customer events, or one of the
// streams named after it (ChatStream, the dispatcher's replay stream).
type EventsStream struct {
	Name          string // EVENTS_STREAM, "EVENTS" in production
	SubjectPrefix string // EVENTS_SUBJECT_PREFIX, "events" in production
	// Replicas is how many servers hold the stream (EVENTS_REPLICAS);
	// 0 is 1.
	Replicas int
}

// Events returns the events stream the connection settings name.
func Events(conn config.Connections) EventsStream {
	return EventsStream{Name: conn.EventsStream, SubjectPrefix: conn.EventsSubjectPrefix, Replicas: conn.EventsReplicas}
}

// Named returns a stream named after s, with s's replicas: suffix is
// appended to its name in capitals and to its subject prefix in lower
// case (EVENTS_CHAT, events_chat.>).
func (s EventsStream) Named(suffix string) EventsStream {
	return EventsStream{Name: s.Name + "_" + strings.ToUpper(suffix), SubjectPrefix: s.SubjectPrefix + "_" + suffix, Replicas: s.Replicas}
}

// NumReplicas is the stream's replica count as JetStream takes it.
func (s EventsStream) NumReplicas() int {
	return max(s.Replicas, 1)
}

// Subject is where an event of kind eventType for a workspace is published.
func (s EventsStream) Subject(workspaceID, eventType string) string {
	return s.SubjectPrefix + "." + workspaceID + "." + eventType
}

// WorkspaceSubjects matches every event of one workspace.
func (s EventsStream) WorkspaceSubjects(workspaceID string) string {
	return s.SubjectPrefix + "." + workspaceID + ".>"
}

// Ensure creates the stream, or brings an existing one to these settings,
// and waits until it is placed on its servers (see ensureStream).
func (s EventsStream) Ensure(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        s.Name,
		Description: "Parley customer events, delivered to webhooks",
		Subjects:    []string{s.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      EventsMaxAge,
		Duplicates:  EventsDedupWindow,
		Discard:     jetstream.DiscardOld,
		Replicas:    s.NumReplicas(),
	})
}

// EnsureWorkQueue creates s as a work queue (a message is removed once
// acked), with the events stream's age and duplicate window, or brings an
// existing one to these settings, as Ensure does: the chat stream
// (EnsureChat) and the dispatcher's replay stream.
func (s EventsStream) EnsureWorkQueue(ctx context.Context, js jetstream.JetStream, description string) (jetstream.Stream, error) {
	return ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        s.Name,
		Description: description,
		Subjects:    []string{s.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      EventsMaxAge,
		Duplicates:  EventsDedupWindow,
		Discard:     jetstream.DiscardOld,
		Replicas:    s.NumReplicas(),
	})
}

// ChatStream is the stream of chat turns (events.v1.ChatTurn): the
// customer messages a channel's built-in AI answers. messaging writes them
// through its outbox and the flow-runner consumes them. It is named after
// the events stream, EVENTS_CHAT with subjects events_chat.<workspace_id>.
// <conversation_id> in production, so each test's names stay its own.
func ChatStream(events EventsStream) EventsStream {
	return events.Named("chat")
}

// ChatSubject is where a conversation's chat turns are published on s, a
// ChatStream.
func (s EventsStream) ChatSubject(workspaceID, conversationID string) string {
	return s.SubjectPrefix + "." + workspaceID + "." + conversationID
}

// EnsureChat creates s, a ChatStream, or brings it to these settings: a
// work queue (a turn is removed once the flow-runner has answered it).
func (s EventsStream) EnsureChat(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return s.EnsureWorkQueue(ctx, js, "Parley chat turns, answered by the built-in AI")
}

// Ready reports whether the connection is usable, for readiness probes.
func Ready(nc *nats.Conn) error {
	if nc == nil || !nc.IsConnected() {
		return errors.New("nats not connected")
	}
	return nil
}
