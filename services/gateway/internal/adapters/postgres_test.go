package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
	"github.com/parleyhq/parley/services/gateway/migrations"
)

func newWorkspace(slug string) account.Workspace {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return account.Workspace{
		ID: uuid.NewString(), Name: "N " + slug, Slug: slug,
		Plan:     account.Plan{Name: "api", Modules: []account.Module{account.ModuleDeveloperAPI}},
		Switched: map[string]bool{}, CreatedAt: now, UpdatedAt: now,
	}
}

func TestWorkspaceStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	store := adapters.NewWorkspaceStore(env.DB(t, adapters.Schema, migrations.FS))
	ctx := context.Background()

	w := newWorkspace("acme")
	// The array encoding must survive any element, whatever the domain
	// allows today, switched on or off.
	w.Switched = map[string]bool{`quo"te`: true, `com,ma`: false, `back\slash`: true, "NULL": false, "": true, "{braces}": false, "spa ce": true}
	w.RatePerMinute = 7
	w.Plan.AILimit, w.Plan.AIUsed = 10, 3
	if err := store.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, w)
	}

	if err := store.Create(ctx, newWorkspace("acme")); !errors.Is(err, account.ErrSlugTaken) {
		t.Fatalf("duplicate slug: %v", err)
	}
	if _, err := store.Get(ctx, uuid.NewString()); !errors.Is(err, account.ErrWorkspaceNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := store.Get(ctx, "'; drop table x; --"); !errors.Is(err, account.ErrWorkspaceNotFound) {
		t.Fatalf("malformed id: %v", err)
	}

	// A workspace without its own rate stores NULL and reads back 0.
	d := newWorkspace("default-rate")
	if err := store.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(ctx, d.ID); got.RatePerMinute != 0 {
		t.Fatalf("rate = %d", got.RatePerMinute)
	}

	// Concurrent updates are serialised: none is lost.
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := store.Update(ctx, d.ID, func(w *account.Workspace) error {
				w.Plan.AILimit++
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got, _ := store.Get(ctx, d.ID); got.Plan.AILimit != 10 {
		t.Fatalf("ai_limit after 10 concurrent increments = %d", got.Plan.AILimit)
	}
	// A refused change saves nothing.
	boom := errors.New("no")
	if _, err := store.Update(ctx, d.ID, func(w *account.Workspace) error { w.Name = "changed"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("update error = %v", err)
	}
	if got, _ := store.Get(ctx, d.ID); got.Name != d.Name {
		t.Fatalf("refused change saved: %q", got.Name)
	}

	list, err := store.List(ctx, "")
	if err != nil || len(list) != 2 || list[0].ID != w.ID {
		t.Fatalf("list = %v, %v", list, err)
	}
	list, err = store.List(ctx, "default-rate")
	if err != nil || len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("list by slug = %v, %v", list, err)
	}
}

// newKeyStores returns the test's migrated database and the workspace and
// key stores on it.
func newKeyStores(t *testing.T) (*gorm.DB, *adapters.WorkspaceStore, *adapters.KeyStore) {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	return gdb, adapters.NewWorkspaceStore(gdb), adapters.NewKeyStore(gdb)
}

func TestKeyStore(t *testing.T) {
	t.Parallel()
	_, ws, keys := newKeyStores(t)
	ctx := context.Background()
	w := newWorkspace("acme")
	if err := ws.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	k, err := account.NewAPIKey(uuid.NewString(), w.ID, "ci", "pk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := keys.FindByHash(ctx, k.Hash)
	if err != nil || !reflect.DeepEqual(got, k) {
		t.Fatalf("find = %+v, %v; want %+v", got, err, k)
	}
	// The credential is the key and its workspace, as stored, in one read.
	storedWS, err := ws.Get(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	credKey, credWS, err := keys.FindCredential(ctx, k.Hash, now)
	used := k
	used.LastUsedAt = &now
	if err != nil || !reflect.DeepEqual(credKey, used) || !reflect.DeepEqual(credWS, storedWS) {
		t.Fatalf("credential = %+v, %+v, %v; want %+v, %+v", credKey, credWS, err, used, storedWS)
	}
	if _, _, err := keys.FindCredential(ctx, account.HashKey("nope"), now); !errors.Is(err, account.ErrAPIKeyNotFound) {
		t.Fatalf("credential of an unknown hash: %v", err)
	}

	dup := k
	dup.ID = uuid.NewString()
	if err := keys.Create(ctx, dup); !errors.Is(err, account.ErrKeyExists) {
		t.Fatalf("same hash twice: %v", err)
	}
	orphan := k
	orphan.ID, orphan.Hash, orphan.WorkspaceID = uuid.NewString(), account.HashKey("pk_other"), uuid.NewString()
	if err := keys.Create(ctx, orphan); !errors.Is(err, account.ErrWorkspaceNotFound) {
		t.Fatalf("key of unknown workspace: %v", err)
	}
	if _, err := keys.FindByHash(ctx, account.HashKey("nope")); !errors.Is(err, account.ErrAPIKeyNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}

	revoked, err := keys.Update(ctx, k.ID, func(k *account.APIKey) error { k.Revoke(now); return nil })
	if err != nil || revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(now) {
		t.Fatalf("revoke = %+v, %v", revoked, err)
	}
	if got, _ := keys.FindByHash(ctx, k.Hash); got.Active() {
		t.Fatal("revocation not stored")
	}
	if got, _, _ := keys.FindCredential(ctx, k.Hash, now); got.Active() {
		t.Fatal("credential of a revoked key is active")
	}
	if _, err := keys.Update(ctx, "nope", func(*account.APIKey) error { return nil }); !errors.Is(err, account.ErrAPIKeyNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
}

// TestKeyStoreRecordsLastUseAtMostOnceAMinute: authentication records a
// key's use in its read, but writes only when the stored use is missing or
// over LastUsedResolution old, never moves it back, and leaves revoked keys
// alone.
func TestKeyStoreRecordsLastUseAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	gdb, ws, keys := newKeyStores(t)
	ctx := context.Background()
	w := newWorkspace("acme")
	if err := ws.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	k, err := account.NewAPIKey(uuid.NewString(), w.ID, "ci", "pk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	stored := func() *time.Time {
		t.Helper()
		var row struct{ LastUsedAt *time.Time }
		if err := gdb.WithContext(ctx).Raw(`SELECT last_used_at FROM accounts.api_keys WHERE id = ?`, k.ID).Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
		return row.LastUsedAt
	}
	if got := stored(); got != nil {
		t.Fatalf("a new key's last use = %v, want none", got)
	}
	steps := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"first use", t0.Add(time.Second), t0.Add(time.Second)},
		{"within the minute: no write", t0.Add(30 * time.Second), t0.Add(time.Second)},
		{"exactly a minute on: no write", t0.Add(time.Second + account.LastUsedResolution), t0.Add(time.Second)},
		{"over a minute on", t0.Add(2 * time.Minute), t0.Add(2 * time.Minute)},
		{"an instance with a slow clock: never back", t0, t0.Add(2 * time.Minute)},
	}
	for _, step := range steps {
		got, _, err := keys.FindCredential(ctx, k.Hash, step.at)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got.LastUsedAt == nil || !got.LastUsedAt.Equal(step.want) {
			t.Errorf("%s: returned last use %v, want %v", step.name, got.LastUsedAt, step.want)
		}
		if s := stored(); s == nil || !s.Equal(step.want) {
			t.Errorf("%s: stored last use %v, want %v", step.name, s, step.want)
		}
	}

	if _, err := keys.Update(ctx, k.ID, func(k *account.APIKey) error { k.Revoke(t0.Add(3 * time.Minute)); return nil }); err != nil {
		t.Fatal(err)
	}
	// Revocation keeps the last use; a revoked key presented again is
	// not a use.
	got, _, err := keys.FindCredential(ctx, k.Hash, t0.Add(time.Hour))
	if err != nil || got.Active() || got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("revoked key = %+v, %v", got, err)
	}
	if s := stored(); s == nil || !s.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("revoked key's stored last use = %v", s)
	}
}

func TestKeyStoreListsAWorkspacesKeys(t *testing.T) {
	t.Parallel()
	_, ws, keys := newKeyStores(t)
	ctx := context.Background()
	a, b := newWorkspace("a"), newWorkspace("b")
	for _, w := range []account.Workspace{a, b} {
		if err := ws.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	var want []account.APIKey
	for i, spec := range []struct{ ws, key string }{
		{a.ID, "pk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{b.ID, "pk_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
		{a.ID, "pk_ccccccccccccccccccccccccccccccccccccccccccc"},
	} {
		k, err := account.NewAPIKey(uuid.NewString(), spec.ws, fmt.Sprint("key ", i), spec.key, t0.Add(time.Duration(2-i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		if spec.ws == a.ID {
			want = append([]account.APIKey{k}, want...) // the later key is the older
		}
	}
	got, err := keys.ListByWorkspace(ctx, a.ID)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("list = %+v, %v; want %+v", got, err, want)
	}
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		if got, err := keys.ListByWorkspace(ctx, id); err != nil || len(got) != 0 {
			t.Errorf("list of %q = %+v, %v", id, got, err)
		}
	}
}
