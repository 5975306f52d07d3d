package http

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// The widget's sources: an HTML shell with the stylesheet and the script
// inlined at start, so the page is one self-contained response with no
// external assets, and the CSP allows exactly those two by hash.
//
//go:embed webchat/widget.html webchat/widget.css webchat/widget.js webchat/embed.js
var webchatAssets embed.FS

// widgetPage is the widget page, composed once.
type widgetPage struct {
	html      string // with {{CHANNEL_ID}} still to fill
	scriptSHA string
	styleSHA  string
	embedJS   []byte
}

// widget is the page every webchat channel serves. Its sources are compiled
// in, so a broken one is a build mistake, caught by any test.
var widget = mustLoadWidgetPage()

func mustLoadWidgetPage() widgetPage {
	p, err := loadWidgetPage()
	if err != nil {
		panic(err)
	}
	return p
}

func loadWidgetPage() (widgetPage, error) {
	read := func(name string) (string, error) {
		b, err := webchatAssets.ReadFile("webchat/" + name)
		return string(b), err
	}
	shell, err := read("widget.html")
	if err != nil {
		return widgetPage{}, err
	}
	css, err := read("widget.css")
	if err != nil {
		return widgetPage{}, err
	}
	js, err := read("widget.js")
	if err != nil {
		return widgetPage{}, err
	}
	embedJS, err := read("embed.js")
	if err != nil {
		return widgetPage{}, err
	}
	// An inlined source must not end its own element early.
	if strings.Contains(strings.ToLower(js), "</script") || strings.Contains(strings.ToLower(css), "</style") {
		return widgetPage{}, fmt.Errorf("webchat widget sources must not contain a closing </script> or </style>")
	}
	if strings.Count(shell, "{{CSS}}") != 1 || strings.Count(shell, "{{JS}}") != 1 || strings.Count(shell, "{{CHANNEL_ID}}") != 1 {
		return widgetPage{}, fmt.Errorf("webchat widget.html must hold {{CSS}}, {{JS}} and {{CHANNEL_ID}} once each")
	}
	page := strings.Replace(strings.Replace(shell, "{{CSS}}", css, 1), "{{JS}}", js, 1)
	return widgetPage{html: page, scriptSHA: cspHash(js), styleSHA: cspHash(css), embedJS: []byte(embedJS)}, nil
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// csp is the page's Content-Security-Policy: its own inline script and
// style only, images from https (carousel and image replies) and data:,
// requests to its own origin only, embeddable by frameAncestors.
func (p widgetPage) csp(frameAncestors string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + p.scriptSHA,
		"style-src " + p.styleSHA,
		"img-src https: data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors " + frameAncestors,
	}, "; ")
}

// GET /webchat/:channel_id
func (w *webchatHandlers) page(c echo.Context) error {
	ch, err := w.app.Channel(c.Request().Context(), c.Param("channel_id"))
	if errors.Is(err, channel.ErrNotFound) {
		return w.notFoundPage(c)
	}
	if err != nil {
		return err
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", widget.csp(w.deps.FrameAncestors))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	// The page is the same for every visitor of a channel; a short cache
	// keeps widget loads cheap and a new release visible soon.
	hd.Set("Cache-Control", "public, max-age=300")
	body := strings.Replace(widget.html, "{{CHANNEL_ID}}", html.EscapeString(ch.ID), 1)
	return c.HTML(http.StatusOK, body)
}

// notFoundPage answers a widget URL without a webchat channel with a page a
// person can read inside the frame.
func (w *webchatHandlers) notFoundPage(c echo.Context) error {
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors "+w.deps.FrameAncestors)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	return c.HTML(http.StatusNotFound, `<!doctype html><html lang="en"><head><meta charset="utf-8">`+
		`<meta name="viewport" content="width=device-width, initial-scale=1"><title>Chat unavailable</title></head>`+
		`<body style="margin:0;display:grid;place-items:center;height:100vh;font:15px system-ui,sans-serif;color:#6b7280">`+
		`<p>This chat is not available.</p></body></html>`)
}

// GET /webchat/:channel_id/embed.js
func (w *webchatHandlers) embedScript(c echo.Context) error {
	if _, err := w.channel(c); err != nil {
		return err
	}
	hd := c.Response().Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	// Loaded by <script> on the customer's site, which may require CORP.
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	hd.Set("Cache-Control", "public, max-age=3600")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", widget.embedJS)
}
