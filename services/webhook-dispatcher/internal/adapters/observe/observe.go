// Package observe is where the dispatcher's use cases are seen from
// outside: it implements app.Observer, logging what happened with zap and
// counting it in Prometheus (deliveries by outcome, the latency of every
// attempt, circuits), registers the gauges of how receivers share the
// instance (attempts in flight and waiting, open circuits), and samples
// the gauges read from elsewhere (consumer lag, paused webhooks). It is
// the only package of the dispatcher that imports Prometheus; the metric
// names are documented in docs/operations.md "Metrics".
package observe

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// Observer implements app.Observer.
type Observer struct {
	log            *zap.Logger
	deliveries     *prometheus.CounterVec
	attempts       *prometheus.HistogramVec
	notSent        prometheus.Counter
	circuitsOpened prometheus.Counter
}

var _ app.Observer = (*Observer)(nil)

// Sources are what the gauges read from outside the observer. Each may be
// nil: its gauges are still registered, and read 0 (Capacity) or are not
// sampled (Lag, CountPaused).
type Sources struct {
	// Capacity is read at each scrape.
	Capacity CapacityFunc
	// Lag reads each durable consumer's lag ("events", "replay") at each
	// sample.
	Lag map[string]LagFunc
	// CountPaused counts the paused webhooks at each sample.
	CountPaused CountFunc
}

// Register registers on reg every metric the dispatcher exports, the
// runtime's too, and returns the Observer that counts the use cases' work
// and the Sampler to run for the gauges read from src. It is the only
// registration main makes, and the metrics test makes the same call, so a
// metric added here is held to docs/operations.md "Metrics".
func Register(reg prometheus.Registerer, log *zap.Logger, src Sources) (*Observer, *Sampler) {
	o := New(log, reg)
	watchCapacity(reg, src.Capacity)
	service.RegisterRuntime(reg)
	return o, newSampler(reg, src.Lag, src.CountPaused, log)
}

// New returns an observer logging to log and counting in metrics it
// registers on reg: the Observer alone, which the app's tests use;
// Register is the service's.
func New(log *zap.Logger, reg prometheus.Registerer) *Observer {
	o := &Observer{
		log: log,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "deliveries_total",
			Help:      "Deliveries that reached an outcome (delivered, failed, skipped), by event kind.",
		}, []string{"event", "outcome"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "attempt_duration_seconds",
			Help:      "Time from sending a delivery attempt to the receiver's complete answer (or the failure).",
			Buckets:   []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
	}
	o.notSent = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "parley",
		Subsystem: "dispatcher",
		Name:      "attempts_not_sent_total",
		Help:      "Attempts recorded as failed without being sent, because the webhook's circuit was open (not in attempt_duration_seconds).",
	})
	o.circuitsOpened = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "parley",
		Subsystem: "dispatcher",
		Name:      "circuits_opened_total",
		Help:      "Times a webhook's circuit opened on this instance: after attempts in a row without answer, or a failed probe.",
	})
	reg.MustRegister(o.deliveries, o.attempts, o.notSent, o.circuitsOpened)
	return o
}

// CapacityFunc reads what the instance's places and circuits hold.
type CapacityFunc func() app.Capacity

// watchCapacity registers the gauges read from capacity at each scrape:
// attempts in flight (by queue), attempts waiting for a place (for their
// webhook's share, or for a slot of the instance) and open circuits. A nil
// capacity reads 0.
func watchCapacity(reg prometheus.Registerer, capacity CapacityFunc) {
	gauge := func(name, help string, labels prometheus.Labels, read func(app.Capacity) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "parley", Subsystem: "dispatcher", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 {
			if capacity == nil {
				return 0
			}
			return float64(read(capacity()))
		})
	}
	const (
		inFlight = "HTTP attempts sent and not yet answered on this instance."
		waiting  = "Attempts waiting for a place: for=webhook waits for the webhook's share (DISPATCHER_WEBHOOK_CONCURRENCY), for=instance holds it and waits for a slot of the instance."
	)
	reg.MustRegister(
		gauge("attempts_in_flight", inFlight, prometheus.Labels{"queue": "events"}, func(c app.Capacity) int { return c.InFlight }),
		gauge("attempts_in_flight", inFlight, prometheus.Labels{"queue": "replay"}, func(c app.Capacity) int { return c.ReplayInFlight }),
		gauge("attempts_waiting", waiting, prometheus.Labels{"for": "webhook"}, func(c app.Capacity) int { return c.WaitingForWebhook }),
		gauge("attempts_waiting", waiting, prometheus.Labels{"for": "instance"}, func(c app.Capacity) int { return c.WaitingForInstance }),
		gauge("open_circuits", "Webhooks whose circuit is open or half-open on this instance.", nil, func(c app.Capacity) int { return c.OpenCircuits }),
	)
}

// AttemptSent implements app.Observer: the attempt's latency, and its
// log line.
func (o *Observer) AttemptSent(d *delivery.Delivery, at delivery.Attempt) {
	result := "failure"
	if at.Succeeded() {
		result = "success"
	}
	o.attempts.WithLabelValues(result).Observe(at.Duration.Seconds())
	o.logAttempt(d, at)
}

// AttemptNotSent implements app.Observer: counted apart from the
// latencies, and logged as a failed attempt.
func (o *Observer) AttemptNotSent(d *delivery.Delivery, at delivery.Attempt) {
	o.notSent.Inc()
	o.logAttempt(d, at)
}

// logAttempt is the one line every attempt logs (docs/operations.md
// "Logs").
func (o *Observer) logAttempt(d *delivery.Delivery, at delivery.Attempt) {
	fields := []zap.Field{
		zap.String("delivery_id", d.ID),
		zap.String("workspace_id", d.WorkspaceID),
		zap.String("event", d.Event),
		zap.Int("attempt", at.Number),
		zap.Int("status", at.ResponseStatus),
		zap.Duration("duration", at.Duration),
	}
	if at.Succeeded() {
		o.log.Info("webhook attempt delivered", fields...)
		return
	}
	o.log.Info("webhook attempt failed", append(fields, zap.String("error", at.Error))...)
}

// CircuitOpened implements app.Observer.
func (o *Observer) CircuitOpened(c app.CircuitOpening) {
	o.circuitsOpened.Inc()
	o.log.Warn("webhook circuit opened",
		zap.String("workspace_id", c.WorkspaceID), zap.String("webhook_id", c.WebhookID),
		zap.Bool("probe", c.Probe), zap.String("last_error", c.LastError),
		zap.Duration("cool_down", c.CoolDown))
}

// ProgressNotStored implements app.Observer.
func (o *Observer) ProgressNotStored(d *delivery.Delivery, err error) {
	o.log.Warn("store delivery progress", zap.String("delivery_id", d.ID), zap.Error(err))
}

// DeliveryFinished implements app.Observer.
func (o *Observer) DeliveryFinished(event string, status delivery.Status) {
	o.deliveries.WithLabelValues(event, string(status)).Inc()
}

// DeliverySkipped implements app.Observer.
func (o *Observer) DeliverySkipped(d *delivery.Delivery) {
	o.log.Info("webhook paused; delivery skipped", zap.String("delivery_id", d.ID), zap.String("workspace_id", d.WorkspaceID))
}

// WebhookPaused implements app.Observer.
func (o *Observer) WebhookPaused(workspaceID string, pauseAfter int) {
	o.log.Warn("webhook paused after consecutive failures",
		zap.String("workspace_id", workspaceID), zap.Int("pause_after", pauseAfter))
}

// DeliveryLogPurged implements app.Observer.
func (o *Observer) DeliveryLogPurged(deleted int64) {
	o.log.Info("delivery log purged", zap.Int64("deleted", deleted))
}

// PurgeFailed implements app.Observer.
func (o *Observer) PurgeFailed(err error) {
	o.log.Warn("purge delivery log", zap.Error(err))
}

// ReplayQueued implements app.Observer.
func (o *Observer) ReplayQueued(r *replay.Replay) {
	o.log.Info("replay queued",
		zap.String("replay_id", r.ID), zap.String("workspace_id", r.WorkspaceID),
		zap.Time("since", r.Since), zap.Timep("until", r.Until), zap.String("event", r.Event),
		zap.Int("queued", r.Queued), zap.Bool("more", r.Next != nil))
}

// DeliveryReplayQueued implements app.Observer.
func (o *Observer) DeliveryReplayQueued(r *replay.Replay, seq uint64) {
	o.log.Info("replay queued",
		zap.String("replay_id", r.ID), zap.String("workspace_id", r.WorkspaceID),
		zap.String("delivery_id", r.DeliveryID), zap.Uint64("seq", seq))
}

// ReplayDropped implements app.Observer.
func (o *Observer) ReplayDropped(deliveryID, workspaceID string) {
	o.log.Info("replay dropped: no webhook", zap.String("delivery_id", deliveryID), zap.String("workspace_id", workspaceID))
}

// ReplayNotSent implements app.Observer.
func (o *Observer) ReplayNotSent(d *delivery.Delivery) {
	o.log.Info("webhook paused; replay not sent", zap.String("delivery_id", d.ID), zap.String("workspace_id", d.WorkspaceID))
}
