// Package observe is the console's Prometheus series, the only package of
// the console that imports Prometheus: how its pages answered, how
// sign-ins went, and the time of its calls to the services behind it. The
// names, labels and help texts are documented in docs/operations.md.
package observe

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/service"
	httpport "github.com/parleyhq/parley/services/console/internal/ports/http"
)

// Sign-in outcomes, the values of parley_console_sign_ins_total's outcome.
const (
	signInSucceeded = "signed_in"
	signInWrong     = "wrong_credentials"
	signInLimited   = "limited"
	signInStaleForm = "stale_form"
)

// routeUnmatched labels a request no route matched (a 404 page).
const routeUnmatched = "unmatched"

// Outcomes of a call to a service, the values of
// parley_console_upstream_duration_seconds' outcome.
const (
	upstreamAnswered    = "answered"    // a 2xx
	upstreamRefused     = "refused"     // a 4xx: the service said no, in words the page shows
	upstreamUnavailable = "unavailable" // a 5xx, no responder, a timeout, the bus down
)

// Observer counts what the pages tell it and times the calls of the
// Callers it wraps.
type Observer struct {
	requests *prometheus.CounterVec
	signIns  *prometheus.CounterVec
	upstream *prometheus.HistogramVec
}

var _ httpport.Observer = (*Observer)(nil)

// New registers with reg every metric the console exports, the runtime's
// too: main registers nothing else, and the metrics test calls New as main
// does.
func New(reg prometheus.Registerer) *Observer {
	o := &Observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "console", Name: "requests_total",
			Help: "Console requests by route (its pattern, e.g. /workspaces/:id/keys) and HTTP status.",
		}, []string{"route", "status"}),
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "console", Name: "sign_ins_total",
			Help: "Sign-in attempts by outcome: signed_in, wrong_credentials, limited (refused by the failed sign-in limits), stale_form (CSRF or origin check).",
		}, []string{"outcome"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley", Subsystem: "console", Name: "upstream_duration_seconds",
			Help:    "Time of the console's calls to a service (gateway, messaging, webhook-dispatcher, flow-runner), by service and outcome: answered (2xx), refused (4xx), unavailable (5xx, no answer, the bus down).",
			Buckets: prometheus.DefBuckets,
		}, []string{"service", "outcome"}),
	}
	for _, outcome := range []string{signInSucceeded, signInWrong, signInLimited, signInStaleForm} {
		o.signIns.WithLabelValues(outcome) // present at 0, so rates and alerts see them from the start
	}
	reg.MustRegister(o.requests, o.signIns, o.upstream)
	service.RegisterRuntime(reg)
	return o
}

// Answered implements httpport.Observer.
func (o *Observer) Answered(route string, status int) {
	if route == "" {
		route = routeUnmatched
	}
	o.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// SignedIn implements httpport.Observer.
func (o *Observer) SignedIn() { o.signIns.WithLabelValues(signInSucceeded).Inc() }

// SignInWrong implements httpport.Observer.
func (o *Observer) SignInWrong() { o.signIns.WithLabelValues(signInWrong).Inc() }

// SignInLimited implements httpport.Observer.
func (o *Observer) SignInLimited() { o.signIns.WithLabelValues(signInLimited).Inc() }

// SignInStaleForm implements httpport.Observer.
func (o *Observer) SignInStaleForm() { o.signIns.WithLabelValues(signInStaleForm).Inc() }

// Upstream returns call timing each call: the console's calls to the
// other services, which every page makes, so that a slow or unavailable
// service shows here before operators say the console is slow.
func (o *Observer) Upstream(call adminclient.Caller) adminclient.Caller {
	return timedCaller{call: call, o: o}
}

type timedCaller struct {
	call adminclient.Caller
	o    *Observer
}

func (c timedCaller) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	start := time.Now()
	err := c.call.CallJSON(ctx, service, endpoint, workspaceID, method, path, in, out)
	c.o.called(service, start, err)
	return err
}

func (c timedCaller) CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	start := time.Now()
	err := c.call.CallRaw(ctx, service, endpoint, req, out)
	c.o.called(service, start, err)
	return err
}

func (o *Observer) called(service string, start time.Time, err error) {
	outcome := upstreamAnswered
	if err != nil {
		outcome = upstreamUnavailable
		if e, ok := errs.As(err); ok && e.Status < http.StatusInternalServerError {
			outcome = upstreamRefused
		}
	}
	o.upstream.WithLabelValues(service, outcome).Observe(time.Since(start).Seconds())
}
