package httpx_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
)

type proxiedConfig struct {
	config.Connections
	httpx.Proxying
}

// Proxying reads TRUSTED_PROXIES: a list of addresses and ranges trusted
// for X-Forwarded-For, empty by default, a word that is neither refused
// by name.
func TestProxying(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[proxiedConfig](map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TrustedProxies != "10.0.0.0/8,192.0.2.7" || len(cfg.Proxies()) != 2 {
		t.Fatalf("proxies = %q, parsed %v", cfg.TrustedProxies, cfg.Proxies())
	}
	if err := cfg.Proxying.Validate(); err != nil {
		t.Fatal(err)
	}
	if empty, err := config.LoadFrom[proxiedConfig](map[string]string{}); err != nil || len(empty.Proxies()) != 0 {
		t.Fatalf("default proxies = %v, %v", empty.Proxies(), err)
	}
	bad := httpx.Proxying{TrustedProxies: "lb.internal"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") {
		t.Fatalf("Validate(%q) = %v", bad.TrustedProxies, err)
	}
}

func TestTruncateKeepsRunes(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 10) // 2 bytes each
	got := httpx.Truncate(s, 5)
	if got != "éé…" {
		t.Fatalf("Truncate = %q", got)
	}
	if httpx.Truncate("short", 10) != "short" {
		t.Fatal("short string changed")
	}
}

// What an error repeats of a request is its start, cut at a character.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ give, want string }{
		{"", ""},
		{"/v1/nope", "/v1/nope"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 64) + "…"},
		{strings.Repeat("a", 100<<10), strings.Repeat("a", 64) + "…"},
		{strings.Repeat("a", 63) + "éé", strings.Repeat("a", 63) + "…"},
	} {
		if got := httpx.Clip(tt.give); got != tt.want {
			t.Errorf("Clip(%.70q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
