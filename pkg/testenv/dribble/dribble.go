// Package dribble plays a client that sends its request body a byte at a
// time and never finishes, for the tests of the listeners' read bound
// (HTTP_READ_TIMEOUT, docs/limits-and-errors.md "Request body limits"):
// what the server answers, and when it lets the connection go.
package dribble

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Request is the request a dribbling client starts.
type Request struct {
	Method string
	// Path is the request target, "/v1/messages?x=1".
	Path   string
	Header http.Header
	// ContentLength is the body's announced length; the client sends one
	// byte ("x") every Every, far fewer than announced.
	ContentLength int
	Every         time.Duration
}

// Result is what became of one dribbled request.
type Result struct {
	// Status is the answer's status; 0 when the connection ended with no
	// answer.
	Status int
	Body   []byte
	// Closed says the server closed the connection, after its answer or
	// without one, within the time Send allowed; After is when, counted
	// from the first byte sent.
	Closed bool
	After  time.Duration
}

// Send starts req on a new connection to addr and dribbles its body until
// the server closes the connection or within has passed, whichever comes
// first; the connection is closed when Send returns. An error is a failure
// to connect or to send the request's head.
func Send(addr string, req Request, within time.Duration) (Result, error) {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(start.Add(within)); err != nil {
		return Result{}, err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.Path, addr)
	for name, values := range req.Header {
		for _, v := range values {
			fmt.Fprintf(&head, "%s: %s\r\n", name, v)
		}
	}
	fmt.Fprintf(&head, "Content-Length: %d\r\n\r\n", req.ContentLength)
	if _, err := io.WriteString(conn, head.String()); err != nil {
		return Result{}, fmt.Errorf("send the request's head: %w", err)
	}

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(req.Every)
		defer tick.Stop()
		for range req.ContentLength - 1 {
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	var res Result
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err == nil {
		res.Status = resp.StatusCode
		res.Body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	} else if !closedErr(err) {
		return res, nil // no answer within the time allowed
	}
	// The answer is read; the connection ends now or never.
	for {
		if _, err := br.ReadByte(); err != nil {
			if closedErr(err) {
				res.Closed, res.After = true, time.Since(start)
			}
			return res, nil
		}
	}
}

// closedErr says err is the server's end of the connection rather than
// Send's own deadline.
func closedErr(err error) bool {
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}
