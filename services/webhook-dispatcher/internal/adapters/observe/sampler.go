package observe

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// LagFunc reads a durable consumer's backlog: messages not yet handed out
// and messages handed out but not yet acked.
type LagFunc func(ctx context.Context) (pending, ackPending uint64, err error)

// CountFunc counts something in storage.
type CountFunc func(ctx context.Context) (int64, error)

// Sampler keeps the gauges that are read from elsewhere rather than
// counted as work happens: each queue's consumer lag and the number of
// paused webhooks. Every instance samples the same shared values, so any
// one instance's scrape shows them.
type Sampler struct {
	lag         *prometheus.GaugeVec
	paused      prometheus.Gauge
	queues      map[string]LagFunc
	countPaused CountFunc
	log         *zap.Logger
}

// newSampler registers the gauges on reg. queues names each durable
// consumer whose lag is sampled ("events", "replay").
func newSampler(reg prometheus.Registerer, queues map[string]LagFunc, countPaused CountFunc, log *zap.Logger) *Sampler {
	s := &Sampler{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "consumer_lag",
			Help:      "Messages of a durable consumer not yet settled: state=pending not yet handed to an instance, state=ack_pending handed out and not yet acked. Their sum is the consumer lag.",
		}, []string{"queue", "state"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "paused_webhooks",
			Help:      "Webhooks paused after consecutive failed deliveries (all workspaces).",
		}),
		queues:      queues,
		countPaused: countPaused,
		log:         log,
	}
	reg.MustRegister(s.lag, s.paused)
	return s
}

// Run samples now and then every interval until ctx ends. A failed read
// leaves the gauge at its last value and is logged.
func (s *Sampler) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads every value once.
func (s *Sampler) Sample(ctx context.Context) {
	names := make([]string, 0, len(s.queues))
	for name := range s.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pending, ackPending, err := s.queues[name](ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sample consumer lag", zap.String("queue", name), zap.Error(err))
			}
			continue
		}
		s.lag.WithLabelValues(name, "pending").Set(float64(pending))
		s.lag.WithLabelValues(name, "ack_pending").Set(float64(ackPending))
	}
	if s.countPaused == nil {
		return
	}
	n, err := s.countPaused(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sample paused webhooks", zap.Error(err))
		}
		return
	}
	s.paused.Set(float64(n))
}
