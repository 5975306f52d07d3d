// Package openaicompat speaks what the AI adapters (llm, guard) share with
// any OpenAI-compatible server (OpenAI, vLLM, Ollama, LiteLLM): a JSON POST
// under a base URL with an optional bearer key, a reply read up to a bound,
// and OpenAI's error body {"error": {"message"}}. Its errors are safe to
// show in a run's trace: they carry the server's reason, truncated, never
// the URL and never the key, even when the server echoes it.
package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/safehttp"
)

// MaxReplyBytes bounds what is read of a reply: a chat completion of a few
// thousand tokens is tens of KiB, so a longer one is a broken server.
const MaxReplyBytes = 1 << 20

// maxReasonRunes bounds the server's reason carried in an error, which
// ends up in a run's trace.
const maxReasonRunes = 300

// Redacted stands where an error would have shown the key.
const Redacted = "[redacted]"

// Endpoint is one OpenAI-compatible server.
type Endpoint struct {
	// BaseURL is where the API's paths start ("https://api.openai.com/v1").
	BaseURL string
	// APIKey is sent as a bearer token; empty sends no Authorization
	// (Ollama needs none).
	APIKey string
	HTTP   *http.Client
}

// NewHTTPClient returns the client an Endpoint uses when given none: a
// connection pool of its own, sized for the runs that call one server at
// once (the default transport keeps two idle connections per host). It
// honours HTTPS_PROXY, since the operator chose the server.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = safehttp.DefaultIdleConnsPerHost
	return &http.Client{Transport: t}
}

// StatusError is a reply whose status is not 2xx.
type StatusError struct {
	Status int
	// Reason is the error body's error.message (or the body's start),
	// truncated, with the key redacted.
	Reason string
	// RetryAfter is the reply's Retry-After; zero when it has none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Reason) }

// UnreachableError is a call that got no whole reply: the server could
// not be reached, did not answer in time, or broke off its answer.
type UnreachableError struct {
	Reason string
}

func (e *UnreachableError) Error() string { return e.Reason }

// Retryable reports whether a call that failed with err may succeed if
// made again: no reply, 429, or a 5xx. Any other 4xx and a malformed reply
// would fail the same way again.
func Retryable(err error) bool {
	var unreachable *UnreachableError
	var status *StatusError
	switch {
	case errors.As(err, &unreachable):
		return true
	case errors.As(err, &status):
		return status.Status == http.StatusTooManyRequests || status.Status >= 500
	}
	return false
}

// Post sends in as JSON to BaseURL+path and decodes a 2xx reply into out.
// Its errors are a *StatusError, an *UnreachableError, or a malformed
// reply; ctx bounds the whole call, the reply's body included.
func (e Endpoint) Post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return errors.New("the base URL is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return &UnreachableError{Reason: e.redact("no reply: " + httpx.CallFailure(ctx, err))}
	}
	defer resp.Body.Close()
	raw, err := safehttp.ReadCapped(resp.Body, MaxReplyBytes)
	var tooLarge *safehttp.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, tooLarge)
	case err != nil:
		return &UnreachableError{Reason: e.redact("the reply broke off: " + httpx.CallFailure(ctx, err))}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Status: resp.StatusCode, Reason: e.redact(reason(resp.StatusCode, raw)), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errors.New(e.redact("the reply is not the JSON the API documents: " + err.Error()))
	}
	return nil
}

// redact takes the key out of s, then truncates it: in that order, so a
// cut never leaves a piece of the key behind.
func (e Endpoint) redact(s string) string {
	if e.APIKey != "" {
		s = strings.ReplaceAll(s, e.APIKey, Redacted)
	}
	return truncate(s)
}

// errorBody is OpenAI's error reply; Ollama and some proxies send the
// message as a plain string instead.
type errorBody struct {
	Error json.RawMessage `json:"error"`
}

// reason is why a non-2xx reply failed: its error message, else the start
// of its body as text, else the status's name.
func reason(status int, raw []byte) string {
	var body errorBody
	if json.Unmarshal(raw, &body) == nil && len(body.Error) > 0 {
		var detail struct {
			Message string `json:"message"`
		}
		var plain string
		switch {
		case json.Unmarshal(body.Error, &detail) == nil && detail.Message != "":
			return oneLine(detail.Message)
		case json.Unmarshal(body.Error, &plain) == nil && plain != "":
			return oneLine(plain)
		}
	}
	if text := oneLine(strings.ToValidUTF8(string(raw), "")); text != "" {
		return text
	}
	return strings.ToLower(http.StatusText(status))
}

// oneLine folds s's white space (an HTML error page's line breaks) into
// single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func truncate(s string) string {
	runes := []rune(s)
	if len(runes) <= maxReasonRunes {
		return s
	}
	return string(runes[:maxReasonRunes]) + "…"
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(header string, now time.Time) time.Duration {
	if header == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(header)); err == nil {
		// A day is longer than any run may wait; the bound keeps the
		// product from overflowing.
		return time.Duration(min(max(secs, 0), 86400)) * time.Second
	}
	if at, err := http.ParseTime(header); err == nil {
		return max(0, at.Sub(now))
	}
	return 0
}
