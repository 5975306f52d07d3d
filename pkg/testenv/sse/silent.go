package sse

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// silentReceiveBuffer is the receive buffer a Silent client asks for (the
// kernel's least is about this): a server writing to it blocks once its own
// send buffer is full, not megabytes later.
const silentReceiveBuffer = 4 << 10

// Silent is a client that sends a request and then reads nothing, as a
// stalled reader of a stream does: what a server's write bound on its
// streams is for.
type Silent struct {
	conn net.Conn
}

// OpenSilent sends req, its body whole, over a loopback connection of its
// own with a small receive buffer, and reads nothing; the connection is
// closed when t ends.
func OpenSilent(t testing.TB, req *http.Request) *Silent {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var set error
		if err := c.Control(func(fd uintptr) {
			set = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, silentReceiveBuffer)
		}); err != nil {
			return err
		}
		return set
	}}
	conn, err := d.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatalf("dial %s: %v", req.URL.Host, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := req.Write(conn); err != nil {
		t.Fatalf("send %s %s: %v", req.Method, req.URL, err)
	}
	return &Silent{conn: conn}
}

// Drain reads whatever the server sent until it closed the connection, and
// returns it; it fails t when the connection is still open after within.
func (s *Silent) Drain(t testing.TB, within time.Duration) []byte {
	t.Helper()
	if err := s.conn.SetReadDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s.conn)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the server still holds the connection open %s later (%d bytes read)", within, len(got))
	case err != nil && !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("after %d bytes: %v", len(got), err)
	}
	return got
}
