package http

import (
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
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

// Metrics are the console's Prometheus series: what operators did and how
// the pages answered. The time spent in the services behind is
// adapters.UpstreamMetrics'.
type Metrics struct {
	requests *prometheus.CounterVec
	signIns  *prometheus.CounterVec
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "console", Name: "requests_total",
			Help: "Console requests by route (its pattern, e.g. /workspaces/:id/keys) and HTTP status.",
		}, []string{"route", "status"}),
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "console", Name: "sign_ins_total",
			Help: "Sign-in attempts by outcome: signed_in, wrong_credentials, limited (refused by the failed sign-in limits), stale_form (CSRF or origin check).",
		}, []string{"outcome"}),
	}
	for _, outcome := range []string{signInSucceeded, signInWrong, signInLimited, signInStaleForm} {
		m.signIns.WithLabelValues(outcome) // present at 0, so rates and alerts see them from the start
	}
	reg.MustRegister(m.requests, m.signIns)
	return m
}

// WithMetrics counts the console's requests and sign-ins in m.
func WithMetrics(m *Metrics) Option { return func(c *Console) { c.metrics = m } }

// count counts each request by its route's pattern, never its path (ids
// would make a series each), and the status it was answered with. An error
// is rendered here, by the console's error page, so that its status is the
// one counted.
func (m *Metrics) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ctx echo.Context) error {
		if err := next(ctx); err != nil {
			ctx.Error(err)
		}
		route := ctx.Path()
		if route == "" {
			route = routeUnmatched
		}
		m.requests.WithLabelValues(route, strconv.Itoa(ctx.Response().Status)).Inc()
		return nil
	}
}

// signIn counts one sign-in attempt; a nil Metrics counts nothing.
func (m *Metrics) signIn(outcome string) {
	if m != nil {
		m.signIns.WithLabelValues(outcome).Inc()
	}
}
