package config_test

import (
	"testing"
	"time"

	pkgconfig "github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
	"github.com/parleyhq/parley/services/gateway/internal/config"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantAddr string
		wantRate int
		wantAuth int
		// wantWrite is SSE_WRITE_TIMEOUT; zero is its default, 30 s.
		wantWrite time.Duration
		wantErr   bool
	}{
		{name: "defaults", env: map[string]string{}, wantAddr: ":8080", wantRate: 120, wantAuth: 30},
		{name: "stream write timeout", env: map[string]string{"SSE_WRITE_TIMEOUT": "5s"}, wantAddr: ":8080", wantRate: 120, wantAuth: 30, wantWrite: 5 * time.Second},
		{name: "zero stream write timeout", env: map[string]string{"SSE_WRITE_TIMEOUT": "0s"}, wantErr: true},
		{name: "auth failures and proxies", env: map[string]string{"AUTH_FAILURES_PER_MINUTE": "5", "TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"}, wantAddr: ":8080", wantRate: 120, wantAuth: 5},
		{name: "zero auth failures", env: map[string]string{"AUTH_FAILURES_PER_MINUTE": "0"}, wantErr: true},
		{name: "a proxy that is no address", env: map[string]string{"TRUSTED_PROXIES": "proxy.internal"}, wantErr: true},
		{name: "overrides", env: map[string]string{"GATEWAY_ADDR": "127.0.0.1:9000", "RATE_LIMIT_PER_MINUTE": "3"}, wantAddr: "127.0.0.1:9000", wantRate: 3, wantAuth: 30},
		{name: "zero rate", env: map[string]string{"RATE_LIMIT_PER_MINUTE": "0"}, wantErr: true},
		{name: "an address without its colon", env: map[string]string{"GATEWAY_ADDR": "8080"}, wantErr: true},
		{name: "rate not a number", env: map[string]string{"RATE_LIMIT_PER_MINUTE": "lots"}, wantErr: true},
		{name: "shared settings are validated too", env: map[string]string{"DAILY_RESET_TZ": "Mars/Olympus"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pkgconfig.LoadFrom[config.Config](tt.env)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("loaded %+v, want an error", cfg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantWrite == 0 {
				tt.wantWrite = 30 * time.Second
			}
			if cfg.Addr != tt.wantAddr || cfg.RatePerMinute != tt.wantRate || cfg.AuthFailuresPerMinute != tt.wantAuth ||
				cfg.SSEWriteTimeout != tt.wantWrite {
				t.Fatalf("config = %+v", cfg)
			}
		})
	}
}

// TestSettingsAreTheDocumentedOnes: every setting the gateway reads is in
// docs/operations.md "Configuration" under its name, with the default the
// code takes, and every setting documented for the gateway is read.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[config.Config](t, "gateway", []string{"Every service"})
}
