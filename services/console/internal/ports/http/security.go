package http

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/httpx"
)

// contentSecurityPolicy lets a page load only the console's own
// stylesheet, images and script files (static/, such as the copy button's),
// lets scripts connect only to the console (the inbox's event stream and
// its redraws), and post forms only to the console: no inline script runs, and no other
// site may frame a page.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders is on every answer of the console's pages.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		return next(c)
	}
}

// onLoopback reports whether r reached the console on this machine in the
// clear: no TLS, a loopback peer, and a Host that names the loopback
// (localhost, *.localhost, 127.0.0.0/8, ::1). Only then, or with
// PublicDeps.InsecureCookies, are its cookies sent without Secure, since a
// browser on plain http://127.0.0.1 would drop a Secure cookie. Any other
// request, including one relayed by a proxy on this machine under a
// public name, gets Secure cookies.
func onLoopback(r *http.Request) bool {
	if r.TLS != nil {
		return false
	}
	// No proxies trusted: the connection's own peer.
	if peer := (httpx.Proxies{}).ClientAddr(r); !peer.IsValid() || !peer.IsLoopback() {
		return false
	}
	return loopbackHost(r.Host)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// sameOrigin reports whether a state-changing request came from one of the
// console's own pages: its Origin, or when a browser sent none its
// Referer, names the host the request was sent to. A request with neither
// is refused: browsers send Origin with every form post, and the console's
// Referrer-Policy keeps Referer for its own pages, so only a forged or
// scripted request lacks both (scripts send Origin themselves).
func sameOrigin(r *http.Request) bool {
	source := r.Header.Get("Origin")
	if source == "" {
		source = r.Header.Get("Referer")
	}
	if source == "" || source == "null" {
		return false
	}
	u, err := url.Parse(source)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if r.TLS != nil && u.Scheme != "https" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// Cookie names: the session's token, and before sign-in the token the
// sign-in form must echo.
const (
	sessionCookie = "parley_console_session"
	loginCookie   = "parley_console_login"
)

// plainHTTP reports whether r came over plain HTTP: no TLS, and no proxy
// says the browser used HTTPS. (A client may claim https itself: that
// only makes its cookies Secure.)
func plainHTTP(r *http.Request) bool {
	return r.TLS == nil && !strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// clearCookies reports whether the cookies of r go without Secure: on
// loopback, or over plain HTTP with PublicDeps.InsecureCookies.
func (c *Console) clearCookies(r *http.Request) bool {
	return onLoopback(r) || (c.insecureCookies && plainHTTP(r))
}

// cookie is the one shape of the console's cookies: HttpOnly (no script
// reads it), SameSite=Lax (not sent on another site's posts), the whole
// console's path, Secure unless clearCookies. No expiry: it lasts the
// browser's session; the server's record decides how long it is honoured.
func (c *Console) cookie(r *http.Request, name, value string) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   !c.clearCookies(r),
	}
}

// expired is a cookie that removes name from the browser.
func (c *Console) expired(r *http.Request, name string) *http.Cookie {
	ck := c.cookie(r, name, "")
	ck.MaxAge = -1
	return ck
}
