package observe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

func newObserver(t *testing.T) (*observe.Observer, *observer.ObservedLogs, *prometheus.Registry) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	return observe.New(zap.New(core), reg), logs, reg
}

// fields is a log entry's fields by key, as zap would write them.
func fields(e observer.LoggedEntry) map[string]any {
	return e.ContextMap()
}

// Every attempt logs one line with delivery_id, workspace_id, event,
// attempt, status and duration (docs/operations.md "Logs"), and is counted
// in the latency histogram when it was sent, apart when an open circuit
// refused it.
func TestEveryAttemptLogsOneLine(t *testing.T) {
	t.Parallel()
	o, logs, reg := newObserver(t)
	d := &delivery.Delivery{ID: "d1", WorkspaceID: "w1", Event: "message.received"}
	o.AttemptSent(d, delivery.Attempt{Number: 1, ResponseStatus: 503, Duration: 20 * time.Millisecond, Error: "receiver answered 503"})
	o.AttemptSent(d, delivery.Attempt{Number: 2, ResponseStatus: 204, Duration: 10 * time.Millisecond})
	o.AttemptNotSent(d, delivery.Attempt{Number: 3, Error: "circuit open"})

	got := logs.All()
	if len(got) != 3 {
		t.Fatalf("%d log lines, want 3: %v", len(got), got)
	}
	want := []struct {
		msg    string
		status int64
		err    any
	}{
		{"webhook attempt failed", 503, "receiver answered 503"},
		{"webhook attempt delivered", 204, nil},
		{"webhook attempt failed", 0, "circuit open"},
	}
	for i, w := range want {
		f := fields(got[i])
		if got[i].Message != w.msg || got[i].Level != zapcore.InfoLevel || f["delivery_id"] != "d1" || f["workspace_id"] != "w1" ||
			f["event"] != "message.received" || f["attempt"] != int64(i+1) || f["status"] != w.status || f["error"] != w.err {
			t.Errorf("line %d = %q %v, want %q with status %d and error %v", i, got[i].Message, f, w.msg, w.status, w.err)
		}
		if _, ok := f["duration"]; !ok {
			t.Errorf("line %d has no duration: %v", i, f)
		}
	}
	const sent = `
# HELP parley_dispatcher_attempts_not_sent_total Attempts recorded as failed without being sent, because the webhook's circuit was open (not in attempt_duration_seconds).
# TYPE parley_dispatcher_attempts_not_sent_total counter
parley_dispatcher_attempts_not_sent_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(sent), "parley_dispatcher_attempts_not_sent_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "parley_dispatcher_attempt_duration_seconds"); n != 2 {
		t.Errorf("attempt_duration_seconds has %d series, want success and failure", n)
	}
}

// A circuit that opens logs "webhook circuit opened" with why, and counts.
func TestCircuitOpenedLogsAndCounts(t *testing.T) {
	t.Parallel()
	o, logs, reg := newObserver(t)
	o.CircuitOpened(app.CircuitOpening{WorkspaceID: "w1", WebhookID: "h1", Probe: true, LastError: "timeout", CoolDown: 30 * time.Second})
	got := logs.FilterMessage("webhook circuit opened").All()
	if len(got) != 1 || got[0].Level != zapcore.WarnLevel {
		t.Fatalf("logged %v", logs.All())
	}
	f := fields(got[0])
	if f["workspace_id"] != "w1" || f["webhook_id"] != "h1" || f["probe"] != true || f["last_error"] != "timeout" || f["cool_down"] != 30*time.Second {
		t.Errorf("fields %v", f)
	}
	const opened = `
# HELP parley_dispatcher_circuits_opened_total Times a webhook's circuit opened on this instance: after attempts in a row without answer, or a failed probe.
# TYPE parley_dispatcher_circuits_opened_total counter
parley_dispatcher_circuits_opened_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(opened), "parley_dispatcher_circuits_opened_total"); err != nil {
		t.Error(err)
	}
}

// Outcomes are counted by event and outcome; the events that only log
// keep their messages.
func TestOutcomesCountAndLog(t *testing.T) {
	t.Parallel()
	o, logs, reg := newObserver(t)
	d := &delivery.Delivery{ID: "d1", WorkspaceID: "w1", Event: "message.received"}
	o.DeliveryFinished("message.received", delivery.StatusSkipped)
	o.DeliverySkipped(d)
	o.WebhookPaused("w1", 20)
	o.ProgressNotStored(d, errors.New("db down"))
	o.DeliveryLogPurged(7)
	o.PurgeFailed(errors.New("db down"))
	o.ReplayDropped("d1", "w1")
	o.ReplayNotSent(d)

	const outcomes = `
# HELP parley_dispatcher_deliveries_total Deliveries that reached an outcome (delivered, failed, skipped), by event kind.
# TYPE parley_dispatcher_deliveries_total counter
parley_dispatcher_deliveries_total{event="message.received",outcome="skipped"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(outcomes), "parley_dispatcher_deliveries_total"); err != nil {
		t.Error(err)
	}
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Level.String()+" "+e.Message)
	}
	want := []string{
		"info webhook paused; delivery skipped",
		"warn webhook paused after consecutive failures",
		"warn store delivery progress",
		"info delivery log purged",
		"warn purge delivery log",
		"info replay dropped: no webhook",
		"info webhook paused; replay not sent",
	}
	if len(msgs) != len(want) {
		t.Fatalf("logged %q, want %q", msgs, want)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, msgs[i], want[i])
		}
	}
	if f := fields(logs.All()[1]); f["workspace_id"] != "w1" || f["pause_after"] != int64(20) {
		t.Errorf("pause fields %v", f)
	}
	if f := fields(logs.All()[3]); f["deleted"] != int64(7) {
		t.Errorf("purge fields %v", f)
	}
}
