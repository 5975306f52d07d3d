package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/gateway/internal/app"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// stores are in-memory accounts: workspaces and keys, with FindCredential
// counted and able to run a hook before it reads (a change racing it).
type stores struct {
	mu         sync.Mutex
	workspaces map[string]account.Workspace
	keys       map[string]account.APIKey // by id
	finds      int
	beforeFind func()
}

var (
	_ account.WorkspaceStore = (*stores)(nil)
	_ account.KeyStore       = keyStore{}
)

func (s *stores) Create(context.Context, account.Workspace) error { return errors.ErrUnsupported }

func (s *stores) Get(_ context.Context, id string) (account.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workspaces[id]
	if !ok {
		return account.Workspace{}, account.ErrWorkspaceNotFound
	}
	return w, nil
}

func (s *stores) List(context.Context, string) ([]account.Workspace, error) {
	return nil, errors.ErrUnsupported
}

func (s *stores) Update(_ context.Context, id string, change func(*account.Workspace) error) (account.Workspace, error) {
	return update(s, s.workspaces, id, change, account.ErrWorkspaceNotFound)
}

// update is both stores' Update: change edits a copy of m[id], kept when
// it returns nil.
func update[T any](s *stores, m map[string]T, id string, change func(*T) error, notFound error) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[id]
	if !ok {
		var zero T
		return zero, notFound
	}
	if err := change(&v); err != nil {
		var zero T
		return zero, err
	}
	m[id] = v
	return v, nil
}

func (s *stores) UseAIUnits(context.Context, []account.AIUnitsUse) ([]account.AIUnitsUsed, error) {
	return nil, errors.ErrUnsupported
}

// keyStore is stores seen as a KeyStore, whose Create and Update differ
// from the workspaces'.
type keyStore struct{ *stores }

func (s keyStore) Create(context.Context, account.APIKey) error { return errors.ErrUnsupported }

func (s keyStore) FindByHash(context.Context, string) (account.APIKey, error) {
	return account.APIKey{}, errors.ErrUnsupported
}

func (s keyStore) FindCredential(_ context.Context, hash string, _ time.Time) (account.APIKey, account.Workspace, error) {
	s.mu.Lock()
	s.finds++
	hook := s.beforeFind
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.Hash == hash {
			return k, s.workspaces[k.WorkspaceID], nil
		}
	}
	return account.APIKey{}, account.Workspace{}, account.ErrAPIKeyNotFound
}

func (s keyStore) ListByWorkspace(context.Context, string) ([]account.APIKey, error) {
	return nil, errors.ErrUnsupported
}

func (s keyStore) Update(_ context.Context, id string, change func(*account.APIKey) error) (account.APIKey, error) {
	return update(s.stores, s.keys, id, change, account.ErrAPIKeyNotFound)
}

func (s *stores) findCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finds
}

// token is an in-memory change token; err, when set, is every call's
// answer.
type token struct {
	mu    sync.Mutex
	value string
	n     int
	err   error
}

func (t *token) Current(context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value, t.err
}

func (t *token) Rotate(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.n++
	t.value = fmt.Sprintf("token-%d", t.n)
	return nil
}

func (t *token) set(v string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.value, t.err = v, err
}

// fixture is an app on in-memory stores with one workspace ("ws") and two
// keys: active (id "k1") and revoked (id "k2"), on a clock the test moves.
type fixture struct {
	app     *app.App
	stores  *stores
	token   *token
	now     time.Time
	active  string
	revoked string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := &fixture{now: start, token: &token{value: "token-0"},
		active: "pk_" + strings.Repeat("a", 43), revoked: "pk_" + strings.Repeat("b", 43)}
	w, err := account.Create("ws", account.NewWorkspace{Name: "Acme"}, start)
	if err != nil {
		t.Fatal(err)
	}
	k1, err := account.NewAPIKey("k1", "ws", "one", f.active, start)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := account.NewAPIKey("k2", "ws", "two", f.revoked, start)
	if err != nil {
		t.Fatal(err)
	}
	k2.Revoke(start)
	f.stores = &stores{workspaces: map[string]account.Workspace{"ws": w}, keys: map[string]account.APIKey{"k1": k1, "k2": k2}}
	f.app = app.New(app.Deps{Workspaces: f.stores, Keys: keyStore{f.stores}, Changes: f.token,
		Clock: func() time.Time { return f.now }})
	return f
}

// auth authenticates key and says how many FindCredential calls it took.
func (f *fixture) auth(t *testing.T, key string) (account.Workspace, int, error) {
	t.Helper()
	before := f.stores.findCount()
	w, err := f.app.Authenticate(context.Background(), []string{"Bearer " + key}, "")
	return w, f.stores.findCount() - before, err
}

// mustAuth is auth that expects the workspace "ws" and finds reads of the
// store.
func (f *fixture) mustAuth(t *testing.T, wantFinds int) {
	t.Helper()
	w, finds, err := f.auth(t, f.active)
	if err != nil || w.ID != "ws" {
		t.Fatalf("Authenticate = %q, %v; want ws", w.ID, err)
	}
	if finds != wantFinds {
		t.Fatalf("Authenticate read the store %d times, want %d", finds, wantFinds)
	}
}

func TestAuthenticateCachesWhileTokenUnchangedAndYoung(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustAuth(t, 1)
	f.mustAuth(t, 0)
	f.now = f.now.Add(30*time.Second - time.Microsecond)
	f.mustAuth(t, 0)
}

func TestAuthenticateRefetches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*fixture)
	}{
		{name: "token changed", change: func(f *fixture) { f.token.set("token-other", nil) }},
		{name: "entry 30 s old", change: func(f *fixture) { f.now = f.now.Add(30 * time.Second) }},
		{name: "token missing", change: func(f *fixture) { f.token.set("", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.mustAuth(t, 1)
			tt.change(f)
			f.mustAuth(t, 1)
		})
	}
}

// A token that is "" (Redis kept none) matches nothing, not even an entry
// fetched under "": another "" later may follow a change in between.
func TestAuthenticateNeverServesEmptyToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.token.set("", nil)
	f.mustAuth(t, 1)
	f.mustAuth(t, 1)
}

// The entry keeps the token read before its fetch: a change that rotates
// the token while the fetch runs leads to another fetch next time, whose
// entry then serves.
func TestAuthenticateStoresTokenReadBeforeFetch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var once sync.Once
	f.stores.beforeFind = func() {
		once.Do(func() {
			if _, err := f.app.SetFeature(context.Background(), "ws", account.FeatureFlowsAPI, false); err != nil {
				t.Errorf("SetFeature: %v", err)
			}
		})
	}
	f.mustAuth(t, 1)
	f.mustAuth(t, 1)
	f.mustAuth(t, 0)
}

func TestAuthenticateDoesNotCacheRevokedOrUnknownKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, key := range []string{f.revoked, "pk_" + strings.Repeat("c", 43)} {
		for range 2 {
			if _, finds, err := f.auth(t, key); !errors.Is(err, account.ErrUnknownKey) || finds != 1 {
				t.Fatalf("Authenticate(%s…) = %v after %d reads of the store; want ErrUnknownKey after 1", key[:6], err, finds)
			}
		}
	}
}

// Each change to a credential rotates the token before it is answered, so
// the next request sees it although the credential was cached.
func TestChangesTakeEffectAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		change func(*app.App) error
		want   func(error) bool
	}{
		{
			name:   "key revoked",
			change: func(a *app.App) error { _, err := a.RevokeAPIKey(ctx, "k1"); return err },
			want:   func(err error) bool { return errors.Is(err, account.ErrUnknownKey) },
		},
		{
			name: "developer_api removed",
			change: func(a *app.App) error {
				_, err := a.UpdateWorkspace(ctx, "ws", account.Changes{Modules: []string{"flows"}})
				return err
			},
			want: func(err error) bool {
				var mi *account.ModuleInactiveError
				return errors.As(err, &mi) && mi.Module == account.ModuleDeveloperAPI
			},
		},
		{
			name: "feature switched off",
			change: func(a *app.App) error {
				_, err := a.SetFeature(ctx, "ws", account.FeatureFlowsAPI, false)
				return err
			},
			want: func(err error) bool { return err == nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.mustAuth(t, 1)
			if err := tt.change(f.app); err != nil {
				t.Fatal(err)
			}
			w, finds, err := f.auth(t, f.active)
			if !tt.want(err) || finds != 1 {
				t.Fatalf("after the change: %v after %d reads of the store", err, finds)
			}
			if err == nil && slices.Contains(w.EnabledFeatures(), account.FeatureFlowsAPI) {
				t.Fatalf("after the change: %s still on", account.FeatureFlowsAPI)
			}
		})
	}
}

// A change whose token cannot be rotated is stored but answered with
// ErrChangesUnavailable, so that the caller repeats it; a request whose
// token cannot be read is refused with it, without reading the store.
func TestChangeTokenUnavailable(t *testing.T) {
	t.Parallel()
	down := errors.New("redis down")
	f := newFixture(t)
	f.mustAuth(t, 1)
	f.token.set("token-0", down)
	if _, err := f.app.RevokeAPIKey(context.Background(), "k1"); !errors.Is(err, account.ErrChangesUnavailable) || !errors.Is(err, down) {
		t.Fatalf("RevokeAPIKey = %v, want ErrChangesUnavailable wrapping the cause", err)
	}
	if _, finds, err := f.auth(t, f.active); !errors.Is(err, account.ErrChangesUnavailable) || finds != 0 {
		t.Fatalf("Authenticate = %v after %d reads of the store; want ErrChangesUnavailable after none", err, finds)
	}
	f.token.set("token-0", nil)
	if _, err := f.app.RevokeAPIKey(context.Background(), "k1"); err != nil {
		t.Fatalf("RevokeAPIKey repeated: %v", err)
	}
	if _, _, err := f.auth(t, f.active); !errors.Is(err, account.ErrUnknownKey) {
		t.Fatalf("after the repeated revocation: %v, want ErrUnknownKey", err)
	}
}

// Cached answers from what an earlier Authenticate stored, never from the
// store or the token: a young entry's workspace with the token it was read
// under, and nothing for a request Authenticate would refuse or read again.
func TestCachedAnswersFromStoredCredentialsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cached := func(key, rawQuery string) (account.Workspace, string, bool) {
		return f.app.Cached([]string{"Bearer " + key}, rawQuery)
	}
	if _, _, ok := cached(f.active, ""); ok {
		t.Fatal("Cached before any Authenticate")
	}
	f.mustAuth(t, 1)
	if w, token, ok := cached(f.active, ""); !ok || w.ID != "ws" || token != "token-0" {
		t.Fatalf("Cached = %q, %q, %v; want ws under token-0", w.ID, token, ok)
	}
	// The token moving is the caller's to see: Cached names the entry's.
	f.token.set("token-other", nil)
	if _, token, ok := cached(f.active, ""); !ok || token != "token-0" {
		t.Fatalf("after the token moved: %q, %v; want the entry's token-0", token, ok)
	}
	for name, req := range map[string][2]string{
		"key in the query": {f.active, "api_key=" + f.active},
		"revoked key":      {f.revoked, ""},
		"unknown key":      {"pk_" + strings.Repeat("c", 43), ""},
		"not a key":        {"pk_wrong", ""},
	} {
		if _, _, ok := cached(req[0], req[1]); ok {
			t.Fatalf("%s: Cached", name)
		}
	}
	if _, _, ok := f.app.Cached(nil, ""); ok {
		t.Fatal("no header: Cached")
	}
	f.now = f.now.Add(30 * time.Second)
	if _, _, ok := cached(f.active, ""); ok {
		t.Fatal("an entry 30 s old: Cached")
	}
	if f.stores.findCount() != 1 {
		t.Fatalf("Cached read the store: %d reads", f.stores.findCount())
	}
}

// An entry stored under "" (Redis kept no token) is never offered: ""
// matches nothing.
func TestCachedNeverOffersEmptyToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.token.set("", nil)
	f.mustAuth(t, 1)
	if _, _, ok := f.app.Cached([]string{"Bearer " + f.active}, ""); ok {
		t.Fatal("Cached an entry stored under \"\"")
	}
}
