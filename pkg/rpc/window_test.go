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

// flood is a handler that flushes pieces of testPiece bytes, the i-th
// all byte i, served with a window of window bytes.
type flood struct {
	*streamHarness
	pieces int
	// flushed counts the flushes that returned; done has how the last
	// one ended.
	flushed atomic.Int32
	done    chan error
}

// newFlood serves a flood of pieces with a window of window bytes.
func newFlood(t *testing.T, env *testenv.Env, pieces int, window int64) *flood {
	t.Helper()
	f := &flood{pieces: pieces, done: make(chan error, 1)}
	f.streamHarness = newStreamHarness(t, env, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		for i := range pieces {
			_, _ = w.Write(bytes.Repeat([]byte{byte(i)}, testPiece))
			if err := rc.Flush(); err != nil {
				f.done <- err
				return
			}
			f.flushed.Add(1)
		}
		f.done <- nil
	}), func(srv *Server) { srv.streamWindow, srv.streamBeat = window, 20*time.Millisecond })
	f.client.keepAlive = 20 * time.Millisecond
	return f
}

// ended is how the handler's last flush ended, once it has; it fails t
// when the handler is still held after within.
func (f *flood) ended(t *testing.T, within time.Duration, why string) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(within):
		t.Fatalf("the handler is still held at %d of %d flushes after %s: %s", f.flushed.Load(), f.pieces, within, why)
		return nil
	}
}

// filled waits until the handler has flushed a window of n bytes.
func (f *flood) filled(t *testing.T, n int) {
	t.Helper()
	wait.Until(t, 10*time.Second, "the handler to fill the window", func() bool { return int(f.flushed.Load()) >= n/testPiece })
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
// while: that it is held, not slow. Nothing can signal an absence, so this
// waits for several of the stream's beats and keep-alives.
func (f *flood) stays(t *testing.T, want int32, what string) {
	t.Helper()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := f.flushed.Load(); got != want {
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
	f := newFlood(t, testenv.New(t), 40, testWindow)
	f.client.ackEvery = 2 * testPiece
	reply := f.open(t)

	// Nothing read: the handler is held a window ahead, beats and
	// keep-alives going meanwhile.
	held := int32(testWindow / testPiece)
	f.filled(t, testWindow)
	f.stays(t, held, "with nothing read")

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
	f.stays(t, held, "with one piece read while more waits")

	got = append(got, rest(t, reply)...)
	wantPieces(t, got, f.pieces)
	if err := f.ended(t, 10*time.Second, "everything was read"); err != nil {
		t.Fatalf("the handler's flush failed: %v", err)
	}
}

// A reader that stops reading holds its handler in Flush; once it goes
// (Close: the gateway's write to its client timed out), the Flush returns
// ErrStreamCancelled at once and the handler stops.
func TestClosingAHeldStreamEndsItsFlush(t *testing.T) {
	t.Parallel()
	f := newFlood(t, testenv.New(t), 1000, testWindow)
	reply := f.open(t)
	f.filled(t, testWindow)
	reply.Close()
	if err := f.ended(t, StreamIdle/2, "its caller went"); !errors.Is(err, ErrStreamCancelled) {
		t.Fatalf("the held flush ended with %v, want ErrStreamCancelled", err)
	}
	if n := f.flushed.Load(); n > testWindow/testPiece {
		t.Fatalf("the handler flushed %d pieces for a reader that read none, want at most a window's %d", n, testWindow/testPiece)
	}
}

// A caller from before flow control (Parley-Accept-Stream: 1) sends no
// acks: its stream is not held, and arrives whole and in order.
func TestCallersWithoutAcksStreamUnheld(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	f := newFlood(t, env, 40, testWindow)

	inbox := f.clientConn.NewInbox()
	sub, err := f.clientConn.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	data, _ := proto.Marshal(&rpcv1.Request{Method: http.MethodPost, Path: "/v1/runs"})
	if err := f.clientConn.PublishMsg(&nats.Msg{
		Subject: Subject(env.RPCPrefix, "streamtest", EndpointAPI), Reply: inbox, Data: data,
		Header: nats.Header{HeaderAcceptStream: {"1"}},
	}); err != nil {
		t.Fatal(err)
	}
	// The handler finishes with nothing acknowledged.
	if err := f.ended(t, 10*time.Second, "its caller sends no acks"); err != nil {
		t.Fatalf("flush: %v", err)
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
	wantPieces(t, body, f.pieces)
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
	f := newFlood(t, testenv.New(t), 2, testPiece)
	reply := f.open(t)
	// The head's piece was handed on and acknowledged, but the ack never
	// reached the service.
	reply.acked.Store(0)
	if err := f.ended(t, 10*time.Second, "the keep-alives did not repeat the ack"); err != nil {
		t.Fatalf("flush: %v", err)
	}
}
