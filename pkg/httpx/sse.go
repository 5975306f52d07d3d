package httpx

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// StreamWriteTimeout bounds one write to a streamed response by default
// (StartSSE; the gateway's relay takes SSE_WRITE_TIMEOUT): a client that
// stops reading is let go rather than holding its connection and its
// server's goroutine for ever. The servers have no WriteTimeout, which
// would cut a long stream short.
const StreamWriteTimeout = 30 * time.Second

// FlushWriter writes a streamed response: each write under its timeout and
// flushed at once, so that it reaches the client now. One goroutine
// writes.
type FlushWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// NewFlushWriter writes to w, whose status and headers the caller sends,
// each write bounded by timeout.
func NewFlushWriter(w http.ResponseWriter, timeout time.Duration) *FlushWriter {
	return &FlushWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Write sends b and flushes it.
func (f *FlushWriter) Write(b []byte) error {
	// A writer without deadlines (a recorder relayed over NATS) is bounded
	// by whoever relays it.
	if err := f.rc.SetWriteDeadline(time.Now().Add(f.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if len(b) > 0 {
		if _, err := f.w.Write(b); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := f.rc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// SSE writes a text/event-stream response, one flushed write per event, so
// that each reaches the client at once. Its methods may be called from
// several goroutines (a run's events and a ping ticker); after the first
// failed write every call fails with that error.
type SSE struct {
	mu  sync.Mutex
	w   *FlushWriter
	err error
}

// StartSSE sends the stream's status (200) and headers: no caching, and no
// buffering by nginx-like proxies.
func StartSSE(w http.ResponseWriter) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &SSE{w: NewFlushWriter(w, StreamWriteTimeout)}
	s.err = s.w.Write(nil) // the headers, at once
	return s
}

// Event sends one event; data goes one "data:" line per line, so a payload
// with newlines arrives whole.
func (s *SSE) Event(name string, data []byte) error {
	return s.write(EventBytes(name, data))
}

// Comment sends a comment line (": ping"), which clients ignore and
// proxies see as traffic.
func (s *SSE) Comment(text string) error {
	return s.write([]byte(": " + text + "\n\n"))
}

// Raw sends b as it is: a field the other methods do not cover, such as
// "retry: 3000\n\n".
func (s *SSE) Raw(b []byte) error { return s.write(b) }

// Err is the error that ended the stream, or nil.
func (s *SSE) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *SSE) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.w.Write(b)
	}
	return s.err
}

// EventBytes is one event as it goes on the wire.
func EventBytes(name string, data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(name) + len(data) + 16)
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteByte('\n')
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}
