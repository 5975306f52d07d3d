// Package httpcall makes flow http nodes' requests through pkg/safehttp:
// the SSRF guard the webhook dispatcher uses (public https only, checked at
// dial time on the resolved address, no redirects followed) unless
// WEBHOOK_ALLOW_PRIVATE_TARGETS allows private targets, with the response
// body capped at run.MaxResponseBytes.
package httpcall

import (
	"context"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Caller implements run.HTTPCaller.
type Caller struct {
	client *safehttp.Client
}

var _ run.HTTPCaller = (*Caller)(nil)

// New returns a Caller; allowPrivate is WEBHOOK_ALLOW_PRIVATE_TARGETS, and
// userAgent is sent when a node sets none.
func New(allowPrivate bool, userAgent string) *Caller {
	return &Caller{client: safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, UserAgent: userAgent})}
}

// Call implements run.HTTPCaller.
func (c *Caller) Call(ctx context.Context, req run.HTTPRequest) (run.HTTPResponse, error) {
	resp, err := c.client.Call(ctx, safehttp.Request{
		Method:  req.Method,
		URL:     req.URL,
		Headers: req.Headers,
		Body:    req.Body,
		Timeout: req.Timeout,
	})
	if err != nil {
		return run.HTTPResponse{}, err
	}
	return run.HTTPResponse{Status: resp.Status, Headers: resp.Headers, Body: resp.Body}, nil
}
