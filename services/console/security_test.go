package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestCookieFlags: HttpOnly, SameSite=Lax and Path=/ always; Secure unless
// the console is reached on loopback, decided from the Host and the peer,
// or over plain HTTP with CONSOLE_INSECURE_COOKIES (PublicDeps.InsecureCookies),
// which keeps Secure over HTTPS. The sign-in page says which holds.
func TestCookieFlags(t *testing.T) {
	t.Parallel()
	strict := newHarness(t, defaults())
	strict.operator(t, "ann@example.com", "")
	insecure := defaults()
	insecure.insecureCookies = true
	relaxed := newHarness(t, insecure)
	relaxed.operator(t, "ann@example.com", "")
	tests := []struct {
		name       string
		h          *harness
		host       string
		https      bool
		wantSecure bool
		// wantNotice is a phrase of the sign-in page's notice, "" none.
		wantNotice string
	}{
		{"loopback address", strict, "", false, false, ""},
		{"localhost", strict, "localhost:8084", false, false, ""},
		{"a public name through a proxy on this machine", strict, "console.example.com", false, true, "only when the console is reached over HTTPS"},
		{"a public name through an HTTPS proxy", strict, "console.example.com", true, true, ""},
		{"a LAN address", strict, "192.0.2.10:8084", false, true, "only when the console is reached over HTTPS"},
		{"insecure cookies: loopback", relaxed, "", false, false, ""},
		{"insecure cookies: a published port", relaxed, "192.0.2.10:8084", false, false, "CONSOLE_INSECURE_COOKIES"},
		{"insecure cookies: an HTTPS proxy", relaxed, "console.example.com", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.h.browser(t)
			headers := map[string]string{}
			origin := tt.h.url
			if tt.host != "" {
				headers["Host"] = tt.host
				origin = "http://" + tt.host
			}
			if tt.https {
				headers["X-Forwarded-Proto"] = "https"
				origin = "https://" + tt.host
			}
			form := b.do(http.MethodGet, "/login", nil, headers)
			login := form.setCookie("parley_console_login")
			assertCookie(t, login, tt.wantSecure)
			notice := between(form.body, `class="notice"`, "</p>")
			if tt.wantNotice == "" && notice != "" || !strings.Contains(notice, tt.wantNotice) {
				t.Errorf("the sign-in page's notice is %q, want one saying %q", notice, tt.wantNotice)
			}
			headers["Origin"] = origin
			// The jar of a browser at 127.0.0.1 keeps the login cookie
			// whatever Host was sent; send it by hand to be sure.
			headers["Cookie"] = "parley_console_login=" + login.Value
			in := b.do(http.MethodPost, "/login", url.Values{"email": {"ann@example.com"}, "password": {password}, "csrf_token": {csrf(t, form)}}, headers)
			if in.status != http.StatusSeeOther {
				t.Fatalf("sign in = %d: %s", in.status, in.body)
			}
			assertCookie(t, in.setCookie("parley_console_session"), tt.wantSecure)
		})
	}
}

// between is the text of body from the first from to the next to after
// it, "" when from is not in body.
func between(body, from, to string) string {
	_, rest, ok := strings.Cut(body, from)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(rest, to)
	return in
}

func assertCookie(t *testing.T, c *http.Cookie, wantSecure bool) {
	t.Helper()
	if c == nil {
		t.Fatal("no cookie set")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure != wantSecure || c.Value == "" {
		t.Fatalf("cookie %s: HttpOnly %v SameSite %v Path %q Secure %v, want HttpOnly, Lax, /, Secure %v", c.Name, c.HttpOnly, c.SameSite, c.Path, c.Secure, wantSecure)
	}
}

// TestCSRFRefused: a post without the session's token, with a wrong one,
// or from another origin is refused (403) and changes nothing; the right
// token from the console's own page passes, as a field or as the header.
func TestCSRFRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "ann@example.com", "")
	b := h.browser(t)
	b.mustSignIn("ann@example.com")
	token := b.pageCSRF("/workspaces")
	tests := []struct {
		name    string
		form    url.Values
		headers map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"empty token", url.Values{"csrf_token": {""}}, nil},
		{"wrong token", url.Values{"csrf_token": {strings.Repeat("A", len(token))}}, nil},
		{"another session's token", url.Values{"csrf_token": {otherSessionToken(t, h)}}, nil},
		{"cross-origin Origin", url.Values{"csrf_token": {token}}, map[string]string{"Origin": "https://evil.example"}},
		{"same host, other port", url.Values{"csrf_token": {token}}, map[string]string{"Origin": h.url + "1"}},
		{"null Origin", url.Values{"csrf_token": {token}}, map[string]string{"Origin": "null"}},
		{"cross-origin Referer", url.Values{"csrf_token": {token}}, map[string]string{"Referer": "https://evil.example/page"}},
		{"neither Origin nor Referer", url.Values{"csrf_token": {token}}, map[string]string{}},
		{"wrong header token", url.Values{}, map[string]string{"Origin": h.url, "X-CSRF-Token": "nope"}},
	}
	for _, tt := range tests {
		r := b.do(http.MethodPost, "/logout", tt.form, tt.headers)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "out of date or came from another site") {
			t.Fatalf("%s: logout = %d: %s", tt.name, r.status, r.body)
		}
		if still := b.get("/workspaces"); still.status != http.StatusOK {
			t.Fatalf("%s: the refused logout ended the session (%d)", tt.name, still.status)
		}
	}
	// The same page's own Referer, without Origin, passes.
	ok := b.do(http.MethodPost, "/logout", url.Values{"csrf_token": {token}}, map[string]string{"Referer": h.url + "/workspaces"})
	if ok.status != http.StatusSeeOther {
		t.Fatalf("logout with the token and a same-origin Referer = %d: %s", ok.status, ok.body)
	}
	// A script's header instead of the field.
	b2 := h.browser(t)
	b2.mustSignIn("ann@example.com")
	hdr := b2.do(http.MethodPost, "/logout", nil, map[string]string{"Origin": h.url, "X-CSRF-Token": b2.pageCSRF("/workspaces")})
	if hdr.status != http.StatusSeeOther {
		t.Fatalf("logout with X-CSRF-Token = %d: %s", hdr.status, hdr.body)
	}
}

func otherSessionToken(t *testing.T, h *harness) string {
	t.Helper()
	other := h.browser(t)
	other.mustSignIn("ann@example.com")
	return other.pageCSRF("/workspaces")
}

// TestLoginCSRFRefused: the sign-in form must echo its pre-session token
// and come from the console's origin, or no password is checked.
func TestLoginCSRFRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "ann@example.com", "")
	creds := url.Values{"email": {"ann@example.com"}, "password": {password}}
	with := func(token string) url.Values {
		v := url.Values{}
		for k, vs := range creds {
			v[k] = vs
		}
		v.Set("csrf_token", token)
		return v
	}

	// No form fetched: no cookie, and a made-up token.
	b := h.browser(t)
	if r := b.do(http.MethodPost, "/login", with("forged"), nil); r.status != http.StatusForbidden {
		t.Fatalf("sign in without the form's cookie = %d", r.status)
	}
	// A token, but not the cookie's.
	form := b.get("/login")
	if r := b.do(http.MethodPost, "/login", with("forged"), nil); r.status != http.StatusForbidden {
		t.Fatalf("sign in with a token not the form's = %d", r.status)
	}
	// The form's token posted from another site.
	form = b.get("/login")
	if r := b.do(http.MethodPost, "/login", with(csrf(t, form)), map[string]string{"Origin": "https://evil.example"}); r.status != http.StatusForbidden {
		t.Fatalf("cross-origin sign in = %d", r.status)
	}
	if b.sessionToken() != "" {
		t.Fatal("a refused sign-in set a session")
	}
	// The refusal drew a fresh form, which works.
	form = b.get("/login")
	if r := b.do(http.MethodPost, "/login", with(csrf(t, form)), nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign in with the form's token = %d: %s", r.status, r.body)
	}
}

// TestNoSessionFixation: signing in always starts a new session with a new
// token, and ends the one the browser held before.
func TestNoSessionFixation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "ann@example.com", "")
	h.operator(t, "bo@example.com", "")
	b := h.browser(t)
	b.mustSignIn("ann@example.com")
	first := b.sessionToken()
	// Signed in, /login goes home; a sign-in form opened before (here
	// fetched by another tab's cookie) still posts, with the session's
	// cookie along.
	if r := b.get("/login"); r.status != http.StatusSeeOther || r.location() != "/" {
		t.Fatalf("GET /login signed in = %d %q", r.status, r.location())
	}
	tab := h.browser(t)
	form := tab.get("/login")
	u, _ := url.Parse(h.url)
	b.client.Jar.SetCookies(u, []*http.Cookie{form.setCookie("parley_console_login")})
	again := b.do(http.MethodPost, "/login", url.Values{"email": {"bo@example.com"}, "password": {password}, "csrf_token": {csrf(t, form)}}, nil)
	if again.status != http.StatusSeeOther {
		t.Fatalf("second sign-in = %d: %s", again.status, again.body)
	}
	second := b.sessionToken()
	if second == "" || second == first {
		t.Fatalf("sign-in kept the session token %q", first)
	}
	if r := authenticated(t, h, first); r {
		t.Fatal("the session held before signing in again still opens")
	}
	if who := b.get("/workspaces"); !strings.Contains(who.body, "bo@example.com") {
		t.Fatal("the new session is not bo's")
	}

	// A token planted in the browser (an attacker's) is not adopted.
	planted := h.browser(t)
	planted.client.Jar.SetCookies(u, []*http.Cookie{{Name: "parley_console_session", Value: "attacker-chosen-token", Path: "/"}})
	planted.mustSignIn("ann@example.com")
	if got := planted.sessionToken(); got == "attacker-chosen-token" || !authenticated(t, h, got) {
		t.Fatalf("session token after sign-in = %q", got)
	}
}

// TestMissingStaticFileIsThePage: a file the console does not have under
// /static/ (or the folder itself, which lists nothing) is the console's
// 404 page, not cached, like any page that does not exist; the files it
// has are served and cached for an hour.
func TestMissingStaticFileIsThePage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	b := h.browser(t)
	for _, path := range []string{"/static/nope.js", "/static/", "/static/nope/", "/static/../static/x.css"} {
		r := b.get(path)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "There is no such page.") {
			t.Errorf("GET %s = %d: %.300s", path, r.status, r.body)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", path, cc)
		}
	}
	if r := b.get("/static/copy.js"); r.status != http.StatusOK || r.header.Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("GET /static/copy.js = %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
}

// TestEveryAnswerCarriesTheSecurityHeaders: the headers docs/console.md
// "Security headers" lists are on every answer, not only on pages: a
// static file, a redirect to sign in, a refused post, a page or method
// that does not exist, a body over the limit, and a signed-in page and
// its event stream.
func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	anonymous := h.browser(t)
	answers := map[string]response{
		"the sign-in page":           anonymous.get("/login"),
		"a static file":              anonymous.get("/static/console.css"),
		"a redirect to sign in":      anonymous.get("/workspaces/" + ws),
		"a sign-in without a token":  anonymous.do(http.MethodPost, "/login", url.Values{"email": {"ann@example.com"}, "password": {password}}, nil),
		"a page that does not exist": anonymous.get("/no/such/page"),
		"a method not taken":         anonymous.do(http.MethodPut, "/login", url.Values{}, nil),
		"a body over the limit":      anonymous.do(http.MethodPost, "/login", url.Values{"email": {strings.Repeat("a", 5<<20)}}, nil),
		"a signed-in page":           b.get("/workspaces/" + ws),
		"a post without its token":   b.do(http.MethodPost, "/workspaces/"+ws+"/keys", url.Values{"name": {"ci"}}, nil),
	}
	s := openInboxStream(t, b, ws)
	answers["the inbox's event stream"] = response{status: s.resp.StatusCode, header: s.resp.Header}
	for what, r := range answers {
		for header, want := range map[string]string{
			"X-Content-Type-Options":     "nosniff",
			"Referrer-Policy":            "same-origin",
			"X-Frame-Options":            "DENY",
			"Cross-Origin-Opener-Policy": "same-origin",
		} {
			if got := r.header.Get(header); got != want {
				t.Errorf("%s (%d): %s = %q, want %q", what, r.status, header, got, want)
			}
		}
		assertStrictCSP(t, r.header.Get("Content-Security-Policy"))
	}
	if r := answers["a body over the limit"]; r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit = %d, want 413", r.status)
	}
}
