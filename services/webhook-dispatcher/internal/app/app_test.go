package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func newApp(t *testing.T, policy app.Policy, resolver safehttp.Resolver, clock func() time.Time) (*app.App, *adapters.DeliveryStore) {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	deliveries := adapters.NewDeliveryStore(gdb)
	return app.New(app.Deps{
		Policy:     policy,
		Webhooks:   adapters.NewWebhookStore(gdb),
		Deliveries: deliveries,
		Resolver:   resolver,
		Observer:   observe.New(env.Logger(t), prometheus.NewRegistry()),
		Clock:      clock,
	}), deliveries
}

// A host name that resolves to a private address is refused at save time
// (the dial-time guard would refuse every delivery anyway).
func TestSaveWebhookChecksResolvedAddresses(t *testing.T) {
	t.Parallel()
	r := fakeResolver{
		"hooks.example.com":    {netip.MustParseAddr("93.184.216.34")},
		"internal.example.com": {netip.MustParseAddr("10.20.30.40")},
	}
	strict, _ := newApp(t, app.Policy{PauseAfter: 20, AttemptTimeout: time.Second}, r, nil)
	ws := uuid.NewString()
	_, err := strict.SaveWebhook(context.Background(), ws, "https://internal.example.com/in")
	var ue *safehttp.URLError
	if !errors.As(err, &ue) || ue.Error() != "url must point to a public address: internal.example.com resolves to 10.20.30.40, a private address" {
		t.Fatalf("SaveWebhook(internal) = %v", err)
	}
	w, err := strict.SaveWebhook(context.Background(), ws, "  https://hooks.example.com/in  ")
	if err != nil || w.URL != "https://hooks.example.com/in" || w.Secret == "" {
		t.Fatalf("SaveWebhook(public) = %+v, %v", w, err)
	}

	dev, _ := newApp(t, app.Policy{AllowPrivateTargets: true, PauseAfter: 20, AttemptTimeout: time.Second}, r, nil)
	if _, err := dev.SaveWebhook(context.Background(), ws, "https://internal.example.com/in"); err != nil {
		t.Fatalf("with private targets allowed: %v", err)
	}
}

// retentionApp is an app that keeps the log 14 days, its clock stopped at
// the now it returns.
func retentionApp(t *testing.T) (*app.App, *adapters.DeliveryStore, time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	a, store := newApp(t, app.Policy{Retention: 336 * time.Hour, PauseAfter: 20, AttemptTimeout: time.Second}, nil, func() time.Time { return now })
	return a, store, now
}

// v7At is a UUIDv7 made at t, as an event id made then would be.
func v7At(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	ms := t.UnixMilli()
	for i := range 6 {
		u[i] = byte(ms >> (8 * (5 - i)))
	}
	return u.String()
}

// The purge deletes what is older than the retention, whether the id is a
// UUIDv7 made when the event was (found by the ids' order) or another
// version (found by the partial index of those).
func TestPurgeKeepsOnlyTheRetention(t *testing.T) {
	t.Parallel()
	a, store, now := retentionApp(t)
	ws := uuid.NewString()
	ctx := context.Background()
	ages := map[string]time.Duration{
		"fresh":       time.Minute,
		"13 days":     13 * 24 * time.Hour,
		"15 days":     15 * 24 * time.Hour,
		"a month ago": 30 * 24 * time.Hour,
	}
	ids := map[string][]string{}
	for name, age := range ages {
		// The event was made a little before its delivery was recorded.
		for _, id := range []string{uuid.NewString(), v7At(now.Add(-age - time.Second))} {
			ids[name] = append(ids[name], id)
			if _, _, err := store.Create(ctx, delivery.New(id, ws, delivery.EventTest, []byte(`{}`), now.Add(-age))); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := a.PurgeDeliveries(ctx)
	if err != nil || n != 4 {
		t.Fatalf("PurgeDeliveries = %d, %v; want 4", n, err)
	}
	left, err := store.List(ctx, ws, delivery.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, d := range left {
		kept = append(kept, d.ID)
	}
	want := append(slices.Clone(ids["fresh"]), ids["13 days"]...)
	slices.Sort(kept)
	slices.Sort(want)
	if !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}

	// The background job purges as soon as it starts.
	old := uuid.NewString()
	if _, _, err := store.Create(ctx, delivery.New(old, ws, delivery.EventTest, []byte(`{}`), now.Add(-400*time.Hour))); err != nil {
		t.Fatal(err)
	}
	jobCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.RunRetention(jobCtx, time.Hour); close(done) }()
	wait.For(t, 10*time.Second, "RunRetention's pass", func() error {
		left, _ = store.List(ctx, ws, delivery.ListQuery{Limit: 10})
		if len(left) != 4 {
			return fmt.Errorf("RunRetention left %d deliveries", len(left))
		}
		return nil
	})
	cancel()
	<-done
}

// The log lists what its retention keeps, not what the hourly purge has
// not reached yet: an entry older than the retention is never shown
// (docs/webhooks.md "The delivery log").
func TestListShowsOnlyTheRetention(t *testing.T) {
	t.Parallel()
	a, store, now := retentionApp(t)
	ws, ctx := uuid.NewString(), context.Background()
	kept, gone := uuid.NewString(), uuid.NewString()
	for id, age := range map[string]time.Duration{kept: 336*time.Hour - time.Minute, gone: 336*time.Hour + time.Minute} {
		if _, _, err := store.Create(ctx, delivery.New(id, ws, delivery.EventTest, []byte(`{}`), now.Add(-age))); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []delivery.ListQuery{{Limit: 10}, {Limit: 1}, {Limit: 10, Status: delivery.StatusPending}} {
		page, err := a.ListDeliveries(ctx, ws, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Deliveries) != 1 || page.Deliveries[0].ID != kept || page.NextBefore != nil {
			var ids []string
			for _, d := range page.Deliveries {
				ids = append(ids, d.ID)
			}
			t.Fatalf("ListDeliveries(%+v) = %v, next %v; want only %s (the other is past the retention)", q, ids, page.NextBefore, kept)
		}
	}
}
