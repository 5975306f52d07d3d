package http

import (
	"path"
	"strings"

	"github.com/parleyhq/parley/pkg/rpc"
)

// route is where a /v1 path is answered: by a service's "api" endpoint, or
// by the gateway itself when service is "".
type route struct {
	// group labels metrics: the first path segment after /v1.
	group   string
	service string
}

// owners maps the first segment after /v1 to the owning service
// (docs/architecture.md, "How the services talk"). Matching is by whole segment, so
// /v1/webhooks is not /v1/webhook.
var owners = map[string]string{
	"channels":      rpc.ServiceMessaging,
	"conversations": rpc.ServiceMessaging,
	"messages":      rpc.ServiceMessaging,
	"image":         rpc.ServiceMessaging,
	"carousel":      rpc.ServiceMessaging,
	"typing":        rpc.ServiceMessaging,
	"comments":      rpc.ServiceMessaging,
	"webhook":       rpc.ServiceDispatcher,
	"flows":         rpc.ServiceFlowRunner,
}

// groupUnknown labels requests to no known route.
const groupUnknown = "unknown"

// resolve finds the route of a path already normalised to /v1/... It refuses
// paths that are not clean (empty, "." or ".." segments, a trailing slash):
// a service must never be handed a path that means something else once
// cleaned.
func resolve(p string) (route, bool) {
	if path.Clean(p) != p {
		return route{}, false
	}
	rest, ok := strings.CutPrefix(p, "/v1/")
	if !ok {
		return route{}, false
	}
	first, _, _ := strings.Cut(rest, "/")
	if first == "me" {
		if rest != "me" {
			return route{}, false
		}
		return route{group: "me"}, true
	}
	svc, ok := owners[first]
	if !ok {
		return route{}, false
	}
	return route{group: first, service: svc}, true
}

// v1Path is the request path as the services see it: /api/v1/x becomes
// /v1/x. It keeps the escaped form, so an encoded "/" inside an id stays
// inside that id.
func v1Path(escapedPath string) string {
	if rest, ok := strings.CutPrefix(escapedPath, legacyPrefix); ok && (rest == "" || rest[0] == '/') {
		return "/v1" + rest
	}
	return escapedPath
}

// groupOf labels a request's metrics.
func groupOf(escapedPath string) string {
	if r, ok := resolve(v1Path(escapedPath)); ok {
		return r.group
	}
	return groupUnknown
}
