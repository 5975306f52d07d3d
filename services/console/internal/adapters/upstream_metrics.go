package adapters

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
)

// Outcomes of a call to a service, the values of
// parley_console_upstream_duration_seconds' outcome.
const (
	upstreamAnswered    = "answered"    // a 2xx
	upstreamRefused     = "refused"     // a 4xx: the service said no, in words the page shows
	upstreamUnavailable = "unavailable" // a 5xx, no responder, a timeout, the bus down
)

// UpstreamMetrics times the console's calls to the other services, which
// every page makes: a slow or unavailable service shows here before
// operators say the console is slow.
type UpstreamMetrics struct {
	duration *prometheus.HistogramVec
}

// NewUpstreamMetrics registers the series with reg.
func NewUpstreamMetrics(reg prometheus.Registerer) *UpstreamMetrics {
	m := &UpstreamMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley", Subsystem: "console", Name: "upstream_duration_seconds",
			Help:    "Time of the console's calls to a service (gateway, messaging, webhook-dispatcher, flow-runner), by service and outcome: answered (2xx), refused (4xx), unavailable (5xx, no answer, the bus down).",
			Buckets: prometheus.DefBuckets,
		}, []string{"service", "outcome"}),
	}
	reg.MustRegister(m.duration)
	return m
}

// Wrap returns call timing each call in m.
func (m *UpstreamMetrics) Wrap(call adminclient.Caller) adminclient.Caller {
	return meteredCaller{call: call, m: m}
}

type meteredCaller struct {
	call adminclient.Caller
	m    *UpstreamMetrics
}

func (c meteredCaller) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	start := time.Now()
	err := c.call.CallJSON(ctx, service, endpoint, workspaceID, method, path, in, out)
	c.m.observe(service, start, err)
	return err
}

func (c meteredCaller) CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	start := time.Now()
	err := c.call.CallRaw(ctx, service, endpoint, req, out)
	c.m.observe(service, start, err)
	return err
}

func (m *UpstreamMetrics) observe(service string, start time.Time, err error) {
	outcome := upstreamAnswered
	if err != nil {
		outcome = upstreamUnavailable
		if e, ok := errs.As(err); ok && e.Status < http.StatusInternalServerError {
			outcome = upstreamRefused
		}
	}
	m.duration.WithLabelValues(service, outcome).Observe(time.Since(start).Seconds())
}
