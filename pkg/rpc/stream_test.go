package rpc

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// streamHarness is a server whose "api" endpoint runs the test's handler,
// and a client to call it, each on its own NATS connection so a test can
// take either away.
type streamHarness struct {
	env        *testenv.Env
	srv        *Server
	serverConn *nats.Conn
	client     *Client
	clientConn *nats.Conn
}

// newStreamHarness serves h in env; configure changes the server's
// timings before the endpoint takes requests.
func newStreamHarness(t *testing.T, env *testenv.Env, h http.Handler, configure func(*Server), opts ...EndpointOption) *streamHarness {
	t.Helper()
	s := &streamHarness{env: env, serverConn: env.NATS(t), clientConn: env.NATS(t)}
	srv, err := NewServer(s.serverConn, env.RPCPrefix, "streamtest", "1.0.0", env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if configure != nil {
		configure(srv)
	}
	if err := srv.Handle(EndpointAPI, h, opts...); err != nil {
		t.Fatal(err)
	}
	s.srv, s.client = srv, NewClient(s.clientConn, env.RPCPrefix)
	return s
}

func (s *streamHarness) open(t *testing.T) *Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := s.client.Open(ctx, "streamtest", EndpointAPI, &rpcv1.Request{Method: http.MethodPost, Path: "/v1/runs"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(reply.Close)
	if !reply.Streaming() {
		t.Fatalf("the reply is not a stream: %d with %d body bytes", reply.Response.GetStatus(), len(reply.Response.GetBody()))
	}
	return reply
}

// next reads one piece of the stream, failing the test on an error.
func next(t *testing.T, reply *Reply) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := reply.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return string(b)
}

// rest reads the stream to its end.
func rest(t *testing.T, reply *Reply) []byte {
	t.Helper()
	var out []byte
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := reply.Next(ctx)
		cancel()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(out), err)
		}
		out = append(out, b...)
	}
}

func header(resp *rpcv1.Response, name string) string {
	for _, h := range resp.GetHeaders() {
		if http.CanonicalHeaderKey(h.GetName()) == name {
			return h.GetValue()
		}
	}
	return ""
}

func sseEvent(i int) string { return fmt.Sprintf("event: step\ndata: {\"n\":%d}\n\n", i) }

// sseHandler is a flow run as the flow-runner serves it, through echo: a
// prelude, then one event per flush. It writes the first event and waits
// for proceed before the others, so the caller must have the first while
// the handler is still running; the last event is not flushed and goes
// with the end.
func sseHandler(log *zap.Logger, proceed <-chan struct{}) http.Handler {
	e := httpx.NewEcho(log)
	e.POST("/v1/runs", func(c echo.Context) error {
		res := c.Response()
		res.Header().Set("Content-Type", "text/event-stream")
		res.Header().Set("X-Run-Id", "run_1")
		res.WriteHeader(http.StatusAccepted)
		_, _ = res.Write([]byte("retry: 1000\n\n"))
		res.Flush()
		_, _ = res.Write([]byte(sseEvent(1)))
		// As a handler that is not echo's finds the flush.
		if err := http.NewResponseController(res).Flush(); err != nil {
			return err
		}
		select {
		case <-proceed:
		case <-c.Request().Context().Done():
			return nil
		}
		for i := 2; i <= 4; i++ {
			_, _ = res.Write([]byte(sseEvent(i)))
			res.Flush()
		}
		_, _ = res.Write([]byte(sseEvent(5)))
		return nil
	})
	return e
}

// A flushed handler's events reach the caller one by one, in order, while
// it runs, after a head with its status and headers.
func TestStreamedEventsArriveInOrderWhileTheHandlerRuns(t *testing.T) {
	t.Parallel()
	proceed := make(chan struct{})
	env := testenv.New(t)
	s := newStreamHarness(t, env, sseHandler(env.Logger(t), proceed), nil)
	reply := s.open(t)
	resp := reply.Response
	if resp.GetStatus() != http.StatusAccepted || header(resp, "Content-Type") != "text/event-stream" ||
		header(resp, "X-Run-Id") != "run_1" || string(resp.GetBody()) != "retry: 1000\n\n" {
		t.Fatalf("head = %d %v %q, want 202, the handler's headers and its prelude", resp.GetStatus(), resp.GetHeaders(), resp.GetBody())
	}
	if got := next(t, reply); got != sseEvent(1) {
		t.Fatalf("first event %q, want %q", got, sseEvent(1))
	}
	close(proceed)
	for i := 2; i <= 5; i++ {
		if got := next(t, reply); got != sseEvent(i) {
			t.Fatalf("event %d is %q, want %q", i, got, sseEvent(i))
		}
	}
	for range 2 {
		if b, err := reply.Next(context.Background()); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last event: %q, %v; want io.EOF", b, err)
		}
	}
}

// A flush larger than one NATS message, before the head and after it,
// arrives whole and in order; so does a large unflushed rest.
func TestLargeFlushesArriveWhole(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	maxPayload := int(env.NATS(t).MaxPayload())
	parts := [][]byte{make([]byte, maxPayload+maxPayload/2), make([]byte, 3<<20), make([]byte, 2*maxPayload+7)}
	for _, p := range parts {
		_, _ = rand.Read(p)
	}
	s := newStreamHarness(t, env, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(parts[0])
		w.(http.Flusher).Flush()
		_, _ = w.Write(parts[1])
		w.(http.Flusher).Flush()
		_, _ = w.Write(parts[2])
	}), nil)
	reply := s.open(t)
	if len(reply.Response.GetBody()) >= len(parts[0]) {
		t.Fatalf("the head carries %d bytes, more than a message holds", len(reply.Response.GetBody()))
	}
	got := append(reply.Response.GetBody(), rest(t, reply)...)
	if want := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("%d bytes arrived (equal: false), want the %d written", len(got), len(want))
	}
}

// causeOf serves a handler that flushes once and waits for its request to
// be cancelled, reporting the cause.
func causeOf(flushed chan<- struct{}, cause chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("started\n"))
		w.(http.Flusher).Flush()
		flushed <- struct{}{}
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	})
}

// Close on a stream not read to its end cancels the handler at once (well
// within StreamIdle, which is left as it is), saying the caller went.
func TestClosingAStreamCancelsItsHandler(t *testing.T) {
	t.Parallel()
	flushed, cause := make(chan struct{}, 1), make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), causeOf(flushed, cause), nil)
	reply := s.open(t)
	<-flushed
	reply.Close()
	reply.Close()
	select {
	case err := <-cause:
		if !errors.Is(err, ErrStreamCancelled) || !strings.Contains(err.Error(), "it cancelled") {
			t.Fatalf("handler cancelled with %v, want ErrStreamCancelled by the caller", err)
		}
	case <-time.After(StreamIdle / 2):
		t.Fatalf("the handler still runs %s after Close", StreamIdle/2)
	}
}

// Keep-alives hold a quiet stream open past StreamIdle; once they stop
// (the caller's connection is gone, so no cancel can come) the handler is
// cancelled within StreamIdle.
func TestStreamWithoutKeepAlivesIsCancelled(t *testing.T) {
	t.Parallel()
	const idle = 400 * time.Millisecond
	flushed, cause := make(chan struct{}, 1), make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), causeOf(flushed, cause), func(srv *Server) {
		srv.streamIdle, srv.streamBeat = idle, 50*time.Millisecond
	})
	s.client.keepAlive = 50 * time.Millisecond
	reply := s.open(t)
	<-flushed

	// Three times StreamIdle of nothing but beats and keep-alives.
	ctx, cancel := context.WithTimeout(context.Background(), 3*idle)
	defer cancel()
	if b, err := reply.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a quiet stream gave %q, %v; want nothing until the deadline", b, err)
	}
	select {
	case err := <-cause:
		t.Fatalf("the handler was cancelled while the caller kept the stream alive: %v", err)
	default:
	}

	s.clientConn.Close()
	gone := time.Now()
	select {
	case err := <-cause:
		if !errors.Is(err, ErrStreamCancelled) || !strings.Contains(err.Error(), "no keep-alive") {
			t.Fatalf("handler cancelled with %v, want ErrStreamCancelled for the missing keep-alives", err)
		}
		// The last keep-alive went up to one interval before the close.
		if took := time.Since(gone); took > idle+time.Second {
			t.Fatalf("cancelled %s after the caller went, want within %s", took, idle)
		}
	case <-time.After(10 * idle):
		t.Fatalf("the handler still runs %s after its caller went", 10*idle)
	}
}

// Beats hold a quiet stream open past StreamGap; once the server is gone
// (its NATS connection closed) Next fails within StreamGap.
func TestStreamWhoseServerIsGoneFailsWithinItsGap(t *testing.T) {
	t.Parallel()
	const gap = 400 * time.Millisecond
	flushed, cause := make(chan struct{}, 1), make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), causeOf(flushed, cause), func(srv *Server) { srv.streamBeat = 50 * time.Millisecond })
	s.client.streamGap = gap
	reply := s.open(t)
	<-flushed

	ctx, cancel := context.WithTimeout(context.Background(), 3*gap)
	defer cancel()
	if b, err := reply.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a quiet stream gave %q, %v; want nothing until the deadline", b, err)
	}

	s.serverConn.Close()
	gone := time.Now()
	bounded, stop := context.WithTimeout(context.Background(), 10*gap)
	defer stop()
	b, err := reply.Next(bounded)
	if !errors.Is(err, ErrReplyIncomplete) {
		t.Fatalf("after the server went: %q, %v; want ErrReplyIncomplete", b, err)
	}
	if took := time.Since(gone); took > gap+time.Second {
		t.Fatalf("Next failed %s after the server went, want within %s", took, gap)
	}
	if _, again := reply.Next(context.Background()); !errors.Is(again, ErrReplyIncomplete) {
		t.Fatalf("Next after the failure = %v, want the failure again", again)
	}
	// The handler, whose beats had nowhere to go, was stopped too.
	if err := <-cause; !errors.Is(err, ErrStreamCancelled) {
		t.Fatalf("handler cancelled with %v, want ErrStreamCancelled", err)
	}
}

// The endpoint's handler timeout bounds a stream as any request: the
// handler's context ends, and what it writes then ends the stream.
func TestStreamIsBoundByItsHandlerTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s := newStreamHarness(t, testenv.New(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("started\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		_, _ = w.Write([]byte(r.Context().Err().Error()))
	}), nil, WithHandlerTimeout(timeout))
	start := time.Now()
	reply := s.open(t)
	if got := string(rest(t, reply)); got != context.DeadlineExceeded.Error() {
		t.Fatalf("stream ended with %q, want the handler's deadline", got)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("stream ended after %s, before the %s timeout", took, timeout)
	}
}

// Stop waits for a stream in flight as for any request.
func TestStopWaitsForAStreamInFlight(t *testing.T) {
	t.Parallel()
	flushed, release := make(chan struct{}, 1), make(chan struct{})
	s := newStreamHarness(t, testenv.New(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/probe" {
			return
		}
		_, _ = w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		flushed <- struct{}{}
		<-release
		_, _ = w.Write([]byte("last"))
	}), nil)
	reply := s.open(t)
	<-flushed
	stopped := make(chan error, 1)
	go func() { stopped <- s.srv.Stop() }()
	// Stop has begun once the service takes no more requests.
	wait.Until(t, 10*time.Second, "the service to be deregistered", func() bool {
		_, err := s.client.Do(context.Background(), "streamtest", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/probe"})
		return err != nil && strings.Contains(err.Error(), "not running")
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a stream was in flight", err)
	default:
	}
	close(release)
	if got := string(rest(t, reply)); got != "last" {
		t.Fatalf("the stream ended with %q, want its last write", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// A caller that does not take streams (`nats req`, an old client) gets a
// flushing handler's response whole, in one message, as before; Do, which
// takes streams, reads one to its end and returns it whole too; and Open
// returns a handler that never flushes whole, not as a stream.
func TestFlushesAreWholeRepliesForCallersThatDoNotStream(t *testing.T) {
	t.Parallel()
	proceed := make(chan struct{})
	close(proceed)
	env := testenv.New(t)
	s := newStreamHarness(t, env, sseHandler(env.Logger(t), proceed), nil)
	want := "retry: 1000\n\n" + sseEvent(1) + sseEvent(2) + sseEvent(3) + sseEvent(4) + sseEvent(5)

	data, _ := proto.Marshal(&rpcv1.Request{Method: http.MethodPost, Path: "/v1/runs"})
	msg, err := s.clientConn.Request(Subject(s.env.RPCPrefix, "streamtest", EndpointAPI), data, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var resp rpcv1.Response
	if err := proto.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(HeaderStream) != "" || resp.GetStatus() != http.StatusAccepted || string(resp.GetBody()) != want {
		t.Fatalf("plain request got %v %d %q, want one whole 202 reply", msg.Header, resp.GetStatus(), resp.GetBody())
	}

	whole, err := s.client.Do(context.Background(), "streamtest", EndpointAPI, &rpcv1.Request{Method: http.MethodPost, Path: "/v1/runs"})
	if err != nil {
		t.Fatal(err)
	}
	if whole.GetStatus() != http.StatusAccepted || string(whole.GetBody()) != want {
		t.Fatalf("Do got %d %q, want the whole stream", whole.GetStatus(), whole.GetBody())
	}

	reply, err := s.client.Open(context.Background(), "streamtest", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/v1/other"})
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Close()
	if reply.Streaming() || reply.Response.GetStatus() != http.StatusNotFound {
		t.Fatalf("a handler that never flushed: streaming %v, status %d; want a whole 404", reply.Streaming(), reply.Response.GetStatus())
	}
	if _, err := reply.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next on a whole reply = %v, want io.EOF", err)
	}
}

// The client's side of the protocol against a responder that breaks it:
// a lost data message, a beat telling of one, a stranger on the stream.
func TestBrokenStreamsFailAtOnce(t *testing.T) {
	t.Parallel()
	head, _ := proto.Marshal(&rpcv1.Response{Status: http.StatusOK})
	msgOf := func(kind, seq, data string) *nats.Msg {
		h := nats.Header{HeaderStream: {kind}}
		if seq != "" {
			h.Set(HeaderStreamSeq, seq)
		}
		return &nats.Msg{Header: h, Data: []byte(data)}
	}
	tests := []struct {
		name string
		msgs []*nats.Msg
	}{
		{"a data message lost", []*nats.Msg{msgOf(streamData, "1", "one"), msgOf(streamData, "3", "three")}},
		{"the end after a lost message", []*nats.Msg{msgOf(streamData, "1", "one"), msgOf(streamEnd, "3", "")}},
		{"a beat after a lost message", []*nats.Msg{msgOf(streamData, "1", "one"), msgOf(streamBeat, "2", "")}},
		{"a whole reply inside the stream", []*nats.Msg{msgOf(streamData, "1", "one"), {Data: head}}},
		{"a malformed number", []*nats.Msg{msgOf(streamData, "1", "one"), msgOf(streamData, "two", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t)
			nc := env.NATS(t)
			cancelled := make(chan struct{}, 1)
			control := nc.NewInbox()
			csub, err := nc.Subscribe(control, func(m *nats.Msg) {
				if string(m.Data) == controlCancel {
					cancelled <- struct{}{}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = csub.Unsubscribe() })
			sub, err := nc.Subscribe(Subject(env.RPCPrefix, "brokenstream", EndpointAPI), func(m *nats.Msg) {
				_ = m.RespondMsg(&nats.Msg{Header: nats.Header{HeaderStream: {streamHead}, HeaderStreamControl: {control}}, Data: head})
				for _, out := range tt.msgs {
					_ = m.RespondMsg(out)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			client := NewClient(env.NATS(t), env.RPCPrefix)
			reply, err := client.Open(context.Background(), "brokenstream", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/"})
			if err != nil {
				t.Fatal(err)
			}
			if got := next(t, reply); got != "one" {
				t.Fatalf("first piece %q, want \"one\"", got)
			}
			start := time.Now()
			if b, err := reply.Next(context.Background()); !errors.Is(err, ErrReplyIncomplete) {
				t.Fatalf("Next = %q, %v; want ErrReplyIncomplete", b, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("the broken stream failed after %s", took)
			}
			reply.Close()
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("Close of a broken stream sent no cancel")
			}
		})
	}
}
