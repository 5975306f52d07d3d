package parley

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is this client's version, sent in the default User-Agent.
const Version = "0.1.0"

// DefaultBaseURL is the gateway of a Parley started on this machine
// (`make run`); pass your deployment's address with WithBaseURL.
const DefaultBaseURL = "http://127.0.0.1:8080"

// Client calls Parley's Developer API with one API key. It is safe for
// concurrent use; make one and share it.
type Client struct {
	apiKey    string
	base      string // the server root followed by /v1, no trailing slash
	hc        *http.Client
	retry     RetryPolicy
	userAgent string
	// maxAnswer bounds the bytes read of one answer, or of one line or
	// event of a stream; tests lower it.
	maxAnswer int64
	// wait sleeps d or until ctx is done; tests replace it.
	wait func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the server's root, such as "https://parley.example.com";
// the client adds /v1. The default is DefaultBaseURL.
func WithBaseURL(u string) Option {
	return func(c *Client) { c.base = strings.TrimRight(u, "/") + "/v1" }
}

// WithHTTPClient sets the http.Client the calls go through (its transport,
// proxy and TLS settings). Leave its Timeout at 0 to stream: a call's
// deadline is its context's. The default (and nil) is http.DefaultClient.
// Unless hc has its own CheckRedirect, the client follows no redirect (the
// API makes none): a 3xx answer is an *Error.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithRetry sets how calls are retried (see RetryPolicy).
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) { c.retry = p }
}

// WithUserAgent sets the User-Agent header; the default is
// "parley-go/<Version>".
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client that authenticates with apiKey (a "pk_…" key).
func New(apiKey string, opts ...Option) *Client {
	c := &Client{
		apiKey:    apiKey,
		hc:        http.DefaultClient,
		userAgent: "parley-go/" + Version,
		maxAnswer: maxAnswer,
		wait:      sleep,
	}
	WithBaseURL(DefaultBaseURL)(c)
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.hc.CheckRedirect == nil {
		// A copy: the caller's client stays as it was. A redirect followed
		// would turn a POST into a GET (whose answer would pass for the
		// POST's) or repeat the API key to wherever it points.
		hc := *c.hc
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		c.hc = &hc
	}
	c.retry = c.retry.withDefaults()
	return c
}

// CallOption configures one call that takes an Idempotency-Key.
type CallOption func(*callConfig)

type callConfig struct {
	idempotencyKey string
	info           *CallInfo
}

// CallInfo is what a call that takes an Idempotency-Key says beyond its
// answer's body, filled in by WithCallInfo.
type CallInfo struct {
	// IdempotencyKey is the key the call carried, given or generated, set
	// before the first attempt (also when the call fails): kept, it repeats
	// the call after a restart of your program (WithIdempotencyKey).
	IdempotencyKey string
	// Replayed says the answer is the first call's answer with this key
	// again (Idempotent-Replayed: true): nothing was done this time.
	Replayed bool
	// RequestID is the successful answer's X-Request-Id, to quote to
	// support (a failed call's is in its *Error).
	RequestID string
}

// WithCallInfo fills info in as the call goes: its Idempotency-Key at
// once, and from its successful answer whether it was a replay and its
// request id. For a stream, the answer is the one the stream arrives in.
func WithCallInfo(info *CallInfo) CallOption {
	return func(cc *callConfig) { cc.info = info }
}

// WithIdempotencyKey sends key as the call's Idempotency-Key (at most 128
// printable ASCII characters) instead of a generated one. Use it to repeat
// a call across restarts of your program: the same key with the same
// request answers the first response again and does nothing again.
func WithIdempotencyKey(key string) CallOption {
	return func(cc *callConfig) { cc.idempotencyKey = key }
}

// newIdempotencyKey returns 32 random lowercase hex digits.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b[:])
}

// maxAnswer is the most bytes read of one answer: the largest reply
// Parley's services send (docs/architecture.md "Large replies travel in
// chunks"). A stream's line and event are bounded by it too.
const maxAnswer = 64 << 20

// request is one call, the same on each attempt.
type request struct {
	method string
	path   string // under /v1, with its query
	body   []byte // nil for none; the same bytes on every attempt
	// key is the Idempotency-Key; "" for calls that take none.
	key    string
	stream bool  // Accept: text/event-stream
	public bool  // no Authorization: a route that takes no key
	err    error // why the request could not be built
	// mayHaveActed is set once an attempt may have reached the server and
	// acted without its answer coming back (a lost or cut answer, a 503).
	mayHaveActed bool
	info         *CallInfo // WithCallInfo's; nil without
}

func (c *Client) newRequest(method, path string, body any, keyed bool, opts []CallOption) *request {
	r := &request{method: method, path: path}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.err = fmt.Errorf("parley: encode the %s %s body: %w", method, path, err)
		}
		r.body = b
	}
	if keyed {
		var cc callConfig
		for _, o := range opts {
			o(&cc)
		}
		r.key = cc.idempotencyKey
		if r.key == "" {
			r.key = newIdempotencyKey()
		}
		if r.info = cc.info; r.info != nil {
			*r.info = CallInfo{IdempotencyKey: r.key}
		}
		// A character outside printable ASCII cannot be sent in the header
		// (net/http refuses a control character): no attempt could go out,
		// and none is made. The server judges the rest of the key's rules.
		if i := strings.IndexFunc(r.key, func(c rune) bool { return c < ' ' || c > '~' }); i >= 0 {
			r.err = fmt.Errorf("parley: the Idempotency-Key %q has a character that is not printable ASCII at byte %d", r.key, i)
		}
	}
	return r
}

// send makes the call, retrying as the policy allows, and returns the
// first answer that is a success (2xx; its body in memory unless it is an
// event stream) or an error.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	if r.err != nil {
		return nil, r.err
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, r)
		if err == nil && resp.StatusCode < 300 && !(r.stream && isEventStream(resp)) {
			// A success read whole here: one cut short is as a lost answer.
			// An event stream is read as it comes (a stream's replay is
			// JSON, read whole).
			err = readWhole(resp, c.maxAnswer)
		}
		if err != nil {
			r.mayHaveActed = true
			if ctx.Err() != nil {
				return nil, r.fail(ctx.Err())
			}
			// An answer too large came whole from the server: a repeat
			// would be answered the same.
			if !r.safeToRepeat() || attempt >= c.retry.MaxAttempts || errors.Is(err, ErrMalformedAnswer) {
				return nil, r.fail(err)
			}
			if werr := c.wait(ctx, c.retry.backoff(attempt)); werr != nil {
				return nil, r.fail(werr)
			}
			continue
		}
		if resp.StatusCode < 300 {
			if r.info != nil {
				r.info.Replayed = strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true")
				r.info.RequestID = resp.Header.Get("X-Request-Id")
			}
			return resp, nil
		}
		apiErr := readError(resp)
		apiErr.IdempotencyKey = r.key
		if apiErr.Status == http.StatusServiceUnavailable {
			r.mayHaveActed = true
		}
		if attempt >= c.retry.MaxAttempts {
			return nil, apiErr
		}
		d, retry := c.retry.delay(apiErr, attempt)
		// A 503 may come after the call reached its service (one that did
		// not answer in time): only a call safe to repeat is repeated.
		if !retry || (apiErr.Status == http.StatusServiceUnavailable && !r.safeToRepeat()) {
			return nil, apiErr
		}
		if werr := c.wait(ctx, d); werr != nil {
			return nil, r.fail(werr)
		}
	}
}

// readWhole reads resp's body, at most limit bytes, into memory, so that
// a connection lost while it arrives can be retried like one lost before
// it.
func readWhole(resp *http.Response, limit int64) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("parley: read the answer: %w", err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%w: a body over %d bytes", ErrMalformedAnswer, limit)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// fail is the error err of the call r, with r's Idempotency-Key when it
// has one (IdempotencyKeyOf reads it).
func (r *request) fail(err error) error {
	var e *Error
	if r.key == "" || errors.As(err, &e) {
		return err
	}
	return &keyedError{key: r.key, err: err}
}

// safeToRepeat reports whether a request whose answer never came may be
// sent again: reads, puts and deletes, and anything with an
// Idempotency-Key, which the server answers once.
func (r *request) safeToRepeat() bool {
	switch r.method {
	case http.MethodGet, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.key != ""
}

func (c *Client) attempt(ctx context.Context, r *request) (*http.Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return nil, fmt.Errorf("parley: %s %s: %w", r.method, r.path, err)
	}
	if !r.public {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if r.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("parley: %s %s: %w", r.method, r.path, err)
	}
	return resp, nil
}

// errorSnippet is how much of a non-JSON error body Error.Message keeps.
const errorSnippet = 256

// readError reads an error answer into an *Error and closes its body.
func readError(resp *http.Response) *Error {
	defer resp.Body.Close()
	e := &Error{
		Status:     resp.StatusCode,
		RequestID:  resp.Header.Get("X-Request-Id"),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RunID     string `json:"run_id"`
		MessageID string `json:"message_id"`
		CommentID string `json:"comment_id"`
	}
	if isJSON(resp.Header.Get("Content-Type")) && json.Unmarshal(raw, &body) == nil && body.Code != "" {
		e.Code, e.Message = body.Code, body.Message
		e.RunID, e.MessageID, e.CommentID = body.RunID, body.MessageID, body.CommentID
		return e
	}
	// A proxy's page may be any bytes; the message is text.
	s := strings.ToValidUTF8(strings.TrimSpace(string(raw)), "\uFFFD")
	if len(s) > errorSnippet {
		s = s[:errorSnippet]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	e.Message = "an answer that is not the API's JSON error"
	if loc := resp.Header.Get("Location"); resp.StatusCode < 400 && loc != "" {
		e.Message = "a redirect to " + loc + ", not followed"
	}
	if s != "" {
		e.Message += ": " + s
	}
	return e
}

func isEventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when
// absent, unreadable, negative or past. Seconds beyond what a Duration
// holds are the longest Duration (not a product wrapped around to a short
// wait).
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if n <= 0 {
			return 0
		}
		if n > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// do makes a JSON call and decodes a success's body into out.
func (c *Client) do(ctx context.Context, r *request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body) // in memory already (send)
	if err == nil {
		err = decodeAnswer(raw, out)
	}
	if err != nil {
		return r.fail(fmt.Errorf("%w: %s %s: decode the answer: %w", ErrMalformedAnswer, r.method, r.path, err))
	}
	return nil
}

// plain builds a call that takes no Idempotency-Key.
func (c *Client) plain(method, path string, body any) *request {
	return c.newRequest(method, path, body, false, nil)
}

// keyed builds a POST that carries an Idempotency-Key.
func (c *Client) keyed(path string, body any, opts []CallOption) *request {
	return c.newRequest(http.MethodPost, path, body, true, opts)
}

// fetch makes the call r and decodes its answer, or the answer's property
// key unless key is "", into a T.
func fetch[T any](ctx context.Context, c *Client, r *request, key string) (*T, error) {
	var out T
	if key == "" {
		if err := c.do(ctx, r, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	var body map[string]json.RawMessage
	if err := c.do(ctx, r, &body); err != nil {
		return nil, err
	}
	raw, ok := body[key]
	if !ok {
		return nil, r.fail(fmt.Errorf("%w: %s %s: the answer has no %q", ErrMalformedAnswer, r.method, r.path, key))
	}
	if err := decodeAnswer(raw, &out); err != nil {
		return nil, r.fail(fmt.Errorf("%w: %s %s: decode the answer's %q: %w", ErrMalformedAnswer, r.method, r.path, key, err))
	}
	return &out, nil
}

// pathEscape makes s one path segment. "." and ".." are escaped too: a
// server or proxy that cleans the path would otherwise route elsewhere.
func pathEscape(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// checkID refuses an empty path id before a request is made: it would
// name another route.
func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("parley: the %s is empty", what)
	}
	return nil
}
