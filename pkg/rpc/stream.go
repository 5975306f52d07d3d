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
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
)

// Streamed replies. A handler that calls Flush (Server-Sent Events: a
// headless flow run reporting as it goes) on a request whose caller takes
// streams has its response sent as it is written, on the request's reply
// subject, instead of whole at the end:
//
//   - the request carries Parley-Accept-Stream: 2 (the Client sets it on
//     every request): the caller reads streams and acknowledges what it
//     consumed; 1 is a caller that reads streams without acknowledging
//     (one from before flow control), and for a caller that sends neither
//     Flush does nothing and the response goes whole when the handler
//     returns, as ever;
//   - the first Flush sends the head: Parley-Stream: head and
//     Parley-Stream-Control: <subject>, its data the encoded rpcv1.Response
//     with the status, the headers and the body written so far (what does
//     not fit one message follows at once as data);
//   - each later Flush sends what was written since as Parley-Stream: data
//     with Parley-Stream-Seq: <n>, n counting from 1, cut into messages that
//     each fit NATS's max payload, each with its own n;
//   - when the handler returns, Parley-Stream: end with whatever was not
//     yet flushed and the next n;
//   - while nothing else is sent, Parley-Stream: beat every StreamBeat,
//     with Parley-Stream-Seq: <the last n sent>, so the caller tells a
//     server gone from a handler with nothing to say, and notices a data
//     message that was lost without waiting for the next one.
//
// The control subject is an inbox the server subscribes for this one
// request. The caller sends "keepalive" there every StreamKeepAlive while it
// reads, and "cancel" when it stops reading before the end (its HTTP client
// went away). On cancel, or when no keep-alive has come for StreamIdle, the
// handler's request context is cancelled with ErrStreamCancelled as its
// cause, so a flow run stops instead of working for no one.
//
// Flow control: a caller of version 2 sends "ack <n>" there once it has
// handed on every message up to n (the head is 0) — the gateway, once it
// has written them to its HTTP client — and its keep-alives repeat the
// last ack, so one lost is made good. A Flush returns only once at most
// StreamWindow bytes of the body sent are unacknowledged, so a handler
// runs ahead of its reader by that much and one flush, not by whatever it
// can produce: a reader that stops reading stops the handler, and the
// reader's own bound (the gateway's SSE_WRITE_TIMEOUT) then cancels it.
// AwaitDelivery waits until everything flushed is acknowledged: a flow run
// is stored completed only once its end event was handed on.
//
// A stream is still one request: it holds one of MaxInFlight slots, its
// handler's timeout bounds it, and Stop waits for it as for any other.
const (
	// HeaderAcceptStream on a request says the caller reads streams.
	HeaderAcceptStream = "Parley-Accept-Stream"
	// HeaderStream on a reply message of a stream is its kind: head,
	// data, beat or end.
	HeaderStream = "Parley-Stream"
	// HeaderStreamControl on the head names the subject on which the
	// caller sends keep-alives and cancel.
	HeaderStreamControl = "Parley-Stream-Control"
	// HeaderStreamSeq numbers data and end messages from 1; on a beat it
	// is the number of the last one sent.
	HeaderStreamSeq = "Parley-Stream-Seq"
)

// acceptStreamAcks is the HeaderAcceptStream of a caller that acknowledges
// what it consumed (flow control); a server applies StreamWindow only to
// such callers, so callers from before it keep streaming during a rollout.
const acceptStreamAcks = 2

// The kinds of stream message (HeaderStream) and the control messages.
const (
	streamHead = "head"
	streamData = "data"
	streamBeat = "beat"
	streamEnd  = "end"

	controlKeepAlive = "keepalive"
	controlCancel    = "cancel"
	controlAck       = "ack "
)

// Timing of a stream. The caller's keep-alives come five times within
// StreamIdle, so a few late ones do not stop a run; the server's beats come
// three times within StreamGap, the caller's patience.
const (
	// StreamIdle is how long a server streams without hearing from its
	// caller before it cancels the handler.
	StreamIdle = 10 * time.Second
	// StreamBeat is how often a server sends a beat while it has
	// nothing else to send.
	StreamBeat = 2 * time.Second
	// StreamKeepAlive is how often a caller tells the server it is still
	// reading.
	StreamKeepAlive = 2 * time.Second
	// StreamGap is how long a caller waits for the next message of a
	// stream, data or beat, before it calls the stream broken.
	StreamGap = 3 * StreamBeat
)

// StreamWindow is how many bytes of a stream's body a server sends ahead
// of what its caller acknowledged: the most a relay holds of one stream
// beyond a flush, whatever the handler produces. A flow run's events are
// small, so a reader that keeps up never waits for it.
const StreamWindow = 256 << 10

// ErrStreamCancelled is the cause (context.Cause) of a streamed handler's
// cancelled context when its caller stopped reading: it said so, it stopped
// sending keep-alives, or the stream could not be sent to it.
var ErrStreamCancelled = errors.New("rpc stream caller gone")

// stream is the sending side of one streamed reply. The handler's goroutine
// flushes into it; the watcher goroutine sends beats and watches the
// keep-alives; the control subscription's callback takes acks and cancel.
type stream struct {
	nc        *nats.Conn
	log       *zap.Logger
	reply     string
	requestID string
	idle      time.Duration
	beat      time.Duration
	// ctx is the handler's request context, which cancel ends.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// window is StreamWindow for a caller that acknowledges, else 0: a
	// flush then never waits.
	window int64

	keepAlive chan struct{} // a keep-alive or an ack arrived; buffered 1
	acked     chan struct{} // an ack moved taken; buffered 1
	stop      chan struct{} // closed when the handler returned
	watched   chan struct{} // closed when the watcher returned

	// mu orders the messages sent, so that numbers, beats and the end
	// come out as the protocol says whoever sends them.
	mu       sync.Mutex
	started  bool
	ended    bool
	seq      int
	lastSent time.Time
	control  *nats.Subscription
	// sent counts the body's bytes sent, the head's included; taken those
	// the caller acknowledged; marks are the messages sent and not yet
	// acknowledged, each with sent once it had gone. Kept only with a
	// window.
	sent, taken int64
	marks       []streamMark
}

// streamMark is where message seq ended in the body sent.
type streamMark struct {
	seq  int
	sent int64
}

func (s *Server) newStream(ctx context.Context, reply, requestID string, cancel context.CancelCauseFunc, acks bool) *stream {
	st := &stream{
		nc:        s.nc,
		log:       s.log,
		reply:     reply,
		requestID: requestID,
		idle:      s.streamIdle,
		beat:      s.streamBeat,
		ctx:       ctx,
		cancel:    cancel,
		keepAlive: make(chan struct{}, 1),
		acked:     make(chan struct{}, 1),
		stop:      make(chan struct{}),
		watched:   make(chan struct{}),
	}
	if acks {
		st.window = s.streamWindow
	}
	return st
}

// acknowledges reports whether a request's HeaderAcceptStream value is a
// caller's that acknowledges what it consumed.
func acknowledges(accept string) bool {
	v, err := strconv.Atoi(accept)
	return err == nil && v >= acceptStreamAcks
}

// pieceSize is the most body one stream message carries, leaving room for
// its headers, which count towards max_payload.
func (st *stream) pieceSize() int {
	return int(st.nc.MaxPayload()) - chunkHeadroom
}

// start subscribes the control subject and sends the head with as much of
// resp's body as fits, the rest as data. NATS handles one connection's
// messages in order, so the subscription is in place at the server before
// the head that names it can reach the caller.
func (st *stream) start(resp *rpcv1.Response) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	control, err := st.nc.Subscribe(st.nc.NewInbox(), st.onControl)
	if err != nil {
		return fmt.Errorf("subscribe stream control: %w", err)
	}
	body := resp.GetBody()
	head := &rpcv1.Response{Status: resp.GetStatus(), Headers: resp.GetHeaders()}
	// A body field costs its bytes, one tag byte and up to five of length.
	room := st.pieceSize() - proto.Size(head) - 6
	if room < 0 {
		_ = control.Unsubscribe()
		return fmt.Errorf("stream head's headers alone are over the %d-byte NATS max payload", st.nc.MaxPayload())
	}
	head.Body = body[:min(room, len(body))]
	data, err := proto.Marshal(head)
	if err != nil {
		_ = control.Unsubscribe()
		return fmt.Errorf("encode stream head: %w", err)
	}
	st.control, st.started = control, true
	go st.watch()
	if err := st.publish(nats.Header{HeaderStream: {streamHead}, HeaderStreamControl: {control.Subject}}, data); err != nil {
		return err
	}
	st.sentMessage(0, len(head.Body))
	return st.send(body[len(head.Body):], false)
}

// flush sends body, written since the last flush, as data, and returns once
// at most the window of what was sent is unacknowledged; st.mu is not held.
// Once the caller has gone nothing more is sent: the body is dropped and
// the cause returned.
func (st *stream) flush(body []byte) error {
	if err := st.gone(); err != nil {
		return err
	}
	st.mu.Lock()
	err := st.send(body, false)
	st.mu.Unlock()
	if err != nil {
		return err
	}
	return st.awaitAcks(st.window)
}

// gone is why the caller no longer reads the stream (ErrStreamCancelled),
// or nil.
func (st *stream) gone() error {
	if cause := context.Cause(st.ctx); errors.Is(cause, ErrStreamCancelled) {
		return cause
	}
	return nil
}

// awaitAcks returns once at most limit bytes of what was sent are
// unacknowledged; at once for a caller that does not acknowledge. It fails
// with the cause when the handler's context ends first (the caller went,
// or the handler's time is up). st.mu is not held.
func (st *stream) awaitAcks(limit int64) error {
	if st.window == 0 {
		return nil
	}
	for {
		st.mu.Lock()
		behind := st.sent - st.taken
		st.mu.Unlock()
		if behind <= limit {
			return nil
		}
		select {
		case <-st.acked:
		case <-st.ctx.Done():
			return context.Cause(st.ctx)
		}
	}
}

// sentMessage counts message seq, with n bytes of the body, as sent and
// not yet acknowledged; st.mu is held.
func (st *stream) sentMessage(seq, n int) {
	if st.window == 0 {
		return
	}
	st.sent += int64(n)
	st.marks = append(st.marks, streamMark{seq: seq, sent: st.sent})
}

// ack takes the caller's acknowledgement of every message up to seq.
func (st *stream) ack(seq int) {
	st.mu.Lock()
	i := 0
	for i < len(st.marks) && st.marks[i].seq <= seq {
		st.taken = st.marks[i].sent
		i++
	}
	st.marks = st.marks[i:]
	st.mu.Unlock()
	if i > 0 {
		select {
		case st.acked <- struct{}{}:
		default:
		}
	}
}

// finish sends the end with the rest of the body and tears the stream down
// once the watcher has returned, so nothing of it outlives the handler.
func (st *stream) finish(body []byte) {
	st.mu.Lock()
	if err := st.send(body, true); err != nil {
		st.log.Warn("rpc stream end not sent", zap.String("request_id", st.requestID), zap.Error(err))
	}
	st.ended = true
	control := st.control
	st.mu.Unlock()
	close(st.stop)
	<-st.watched
	if err := control.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		st.log.Warn("rpc stream control not unsubscribed", zap.String("request_id", st.requestID), zap.Error(err))
	}
}

// send numbers body's pieces as data, the last as the end if last; with no
// body it sends nothing, or an empty end. st.mu is held.
func (st *stream) send(body []byte, last bool) error {
	size := st.pieceSize()
	for len(body) > 0 || last {
		piece := body[:min(size, len(body))]
		body = body[len(piece):]
		kind := streamData
		if last && len(body) == 0 {
			kind = streamEnd
		}
		st.seq++
		if err := st.publish(nats.Header{HeaderStream: {kind}, HeaderStreamSeq: {strconv.Itoa(st.seq)}}, piece); err != nil {
			return err
		}
		st.sentMessage(st.seq, len(piece))
		if kind == streamEnd {
			return nil
		}
	}
	return nil
}

// publish sends one message of the stream. A message that cannot be sent
// leaves a hole the caller would only find by its gap, so the handler is
// stopped at once: its output has nowhere to go. st.mu is held.
func (st *stream) publish(h nats.Header, data []byte) error {
	st.lastSent = time.Now()
	err := st.nc.PublishMsg(&nats.Msg{Subject: st.reply, Header: h, Data: data})
	if err != nil {
		st.cancel(fmt.Errorf("%w: its stream could not be sent: %w", ErrStreamCancelled, err))
		return fmt.Errorf("send rpc stream %s: %w", h.Get(HeaderStream), err)
	}
	return nil
}

// onControl takes the caller's keep-alives, acks and cancel. Anything but
// a cancel says the caller is alive.
func (st *stream) onControl(m *nats.Msg) {
	if string(m.Data) == controlCancel {
		st.cancel(fmt.Errorf("%w: it cancelled", ErrStreamCancelled))
		return
	}
	if n, ok := strings.CutPrefix(string(m.Data), controlAck); ok {
		if seq, err := strconv.Atoi(n); err == nil {
			st.ack(seq)
		}
	}
	select {
	case st.keepAlive <- struct{}{}:
	default:
	}
}

// watch sends beats while nothing else is sent and cancels the handler when
// the caller's keep-alives stop, until the handler returns.
func (st *stream) watch() {
	defer close(st.watched)
	idle := time.NewTimer(st.idle)
	defer idle.Stop()
	beat := time.NewTimer(st.beat)
	defer beat.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-st.keepAlive:
			idle.Reset(st.idle)
		case <-idle.C:
			st.cancel(fmt.Errorf("%w: no keep-alive for %s", ErrStreamCancelled, st.idle))
			// Beats would be for no one; the end still goes when the
			// handler returns.
			<-st.stop
			return
		case <-beat.C:
			beat.Reset(st.beatIfQuiet())
		}
	}
}

// beatIfQuiet sends a beat unless something else went within the last
// beat interval, and returns how long until the next may be due.
func (st *stream) beatIfQuiet() time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return st.beat
	}
	if quiet := time.Since(st.lastSent); quiet < st.beat {
		return st.beat - quiet
	}
	if err := st.publish(nats.Header{HeaderStream: {streamBeat}, HeaderStreamSeq: {strconv.Itoa(st.seq)}}, nil); err != nil {
		st.log.Warn("rpc stream beat not sent", zap.String("request_id", st.requestID), zap.Error(err))
	}
	return st.beat
}
