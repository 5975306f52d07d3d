// Package meta speaks Meta's platform for Messenger and Instagram: it
// verifies and reads the webhook posts Meta sends to /ingress/meta, and
// calls the Graph API (META_GRAPH_API_BASE) to send messages and answer
// comments (https://developers.facebook.com/docs/messenger-platform).
package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Meta's own messaging-window refusal: code 10 with this subcode ("This
// message is sent outside of allowed window"). It maps to
// conversation.ErrOutsideWindow, like Parley's own check.
const (
	codePermission          = 10
	subcodeOutsideWindow    = 2018278
	maxGraphResponseBytes   = 1 << 20
	maxGraphErrorMessageLen = 500
)

// Graph calls the Graph API at a base URL with a page's access token.
type Graph struct {
	base string
	http *http.Client
}

// NewGraph returns a Graph client for base (https://graph.facebook.com/v21.0
// or a fake in tests). hc should have a timeout; the context bounds each
// call too.
func NewGraph(base string, hc *http.Client) *Graph {
	return &Graph{base: strings.TrimRight(base, "/"), http: hc}
}

// graphError is the Graph API's error body.
type graphError struct {
	Error *struct {
		Message      string `json:"message"`
		Type         string `json:"type"`
		Code         int    `json:"code"`
		ErrorSubcode int    `json:"error_subcode"`
	} `json:"error"`
}

// Call sends in as JSON to path (POST, or GET when in is nil) with the
// page's token and decodes the answer into out (nil to ignore it). A
// refusal is a *conversation.PlatformError carrying Meta's message, or
// conversation.ErrOutsideWindow for Meta's window refusal.
func (g *Graph) Call(ctx context.Context, platform channel.Kind, token, path string, in, out any) error {
	method := http.MethodGet
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode graph request: %w", err)
		}
		method, body = http.MethodPost, bytes.NewReader(raw)
	}
	target := g.base + path
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	target += sep + "access_token=" + url.QueryEscape(token)
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return refused(platform, 0, "invalid graph api address")
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return refused(platform, 0, "meta could not be reached: "+httpx.CallFailure(ctx, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxGraphResponseBytes))
	if err != nil {
		return refused(platform, 0, "meta's answer could not be read: "+httpx.CallFailure(ctx, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var ge graphError
		if json.Unmarshal(raw, &ge) != nil || ge.Error == nil {
			return refused(platform, resp.StatusCode, fmt.Sprintf("meta answered HTTP %d without a Graph API error", resp.StatusCode))
		}
		if ge.Error.Code == codePermission && ge.Error.ErrorSubcode == subcodeOutsideWindow {
			return conversation.ErrOutsideWindow
		}
		msg := ge.Error.Message
		if len(msg) > maxGraphErrorMessageLen {
			msg = msg[:maxGraphErrorMessageLen]
		}
		return refused(platform, ge.Error.Code, fmt.Sprintf("%s (code %d, subcode %d)", msg, ge.Error.Code, ge.Error.ErrorSubcode))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return refused(platform, 0, "the Graph API's answer is not what it documents")
	}
	return nil
}

func refused(platform channel.Kind, code int, description string) *conversation.PlatformError {
	return &conversation.PlatformError{Platform: platform, Code: code, Description: description}
}
