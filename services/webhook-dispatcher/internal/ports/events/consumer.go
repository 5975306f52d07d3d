// Package events consumes customer events from the JetStream stream EVENTS
// through one durable pull consumer that every dispatcher instance shares
// (ARCHITECTURE.md §3), and hands each to the delivery use case. A message
// is acked only after its outcome is stored; a message that can never be
// delivered is terminated; anything transient is nak'ed with a delay and
// comes back.
package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Handler delivers one event; see app.App.DeliverEvent for what its errors
// mean.
type Handler interface {
	DeliverEvent(ctx context.Context, ev *eventsv1.Event, keepAlive func()) error
}

// Config describes the consumer.
type Config struct {
	Stream natsx.EventsStream
	// Durable names the consumer all instances share.
	Durable string
	// Concurrency bounds the events this instance works on at once.
	Concurrency int
	// AckWait must exceed a delivery's longest round of attempts.
	AckWait time.Duration
	// Fresh, when positive, spares a message handed out for the first
	// time less than Fresh after it was stored the extension of its ack
	// deadline before its first attempt (one message to the server per
	// delivery): it was handed out after it was stored, so more than
	// AckWait - Fresh of its ack wait is ahead, and with AckWait longer
	// than a full round plus Fresh the whole round fits. Retries extend
	// as always. Zero: every attempt extends.
	Fresh time.Duration
}

// MaxAckPending bounds the events handed out and not yet acked, across all
// instances: the consumer stops giving out more when receivers are slow.
const MaxAckPending = 1024

// Nak delays for transient failures: the first retry comes soon, repeated
// ones back off.
const (
	nakDelayMin = time.Second
	nakDelayMax = time.Minute
)

// Consumer runs the durable consumer.
type Consumer struct {
	h      Handler
	log    *zap.Logger
	prefix string
	cc     jetstream.ConsumeContext
	slots  chan struct{}
	// mu orders stopping against receiving, so no delivery starts once
	// Stop waits for those under way.
	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
	work    context.Context
	cancel  context.CancelFunc
	fresh   time.Duration // Config.Fresh
}

// Start makes sure the stream and the durable consumer exist, then starts
// consuming.
func Start(ctx context.Context, js jetstream.JetStream, cfg Config, h Handler, log *zap.Logger) (*Consumer, error) {
	if _, err := cfg.Stream.Ensure(ctx, js); err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream.Name, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "webhook dispatcher: delivers customer events to webhooks",
		FilterSubject: cfg.Stream.SubjectPrefix + ".>",
		// A consumer created on a stream that already holds events
		// delivers them too: nothing published before the first
		// dispatcher started is lost.
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1, // transient failures retry until the stream's age limit
		MaxAckPending: MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s on %s: %w", cfg.Durable, cfg.Stream.Name, err)
	}
	c := newConsumer(cfg.Stream.SubjectPrefix, cfg.Concurrency, h, log)
	c.fresh = cfg.Fresh
	return c.start(cons, cfg.Durable, cfg.Concurrency)
}

// consume starts handing cons's messages, whose subjects are
// <prefix>.<workspace_id>.<event>, to h.
func consume(cons jetstream.Consumer, durable, prefix string, concurrency int, h Handler, log *zap.Logger) (*Consumer, error) {
	return newConsumer(prefix, concurrency, h, log).start(cons, durable, concurrency)
}

func newConsumer(prefix string, concurrency int, h Handler, log *zap.Logger) *Consumer {
	work, cancel := context.WithCancel(context.Background())
	return &Consumer{
		h:      h,
		log:    log,
		prefix: prefix + ".",
		slots:  make(chan struct{}, concurrency),
		work:   work,
		cancel: cancel,
	}
}

func (c *Consumer) start(cons jetstream.Consumer, durable string, concurrency int) (*Consumer, error) {
	log := c.log
	// Pull no more than can be worked on, so no message waits in a local
	// buffer while its ack deadline runs.
	var err error
	c.cc, err = cons.Consume(c.receive,
		jetstream.PullMaxMessages(concurrency),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Warn("event consumer", zap.Error(err))
		}),
	)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("consume %s: %w", durable, err)
	}
	return c, nil
}

// receive runs on the subscription's goroutine; it blocks while every slot
// is busy, which holds back further pulls.
func (c *Consumer) receive(msg jetstream.Msg) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		// Shutting down: hand the message to another instance now
		// rather than after the ack wait.
		_ = msg.Nak()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	c.slots <- struct{}{}
	go func() {
		defer func() { <-c.slots; c.wg.Done() }()
		c.handle(msg)
	}()
}

func (c *Consumer) handle(msg jetstream.Msg) {
	var ev eventsv1.Event
	if err := proto.Unmarshal(msg.Data(), &ev); err != nil {
		log := c.log.With(zap.String("subject", msg.Subject()))
		log.Error("malformed event dropped", zap.Error(err))
		c.term(msg, log)
		return
	}
	// The logger with the event's fields is built only when there is
	// something to log: zap encodes fields as soon as they are attached.
	var eventLog *zap.Logger
	log := func() *zap.Logger {
		if eventLog == nil {
			eventLog = c.log.With(zap.String("subject", msg.Subject()),
				zap.String("delivery_id", ev.GetId()), zap.String("workspace_id", ev.GetWorkspaceId()))
		}
		return eventLog
	}
	if ws := c.subjectWorkspace(msg.Subject()); ws != ev.GetWorkspaceId() {
		log().Error("malformed event dropped", zap.String("reason", "subject names workspace "+ws))
		c.term(msg, log())
		return
	}
	spare := c.fresh > 0 && firstAndFresh(msg, c.fresh)
	keepAlive := func() {
		if spare {
			spare = false
			return
		}
		if err := msg.InProgress(); err != nil {
			log().Debug("extend ack deadline", zap.Error(err))
		}
	}
	err := c.h.DeliverEvent(c.work, &ev, keepAlive)
	switch {
	case err == nil:
		if err := msg.Ack(); err != nil {
			// The outcome is stored; a redelivery finds it settled.
			log().Warn("ack event", zap.Error(err))
		}
	case errors.Is(err, delivery.ErrMalformedEvent):
		log().Error("malformed event dropped", zap.Error(err))
		c.term(msg, log())
	case c.work.Err() != nil:
		// Stopped mid-delivery; another instance takes it over.
		_ = msg.Nak()
	default:
		delay := nakDelay(msg)
		log().Error("delivery not settled; will retry", zap.Error(err), zap.Duration("retry_in", delay))
		if err := msg.NakWithDelay(delay); err != nil {
			log().Warn("nak event", zap.Error(err))
		}
	}
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

func (c *Consumer) term(msg jetstream.Msg, log *zap.Logger) {
	if err := msg.Term(); err != nil {
		log.Warn("terminate event", zap.Error(err))
	}
}

// subjectWorkspace is <workspace_id> of <prefix>.<workspace_id>.<event>.
func (c *Consumer) subjectWorkspace(subject string) string {
	rest, ok := strings.CutPrefix(subject, c.prefix)
	if !ok {
		return ""
	}
	ws, _, _ := strings.Cut(rest, ".")
	return ws
}

func nakDelay(msg jetstream.Msg) time.Duration {
	delay := nakDelayMin
	if md, err := msg.Metadata(); err == nil {
		for i := uint64(1); i < md.NumDelivered && delay < nakDelayMax; i++ {
			delay *= 2
		}
	}
	return min(delay, nakDelayMax)
}

// Stop stops pulling and waits, for up to grace, for the deliveries under
// way. Those waiting between attempts hand their message back at once (it
// is redelivered to another instance, under the same delivery id); an
// attempt in flight finishes within the attempt timeout and its outcome is
// stored.
func (c *Consumer) Stop(grace time.Duration) {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cc.Drain()
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		c.log.Warn("deliveries still under way at shutdown; their events will be redelivered")
		return
	}
	select {
	case <-c.cc.Closed():
	case <-timer.C:
	}
}
