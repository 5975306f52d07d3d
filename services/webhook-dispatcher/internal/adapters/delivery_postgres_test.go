package adapters_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

type stores struct {
	db         *gorm.DB
	webhooks   *adapters.WebhookStore
	deliveries *adapters.DeliveryStore
}

func newStores(t *testing.T) stores {
	t.Helper()
	gdb := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS)).DB(t, adapters.Schema, migrations.FS)
	return stores{db: gdb, webhooks: adapters.NewWebhookStore(gdb), deliveries: adapters.NewDeliveryStore(gdb)}
}

func (s stores) saveWebhook(t *testing.T, ws string) *webhook.Webhook {
	t.Helper()
	w, err := s.webhooks.Put(context.Background(), webhook.New(ws, "https://hooks.example.com/in", "whsec_test", time.Now().UTC()))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// webhookState reads what counting changes, and the row version (xmin),
// which moves only when the row is written.
func (s stores) webhookState(t *testing.T, ws string) (status string, failures int, xmin string) {
	t.Helper()
	err := s.db.Raw(`SELECT status, consecutive_failures, xmin::text FROM dispatch.webhooks WHERE workspace_id = ?`, ws).
		Row().Scan(&status, &failures, &xmin)
	if err != nil {
		t.Fatal(err)
	}
	return status, failures, xmin
}

// finished returns a delivery created pending, with one attempt recorded
// and its outcome set (not yet stored).
func (s stores) finished(t *testing.T, ws string, ok bool) *delivery.Delivery {
	t.Helper()
	d := outcome(ws, ok)
	if _, created, err := s.deliveries.Create(context.Background(), delivery.New(d.ID, ws, d.Event, d.Payload, d.CreatedAt)); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	return d
}

// counter is the app's count: the outcome counts towards pausing.
func counter(hook *webhook.Webhook, delivered bool, pauseAfter int, paused *atomic.Bool) func(*webhook.Webhook) bool {
	return func(w *webhook.Webhook) bool {
		if w.ID != hook.ID || w.Secret != hook.Secret {
			return false
		}
		changed, p := w.RecordDelivery(delivered, pauseAfter, time.Now().UTC())
		paused.Store(p)
		return changed
	}
}

// Outcomes finished at once share writes, and every failure is counted
// under the webhook's lock with its outcome: 40 concurrent failures leave
// the counter at exactly 40, and exactly one of them reports the pause.
func TestConcurrentFailuresAreAllCounted(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	const n = 40
	ds := make([]*delivery.Delivery, n)
	for i := range ds {
		ds[i] = s.finished(t, ws, false)
	}
	paused := make([]atomic.Bool, n)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			if _, err := s.deliveries.Finish(context.Background(), d, 0, counter(hook, false, 5, &paused[i])); err != nil {
				t.Errorf("Finish: %v", err)
			}
		})
	}
	wg.Wait()
	status, failures, _ := s.webhookState(t, ws)
	if status != "paused" || failures != n {
		t.Errorf("webhook %s with %d failures, want paused with %d", status, failures, n)
	}
	reported := 0
	for i := range paused {
		if paused[i].Load() {
			reported++
		}
	}
	if reported != 1 {
		t.Errorf("%d outcomes reported the pause, want 1", reported)
	}
	var failed int
	_ = s.db.Raw(`SELECT count(*) FROM dispatch.deliveries WHERE workspace_id = ? AND status = 'failed'`, ws).Row().Scan(&failed)
	if failed != n {
		t.Errorf("%d failed deliveries stored, want %d", failed, n)
	}
}

// A success on a webhook without failures changes nothing, so the webhook
// row is not written (no lock, no update); a success after failures clears
// them.
func TestSuccessWritesTheWebhookOnlyWhenItHadFailures(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	var paused atomic.Bool
	_, _, before := s.webhookState(t, ws)
	for range 3 {
		if _, err := s.deliveries.Finish(context.Background(), s.finished(t, ws, true), 0, counter(hook, true, 20, &paused)); err != nil {
			t.Fatal(err)
		}
	}
	if _, failures, after := s.webhookState(t, ws); after != before || failures != 0 {
		t.Errorf("webhook written by successes (xmin %s -> %s, %d failures)", before, after, failures)
	}

	for range 2 {
		if _, err := s.deliveries.Finish(context.Background(), s.finished(t, ws, false), 0, counter(hook, false, 20, &paused)); err != nil {
			t.Fatal(err)
		}
	}
	if _, failures, _ := s.webhookState(t, ws); failures != 2 {
		t.Fatalf("%d failures, want 2", failures)
	}
	if _, err := s.deliveries.Finish(context.Background(), s.finished(t, ws, true), 0, counter(hook, true, 20, &paused)); err != nil {
		t.Fatal(err)
	}
	if status, failures, _ := s.webhookState(t, ws); failures != 0 || status != "active" {
		t.Errorf("after a success: %s with %d failures, want active with 0", status, failures)
	}
}

// An outcome that cannot be stored (its row is gone) fails alone: it is
// not counted, and the outcomes sharing its write are stored and counted.
func TestAnOutcomeThatCannotBeStoredFailsAlone(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	good := []*delivery.Delivery{s.finished(t, ws, false), s.finished(t, ws, false), s.finished(t, ws, false)}
	gone := s.finished(t, ws, false)
	if err := s.db.Exec(`DELETE FROM dispatch.deliveries WHERE id = ?`, gone.ID).Error; err != nil {
		t.Fatal(err)
	}
	var paused atomic.Bool
	var wg sync.WaitGroup
	for _, d := range append(good, gone) {
		wg.Go(func() {
			_, err := s.deliveries.Finish(context.Background(), d, 0, counter(hook, false, 20, &paused))
			switch {
			case d == gone && err == nil:
				t.Error("Finish of a delivery without a row succeeded")
			case d != gone && err != nil:
				t.Errorf("Finish: %v", err)
			}
		})
	}
	wg.Wait()
	if _, failures, _ := s.webhookState(t, ws); failures != len(good) {
		t.Errorf("%d failures counted, want %d", failures, len(good))
	}
	var rows int
	_ = s.db.Raw(`SELECT count(*) FROM dispatch.deliveries WHERE id = ?`, gone.ID).Row().Scan(&rows)
	if rows != 0 {
		t.Error("the outcome of a purged delivery was written somewhere")
	}
}

// An update is made only on the row as its round read it: an outcome
// whose row another round wrote meanwhile (more attempts than it read) is
// not written and not counted, and its Finish returns the stored
// delivery; the outcomes sharing its write are stored and counted.
func TestAnOutcomeOnARowWrittenMeanwhileIsNotWritten(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	good := []*delivery.Delivery{s.finished(t, ws, false), s.finished(t, ws, false), s.finished(t, ws, false)}
	raced := []*delivery.Delivery{s.finished(t, ws, false), s.finished(t, ws, false)}
	for _, d := range raced {
		other := delivery.New(d.ID, ws, d.Event, d.Payload, d.CreatedAt)
		other.Record(delivery.Attempt{Number: 1, StartedAt: d.CreatedAt, Duration: time.Millisecond, ResponseStatus: 503, Error: "receiver answered 503"})
		if lost, err := s.deliveries.Progress(context.Background(), other, 0); err != nil || lost != nil {
			t.Fatalf("the other round's Progress = %+v, %v", lost, err)
		}
	}
	var paused atomic.Bool
	var wg sync.WaitGroup
	for _, d := range append(slices.Clone(good), raced...) {
		wg.Go(func() {
			lost, err := s.deliveries.Finish(context.Background(), d, 0, counter(hook, false, 20, &paused))
			switch {
			case err != nil:
				t.Errorf("Finish: %v", err)
			case slices.Contains(raced, d) && (lost == nil || lost.Attempts != 1 || lost.Status != delivery.StatusPending || lost.History[0].ResponseStatus != 503):
				t.Errorf("Finish on a row written meanwhile returned %+v", lost)
			case !slices.Contains(raced, d) && lost != nil:
				t.Errorf("Finish on a row as read returned %+v", lost)
			}
		})
	}
	wg.Wait()
	if _, failures, _ := s.webhookState(t, ws); failures != len(good) {
		t.Errorf("%d failures counted, want %d", failures, len(good))
	}
	for _, d := range raced {
		var status string
		var attempts int
		_ = s.db.Raw(`SELECT status, attempts FROM dispatch.deliveries WHERE id = ?`, d.ID).Row().Scan(&status, &attempts)
		if status != "pending" || attempts != 1 {
			t.Errorf("a row written meanwhile was overwritten: %s after %d attempts", status, attempts)
		}
	}
}

// The payload is stored once, by Create; later writes never change it,
// and a second Create of the same id returns the stored delivery.
func TestPayloadIsStoredOnce(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := delivery.New(uuid.NewString(), ws, delivery.EventMessageReceived, []byte(`{"first":true}`), now)
	if _, created, err := s.deliveries.Create(ctx, d); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	d.Payload = []byte(`{"changed":true}`)
	d.Record(delivery.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, ResponseStatus: 503, Error: "receiver answered 503"})
	if _, err := s.deliveries.Progress(ctx, d, 0); err != nil {
		t.Fatal(err)
	}
	again := delivery.New(d.ID, ws, delivery.EventMessageReceived, []byte(`{"rendered":"again"}`), now.Add(time.Minute))
	stored, created, err := s.deliveries.Create(ctx, again)
	if err != nil || created || string(stored.Payload) != `{"first":true}` || stored.Attempts != 1 || stored.Status != delivery.StatusPending {
		t.Fatalf("Create(existing) = %+v, %v, %v", stored, created, err)
	}
	d.Record(delivery.Attempt{Number: 2, StartedAt: now, Duration: time.Millisecond, ResponseStatus: 200})
	d.Finish()
	if _, err := s.deliveries.Finish(ctx, d, 1, nil); err != nil {
		t.Fatal(err)
	}
	var payload, status string
	_ = s.db.Raw(`SELECT payload, status FROM dispatch.deliveries WHERE id = ?`, d.ID).Row().Scan(&payload, &status)
	if payload != `{"first":true}` || status != "delivered" {
		t.Errorf("stored %s %s", status, payload)
	}
}

// Concurrent Creates share inserts, and each learns whether it created
// its row: of two Creates of one id, exactly one did.
func TestConcurrentCreates(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ids := make([]string, 30)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	var created atomic.Int64
	var wg sync.WaitGroup
	for _, id := range append(ids, ids...) {
		wg.Go(func() {
			stored, ok, err := s.deliveries.Create(context.Background(), delivery.New(id, ws, delivery.EventMessageReceived, []byte(`{}`), now))
			if err != nil || stored.ID != id {
				t.Errorf("Create = %+v, %v", stored, err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != int64(len(ids)) {
		t.Errorf("%d Creates created a row, want %d", created.Load(), len(ids))
	}
}

// Get shares queries between concurrent callers, yet never returns an older
// webhook than the one stored when it was called: every save, resave,
// pause or delete is seen by every Get that starts after it.
func TestGetSeesEveryChangeAtOnce(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ctx := context.Background()
	ws := uuid.NewString()
	s.saveWebhook(t, ws)

	// Readers keep Gets in flight so that the checks below share batches.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 8 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.webhooks.Get(ctx, ws); err != nil && !errors.Is(err, webhook.ErrNotFound) {
					t.Errorf("Get: %v", err)
					return
				}
			}
		})
	}
	defer func() { close(stop); readers.Wait() }()

	for i := range 20 {
		secret := "whsec_" + uuid.NewString()
		if _, err := s.webhooks.Update(ctx, ws, func(w *webhook.Webhook) error {
			w.Resave(secret, time.Now().UTC())
			if i%2 == 1 {
				w.Status = webhook.StatusPaused
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.webhooks.Get(ctx, ws)
		if err != nil || got.Secret != secret || got.Active() != (i%2 == 0) {
			t.Fatalf("Get after change %d = %+v, %v; want secret %s", i, got, err, secret)
		}
		// The copy handed out is the caller's own.
		got.Secret = "changed by the caller"
	}
	if err := s.webhooks.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.webhooks.Get(ctx, ws); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("Get after delete = %v, want ErrNotFound", err)
	}
	if _, err := s.webhooks.Get(ctx, "not-a-uuid"); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("Get(not a uuid) = %v, want ErrNotFound", err)
	}
}

// outcome is a delivery not yet stored, settled after one attempt.
func outcome(ws string, ok bool) *delivery.Delivery {
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := delivery.New(uuid.NewString(), ws, delivery.EventMessageReceived, []byte(`{"n":1}`), now)
	at := delivery.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, ResponseStatus: 200}
	if !ok {
		at.ResponseStatus, at.Error = 500, "receiver answered 500"
	}
	d.Record(at)
	d.Finish()
	return d
}

// Outcomes inserted at once (a delivery's one write) share statements
// with updates of other deliveries and are counted with them under the
// webhook's lock: 30 inserted failures and 10 updated ones leave the
// counter at exactly 40.
func TestInsertedOutcomesAreCountedWithUpdatedOnes(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	var inserted, updated []*delivery.Delivery
	for range 30 {
		inserted = append(inserted, outcome(ws, false))
	}
	for range 10 {
		updated = append(updated, s.finished(t, ws, false))
	}
	var paused atomic.Bool
	var wg sync.WaitGroup
	for _, d := range inserted {
		wg.Go(func() {
			if existing, err := s.deliveries.Insert(context.Background(), d, counter(hook, false, 100, &paused)); err != nil || existing != nil {
				t.Errorf("Insert = %v, %v", existing, err)
			}
		})
	}
	for _, d := range updated {
		wg.Go(func() {
			if _, err := s.deliveries.Finish(context.Background(), d, 0, counter(hook, false, 100, &paused)); err != nil {
				t.Errorf("Finish: %v", err)
			}
		})
	}
	wg.Wait()
	if _, failures, _ := s.webhookState(t, ws); failures != 40 {
		t.Errorf("%d failures counted, want 40", failures)
	}
	var failed int
	_ = s.db.Raw(`SELECT count(*) FROM dispatch.deliveries WHERE workspace_id = ? AND status = 'failed'`, ws).Row().Scan(&failed)
	if failed != 40 {
		t.Errorf("%d failed deliveries stored, want 40", failed)
	}
}

// An Insert whose id is stored already writes and counts nothing and
// returns the stored delivery, also beside inserts that go in.
func TestInsertOfAStoredDeliveryReturnsIt(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	stored := outcome(ws, true)
	if existing, err := s.deliveries.Insert(context.Background(), stored, nil); err != nil || existing != nil {
		t.Fatalf("Insert = %v, %v", existing, err)
	}
	_, _, before := s.webhookState(t, ws)
	again := outcome(ws, false)
	again.ID, again.Payload = stored.ID, []byte(`{"again":1}`)
	fresh := outcome(ws, false)
	var paused atomic.Bool
	var wg sync.WaitGroup
	var got *delivery.Delivery
	wg.Go(func() {
		var err error
		if got, err = s.deliveries.Insert(context.Background(), again, counter(hook, false, 20, &paused)); err != nil {
			t.Errorf("Insert(again): %v", err)
		}
	})
	wg.Go(func() {
		if existing, err := s.deliveries.Insert(context.Background(), fresh, counter(hook, false, 20, &paused)); err != nil || existing != nil {
			t.Errorf("Insert(fresh) = %v, %v", existing, err)
		}
	})
	wg.Wait()
	if got == nil || got.Status != delivery.StatusDelivered || string(got.Payload) != `{"n":1}` || got.Attempts != 1 {
		t.Fatalf("Insert(again) returned %+v", got)
	}
	if _, failures, after := s.webhookState(t, ws); failures != 1 || after == before {
		t.Errorf("%d failures counted, want 1 (the fresh one's)", failures)
	}
	var status string
	_ = s.db.Raw(`SELECT status FROM dispatch.deliveries WHERE id = ?`, stored.ID).Row().Scan(&status)
	if status != "delivered" {
		t.Errorf("stored delivery became %s", status)
	}
}
