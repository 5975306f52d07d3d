// Package webhookhttp posts signed deliveries to receivers over HTTP. Its
// client is pkg/safehttp's, built for hostile receivers: redirects are never
// followed, responses are never decompressed and are read only up to a cap,
// no proxy from the environment is used, and (unless private targets are
// allowed) every connection is checked at dial time against the resolved
// address, so DNS rebinding cannot reach loopback, private or metadata
// addresses.
package webhookhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/sdk/go/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Bounds on what a receiver can make the dispatcher read (the response
// headers are bounded by safehttp.MaxResponseHeader).
const (
	// MaxResponseBody is how much of a response body is read.
	MaxResponseBody = 64 << 10
	// errorBodyChars is how much of a failing response's body is kept in
	// the delivery's last_error.
	errorBodyChars = 512
)

// Options configure a Sender.
type Options struct {
	// AllowPrivateTargets lets deliveries use plain http and reach
	// loopback and private addresses (development and tests).
	AllowPrivateTargets bool
	// UserAgent is sent as User-Agent ("Parley-Webhooks/<version>").
	UserAgent string
	// Clock stamps X-Service-Timestamp; time.Now when nil.
	Clock func() time.Time
	// Resolver looks up receivers' host names; the system's when nil.
	// The dial-time guard (safehttp.DialControl) judges whatever address
	// it returns.
	Resolver *net.Resolver
	// IdleConnsPerHost is how many kept-alive connections to one receiver
	// are kept for reuse: as many as deliveries may be under way at once,
	// so a busy receiver is never dialed again for lack of an idle one.
	// DefaultIdleConnsPerHost when zero.
	IdleConnsPerHost int
}

// DefaultIdleConnsPerHost is Options.IdleConnsPerHost's default.
const DefaultIdleConnsPerHost = 64

// Sender implements delivery.Sender.
type Sender struct {
	client       *http.Client
	userAgent    string
	clock        func() time.Time
	allowPrivate bool
}

var _ delivery.Sender = (*Sender)(nil)

// New returns a Sender with its own connection pool.
func New(o Options) *Sender {
	idlePerHost := o.IdleConnsPerHost
	if idlePerHost <= 0 {
		idlePerHost = DefaultIdleConnsPerHost
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Sender{
		// A redirect is the answer, and a failure: safehttp never follows it.
		client: safehttp.NewHTTPClient(safehttp.Options{
			AllowPrivate:     o.AllowPrivateTargets,
			Resolver:         o.Resolver,
			IdleConnsPerHost: idlePerHost,
		}),
		userAgent:    o.UserAgent,
		clock:        clock,
		allowPrivate: o.AllowPrivateTargets,
	}
}

// Send implements delivery.Sender: one POST, signed with the current time.
func (s *Sender) Send(ctx context.Context, r delivery.Request) delivery.Result {
	u, err := url.Parse(r.URL)
	if err != nil {
		return delivery.Result{Error: "invalid webhook url"}
	}
	if !s.allowPrivate && u.Scheme != "https" {
		return delivery.Result{Error: "refused: webhook url is not https"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return delivery.Result{Error: "invalid webhook url"}
	}
	ts := s.clock().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	// The headers and signature of docs/webhooks.md "Headers", made by the
	// Go client's webhook package: what it verifies is what is sent.
	req.Header.Set(webhook.HeaderEvent, r.Event)
	req.Header.Set(webhook.HeaderDelivery, r.DeliveryID)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(r.Secret, ts, r.Body))

	resp, err := s.client.Do(req)
	if err != nil {
		return delivery.Result{Error: describe(err)}
	}
	defer resp.Body.Close()
	// Read (capped) so the connection can be reused; a body cut short by
	// the attempt deadline does not change the answer already given.
	body, _ := safehttp.ReadCapped(resp.Body, MaxResponseBody)

	res := delivery.Result{Status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		res.Error = fmt.Sprintf("receiver answered %d (redirects are not followed)", resp.StatusCode)
		if loc := resp.Header.Get("Location"); loc != "" {
			res.Error += ": Location " + httpx.Truncate(clean([]byte(loc)), errorBodyChars)
		}
	default:
		res.Error = fmt.Sprintf("receiver answered %d", resp.StatusCode)
		if snippet := httpx.Truncate(clean(body), errorBodyChars); snippet != "" {
			res.Error += ": " + snippet
		}
	}
	return res
}

// describe turns a transport error into last_error text without Go's
// wrapping ("Post \"https://...\": dial tcp ...").
func describe(err error) string {
	var blocked *safehttp.BlockedError
	if errors.As(err, &blocked) {
		return blocked.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return httpx.Truncate(err.Error(), errorBodyChars)
}

// clean makes receiver-supplied bytes fit to store and show: valid UTF-8,
// no control characters, trimmed.
func clean(b []byte) string {
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
