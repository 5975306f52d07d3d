// Package observe is what messaging's operators watch: it counts the use
// cases' and the ports' events in Prometheus and logs them with zap. It is
// the only package of the service that imports Prometheus; the metric
// names, labels and help texts are documented (docs/operations.md) and
// dashboards depend on them.
package observe

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/messaging/internal/app"
)

// Observer counts and logs; it is the app's Observer and the HTTP port's
// (which counts the ingress it refuses before the app sees it).
type Observer struct {
	log             *zap.Logger
	ingress         *prometheus.CounterVec
	sends           *prometheus.CounterVec
	outboxBacklog   prometheus.Gauge
	outboxPublished prometheus.Counter
	outboxFailures  prometheus.Counter
}

var _ app.Observer = (*Observer)(nil)

// New returns an Observer logging to log, with every metric messaging
// exports registered with reg, the runtime's too: main registers nothing
// else, and the metrics test calls New as main does. webchatStreams reads
// the widget streams this process holds at each scrape; nil reads 0.
func New(log *zap.Logger, reg prometheus.Registerer, webchatStreams func() int) *Observer {
	o := &Observer{
		log: log,
		ingress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "messaging", Name: "ingress_updates_total",
			Help: "Platform deliveries received, by platform and outcome.",
		}, []string{"platform", "outcome"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "messaging", Name: "sends_total",
			Help: "Messages sent through the API, by platform and outcome.",
		}, []string{"platform", "outcome"}),
		outboxBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "parley", Subsystem: "messaging", Name: "outbox_backlog",
			Help: "Events written to the outbox and not yet published.",
		}),
		outboxPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "messaging", Name: "outbox_published_total",
			Help: "Events published to the stream by this process.",
		}),
		outboxFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "messaging", Name: "outbox_publish_failures_total",
			Help: "Relay passes that stopped on an error (NATS or the database).",
		}),
	}
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "parley", Subsystem: "messaging", Name: "webchat_streams",
		Help: "Webchat widget streams (SSE) open in this process.",
	}, func() float64 {
		if webchatStreams == nil {
			return 0
		}
		return float64(webchatStreams())
	})
	reg.MustRegister(o.ingress, o.sends, o.outboxBacklog, o.outboxPublished, o.outboxFailures, streams)
	service.RegisterRuntime(reg)
	return o
}

// Ingress counts one platform delivery.
func (o *Observer) Ingress(platform, outcome string) {
	o.ingress.WithLabelValues(platform, outcome).Inc()
}

// Send counts one outcome of a send.
func (o *Observer) Send(platform, outcome string) {
	o.sends.WithLabelValues(platform, outcome).Inc()
}

// ButtonNotAnswered logs a tap the platform was not told of.
func (o *Observer) ButtonNotAnswered(channelID, platform, tapID string, err error) {
	o.log.Warn("button tap not answered", zap.String("channel_id", channelID),
		zap.String("platform", platform), zap.String("tap_id", tapID), zap.Error(err))
}

// SentNotStored logs a delivered send whose copy is missing, with the
// platform's ids to find it by.
func (o *Observer) SentNotStored(conversationID, platform string, externalIDs []string, err error) {
	o.log.Error("sent message not stored", zap.String("conversation_id", conversationID),
		zap.String("platform", platform), zap.Strings("external_ids", externalIDs), zap.Error(err))
}

// ReceiptNotRendered logs a keyed send left without its receipt.
func (o *Observer) ReceiptNotRendered(workspaceID string, err error) {
	o.log.Error("idempotency receipt not rendered", zap.String("workspace_id", workspaceID), zap.Error(err))
}

// ReceiptNotStored logs a keyed send left without its receipt.
func (o *Observer) ReceiptNotStored(workspaceID string, err error) {
	o.log.Error("idempotency receipt not stored", zap.String("workspace_id", workspaceID), zap.Error(err))
}

// PublicReplyNotRecorded logs a posted reply the comment does not show.
func (o *Observer) PublicReplyNotRecorded(commentID, replyID string, err error) {
	o.log.Error("public reply not recorded", zap.String("comment_id", commentID),
		zap.String("reply_id", replyID), zap.Error(err))
}

// PrivateReplyClaimNotReleased logs a claim a refused reply left behind.
func (o *Observer) PrivateReplyClaimNotReleased(commentID string, err error) {
	o.log.Error("private reply claim not released", zap.String("comment_id", commentID), zap.Error(err))
}

// PrivateReplyNotStored logs a sent DM whose copy is missing.
func (o *Observer) PrivateReplyNotStored(commentID, recipientID, externalID string, err error) {
	o.log.Error("private reply not stored", zap.String("comment_id", commentID),
		zap.String("recipient_id", recipientID), zap.String("external_id", externalID), zap.Error(err))
}

// SuggestionNotPutBack logs a suggestion whose unsent rest was lost.
func (o *Observer) SuggestionNotPutBack(conversationID string, err error) {
	o.log.Error("suggestion not put back", zap.String("conversation_id", conversationID), zap.Error(err))
}

// OutboxPublished counts published events.
func (o *Observer) OutboxPublished(events int) { o.outboxPublished.Add(float64(events)) }

// OutboxPassFailed counts a failed relay pass.
func (o *Observer) OutboxPassFailed() { o.outboxFailures.Inc() }

// OutboxFailing logs the first failed pass of a run.
func (o *Observer) OutboxFailing(err error) {
	o.log.Warn("outbox publish failed, retrying", zap.Error(err))
}

// OutboxRecovered logs the pass that ends a run of failures.
func (o *Observer) OutboxRecovered() { o.log.Info("outbox publishing again") }

// OutboxBacklog sets the backlog gauge.
func (o *Observer) OutboxBacklog(events int64) { o.outboxBacklog.Set(float64(events)) }

// TablePruned logs rows pruned from a table.
func (o *Observer) TablePruned(table string, rows int64) {
	o.log.Debug("pruned", zap.String("table", table), zap.Int64("rows", rows))
}

// TablePruneFailed logs a table's failed pruning pass.
func (o *Observer) TablePruneFailed(table string, err error) {
	o.log.Warn("prune failed", zap.String("table", table), zap.Error(err))
}
