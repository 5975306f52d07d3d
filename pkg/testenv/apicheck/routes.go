package apicheck

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/api"
)

// Route is an operation: a method and a path pattern under BasePath whose
// parameters are written {} whatever their names (echo's :id and the
// document's {id} are the same route).
type Route struct {
	Method string
	Path   string
}

func (r Route) String() string { return r.Method + " " + r.Path }

// Segment is the route's first path segment after BasePath ("flows" of
// /v1/flows/{}/invoke): the unit the gateway routes to a service by.
func (r Route) Segment() string {
	rest, _, _ := apiPath(r.Path)
	first, _, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	return first
}

// normalise writes every parameter segment ({id}, :id, *) as {}.
func normalise(method, path string) Route {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || s == "*" || (strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")) {
			segs[i] = "{}"
		}
	}
	return Route{Method: strings.ToUpper(method), Path: strings.Join(segs, "/")}
}

// DocumentedRoutes returns every operation of the document, under BasePath.
func (d *Document) DocumentedRoutes() []Route {
	var out []Route
	for path, item := range d.T.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, normalise(method, BasePath+path))
		}
	}
	return sortRoutes(out)
}

// EchoRoutes returns the routes e serves under BasePath. Catch-alls (echo
// registers some for a group's middleware, and a server may route by
// prefix) are not operations, and neither are methods outside HTTP's
// standard set.
func EchoRoutes(e *echo.Echo) []Route {
	var out []Route
	for _, r := range e.Routes() {
		if !standardMethod(r.Method) || strings.HasSuffix(r.Path, "*") {
			continue
		}
		// The base itself is a group's catch-all (echo's Any("")), not an
		// operation.
		if rest, _, ok := apiPath(r.Path); !ok || rest == "" || strings.HasPrefix(r.Path, LegacyBasePath) {
			continue
		}
		out = append(out, normalise(r.Method, r.Path))
	}
	return sortRoutes(out)
}

func standardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// RouteDiff is what CompareRoutes found.
type RouteDiff struct {
	// Undocumented are served but not in the document.
	Undocumented []Route
	// Unserved are in the document but not served.
	Unserved []Route
}

// CompareRoutes compares the routes served with the ones documented.
func CompareRoutes(served, documented []Route) RouteDiff {
	var d RouteDiff
	for _, r := range served {
		if !slices.Contains(documented, r) {
			d.Undocumented = append(d.Undocumented, r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			d.Unserved = append(d.Unserved, r)
		}
	}
	d.Undocumented, d.Unserved = sortRoutes(d.Undocumented), sortRoutes(d.Unserved)
	return d
}

// OfSegments keeps the routes whose Segment is one of segments.
func OfSegments(routes []Route, segments []string) []Route {
	var out []Route
	for _, r := range routes {
		if slices.Contains(segments, r.Segment()) {
			out = append(out, r)
		}
	}
	return out
}

// Segments returns the distinct first segments of routes, sorted.
func Segments(routes []Route) []string {
	var out []string
	for _, r := range routes {
		if s := r.Segment(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// CheckRoutes fails t for each route served but undocumented and each
// documented one not served; who names the server in the messages.
func CheckRoutes(t testing.TB, who string, served, documented []Route) {
	t.Helper()
	d := CompareRoutes(served, documented)
	for _, r := range d.Undocumented {
		t.Errorf("%s serves %s, which pkg/openapi/openapi.yaml does not document", who, r)
	}
	for _, r := range d.Unserved {
		t.Errorf("pkg/openapi/openapi.yaml documents %s, which %s does not serve", r, who)
	}
}

func sortRoutes(rs []Route) []Route {
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Method, b.Method))
	})
	return slices.Compact(rs)
}

// CheckServiceRoutes fails t unless the /v1 routes service serves on e are
// exactly the document's operations under the path segments those routes
// use (a service owns whole segments: the gateway routes by the first one).
// A route added without documentation fails it, and so does a documented
// operation the service stopped serving.
func CheckServiceRoutes(t testing.TB, service string, e *echo.Echo) {
	t.Helper()
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	served := EchoRoutes(e)
	if len(served) == 0 {
		t.Fatalf("%s serves no route under %s", service, BasePath)
	}
	CheckRoutes(t, service, served, OfSegments(doc.DocumentedRoutes(), Segments(served)))
}

// CheckDeclaredRoutes fails t unless e serves exactly the routes declared
// in a pkg/api Routes table: who names the server in the messages. Unlike
// CheckServiceRoutes it compares every route, /admin and /ingress as much
// as /v1, by method and path (parameter names aside).
func CheckDeclaredRoutes(t testing.TB, who string, e *echo.Echo, declared []api.Route) {
	t.Helper()
	var served, want []Route
	for _, r := range e.Routes() {
		if standardMethod(r.Method) && !strings.HasSuffix(r.Path, "*") {
			served = append(served, normalise(r.Method, r.Path))
		}
	}
	for _, r := range declared {
		want = append(want, normalise(r.Method, r.Path))
	}
	d := CompareRoutes(sortRoutes(served), sortRoutes(want))
	for _, r := range d.Undocumented {
		t.Errorf("%s serves %s, which its pkg/api Routes do not declare", who, r)
	}
	for _, r := range d.Unserved {
		t.Errorf("its pkg/api Routes declare %s, which %s does not serve", r, who)
	}
}

// Body decodes a body a route answered into T, failing t when the body
// carries a field T does not declare: what a service renders must be its
// pkg/api type, field for field.
func Body[T any](t testing.TB, raw []byte) T {
	t.Helper()
	var v T
	if err := DecodeStrict(raw, &v); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	return v
}

// DecodeStrict decodes raw into v, refusing a field v does not declare.
func DecodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body does not decode strictly into %T: %w", v, err)
	}
	return nil
}
