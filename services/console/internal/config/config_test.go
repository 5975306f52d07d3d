package config_test

import (
	"testing"
	"time"

	pkgconfig "github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
	"github.com/parleyhq/parley/services/console/internal/config"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    config.Config
		wantErr bool
	}{
		{name: "defaults", env: map[string]string{}, want: config.Config{Addr: ":8084", SessionTTL: 12 * time.Hour, SessionMaxAge: 7 * 24 * time.Hour, LoginFailuresPerMinute: 10, LoginAccountFailuresPerMinute: 5}},
		{name: "overrides", env: map[string]string{"CONSOLE_ADDR": "127.0.0.1:9000", "CONSOLE_SESSION_TTL": "30m", "CONSOLE_SESSION_MAX_AGE": "8h", "CONSOLE_LOGIN_FAILURES_PER_MINUTE": "3", "CONSOLE_LOGIN_ACCOUNT_FAILURES_PER_MINUTE": "2", "TRUSTED_PROXIES": "10.0.0.0/8", "CONSOLE_INSECURE_COOKIES": "true"},
			want: config.Config{Addr: "127.0.0.1:9000", SessionTTL: 30 * time.Minute, SessionMaxAge: 8 * time.Hour, LoginFailuresPerMinute: 3, LoginAccountFailuresPerMinute: 2, Proxying: httpx.Proxying{TrustedProxies: "10.0.0.0/8"}, InsecureCookies: true}},
		{name: "insecure cookies off", env: map[string]string{"CONSOLE_INSECURE_COOKIES": "false"}, want: config.Config{Addr: ":8084", SessionTTL: 12 * time.Hour, SessionMaxAge: 7 * 24 * time.Hour, LoginFailuresPerMinute: 10, LoginAccountFailuresPerMinute: 5}},
		{name: "insecure cookies that are no boolean", env: map[string]string{"CONSOLE_INSECURE_COOKIES": "yes please"}, wantErr: true},
		{name: "a TTL past the cap", env: map[string]string{"CONSOLE_SESSION_TTL": "200h"}, wantErr: true},
		{name: "a TTL under a second", env: map[string]string{"CONSOLE_SESSION_TTL": "10ms"}, wantErr: true},
		{name: "a TTL that is no duration", env: map[string]string{"CONSOLE_SESSION_TTL": "12"}, wantErr: true},
		{name: "zero failures", env: map[string]string{"CONSOLE_LOGIN_FAILURES_PER_MINUTE": "0"}, wantErr: true},
		{name: "an address without its colon", env: map[string]string{"CONSOLE_ADDR": "8084"}, wantErr: true},
		{name: "zero account failures", env: map[string]string{"CONSOLE_LOGIN_ACCOUNT_FAILURES_PER_MINUTE": "0"}, wantErr: true},
		{name: "a proxy that is no address", env: map[string]string{"TRUSTED_PROXIES": "proxy.internal"}, wantErr: true},
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
			got := cfg
			got.Connections = tt.want.Connections
			if got != tt.want {
				t.Fatalf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSettingsAreTheDocumentedOnes: every setting the console reads is in
// docs/operations.md "Configuration" under its name, with the default the
// code takes, and every setting documented for the console is read.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[config.Config](t, "console", []string{"Every service"})
}
