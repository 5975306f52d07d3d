package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSignInAndOut: the form, a sign-in that lands on the operator's
// workspace, the page's security headers, and a sign-out that ends the
// session on the server, not only in the browser.
func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme")
	h.operator(t, "ann@example.com", ws)
	b := h.browser(t)

	form := b.get("/login")
	if form.status != http.StatusOK || !strings.Contains(form.body, `<label for="email">Email</label>`) || !strings.Contains(form.body, `<label for="password">Password</label>`) {
		t.Fatalf("GET /login = %d: %s", form.status, form.body)
	}
	for header, want := range map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "same-origin",
		"Cache-Control":          "no-store",
	} {
		if got := form.header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	assertStrictCSP(t, form.header.Get("Content-Security-Policy"))

	// Email in another case: one operator whatever the case.
	in := b.signIn("Ann@Example.COM", password)
	if in.status != http.StatusSeeOther || in.location() != "/" {
		t.Fatalf("sign in = %d %q: %s", in.status, in.location(), in.body)
	}
	if home := b.get("/"); home.status != http.StatusSeeOther || home.location() != "/workspaces/"+ws {
		t.Fatalf("GET / = %d %q", home.status, home.location())
	}
	page := b.get("/workspaces/" + ws)
	if page.status != http.StatusOK {
		t.Fatalf("workspace page = %d: %s", page.status, page.body)
	}
	for _, want := range []string{"<h1>Acme</h1>", "developer_api", "flows", "250</span> of 1000 used (25%)", "120</span> API requests a minute", "flows_api", "ann@example.com", `aria-current="page"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("workspace page lacks %q", want)
		}
	}
	if strings.Contains(page.body, `href="/workspaces"`) {
		t.Error("a workspace operator's page links the list of every workspace")
	}

	token := b.sessionToken()
	out := b.do(http.MethodPost, "/logout", url.Values{"csrf_token": {csrf(t, page)}}, nil)
	if out.status != http.StatusSeeOther || out.location() != "/login" {
		t.Fatalf("logout = %d %q: %s", out.status, out.location(), out.body)
	}
	if c := out.setCookie("parley_console_session"); c == nil || c.MaxAge >= 0 {
		t.Fatalf("logout's session cookie = %v, want it removed", c)
	}
	if again := b.get("/workspaces/" + ws); again.status != http.StatusSeeOther || again.location() != "/login" {
		t.Fatalf("after logout = %d %q", again.status, again.location())
	}
	// The token replayed by hand opens nothing: the session is gone.
	if authenticated(t, h, token) {
		t.Fatal("the signed-out token still authenticates")
	}
	var n int64
	h.gdb.Table("console.sessions").Count(&n)
	if n != 0 {
		t.Fatalf("%d sessions left after logout", n)
	}
}

// TestSignInFailure: a wrong password and an unknown email get the same
// words and status, and no session.
func TestSignInFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "ann@example.com", "")
	b := h.browser(t)
	var bodies []string
	for _, tt := range []struct{ email, pw string }{
		{"ann@example.com", "wrong password entirely"},
		{"nobody@example.com", password},
		{"", ""},
		{"ann@example.com", strings.Repeat("x", 5000)},
	} {
		r := b.signIn(tt.email, tt.pw)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "The email or the password is wrong.") {
			t.Fatalf("sign in %q = %d: %s", tt.email, r.status, r.body)
		}
		if r.setCookie("parley_console_session") != nil || b.sessionToken() != "" {
			t.Fatal("a failed sign-in set a session cookie")
		}
		bodies = append(bodies, r.body)
	}
	if !strings.Contains(bodies[0], `value="ann@example.com"`) {
		t.Error("the form does not keep the email typed")
	}
	if strings.Contains(bodies[0], "wrong password entirely") {
		t.Error("the form shows the password back")
	}
}

// TestSignInLimitPerAddress: an address with as many failures as its
// limit is refused with Retry-After and a page that says when to retry,
// even with the right password; another address is not.
func TestSignInLimitPerAddress(t *testing.T) {
	t.Parallel()
	s := defaults()
	s.perAddress, s.perAcct, s.proxies = 3, 100, "127.0.0.1"
	h := newHarness(t, s)
	h.operator(t, "ann@example.com", "")
	attacker := h.browser(t)
	attacker.forwardedFor = "198.51.100.7"
	for i := range 3 {
		// Different accounts, so only the address's count can refuse.
		if r := attacker.signIn("guess"+strconv.Itoa(i)+"@example.com", "wrong password"); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d = %d", i, r.status)
		}
	}
	r := attacker.signIn("ann@example.com", password)
	assertLimited(t, r)
	if attacker.sessionToken() != "" {
		t.Fatal("a refused address was signed in")
	}
	other := h.browser(t)
	other.forwardedFor = "203.0.113.9"
	other.mustSignIn("ann@example.com")
}

// TestSignInLimitPerAccount: an account with as many failures as its
// limit, from any addresses, is refused from every address, even with the
// right password; another account is not.
func TestSignInLimitPerAccount(t *testing.T) {
	t.Parallel()
	s := defaults()
	s.perAddress, s.perAcct, s.proxies = 100, 2, "127.0.0.1"
	h := newHarness(t, s)
	h.operator(t, "ann@example.com", "")
	h.operator(t, "bo@example.com", "")
	for i, addr := range []string{"198.51.100.1", "198.51.100.2"} {
		b := h.browser(t)
		b.forwardedFor = addr
		if r := b.signIn("ANN@example.com", "wrong password"); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d = %d", i, r.status)
		}
	}
	fresh := h.browser(t)
	fresh.forwardedFor = "203.0.113.50"
	assertLimited(t, fresh.signIn("ann@example.com", password))
	fresh.mustSignIn("bo@example.com")
}

func assertLimited(t *testing.T, r response) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("sign-in at the limit = %d: %s", r.status, r.body)
	}
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 60 {
		t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	if !strings.Contains(r.body, "Try again in "+strconv.Itoa(secs)+" seconds") {
		t.Fatalf("the page does not say when to retry: %s", r.body)
	}
	if r.setCookie("parley_console_session") != nil {
		t.Fatal("a refused sign-in set a session cookie")
	}
}

// TestSessionExpiry: an idle session past its TTL is refused, its cookie
// removed and its row deleted.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	token := b.sessionToken()
	var before int64
	h.gdb.Table("console.sessions").Count(&before)
	if before != 1 {
		t.Fatalf("%d sessions after sign-in", before)
	}
	// Idle past the TTL without touching the session (a request would
	// slide it).
	h.clock.advance(time.Hour + time.Second)
	r := b.get("/workspaces/" + ws)
	if r.status != http.StatusSeeOther || r.location() != "/login" {
		t.Fatalf("an expired session = %d %q", r.status, r.location())
	}
	if c := r.setCookie("parley_console_session"); c == nil || c.MaxAge >= 0 {
		t.Fatalf("cookie of an expired session = %v, want it removed", c)
	}
	var n int64
	h.gdb.Table("console.sessions").Count(&n)
	if n != 0 {
		t.Fatalf("%d sessions left, want the expired one pruned", n)
	}
	if authenticated(t, h, token) {
		t.Fatal("the expired token authenticates")
	}
}

// assertStrictCSP checks the policy's directives one by one: everything
// closed by default, the console's own files only, nothing inline, no
// framing; a script-src, when a page needs one, is 'self' alone.
func assertStrictCSP(t *testing.T, policy string) {
	t.Helper()
	got := map[string]string{}
	for _, d := range strings.Split(policy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		got[name] = value
	}
	for name, want := range map[string]string{
		"default-src": "'none'", "style-src": "'self'", "img-src": "'self'", "form-action": "'self'",
		"frame-ancestors": "'none'", "base-uri": "'none'",
	} {
		if got[name] != want {
			t.Errorf("Content-Security-Policy %s = %q, want %q (policy %q)", name, got[name], want, policy)
		}
	}
	if s, ok := got["script-src"]; ok && s != "'self'" {
		t.Errorf("Content-Security-Policy script-src = %q, want 'self' or none", s)
	}
	if strings.Contains(policy, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows unsafe sources", policy)
	}
}

// TestSignInWithAnEmailNoOperatorHas: an email PostgreSQL text cannot
// hold (a NUL in it) is a wrong email, as any unknown one: 401 with the
// sign-in page and no session (it was a 500).
func TestSignInWithAnEmailNoOperatorHas(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "ann@example.com", h.workspace("Acme"))
	for _, email := range []string{"ann@example.com\x00", "a\x00nn@example.com", "\x00"} {
		b := h.browser(t)
		r := b.signIn(email, password)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "The email or the password is wrong.") || b.sessionToken() != "" {
			t.Errorf("sign in as %q = %d, session %q: %.300s", email, r.status, b.sessionToken(), r.body)
		}
	}
}
