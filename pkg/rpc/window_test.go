package rpc

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// Flow control's sizes in these tests: a window of four pieces.
const (
	testPiece  = 1 << 10
	testWindow = 4 * testPiece
)

// floodHandler flushes pieces of testPiece bytes, the i-th all byte i,
// counting each flush that returned in flushed, and reports how its last
// flush ended on done.
func floodHandler(pieces int, flushed *atomic.Int32, done chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		for i := range pieces {
			_, _ = w.Write(bytes.Repeat([]byte{byte(i)}, testPiece))
			if err := rc.Flush(); err != nil {
				done <- err
				return
			}
			flushed.Add(1)
		}
		done <- nil
	})
}

// wantPieces checks that body is pieces of testPiece bytes, the i-th all
// byte i.
func wantPieces(t *testing.T, body []byte, pieces int) {
	t.Helper()
	if len(body) != pieces*testPiece {
		t.Fatalf("%d bytes arrived, want %d", len(body), pieces*testPiece)
	}
	for i := range pieces {
		if piece := body[i*testPiece : (i+1)*testPiece]; !bytes.Equal(piece, bytes.Repeat([]byte{byte(i)}, testPiece)) {
			t.Fatalf("piece %d is not what was flushed", i)
		}
	}
}

// stays checks that the handler's count of flushes stays at want for a
// while: that it is blocked, not slow. Nothing can signal an absence, so
// this waits for several of the stream's beats and keep-alives.
func stays(t *testing.T, flushed *atomic.Int32, want int32, what string) {
	t.Helper()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := flushed.Load(); got != want {
			t.Fatalf("%s: the handler flushed %d pieces, want it held at %d", what, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A handler that flushes more than the window is held once it is a window
// ahead of its reader, and goes on as the reader reads, acknowledging as
// it goes (at once when it has read all there was, and every ackEvery
// bytes while more waits); the reader gets everything, in order.
func TestFlushWaitsForTheReaderBeyondTheWindow(t *testing.T) {
	t.Parallel()
	const pieces = 40
	var flushed atomic.Int32
	done := make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), floodHandler(pieces, &flushed, done), func(srv *Server) {
		srv.streamWindow, srv.streamBeat = testWindow, 20*time.Millisecond
	})
	s.client.keepAlive = 20 * time.Millisecond
	s.client.ackEvery = 2 * testPiece
	reply := s.open(t)

	// Nothing read: the handler is held a window ahead, beats and
	// keep-alives going meanwhile.
	held := int32(testWindow / testPiece)
	wait.Until(t, 10*time.Second, "the handler to fill the window", func() bool { return flushed.Load() >= held })
	stays(t, &flushed, held, "with nothing read")

	// One piece read and handed on: with more queued, no ack yet.
	wait.Until(t, 10*time.Second, "the window's pieces to arrive", func() bool {
		reply.call.p.mu.Lock()
		defer reply.call.p.mu.Unlock()
		data := 0
		for _, m := range reply.call.p.queue {
			if m.Header.Get(HeaderStream) == streamData {
				data++
			}
		}
		return data == int(held)
	})
	got := append([]byte(nil), reply.Response.GetBody()...)
	got = append(got, next(t, reply)...)
	stays(t, &flushed, held, "with one piece read while more waits")

	got = append(got, rest(t, reply)...)
	wantPieces(t, got, pieces)
	if err := <-done; err != nil {
		t.Fatalf("the handler's flush failed: %v", err)
	}
}

// A reader that stops reading holds its handler in Flush; once it goes
// (Close: the gateway's write to its client timed out), the Flush returns
// ErrStreamCancelled at once and the handler stops.
func TestClosingAHeldStreamEndsItsFlush(t *testing.T) {
	t.Parallel()
	var flushed atomic.Int32
	done := make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), floodHandler(1000, &flushed, done), func(srv *Server) { srv.streamWindow = testWindow })
	reply := s.open(t)
	wait.Until(t, 10*time.Second, "the handler to fill the window", func() bool { return flushed.Load() >= testWindow/testPiece })
	reply.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStreamCancelled) {
			t.Fatalf("the held flush ended with %v, want ErrStreamCancelled", err)
		}
	case <-time.After(StreamIdle / 2):
		t.Fatalf("the handler is still held %s after its caller went", StreamIdle/2)
	}
	if n := flushed.Load(); n > testWindow/testPiece {
		t.Fatalf("the handler flushed %d pieces for a reader that read none, want at most a window's %d", n, testWindow/testPiece)
	}
}

// A caller from before flow control (Parley-Accept-Stream: 1) sends no
// acks: its stream is not held, and arrives whole and in order.
func TestCallersWithoutAcksStreamUnheld(t *testing.T) {
	t.Parallel()
	const pieces = 40
	var flushed atomic.Int32
	done := make(chan error, 1)
	env := testenv.New(t)
	s := newStreamHarness(t, env, floodHandler(pieces, &flushed, done), func(srv *Server) { srv.streamWindow = testWindow })

	inbox := s.clientConn.NewInbox()
	sub, err := s.clientConn.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	data, _ := proto.Marshal(&rpcv1.Request{Method: http.MethodPost, Path: "/v1/runs"})
	if err := s.clientConn.PublishMsg(&nats.Msg{
		Subject: Subject(env.RPCPrefix, "streamtest", EndpointAPI), Reply: inbox, Data: data,
		Header: nats.Header{HeaderAcceptStream: {"1"}},
	}); err != nil {
		t.Fatal(err)
	}
	// The handler finishes with nothing acknowledged.
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("flush: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the handler was held at %d of %d flushes for a caller that sends no acks", flushed.Load(), pieces)
	}
	var body []byte
	for seq := 0; ; seq++ {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("after %d messages: %v", seq, err)
		}
		kind := m.Header.Get(HeaderStream)
		if seq == 0 {
			var head rpcv1.Response
			if kind != streamHead || proto.Unmarshal(m.Data, &head) != nil {
				t.Fatalf("first message %v, want the head", m.Header)
			}
			body = append(body, head.GetBody()...)
			continue
		}
		if kind == streamBeat {
			seq--
			continue
		}
		if m.Header.Get(HeaderStreamSeq) != strconv.Itoa(seq) {
			t.Fatalf("message %d is %s %s", seq, kind, m.Header.Get(HeaderStreamSeq))
		}
		body = append(body, m.Data...)
		if kind == streamEnd {
			break
		}
	}
	wantPieces(t, body, pieces)
}

// AwaitDelivery returns once the reader has handed on everything flushed
// (it calls Next again), and fails with ErrStreamCancelled when the reader
// goes first; for a reply that is not a stream it returns at once.
func TestAwaitDeliveryWaitsForTheReader(t *testing.T) {
	t.Parallel()
	delivered := make(chan error, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/whole" {
			_, _ = w.Write([]byte("whole"))
			delivered <- AwaitDelivery(w)
			return
		}
		_, _ = w.Write([]byte("head"))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("end event"))
		delivered <- AwaitDelivery(w)
		_, _ = w.Write([]byte(" and after"))
	})
	s := newStreamHarness(t, testenv.New(t), handler, nil)

	t.Run("read", func(t *testing.T) {
		reply := s.open(t)
		if got := next(t, reply); got != "end event" {
			t.Fatalf("read %q", got)
		}
		select {
		case err := <-delivered:
			t.Fatalf("AwaitDelivery returned (%v) before the reader handed the last piece on", err)
		case <-time.After(200 * time.Millisecond):
		}
		// Asking for more says the last piece was handed on.
		if got := string(rest(t, reply)); got != " and after" {
			t.Fatalf("the rest is %q", got)
		}
		if err := <-delivered; err != nil {
			t.Fatalf("AwaitDelivery = %v, want nil", err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		reply := s.open(t)
		if got := next(t, reply); got != "end event" {
			t.Fatalf("read %q", got)
		}
		reply.Close()
		if err := <-delivered; !errors.Is(err, ErrStreamCancelled) {
			t.Fatalf("AwaitDelivery = %v, want ErrStreamCancelled", err)
		}
	})
	t.Run("whole", func(t *testing.T) {
		resp, err := s.client.Do(context.Background(), "streamtest", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/whole"})
		if err != nil || string(resp.GetBody()) != "whole" {
			t.Fatalf("Do = %v, %v", resp, err)
		}
		if err := <-delivered; err != nil {
			t.Fatalf("AwaitDelivery on a reply that is not a stream = %v, want nil", err)
		}
	})
}

// An ack that was lost is made good by the keep-alives, which repeat the
// last ack sent: the handler held for it goes on without another read.
func TestKeepAlivesRepeatALostAck(t *testing.T) {
	t.Parallel()
	var flushed atomic.Int32
	done := make(chan error, 1)
	s := newStreamHarness(t, testenv.New(t), floodHandler(2, &flushed, done), func(srv *Server) { srv.streamWindow = testPiece })
	s.client.keepAlive = 20 * time.Millisecond
	reply := s.open(t)
	// The head's piece was handed on and acknowledged, but the ack never
	// reached the service.
	reply.acked.Store(0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("flush: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the handler is still held at %d flushes: the keep-alives did not repeat the ack", flushed.Load())
	}
}
