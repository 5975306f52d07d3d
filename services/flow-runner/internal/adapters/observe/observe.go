// Package observe is where the flow-runner's use cases are logged and
// counted: Observer implements app.Observer with zap and Prometheus, the
// only package of the service that imports Prometheus.
package observe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Observer logs what the use cases report and counts the runs.
type Observer struct {
	log       *zap.Logger
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	chatTurns *prometheus.CounterVec
}

var _ app.Observer = (*Observer)(nil)

// New returns an Observer logging to log, with every metric the
// flow-runner exports registered on reg, the runtime's too: main registers
// nothing else, and the metrics test calls New as main does.
func New(log *zap.Logger, reg prometheus.Registerer) *Observer {
	o := &Observer{
		log: log,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "flow_runner", Name: "runs_total",
			Help: "Invokes and continues that ran, by the status the run reached.",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley", Subsystem: "flow_runner", Name: "run_duration_seconds",
			Help: "How long the engine took for one invoke or continue, by the status the run reached.",
			// From a few node runs without I/O to the 60 s budget.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"status"}),
		chatTurns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "flow_runner", Name: "chat_turns_total",
			Help: "Chat turns handled, by outcome: answered, answered_before (a redelivery), early, busy and behind_delay (handed back to wait their turn), failed (retried later).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(o.calls, o.duration, o.chatTurns)
	service.RegisterRuntime(reg)
	return o
}

// RunCall implements app.Observer.
func (o *Observer) RunCall(status run.Status, took time.Duration) {
	o.calls.WithLabelValues(string(status)).Inc()
	o.duration.WithLabelValues(string(status)).Observe(took.Seconds())
}

// FlowRefused implements app.Observer.
func (o *Observer) FlowRefused(workspaceID string, err error) {
	o.log.Warn("flow refused", zap.String("workspace_id", workspaceID), zap.Error(err))
}

// ContractUnavailable implements app.Observer.
func (o *Observer) ContractUnavailable(what string, err error) {
	o.log.Warn("invoke refused: "+what+" unavailable", zap.Error(err))
}

// SlotNotRenewed implements app.Observer.
func (o *Observer) SlotNotRenewed(workspaceID string, err error) {
	o.log.Warn("concurrency slot not renewed", zap.String("workspace_id", workspaceID), zap.Error(err))
}

// SlotNotReleased implements app.Observer.
func (o *Observer) SlotNotReleased(err error) {
	o.log.Warn("concurrency slot not released", zap.Error(err))
}

// DailyUnitNotGivenBack implements app.Observer.
func (o *Observer) DailyUnitNotGivenBack(workspaceID string, err error) {
	o.log.Warn("daily invoke unit not given back", zap.String("workspace_id", workspaceID), zap.Error(err))
}

// ReceiptsPurged implements app.Observer.
func (o *Observer) ReceiptsPurged(deleted int64) {
	o.log.Info("idempotency receipts purged", zap.Int64("deleted", deleted))
}

// ReceiptPurgeFailed implements app.Observer.
func (o *Observer) ReceiptPurgeFailed(err error) {
	o.log.Warn("purge idempotency receipts", zap.Error(err))
}

// StreamNotFinished implements app.Observer.
func (o *Observer) StreamNotFinished(workspaceID, runID string, err error) {
	o.log.Error("streamed run's end not stored", zap.String("workspace_id", workspaceID), zap.String("run_id", runID), zap.Error(err))
}

// ChatFailed implements app.Observer.
func (o *Observer) ChatFailed(what string, err error) {
	o.log.Error("chat runs", zap.String("work", what), zap.Error(err))
}

// ChatTurn implements app.Observer.
func (o *Observer) ChatTurn(outcome string) {
	o.chatTurns.WithLabelValues(outcome).Inc()
}
