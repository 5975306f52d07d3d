package account_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

const validKey = "pk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ" // 43 characters after pk_

func TestParseBearer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    []string
		want    string
		wantErr error
	}{
		{name: "valid", give: []string{"Bearer " + validKey}, want: validKey},
		{name: "scheme in any case", give: []string{"bearer " + validKey}, want: validKey},
		{name: "surrounding spaces", give: []string{"  Bearer   " + validKey + "  "}, want: validKey},
		{name: "demo key", give: []string{"Bearer pk_demo_parley_local_development_key_2026"}, want: "pk_demo_parley_local_development_key_2026"},
		{name: "no header", give: nil, wantErr: account.ErrMissingCredentials},
		{name: "empty header", give: []string{""}, wantErr: account.ErrMissingCredentials},
		{name: "blank header", give: []string{"   "}, wantErr: account.ErrMissingCredentials},
		{name: "two headers", give: []string{"Bearer " + validKey, "Bearer " + validKey}, wantErr: account.ErrMalformedCredentials},
		{name: "basic scheme", give: []string{"Basic dXNlcjpwYXNz"}, wantErr: account.ErrMalformedCredentials},
		{name: "no scheme", give: []string{validKey}, wantErr: account.ErrMalformedCredentials},
		{name: "bearer without key", give: []string{"Bearer"}, wantErr: account.ErrMalformedCredentials},
		{name: "bearer with blank key", give: []string{"Bearer    "}, wantErr: account.ErrMalformedCredentials},
		{name: "two tokens", give: []string{"Bearer " + validKey + " extra"}, wantErr: account.ErrMalformedCredentials},
		// Well-formed headers whose token is no key: parsed, then unknown.
		{name: "not a key", give: []string{"Bearer hello"}, want: "hello"},
		{name: "too short", give: []string{"Bearer pk_wrong"}, want: "pk_wrong"},
		{name: "wrong prefix", give: []string{"Bearer sk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"}, want: "sk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"},
		{name: "b64token with padding", give: []string{"Bearer pk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJK+/=="}, want: "pk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJK+/=="},
		{name: "outside b64token", give: []string{"Bearer pk_abc,def"}, wantErr: account.ErrMalformedCredentials},
		{name: "padding only", give: []string{"Bearer =="}, wantErr: account.ErrMalformedCredentials},
		{name: "padding inside", give: []string{"Bearer ab=cd"}, wantErr: account.ErrMalformedCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := account.ParseBearer(tt.give)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("ParseBearer(%q) = %q, %v; want %q, %v", tt.give, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCheckQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		give      string
		wantParam string
	}{
		{name: "no query", give: ""},
		{name: "ordinary parameters", give: "limit=10&before=2026-01-01T00:00:00Z&platform=telegram"},
		{name: "parameter merely containing key", give: "monkey=1&keys=2"},
		{name: "api_key", give: "api_key=" + validKey, wantParam: "api_key"},
		{name: "key", give: "limit=5&key=x", wantParam: "key"},
		{name: "access_token", give: "access_token=x", wantParam: "access_token"},
		{name: "token", give: "token=x", wantParam: "token"},
		{name: "upper case", give: "API_KEY=x", wantParam: "API_KEY"},
		{name: "empty value", give: "token=", wantParam: "token"},
		{name: "no value", give: "key", wantParam: "key"},
		{name: "next to a malformed pair", give: "a=%zz&api_key=x", wantParam: "api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := account.CheckQuery(tt.give)
			var kq *account.KeyInQueryError
			switch {
			case tt.wantParam == "" && err != nil:
				t.Fatalf("CheckQuery(%q) = %v, want nil", tt.give, err)
			case tt.wantParam != "" && (!errors.As(err, &kq) || kq.Param != tt.wantParam):
				t.Fatalf("CheckQuery(%q) = %v, want key in %q", tt.give, err, tt.wantParam)
			}
		})
	}
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	k1, err := account.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := account.GenerateKey(rand.Reader)
	if !strings.HasPrefix(k1, "pk_") || len(k1) != 3+43 || k1 == k2 {
		t.Fatalf("keys %q, %q", k1, k2)
	}
	if err := account.ValidateKeyFormat(k1); err != nil {
		t.Fatalf("generated key fails its own format: %v", err)
	}
	if _, err := account.GenerateKey(bytes.NewReader(make([]byte, 10))); err == nil {
		t.Fatal("short randomness accepted")
	}
}

func TestNewAPIKeyStoresOnlyTheHash(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC)
	k, err := account.NewAPIKey("id", "ws", " ci ", validKey, now)
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "ci" || k.Prefix != "pk_abcde" || k.Hash == validKey || len(k.Hash) != 64 || !k.Active() {
		t.Fatalf("key = %+v", k)
	}
	if !k.Matches(validKey) || k.Matches(validKey+"x") || k.Matches("") {
		t.Fatal("Matches is wrong")
	}
	k.Revoke(now)
	first := *k.RevokedAt
	k.Revoke(now.Add(time.Hour))
	if k.Active() || !k.RevokedAt.Equal(first) {
		t.Fatalf("revoke: %+v", k)
	}

	tests := []struct {
		name, key, keyName, field string
	}{
		{name: "bad key", key: "pk_short", field: "key"},
		{name: "long name", key: validKey, keyName: strings.Repeat("n", 101), field: "name"},
	}
	for _, tt := range tests {
		_, err := account.NewAPIKey("id", "ws", tt.keyName, tt.key, now)
		var ve *account.ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%s: err = %v, want invalid %s", tt.name, err, tt.field)
		}
	}
}

func TestSlugify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give, want string
	}{
		{"Acme Shop", "acme-shop"},
		{"  Demo workspace  ", "demo-workspace"},
		{"Café Düsseldorf", "cafe-dusseldorf"},
		{"ACME__Shop!!2026", "acme-shop-2026"},
		{"--x--", "x"},
		{"Монгол дэлгүүр", ""},
		{"!!!", ""},
		{strings.Repeat("ab ", 40), strings.TrimRight(strings.Repeat("ab-", 21), "-")},
	}
	for _, tt := range tests {
		if got := account.Slugify(tt.give); got != tt.want {
			t.Errorf("Slugify(%q) = %q, want %q", tt.give, got, tt.want)
		}
		if tt.want != "" {
			if err := account.ValidateSlug(account.Slugify(tt.give)); err != nil {
				t.Errorf("Slugify(%q) gives an invalid slug: %v", tt.give, err)
			}
		}
	}
}

func TestValidateSlug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		ok   bool
	}{
		{"demo", true},
		{"acme-shop-2", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Acme", false},
		{"-acme", false},
		{"acme-", false},
		{"ac--me", false},
		{"ac_me", false},
		{"ac me", false},
	}
	for _, tt := range tests {
		err := account.ValidateSlug(tt.give)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateSlug(%q) = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
}

func TestParseModules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    []string
		want    []account.Module
		wantErr bool
	}{
		{name: "empty", give: []string{}, want: []account.Module{}},
		{name: "canonical order and no duplicates", give: []string{"flow_script", "developer_api", "flows", "developer_api"},
			want: []account.Module{account.ModuleDeveloperAPI, account.ModuleFlows, account.ModuleFlowScript}},
		{name: "all", give: []string{"developer_api", "flows", "flow_ai", "flow_script"}, want: account.Modules},
		{name: "unknown", give: []string{"developer_api", "crm"}, wantErr: true},
		{name: "wrong case", give: []string{"Developer_API"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := account.ParseModules(tt.give)
			if tt.wantErr {
				var ve *account.ValidationError
				if !errors.As(err, &ve) || ve.Field != "modules" {
					t.Fatalf("err = %v, want invalid modules", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseModules(%v) = %v, %v; want %v", tt.give, got, err, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCreateWorkspace(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		give      account.NewWorkspace
		wantSlug  string
		wantMods  []account.Module
		wantRate  int
		wantField string
	}{
		{name: "defaults", give: account.NewWorkspace{Name: "Acme Shop"}, wantSlug: "acme-shop", wantMods: []account.Module{account.ModuleDeveloperAPI}},
		{name: "explicit", give: account.NewWorkspace{Name: "Acme", Slug: "acme-1", Modules: []string{"flows"}, AILimit: ptr[int64](5), RatePerMinute: ptr(3)},
			wantSlug: "acme-1", wantMods: []account.Module{account.ModuleFlows}, wantRate: 3},
		{name: "no modules at all", give: account.NewWorkspace{Name: "Acme", Modules: []string{}}, wantSlug: "acme", wantMods: []account.Module{}},
		{name: "name required", give: account.NewWorkspace{Name: "  "}, wantField: "name"},
		{name: "name too long", give: account.NewWorkspace{Name: strings.Repeat("x", 201)}, wantField: "name"},
		{name: "underivable slug", give: account.NewWorkspace{Name: "Монгол"}, wantField: "slug"},
		{name: "bad slug", give: account.NewWorkspace{Name: "Acme", Slug: "Acme Shop"}, wantField: "slug"},
		{name: "unknown module", give: account.NewWorkspace{Name: "Acme", Modules: []string{"crm"}}, wantField: "modules"},
		{name: "negative ai_limit", give: account.NewWorkspace{Name: "Acme", AILimit: ptr[int64](-1)}, wantField: "ai_limit"},
		{name: "zero rate", give: account.NewWorkspace{Name: "Acme", RatePerMinute: ptr(0)}, wantField: "rate_per_minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := account.Create("id", tt.give, now)
			if tt.wantField != "" {
				var ve *account.ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.wantField {
					t.Fatalf("err = %v, want invalid %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Slug != tt.wantSlug || !reflect.DeepEqual(w.Plan.Modules, tt.wantMods) || w.RatePerMinute != tt.wantRate || w.Plan.Name != "api" {
				t.Fatalf("workspace = %+v", w)
			}
		})
	}
}

func TestWorkspaceRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC)
	w, err := account.Create("id", account.NewWorkspace{Name: "Acme", Modules: []string{"flows"}}, now)
	if err != nil {
		t.Fatal(err)
	}

	var mi *account.ModuleInactiveError
	if err := w.RequireModule(account.ModuleDeveloperAPI); !errors.As(err, &mi) || mi.Module != account.ModuleDeveloperAPI {
		t.Fatalf("RequireModule = %v", err)
	}
	if w.RateLimit(120) != 120 {
		t.Fatal("default rate not used")
	}

	before := w
	if err := w.Apply(account.Changes{Modules: []string{"developer_api"}, RatePerMinute: ptr(0)}, now); err == nil {
		t.Fatal("invalid change accepted")
	}
	if !reflect.DeepEqual(w, before) {
		t.Fatal("a refused change altered the workspace")
	}
	if err := w.Apply(account.Changes{Modules: []string{"developer_api"}, RatePerMinute: ptr(3)}, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if w.RequireModule(account.ModuleDeveloperAPI) != nil || w.RateLimit(120) != 3 || !w.UpdatedAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("after change: %+v", w)
	}

	// flows_api is on in a workspace nobody switched it for.
	if got := w.EnabledFeatures(); !reflect.DeepEqual(got, []string{"flows_api"}) {
		t.Fatalf("a new workspace's features = %v, want [flows_api]", got)
	}
	tests := []struct {
		feature string
		on      bool
		want    []string
		wantErr bool
	}{
		{"flows_api", false, []string{}, false},
		{"flows_api", false, []string{}, false},
		{"flows_api", true, []string{"flows_api"}, false},
		{"flows_api", true, []string{"flows_api"}, false},
		{"flows_api", false, []string{}, false},
		{"teleport", true, []string{}, true},
	}
	for _, tt := range tests {
		err := w.SetFeature(tt.feature, tt.on, now)
		if (err != nil) != tt.wantErr {
			t.Fatalf("SetFeature(%s, %v) = %v", tt.feature, tt.on, err)
		}
		if got := w.EnabledFeatures(); !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("SetFeature(%s, %v): features %v, want %v", tt.feature, tt.on, got, tt.want)
		}
	}
	if !reflect.DeepEqual(w.Switched, map[string]bool{"flows_api": false}) {
		t.Fatalf("switched = %v, want flows_api off and nothing else", w.Switched)
	}
}
