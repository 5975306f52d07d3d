package rpc

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
)

// Reply is a service's answer as Open returns it: whole, or the head of a
// stream whose body follows through Next (see stream.go).
type Reply struct {
	// Response is the whole response, or for a stream its status, its
	// headers and the body written before the first flush.
	Response *rpcv1.Response

	nc       *nats.Conn
	replies  *replies
	call     call
	stream   bool
	control  string // the stream's control subject
	gap      time.Duration
	stopOnce sync.Once
	stop     chan struct{} // closed to stop the keep-alives

	// Read by Next only.
	seq int   // of the last data or end read
	err error // io.EOF after the end, or why the stream broke
	// ackEvery is Client.ackEvery; unacked the bytes handed on since the
	// last ack.
	ackEvery int
	unacked  int
	// acked is the last seq acknowledged, -1 before the first; the
	// keep-alives repeat it.
	acked atomic.Int64

	mu     sync.Mutex
	ended  bool // the end was read: the server needs no cancel
	closed bool
}

// newReply wraps msg, the first answer to call; for a stream's head it
// starts the keep-alives.
func (c *Client) newReply(msg *nats.Msg, call call) *Reply {
	r := &Reply{nc: c.nc, replies: c.replies, call: call, gap: c.streamGap, stop: make(chan struct{}), ackEvery: c.ackEvery}
	r.acked.Store(-1)
	if msg.Header.Get(HeaderStream) != streamHead {
		r.stopKeepAlives()
		c.replies.close(call.inbox)
		return r
	}
	r.stream, r.control = true, msg.Header.Get(HeaderStreamControl)
	if r.control != "" {
		go r.keepAlive(c.keepAlive)
	}
	return r
}

// Streaming reports whether the reply is a stream, read with Next.
func (r *Reply) Streaming() bool { return r.stream }

// Next returns the next piece of a stream's body as its service flushed it
// (a large flush may come in several pieces). It returns io.EOF once the
// stream ended, and at once for a reply that is not a stream. It fails when
// a message of the stream was lost, when nothing at all (data or beat)
// came for StreamGap, when the connection to NATS dropped, and when ctx
// ends; once it failed other than by ctx it keeps failing, and the caller
// closes the reply. One goroutine reads.
//
// Calling Next says the caller has handed on what it read before (the
// head's body included): it acknowledges that to the service, whose
// handler runs at most StreamWindow ahead of it (see stream.go).
func (r *Reply) Next(ctx context.Context) ([]byte, error) {
	if !r.Streaming() {
		return nil, io.EOF
	}
	r.acknowledge()
	for r.err == nil {
		m, err := r.call.p.next(ctx, r.gap)
		if err != nil {
			if ctx.Err() == nil {
				r.err = err
			}
			return nil, err
		}
		kind := m.Header.Get(HeaderStream)
		seq, err := strconv.Atoi(m.Header.Get(HeaderStreamSeq))
		if err != nil && kind != "" {
			r.err = fmt.Errorf("%w: stream %s with %s %q", ErrReplyIncomplete, kind, HeaderStreamSeq, m.Header.Get(HeaderStreamSeq))
			break
		}
		switch kind {
		case streamBeat:
			// A beat tells what was sent before it, which NATS delivers
			// first: a data message missing by then was lost.
			if seq != r.seq {
				r.err = fmt.Errorf("%w: a beat after message %d arrived after message %d (one was lost)", ErrReplyIncomplete, seq, r.seq)
			}
		case streamData, streamEnd:
			if seq != r.seq+1 {
				r.err = fmt.Errorf("%w: stream message %d arrived after message %d (one was lost)", ErrReplyIncomplete, seq, r.seq)
				break
			}
			r.seq = seq
			if kind == streamEnd {
				r.err = io.EOF
				r.end()
			}
			if len(m.Data) > 0 {
				r.unacked += len(m.Data)
				return m.Data, nil
			}
		default:
			r.err = fmt.Errorf("%w: a message that is not part of the stream (%s %q) arrived after message %d", ErrReplyIncomplete, HeaderStream, kind, r.seq)
		}
	}
	return nil, r.err
}

// acknowledge tells the service that every message up to the last read
// was handed on: at once when nothing more is queued (the handler may be
// waiting for it), else once ackEvery bytes were, so that a stream of many
// small events costs few acks.
func (r *Reply) acknowledge() {
	if r.err != nil || r.control == "" || int64(r.seq) <= r.acked.Load() {
		return
	}
	if r.unacked < r.ackEvery && r.call.p.backlog() {
		return
	}
	// One lost is made good by the keep-alives, which repeat it.
	_ = r.nc.Publish(r.control, []byte(controlAck+strconv.Itoa(r.seq)))
	r.acked.Store(int64(r.seq))
	r.unacked = 0
}

// end forgets a stream that ended: nothing is left to keep alive or cancel.
func (r *Reply) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.stopKeepAlives()
	r.replies.close(r.call.inbox)
}

// Close ends the reply: for a stream not read to its end it stops the
// keep-alives and tells the service to cancel its handler. It may be
// called more than once, and from another goroutine than Next's.
func (r *Reply) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	ended := r.ended
	r.mu.Unlock()
	r.stopKeepAlives()
	if r.Streaming() && !ended {
		if r.control != "" {
			// Should the cancel be lost, the missing keep-alives stop
			// the handler within StreamIdle.
			_ = r.nc.Publish(r.control, []byte(controlCancel))
		}
		r.replies.close(r.call.inbox)
	}
}

func (r *Reply) stopKeepAlives() { r.stopOnce.Do(func() { close(r.stop) }) }

// keepAlive tells the service every interval that the stream is still read.
func (r *Reply) keepAlive(interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			// A keep-alive that cannot be sent now is one of several
			// within StreamIdle; the next may go.
			msg := controlKeepAlive
			if seq := r.acked.Load(); seq >= 0 {
				msg = controlAck + strconv.FormatInt(seq, 10)
			}
			_ = r.nc.Publish(r.control, []byte(msg))
		}
	}
}
