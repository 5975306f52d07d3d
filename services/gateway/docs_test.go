package main

import (
	"bytes"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/openapi"
)

func TestOpenAPIDocumentNeedsNoKey(t *testing.T) {
	t.Parallel()
	// One failed authentication a minute: the address is refused for keyed
	// routes after the first 401, and the document is served all the same.
	h := newHarness(t, authFailuresPerMinute(1))
	h.call(t, http.MethodGet, "/v1/me", "pk_wrong", nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	h.call(t, http.MethodGet, "/v1/me", "", nil, nil).expectError(t, http.StatusTooManyRequests, "rate_limited")

	for _, path := range []string{"/v1/openapi.json", "/api/v1/openapi.json"} {
		for _, key := range []string{"", "pk_wrong"} {
			r := h.call(t, http.MethodGet, path, key, nil, nil)
			if r.status != http.StatusOK || !bytes.Equal(r.body, openapi.JSON()) {
				t.Fatalf("GET %s (key %q) = %d, %d bytes, want 200 and the document's %d", path, key, r.status, len(r.body), len(openapi.JSON()))
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("GET %s: Content-Type %q", path, ct)
			}
			if r.header.Get("Cache-Control") != "public, max-age=300" || r.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: Cache-Control %q, X-Content-Type-Options %q", path, r.header.Get("Cache-Control"), r.header.Get("X-Content-Type-Options"))
			}
			// Counted against nothing: no workspace, so no RateLimit-*.
			if r.header.Get("RateLimit-Limit") != "" {
				t.Errorf("GET %s carries RateLimit-Limit %q", path, r.header.Get("RateLimit-Limit"))
			}
		}
	}

	r := h.call(t, http.MethodGet, "/v1/openapi.json", "", nil, nil)
	etag := r.header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if again := h.call(t, http.MethodGet, "/v1/openapi.json", "", nil, nil); again.header.Get("ETag") != etag {
		t.Fatalf("ETag changed between requests: %q, %q", etag, again.header.Get("ETag"))
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		r := h.call(t, http.MethodGet, "/v1/openapi.json", "", nil, http.Header{"If-None-Match": {inm}})
		if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s = %d, %d bytes, ETag %q; want 304, empty, the same ETag", inm, r.status, len(r.body), r.header.Get("ETag"))
		}
	}
	if r := h.call(t, http.MethodGet, "/v1/openapi.json", "", nil, http.Header{"If-None-Match": {`"stale"`}}); r.status != http.StatusOK || len(r.body) == 0 {
		t.Errorf("a stale ETag = %d, %d bytes, want 200 and the document", r.status, len(r.body))
	}

	head := h.call(t, http.MethodHead, "/api/v1/openapi.json", "", nil, nil)
	if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("ETag") != etag ||
		head.header.Get("Content-Length") != strconv.Itoa(len(openapi.JSON())) {
		t.Fatalf("HEAD = %d, %d bytes, ETag %q, Content-Length %q", head.status, len(head.body), head.header.Get("ETag"), head.header.Get("Content-Length"))
	}

	// The alias says what every /api/v1 answer says; /v1 does not.
	const deprecation = "@1789689600"
	legacy := h.call(t, http.MethodGet, "/api/v1/openapi.json", "", nil, nil)
	if legacy.header.Get("Deprecation") != deprecation || legacy.header.Get("Link") != `</v1/openapi.json>; rel="successor-version"` {
		t.Fatalf("alias: Deprecation %q, Link %q", legacy.header.Get("Deprecation"), legacy.header.Get("Link"))
	}
	if r.header.Get("Deprecation") != "" || r.header.Get("Link") != "" {
		t.Fatalf("/v1 carries Deprecation %q, Link %q", r.header.Get("Deprecation"), r.header.Get("Link"))
	}

	// Only GET and HEAD, still without a key.
	for _, path := range []string{"/v1/openapi.json", "/api/v1/openapi.json"} {
		r := h.call(t, http.MethodPost, path, "", []byte(`{}`), nil)
		r.expectError(t, http.StatusMethodNotAllowed, "method_not_allowed")
		if r.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: Allow %q", path, r.header.Get("Allow"))
		}
	}
}

func TestReferencePage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	r := h.call(t, http.MethodGet, "/docs", "", nil, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/html; charset=UTF-8" {
		t.Fatalf("GET /docs = %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" ||
		r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", r.header)
	}
	page := string(r.body)
	nonce := regexp.MustCompile(`<meta property="csp-nonce" content="([A-Za-z0-9_-]{24})">`).FindStringSubmatch(page)
	if nonce == nil {
		t.Fatalf("no nonce in the page:\n%s", page)
	}
	// The policy allows the gateway's own scripts, styles, images and
	// fetches, the nonce's inline styles and nothing from elsewhere.
	csp := r.header.Get("Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	want := map[string]string{
		"default-src":     "'none'",
		"script-src":      "'self'",
		"img-src":         "'self' data:",
		"connect-src":     "'self'",
		"worker-src":      "blob:",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
	}
	for name, value := range want {
		if directives[name] != value {
			t.Errorf("CSP %s = %q, want %q (policy %q)", name, directives[name], value, csp)
		}
	}
	style := strings.Fields(directives["style-src"])
	if len(style) < 2 || style[0] != "'self'" || style[1] != "'nonce-"+nonce[1]+"'" {
		t.Errorf("CSP style-src = %q, want 'self', the page's nonce and hashes", directives["style-src"])
	}
	for _, src := range style[2:] {
		if !strings.HasPrefix(src, "'sha256-") {
			t.Errorf("CSP style-src allows %s", src)
		}
	}
	if len(directives) != len(want)+1 {
		t.Errorf("CSP has directives beyond these: %q", csp)
	}
	// Every response has its own nonce.
	if again := h.call(t, http.MethodGet, "/docs", "", nil, nil); strings.Contains(again.header.Get("Content-Security-Policy"), nonce[1]) {
		t.Errorf("two pages share the nonce %s", nonce[1])
	}

	// What the page links is served from the gateway, and is cached for good
	// at the address the page gives it.
	links := regexp.MustCompile(`(?:src|href|data-spec)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	base, _ := url.Parse(h.url + "/docs")
	assets := 0
	for _, l := range links {
		ref := strings.ReplaceAll(l[1], "&amp;", "&")
		if strings.HasPrefix(ref, "data:") {
			continue
		}
		u, err := base.Parse(ref)
		if err != nil || u.Host != base.Host {
			t.Fatalf("the page links %q, elsewhere than the gateway", ref)
		}
		r := h.call(t, http.MethodGet, u.RequestURI(), "", nil, nil)
		if r.status != http.StatusOK || len(r.body) == 0 {
			t.Fatalf("GET %s = %d", u.RequestURI(), r.status)
		}
		if u.Path == "/v1/openapi.json" {
			continue
		}
		assets++
		if !strings.HasPrefix(u.Path, "/docs/assets/") || u.Query().Get("v") == "" {
			t.Errorf("asset address %s", u)
		}
		if r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || r.header.Get("ETag") == "" ||
			r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %v", u.RequestURI(), r.header)
		}
		wantType := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}[u.Path[strings.LastIndex(u.Path, "."):]]
		if r.header.Get("Content-Type") != wantType {
			t.Errorf("GET %s: Content-Type %q, want %q", u.Path, r.header.Get("Content-Type"), wantType)
		}
		// Another version's address is revalidated, never kept for good.
		other := h.call(t, http.MethodGet, u.Path+"?v=0", "", nil, nil)
		if other.status != http.StatusOK || other.header.Get("Cache-Control") != "public, no-cache" {
			t.Errorf("GET %s?v=0 = %d, Cache-Control %q", u.Path, other.status, other.header.Get("Cache-Control"))
		}
		if r := h.call(t, http.MethodGet, u.RequestURI(), "", nil, http.Header{"If-None-Match": {r.header.Get("ETag")}}); r.status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag = %d, want 304", u.RequestURI(), r.status)
		}
	}
	if assets != 3 {
		t.Errorf("the page links %d assets, want the stylesheet, Redoc and its own script:\n%s", assets, page)
	}

	if r := h.call(t, http.MethodHead, "/docs", "", nil, nil); r.status != http.StatusOK || len(r.body) != 0 ||
		!strings.HasPrefix(r.header.Get("Content-Security-Policy"), "default-src 'none';") {
		t.Errorf("HEAD /docs = %d, %d bytes, CSP %q", r.status, len(r.body), r.header.Get("Content-Security-Policy"))
	}
	if r := h.call(t, http.MethodHead, "/docs/assets/redoc.standalone.js", "", nil, nil); r.status != http.StatusOK || len(r.body) != 0 || r.header.Get("Content-Length") == "" {
		t.Errorf("HEAD of the renderer = %d, %d bytes, Content-Length %q", r.status, len(r.body), r.header.Get("Content-Length"))
	}
	// The licence texts of the vendored renderer are there too.
	if r := h.call(t, http.MethodGet, "/docs/assets/redoc.LICENSE", "", nil, nil); r.status != http.StatusOK ||
		r.header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(string(r.body), "MIT") {
		t.Errorf("GET /docs/assets/redoc.LICENSE = %d %q", r.status, r.header.Get("Content-Type"))
	}

	// /docs/ is /docs.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.url + "/docs/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, err := resp.Request.URL.Parse(resp.Header.Get("Location")); resp.StatusCode != http.StatusMovedPermanently || err != nil || loc.Path != "/docs" {
		t.Fatalf("GET /docs/ = %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Unknown assets and methods answer in the documented error shape.
	for _, path := range []string{"/docs/assets/x", "/docs/assets/", "/docs/assets/reference.html", "/docs/assets/..%2freference.html", "/docs/other"} {
		h.call(t, http.MethodGet, path, "", nil, nil).expectError(t, http.StatusNotFound, "not_found")
	}
	for _, path := range []string{"/docs", "/docs/assets/reference.js"} {
		h.call(t, http.MethodPost, path, "", nil, nil).expectError(t, http.StatusMethodNotAllowed, "method_not_allowed")
	}
	// An asset's name of 100 KB is named by its start only.
	long := h.call(t, http.MethodGet, "/docs/assets/"+strings.Repeat("x", 100<<10), "", nil, nil)
	if m := long.expectError(t, http.StatusNotFound, "not_found"); len(long.body) > 300 || !strings.HasSuffix(m, "/docs/assets/"+strings.Repeat("x", 51)+"…") {
		t.Fatalf("a 100 KB asset name: %d bytes: %s", len(long.body), long.body)
	}
}
