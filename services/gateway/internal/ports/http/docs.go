package http

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/openapi"
)

// The API's own description, answered by the gateway itself: the OpenAPI
// document at /v1/openapi.json (and /api/v1/openapi.json), and a reference
// page drawn from it at /docs by Redoc, vendored at a pinned version
// (scripts/vendor-docs-renderer.sh fetches it again from the npm registry
// and checks it) and embedded here.
//
// Neither needs an API key, and neither counts against a rate limit: no
// workspace is known to count against, and a limit per client address
// (as failed authentications have) would cost a Redis round trip to guard
// bytes that are already in memory. These answers reach no database, no
// Redis and no service, which is what the limits protect, so they are
// served like the probes, also while Redis is down; clients revalidate with
// If-None-Match and get 304. A flood of them is the load balancer's to stop.

const openAPIPath = "/openapi.json"

//go:embed docs/reference.html docs/assets
var docsFS embed.FS

// referencePolicy is the page's Content-Security-Policy: the page, its
// scripts, styles and the document come from the gateway only; nothing
// else may be fetched, framed or posted. Beyond 'self' it allows:
//   - data: images: Redoc draws its icons as data: SVGs;
//   - blob: workers: Redoc's search runs in a worker built from a blob;
//   - inline styles with the response's nonce: styled-components inserts
//     <style> elements and puts the nonce Redoc is given on them;
//   - two inline styles by hash: the bundle inserts perfect-scrollbar's
//     stylesheet while it loads, before any nonce can reach it — an empty
//     <style> first, then its text. Another Redoc version may insert
//     others; the browser test (e2e) names any the policy refuses.
//
// %s is the nonce.
const referencePolicy = "default-src 'none'; " +
	"script-src 'self'; " +
	"style-src 'self' 'nonce-%s' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' 'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='; " +
	"img-src 'self' data:; " +
	"connect-src 'self'; " +
	"worker-src blob:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Cache lifetimes. An asset asked for by the address the page gives it
// (with its content's hash) never changes; by another, it is revalidated.
// The document may change with a deploy, so it is kept briefly and then
// revalidated by its ETag.
const (
	cacheImmutable   = "public, max-age=31536000, immutable"
	cacheRevalidate  = "public, no-cache"
	cacheOpenAPI     = "public, max-age=300"
	cacheNeverStored = "no-store"
)

// staticFile is an embedded answer with what caching needs.
type staticFile struct {
	body        []byte
	contentType string
	etag        string
	// version is the query (?v=) under which the page links it.
	version string
}

func newStaticFile(body []byte, contentType string) staticFile {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	return staticFile{body: body, contentType: contentType, etag: `"` + h[:32] + `"`, version: h[:16]}
}

// serve answers GET and HEAD with the file, or 304 when If-None-Match names
// its ETag (http.ServeContent does the conditional and HEAD handling).
func (f staticFile) serve(c echo.Context, cacheControl string) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", cacheControl)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(f.body))
	return nil
}

// reference serves the OpenAPI document and the page that shows it.
type reference struct {
	document staticFile
	assets   map[string]staticFile
	page     *template.Template
	links    referenceLinks
}

// referenceLinks are the page's addresses, relative to /docs so that the
// page also works under a path prefix.
type referenceLinks struct {
	Spec   string
	Assets struct{ CSS, Renderer, JS string }
}

func newReference() *reference {
	r := &reference{
		document: newStaticFile(openapi.JSON(), echo.MIMEApplicationJSON),
		assets:   map[string]staticFile{},
		page:     template.Must(template.ParseFS(docsFS, "docs/reference.html")),
	}
	entries, err := fs.ReadDir(docsFS, "docs/assets")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	for _, e := range entries {
		body, err := fs.ReadFile(docsFS, "docs/assets/"+e.Name())
		if err != nil {
			panic(err)
		}
		r.assets[e.Name()] = newStaticFile(body, assetType(e.Name()))
	}
	link := func(name string) string { return "docs/assets/" + name + "?v=" + r.assets[name].version }
	r.links.Spec = "v1" + openAPIPath
	r.links.Assets.CSS = link("reference.css")
	r.links.Assets.Renderer = link("redoc.standalone.js")
	r.links.Assets.JS = link("reference.js")
	return r
}

// assetType is a file's Content-Type; the licence texts have no extension
// of their own.
func assetType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	default:
		return "text/plain; charset=utf-8"
	}
}

// mount adds the document under /v1 and /api/v1 (before their groups'
// authentication: echo prefers these exact paths to the groups' wildcards)
// and the page under /docs.
func (r *reference) mount(e *echo.Echo) {
	// Every method, so that one other than GET or HEAD is 405 here rather
	// than falling to the groups' wildcard and its authentication.
	e.Any("/v1"+openAPIPath, r.openAPI)
	e.Any(legacyPrefix+openAPIPath, r.openAPI, deprecated)
	getOrHead := []string{http.MethodGet, http.MethodHead}
	e.Match(getOrHead, "/docs", r.docs)
	e.Match(getOrHead, "/docs/", func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, "../docs")
	})
	e.Match(getOrHead, "/docs/assets/:name", r.asset)
}

func (r *reference) openAPI(c echo.Context) error {
	if m := c.Request().Method; m != http.MethodGet && m != http.MethodHead {
		c.Response().Header().Set("Allow", "GET, HEAD")
		return errs.Newf(http.StatusMethodNotAllowed, errs.CodeMethodNotAllowed, "method not allowed on %s", v1Path(c.Request().URL.EscapedPath()))
	}
	return r.document.serve(c, cacheOpenAPI)
}

// docs renders the page with a fresh nonce for its styles, so the page is
// never stored.
func (r *reference) docs(c echo.Context) error {
	var raw [18]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	var out bytes.Buffer
	if err := r.page.Execute(&out, struct {
		referenceLinks
		Nonce string
	}{r.links, nonce}); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", fmt.Sprintf(referencePolicy, nonce))
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", cacheNeverStored)
	return c.HTMLBlob(http.StatusOK, out.Bytes())
}

func (r *reference) asset(c echo.Context) error {
	name := c.Param("name")
	f, ok := r.assets[name]
	if !ok {
		return errs.Newf(http.StatusNotFound, errs.CodeNotFound, "no such asset: %s", httpx.Clip(c.Request().URL.EscapedPath()))
	}
	cache := cacheRevalidate
	if c.QueryParam("v") == f.version {
		cache = cacheImmutable
	}
	return f.serve(c, cache)
}
