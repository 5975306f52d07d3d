package safehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
)

// Bounds of one Client call (a flow http node).
const (
	// MaxTimeout bounds one call, body read included; it is also the
	// timeout of a call that sets none: a flow http node's timeout_ms is at
	// most 10000 (docs/flows.md "http").
	MaxTimeout = 10 * time.Second
	// MaxRequestBody bounds what a call may send.
	MaxRequestBody = 1 << 20
	// MaxResponseBody bounds what a call reads back: a flow keeps the
	// body in its vars and run trace, so a server must not be able to
	// make it hold more. A longer body fails the call (*TooLargeError)
	// rather than being cut, since a cut JSON body would parse as
	// nothing useful.
	MaxResponseBody = 1 << 20
)

// Request is one call a Client makes.
type Request struct {
	// Method is the HTTP method, sent as given; GET when empty.
	Method string
	// URL must pass ValidateURL (https to a public address unless
	// Options.AllowPrivate).
	URL string
	// Headers are sent as given, one value each. Host, Content-Length
	// and Transfer-Encoding come from the URL and body whatever they say.
	Headers map[string]string
	// Body is sent as is (at most MaxRequestBody bytes); nil sends none.
	Body []byte
	// Timeout bounds the call, from dial to the body's last byte; zero
	// or over MaxTimeout means MaxTimeout.
	Timeout time.Duration
}

// Response is what a call got back: any status, 3xx included, since
// redirects are never followed.
type Response struct {
	Status int
	// Headers are flattened to one string each: names in lower case (as
	// HTTP/2 sends them, so a flow has one spelling to look for), the
	// values of a repeated header joined with ", " (RFC 9110 §5.3).
	Headers map[string]string
	// Body is the whole body, at most MaxResponseBody bytes.
	Body []byte
}

// TimeoutError is a call that ran out of its own Timeout.
type TimeoutError struct {
	After time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("no answer within %s", e.After) }

// Client makes the HTTP calls of flow http nodes: one request, guarded as
// the package describes, bounded in time and in what it reads. It is safe
// for concurrent use and shares one connection pool among its calls.
type Client struct {
	hc           *http.Client
	allowPrivate bool
	userAgent    string
}

// NewClient returns a Client; o.AllowPrivate is WEBHOOK_ALLOW_PRIVATE_TARGETS.
func NewClient(o Options) *Client {
	return &Client{hc: NewHTTPClient(o), allowPrivate: o.AllowPrivate, userAgent: o.UserAgent}
}

// Call makes one request and reads its whole response. Every status is a
// Response, not an error; the errors are a URL refused (*URLError), a dial
// refused (*BlockedError), the call's own timeout (*TimeoutError), a body
// over MaxResponseBody (*TooLargeError), ctx's own error when ctx ended
// first, and other transport failures. No error message holds the URL,
// since URLs may carry credentials in the query.
func (c *Client) Call(ctx context.Context, r Request) (Response, error) {
	u, err := ValidateURL(r.URL, c.allowPrivate)
	if err != nil {
		return Response{}, err
	}
	if len(r.Body) > MaxRequestBody {
		return Response{}, fmt.Errorf("request body is larger than %s", bytesize.Size(MaxRequestBody))
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	timeout := callTimeout(r.Timeout)
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body io.Reader // nil, not an empty reader, sends no body at all
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(callCtx, method, u.String(), body)
	if err != nil {
		// The URL passed ValidateURL, so it is the method.
		return Response{}, fmt.Errorf("invalid method %q", method)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" && c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return Response{}, callError(ctx, callCtx, timeout, err)
	}
	defer resp.Body.Close()
	b, err := ReadCapped(resp.Body, MaxResponseBody)
	if err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			return Response{}, err
		}
		return Response{}, callError(ctx, callCtx, timeout, err)
	}
	return Response{Status: resp.StatusCode, Headers: flatten(resp.Header), Body: b}, nil
}

// callTimeout is a call's timeout: d, within MaxTimeout. A flow's
// timeout_ms is checked at publish; this keeps the bound whatever reaches
// here.
func callTimeout(d time.Duration) time.Duration {
	if d <= 0 || d > MaxTimeout {
		return MaxTimeout
	}
	return d
}

// callError says why a call failed, without Go's wrapping (`Get
// "https://...": ...`), which would put the URL in the message.
func callError(ctx, callCtx context.Context, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		return blocked
	}
	if callCtx.Err() != nil {
		return &TimeoutError{After: timeout}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func flatten(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		k = strings.ToLower(k)
		if prev, ok := out[k]; ok {
			out[k] = prev + ", " + strings.Join(vs, ", ")
			continue
		}
		out[k] = strings.Join(vs, ", ")
	}
	return out
}
