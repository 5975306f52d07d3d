package apicheck

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
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
