package webchat

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// EventHeader carries an event's name on its NATS message.
const EventHeader = "Webchat-Event"

// Errors of Open.
var (
	// ErrTooManyStreams is a stream over this instance's limit. (The
	// limits per channel, visitor and client address hold across instances
	// and are kept in Redis by the HTTP port.)
	ErrTooManyStreams = errors.New("too many open widget streams")
	// ErrClosed is a stream asked for while the instance shuts down.
	ErrClosed = errors.New("widget streams are closed: the service is shutting down")
)

// Limits bound the streams one instance holds.
type Limits struct {
	// MaxStreams is the most open streams in this process.
	MaxStreams int
	// Buffer is how many events a stream may have waiting to be written;
	// a client that falls further behind is disconnected (its widget
	// reconnects and reloads the history).
	Buffer int
}

// Bus relays widget events between instances over core NATS. Each visitor
// has one subject, "<prefix>.webchat.<channel_id>.<visitor_id>" (prefix is
// RPC_SUBJECT_PREFIX, so test runs and deployments sharing a NATS server
// stay apart); replies are published there by whichever instance sent them,
// and every stream this instance holds subscribes to its visitor's subject.
// Core NATS keeps nothing: an event published while no widget is open is
// simply not pushed, and the widget reads it from the history when it
// loads.
type Bus struct {
	nc     *nats.Conn
	prefix string
	limits Limits

	mu      sync.Mutex
	closed  bool
	streams map[*Stream]struct{}
}

// NewBus returns a bus on nc whose subjects start with prefix.
func NewBus(nc *nats.Conn, prefix string, limits Limits) *Bus {
	if limits.Buffer <= 0 {
		limits.Buffer = 64
	}
	return &Bus{nc: nc, prefix: prefix, limits: limits, streams: map[*Stream]struct{}{}}
}

// Subject is the visitor's subject. Both ids are UUIDs, so they are valid
// subject tokens.
func (b *Bus) Subject(channelID, visitorID string) string {
	return b.prefix + ".webchat." + channelID + "." + visitorID
}

// Publish sends an event to the visitor's open widgets, wherever they are
// connected. data is encoded as JSON; nil sends an empty object.
func (b *Bus) Publish(channelID, visitorID, event string, data any) error {
	body := []byte("{}")
	if data != nil {
		var err error
		if body, err = json.Marshal(data); err != nil {
			return fmt.Errorf("encode %s event: %w", event, err)
		}
	}
	msg := &nats.Msg{Subject: b.Subject(channelID, visitorID), Header: nats.Header{}, Data: body}
	msg.Header.Set(EventHeader, event)
	if err := b.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("publish %s event: %w", event, err)
	}
	return nil
}

// Frame is one event for a stream: its name and its JSON.
type Frame struct {
	Event string
	Data  []byte
}

// Stream is one open widget's subscription.
type Stream struct {
	bus    *Bus
	frames chan Frame
	done   chan struct{}
	once   sync.Once

	mu  sync.Mutex
	sub *nats.Subscription
}

// Open subscribes a new stream to the visitor's subject. When it returns,
// the NATS server knows the subscription, so any event published after
// that reaches it. The caller must Close it.
func (b *Bus) Open(channelID, visitorID string) (*Stream, error) {
	s := &Stream{bus: b, frames: make(chan Frame, b.limits.Buffer), done: make(chan struct{})}
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, ErrClosed
	case b.limits.MaxStreams > 0 && len(b.streams) >= b.limits.MaxStreams:
		b.mu.Unlock()
		return nil, ErrTooManyStreams
	}
	b.streams[s] = struct{}{}
	b.mu.Unlock()

	sub, err := b.nc.Subscribe(b.Subject(channelID, visitorID), s.deliver)
	if err == nil {
		err = b.nc.FlushTimeout(2 * time.Second)
	}
	if sub != nil {
		// Close may have run meanwhile (shutdown, or a burst that
		// overflowed the buffer); whichever of the two sees the other's
		// work drops the subscription.
		s.mu.Lock()
		s.sub = sub
		s.mu.Unlock()
		select {
		case <-s.done:
			_ = sub.Unsubscribe()
		default:
		}
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("subscribe widget stream: %w", err)
	}
	return s, nil
}

// deliver runs on the subscription's goroutine; it never blocks, so one
// slow client cannot hold up NATS delivery.
func (s *Stream) deliver(m *nats.Msg) {
	f := Frame{Event: m.Header.Get(EventHeader), Data: m.Data}
	if f.Event == "" {
		return
	}
	select {
	case s.frames <- f:
	case <-s.done:
	default:
		// The client fell behind: end the stream rather than drop events
		// silently; the widget reconnects and reloads the history.
		s.Close()
	}
}

// Frames are the events to write to the client.
func (s *Stream) Frames() <-chan Frame { return s.frames }

// Done is closed when the stream must end: the bus closed (shutdown) or the
// client fell behind.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Close ends the stream and frees its place; it may be called more than
// once.
func (s *Stream) Close() {
	s.once.Do(func() {
		close(s.done)
		s.mu.Lock()
		sub := s.sub
		s.mu.Unlock()
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		b := s.bus
		b.mu.Lock()
		delete(b.streams, s)
		b.mu.Unlock()
	})
}

// Close ends every stream and refuses new ones: at shutdown, so that the
// HTTP server's graceful stop does not wait on widgets that never hang up.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	open := make([]*Stream, 0, len(b.streams))
	for s := range b.streams {
		open = append(open, s)
	}
	b.mu.Unlock()
	for _, s := range open {
		s.Close()
	}
}

// Streams is the number of open streams in this process.
func (b *Bus) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.streams)
}
