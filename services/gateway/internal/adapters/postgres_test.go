package adapters_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
		Features: []string{}, CreatedAt: now, UpdatedAt: now,
	}
}

func TestWorkspaceStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	store := adapters.NewWorkspaceStore(env.DB(t, adapters.Schema, migrations.FS))
	ctx := context.Background()

	w := newWorkspace("acme")
	// The array encoding must survive any element, whatever the domain
	// allows today.
	w.Features = []string{`quo"te`, `com,ma`, `back\slash`, "NULL", "", "{braces}", "spa ce"}
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

func TestKeyStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	ws := adapters.NewWorkspaceStore(gdb)
	keys := adapters.NewKeyStore(gdb)
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
	credKey, credWS, err := keys.FindCredential(ctx, k.Hash)
	if err != nil || !reflect.DeepEqual(credKey, k) || !reflect.DeepEqual(credWS, storedWS) {
		t.Fatalf("credential = %+v, %+v, %v; want %+v, %+v", credKey, credWS, err, k, storedWS)
	}
	if _, _, err := keys.FindCredential(ctx, account.HashKey("nope")); !errors.Is(err, account.ErrAPIKeyNotFound) {
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
	if got, _, _ := keys.FindCredential(ctx, k.Hash); got.Active() {
		t.Fatal("credential of a revoked key is active")
	}
	if _, err := keys.Update(ctx, "nope", func(*account.APIKey) error { return nil }); !errors.Is(err, account.ErrAPIKeyNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
}
