package rpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
)

// Chunked replies. NATS refuses a message over the server's max_payload
// (1 MiB by default), and a page of the API can be larger (100 messages of
// 4,096 characters that JSON escapes to six bytes each is 2.4 MB). A reply
// that fits is one message, as before. A larger one is cut into chunks that
// each fit, all published to the request's own reply subject in order; the
// client collects them into the whole reply. Nothing is stored and the
// servers need no configuration; a stream of messages on the reply subject
// is also how a streamed answer (SSE) travels (stream.go).
//
// The protocol, in NATS headers:
//
//   - the request carries Parley-Accept-Chunks: 1 (a caller that does not,
//     such as `nats req`, gets a service error for an oversized reply
//     rather than a part of it);
//   - every chunk carries Parley-Chunk: <i>/<n>, i counting from 1, and
//     the first also Parley-Reply-Size: <bytes of the whole reply>;
//   - the chunks concatenated are the encoded rpcv1.Response.
//
// NATS keeps the order of one publisher's messages to one subscriber, so a
// chunk out of order means one was lost (a slow consumer): the call fails
// at once. A reply that stops arriving fails after ChunkGap.
const (
	// HeaderAcceptChunks on a request says the caller reassembles chunks.
	HeaderAcceptChunks = "Parley-Accept-Chunks"
	// HeaderChunk on a reply message is its place, "<i>/<n>".
	HeaderChunk = "Parley-Chunk"
	// HeaderReplySize on the first chunk is the whole reply's length.
	HeaderReplySize = "Parley-Reply-Size"
)

// MaxReplyBytes bounds one reply, however it travels: the caller holds it
// whole in memory. The largest the API produces within its documented
// limits (a delivery-log page of 100 deliveries of 4,096-character texts)
// is under 4 MB.
const MaxReplyBytes = 64 << 20

// ChunkGap is how long a client waits for the next chunk of a reply whose
// first has arrived; the chunks follow one another within milliseconds.
const ChunkGap = 5 * time.Second

// chunkHeadroom is left out of each chunk for its headers, which count
// towards max_payload.
const chunkHeadroom = 4 << 10

// ErrReplyIncomplete is a chunked reply that lost a chunk or stopped.
var ErrReplyIncomplete = errors.New("rpc reply incomplete")

// reply sends out, the encoded response, to msg's caller: in one message
// when it fits NATS's max payload, else in chunks when the caller accepts
// them. A reply that cannot be sent is answered with a service error at
// once, so the caller never waits out its timeout for it.
func (s *Server) reply(msg micro.Request, out []byte, requestID string) {
	limit := int(s.nc.MaxPayload())
	switch {
	case len(out) <= limit:
		if err := msg.Respond(out); err != nil {
			s.replyFailed(msg, requestID, "send rpc response", err)
		}
		return
	case msg.Headers().Get(HeaderAcceptChunks) == "":
		s.replyFailed(msg, requestID, "send rpc response",
			fmt.Errorf("reply of %d bytes is over the %d-byte NATS max payload and the caller does not accept chunked replies", len(out), limit))
		return
	case len(out) > MaxReplyBytes:
		s.replyFailed(msg, requestID, "send rpc response",
			fmt.Errorf("reply of %d bytes is over the %d-byte bound of a reply", len(out), MaxReplyBytes))
		return
	}
	size := limit - chunkHeadroom
	n := (len(out) + size - 1) / size
	for i := range n {
		h := micro.Headers{HeaderChunk: {strconv.Itoa(i+1) + "/" + strconv.Itoa(n)}}
		if i == 0 {
			h[HeaderReplySize] = []string{strconv.Itoa(len(out))}
		}
		if err := msg.Respond(out[i*size:min((i+1)*size, len(out))], micro.WithHeaders(h)); err != nil {
			// The caller notices the missing chunks within ChunkGap; NATS
			// is what failed, so there is no way to tell it sooner.
			s.log.Warn("send rpc response chunk", zap.Int("chunk", i+1), zap.Int("chunks", n),
				zap.String("request_id", requestID), zap.Error(err))
			return
		}
	}
}

// replyFailed logs why a reply could not be sent and tells the caller with
// a service error, which it turns into 500 internal_error at once.
func (s *Server) replyFailed(msg micro.Request, requestID, what string, err error) {
	s.log.Error(what, zap.String("subject", msg.Subject()), zap.String("request_id", requestID), zap.Error(err))
	if err := msg.Error("500", "reply could not be sent: "+err.Error(), nil); err != nil {
		s.log.Warn("send rpc error", zap.String("request_id", requestID), zap.Error(err))
	}
}

// replies routes the messages arriving on a client's inbox to the calls
// waiting for them. Like nats.go's own request mux it is one wildcard
// subscription for every call of the connection, so a call costs no
// SUB/UNSUB; unlike it, a call stays open until its last chunk, or a
// stream's end.
type replies struct {
	nc  *nats.Conn
	gap time.Duration // ChunkGap; shorter in tests

	mu    sync.Mutex
	inbox string // "<inbox>.": a call's reply subject is inbox + token
	sub   *nats.Subscription
	next  uint64
	calls map[string]*pending
}

// open registers a new call and returns its reply subject.
func (r *replies) open() (string, *pending, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		inbox := r.nc.NewInbox() + "."
		sub, err := r.nc.Subscribe(inbox+"*", r.route)
		if err != nil {
			return "", nil, err
		}
		// The handler only copies bytes, so a backlog is brief; allow
		// several of the largest replies in flight before NATS drops
		// messages as a slow consumer (which a call then reports).
		if err := sub.SetPendingLimits(-1, 4*MaxReplyBytes); err != nil {
			_ = sub.Unsubscribe()
			return "", nil, err
		}
		r.inbox, r.sub, r.calls = inbox, sub, map[string]*pending{}
		go r.failOnDisconnect(r.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED))
	}
	r.next++
	token := strconv.FormatUint(r.next, 36)
	p := &pending{done: make(chan struct{}), progress: make(chan struct{}, 1), arrived: make(chan struct{}, 1)}
	r.calls[token] = p
	return r.inbox + token, p, nil
}

// close forgets a call; later messages for it are dropped.
func (r *replies) close(subject string) {
	r.mu.Lock()
	delete(r.calls, strings.TrimPrefix(subject, r.inbox))
	r.mu.Unlock()
}

// failOnDisconnect ends every call waiting when the connection drops: a
// reply published while it is down is lost, so waiting for it would only
// run out the call's timeout.
func (r *replies) failOnDisconnect(changes chan nats.Status) {
	for status := range changes {
		r.mu.Lock()
		for _, p := range r.calls {
			p.fail(nats.ErrDisconnected)
		}
		r.mu.Unlock()
		if status == nats.CLOSED {
			r.nc.RemoveStatusListener(changes)
			return
		}
	}
}

func (r *replies) route(m *nats.Msg) {
	r.mu.Lock()
	p := r.calls[strings.TrimPrefix(m.Subject, r.inbox)]
	r.mu.Unlock()
	if p != nil {
		p.add(m)
	}
}

// pending is one call's reply as it arrives, and for a stream the messages
// that follow its head (see stream.go).
type pending struct {
	done     chan struct{} // closed when msg or err is set
	progress chan struct{} // a chunk arrived (not the last)
	arrived  chan struct{} // a stream message was queued, or the stream failed

	mu     sync.Mutex
	msg    *nats.Msg
	err    error
	got    int // chunks received
	total  int // chunks announced
	size   int // bytes announced
	header nats.Header
	buf    []byte

	// Once msg is a stream's head: the messages after it, in the order
	// they came, for Reply.Next.
	streaming   bool
	queue       []*nats.Msg
	queued      int // bytes in queue
	lastArrival time.Time
	streamErr   error
}

func (p *pending) add(m *nats.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streaming {
		p.enqueue(m)
		return
	}
	if p.msg != nil || p.err != nil {
		return
	}
	chunk := m.Header.Get(HeaderChunk)
	switch {
	case chunk == "" && p.got == 0:
		// The status message NATS sends when no instance is subscribed.
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			p.finish(nil, nats.ErrNoResponders)
			return
		}
		if m.Header.Get(HeaderStream) == streamHead {
			p.streaming, p.lastArrival = true, time.Now()
		}
		p.finish(m, nil)
		return
	case chunk == "":
		p.finish(nil, fmt.Errorf("%w: a whole message arrived after chunk %d of %d", ErrReplyIncomplete, p.got, p.total))
		return
	}
	i, n, err := parseChunk(chunk)
	switch {
	case err != nil:
		p.finish(nil, err)
		return
	case i != p.got+1 || (p.got > 0 && n != p.total):
		p.finish(nil, fmt.Errorf("%w: chunk %d/%d arrived after chunk %d/%d (one was lost)", ErrReplyIncomplete, i, n, p.got, p.total))
		return
	case i == 1:
		size, err := strconv.Atoi(m.Header.Get(HeaderReplySize))
		if err != nil || size < 0 || size > MaxReplyBytes {
			p.finish(nil, fmt.Errorf("chunked reply announces %q bytes: want 0..%d", m.Header.Get(HeaderReplySize), MaxReplyBytes))
			return
		}
		p.total, p.size, p.header = n, size, m.Header
		p.buf = make([]byte, 0, size)
	}
	if len(p.buf)+len(m.Data) > p.size {
		p.finish(nil, fmt.Errorf("chunked reply is longer than the %d bytes it announced", p.size))
		return
	}
	p.buf = append(p.buf, m.Data...)
	p.got = i
	if i < n {
		select {
		case p.progress <- struct{}{}:
		default:
		}
		return
	}
	if len(p.buf) != p.size {
		p.finish(nil, fmt.Errorf("%w: %d bytes of the %d announced", ErrReplyIncomplete, len(p.buf), p.size))
		return
	}
	p.finish(&nats.Msg{Subject: m.Subject, Header: p.header, Data: p.buf}, nil)
}

// fail settles the call with err unless it is settled, or breaks its
// stream with err.
func (p *pending) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.streaming:
		p.failStream(err)
	case p.msg == nil && p.err == nil:
		p.finish(nil, err)
	}
}

// enqueue keeps a stream message for the reader. The reader relays it to a
// client that may read slowly, so what waits is bounded like a whole reply:
// a reader that far behind would lose its stream to NATS's slow-consumer
// limit soon anyway. p.mu is held.
func (p *pending) enqueue(m *nats.Msg) {
	if p.streamErr != nil {
		return
	}
	p.lastArrival = time.Now()
	if p.queued+len(m.Data) > MaxReplyBytes {
		p.failStream(fmt.Errorf("%w: the reader is %d bytes behind the stream", ErrReplyIncomplete, p.queued))
		return
	}
	p.queue = append(p.queue, m)
	p.queued += len(m.Data)
	p.signal()
}

// streamControl is the control subject of a stream whose head came, or "".
func (p *pending) streamControl() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.streaming || p.msg == nil {
		return ""
	}
	return p.msg.Header.Get(HeaderStreamControl)
}

// backlog reports whether stream messages wait to be read.
func (p *pending) backlog() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) > 0
}

// failStream breaks the stream with err unless it is broken; p.mu is held.
func (p *pending) failStream(err error) {
	if p.streamErr == nil {
		p.streamErr = err
		p.signal()
	}
}

func (p *pending) signal() {
	select {
	case p.arrived <- struct{}{}:
	default:
	}
}

// next returns the stream's next message once there is one. It fails when
// the stream broke (the connection dropped, the reader fell too far
// behind), once what came before has been read, when nothing at all came
// for gap, or when ctx ends.
func (p *pending) next(ctx context.Context, gap time.Duration) (*nats.Msg, error) {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			m := p.queue[0]
			p.queue[0], p.queue = nil, p.queue[1:]
			p.queued -= len(m.Data)
			p.mu.Unlock()
			return m, nil
		}
		err, quietSince := p.streamErr, p.lastArrival
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		left := time.Until(quietSince.Add(gap))
		if left <= 0 {
			return nil, fmt.Errorf("%w: nothing of the stream for %s", ErrReplyIncomplete, gap)
		}
		timer := time.NewTimer(left)
		select {
		case <-p.arrived:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// finish settles the call; p.mu is held.
func (p *pending) finish(m *nats.Msg, err error) {
	p.msg, p.err, p.buf = m, err, nil
	close(p.done)
}

// wait returns the whole reply, or why there is none: ctx ended, or a
// chunked reply lost a chunk or made no progress for gap.
func (p *pending) wait(ctx context.Context, gap time.Duration) (*nats.Msg, error) {
	var stalled <-chan time.Time
	for {
		select {
		case <-p.done:
			return p.msg, p.err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.progress:
			stalled = time.After(gap)
		case <-stalled:
			p.mu.Lock()
			got, total := p.got, p.total
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: nothing after chunk %d of %d for %s", ErrReplyIncomplete, got, total, gap)
		}
	}
}

func parseChunk(v string) (i, n int, err error) {
	a, b, ok := strings.Cut(v, "/")
	i, errI := strconv.Atoi(a)
	n, errN := strconv.Atoi(b)
	if !ok || errI != nil || errN != nil || i < 1 || n < i {
		return 0, 0, fmt.Errorf("malformed %s header %q", HeaderChunk, v)
	}
	return i, n, nil
}
