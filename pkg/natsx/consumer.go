package natsx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Handler works on one message of a JetStream pull consumer (Consume). Its
// error decides what becomes of the message: nil acks it; an error marked
// Permanent terminates it (it can never succeed, so it is not redelivered);
// any other error naks it with a delay that grows with each redelivery, so
// a transient failure is retried later (docs/architecture.md "Errors").
//
// ctx ends when the consumer stops. A handler finishes what must not be cut
// short (storing an outcome, on context.WithoutCancel) and returns; an
// error returned after ctx ended hands the message back for another
// instance to take, after HandBackDelay rather than the nak delays.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Permanent marks err as one that retrying cannot cure: the message is
// terminated instead of redelivered.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	return errors.As(err, new(permanentError))
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Later hands the message back to be redelivered after d: the handler
// cannot work on it yet (it waits for another message to be handled
// first), which is no failure, so it is neither logged as one nor backed
// off like one.
func Later(d time.Duration, why error) error {
	return laterError{d: d, err: why}
}

type laterError struct {
	d   time.Duration
	err error
}

func (e laterError) Error() string { return e.err.Error() }
func (e laterError) Unwrap() error { return e.err }

// Nak delays of transient failures: the first redelivery comes soon,
// repeated ones back off.
const (
	NakDelayMin = time.Second
	NakDelayMax = time.Minute
)

// HandBackDelay is how long a message handed back by a stopping consumer
// waits before the server hands it out again. Not zero: the stopping
// consumer's pull may still be open on the server when the message is
// handed back, and a message sent to it then would be dropped by the
// client and come back only after the ack wait. A moment later the
// server has seen the pull's subscription go and gives the message to
// another instance.
const HandBackDelay = 500 * time.Millisecond

// Consumer hands the messages of one JetStream pull consumer to a Handler,
// at most a fixed number at a time, until stopped.
type Consumer struct {
	h     Handler
	log   *zap.Logger
	cc    jetstream.ConsumeContext
	slots chan struct{}
	// mu orders stopping against receiving, so no handler starts once
	// Stop waits for those under way.
	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
	work    context.Context
	cancel  context.CancelFunc
}

// Consume starts handing cons's messages to h, concurrency at a time. It
// pulls no more than it can work on, so no message waits in a local buffer
// while its ack deadline runs, and a slow handler holds back further pulls
// rather than piling messages up. Stop ends it.
func Consume(cons jetstream.Consumer, concurrency int, h Handler, log *zap.Logger) (*Consumer, error) {
	c := newConsumer(concurrency, h, log)
	var err error
	c.cc, err = cons.Consume(c.receive,
		jetstream.PullMaxMessages(concurrency),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Warn("pull consumer", zap.Error(err))
		}),
	)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("consume %s: %w", cons.CachedInfo().Name, err)
	}
	return c, nil
}

func newConsumer(concurrency int, h Handler, log *zap.Logger) *Consumer {
	work, cancel := context.WithCancel(context.Background())
	return &Consumer{h: h, log: log, slots: make(chan struct{}, concurrency), work: work, cancel: cancel}
}

// receive runs on the subscription's goroutine; it blocks while every slot
// is busy, which holds back further pulls.
func (c *Consumer) receive(msg jetstream.Msg) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		// Stopping: hand the message to another instance now rather
		// than after the ack wait.
		_ = msg.NakWithDelay(HandBackDelay)
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

// handle runs the handler on msg and settles it by the outcome.
func (c *Consumer) handle(msg jetstream.Msg) {
	err := c.run(msg)
	var later laterError
	switch {
	case err == nil:
		if err := msg.Ack(); err != nil {
			// The work is done; a redelivery must find it so.
			c.log.Warn("ack message", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	case IsPermanent(err):
		c.log.Error("message dropped", zap.String("subject", msg.Subject()), zap.Error(err))
		if err := msg.Term(); err != nil {
			c.log.Warn("terminate message", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	case c.work.Err() != nil:
		// Stopped mid-way; another instance takes it over.
		_ = msg.NakWithDelay(HandBackDelay)
	case errors.As(err, &later):
		if err := msg.NakWithDelay(later.d); err != nil {
			c.log.Warn("nak message", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	default:
		delay := nakDelay(msg)
		c.log.Error("message not settled; will retry", zap.String("subject", msg.Subject()), zap.Error(err), zap.Duration("retry_in", delay))
		if err := msg.NakWithDelay(delay); err != nil {
			c.log.Warn("nak message", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	}
}

// run runs the handler on msg. A handler that panics has met a message
// it can never handle (a bug the message exposes): it is terminated like
// a permanent failure, so that it cannot take down every instance in turn.
func (c *Consumer) run(msg jetstream.Msg) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("message handler panicked", zap.String("subject", msg.Subject()), zap.Any("panic", p), zap.Stack("stack"))
			err = Permanent(fmt.Errorf("handler panicked: %v", p))
		}
	}()
	return c.h(c.work, msg)
}

// nakDelay doubles from NakDelayMin with each delivery, up to NakDelayMax.
func nakDelay(msg jetstream.Msg) time.Duration {
	delay := NakDelayMin
	if md, err := msg.Metadata(); err == nil {
		for i := uint64(1); i < md.NumDelivered && delay < NakDelayMax; i++ {
			delay *= 2
		}
	}
	return min(delay, NakDelayMax)
}

// Stop stops pulling, ends the handlers' ctx, and waits until ctx ends for
// the messages in hand to be settled. A message that arrives meanwhile is
// handed back (after HandBackDelay, as are those the handlers give up). If
// ctx ends first, Stop says so; the messages still in hand are redelivered
// after their ack wait.
func (c *Consumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cc.Drain()
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("messages still in hand at shutdown; they will be redelivered")
	}
	// Settled; the drain ends once the pull in flight returns.
	select {
	case <-c.cc.Closed():
	case <-ctx.Done():
	}
	return nil
}
