package config_test

import (
	"strings"
	"testing"
	"time"

	pkgconfig "github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
	"github.com/parleyhq/parley/services/messaging/internal/config"
)

// TestWebchatBounds: every widget bound has its documented default and
// refuses a value that would switch it off.
func TestWebchatBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		wantErr bool
	}{
		{name: "defaults", env: map[string]string{}},
		{name: "no sessions", env: map[string]string{"WEBCHAT_SESSIONS_PER_MINUTE": "0"}, wantErr: true},
		{name: "no messages per address", env: map[string]string{"WEBCHAT_ADDRESS_MESSAGES_PER_MINUTE": "0"}, wantErr: true},
		{name: "no streams per address", env: map[string]string{"WEBCHAT_STREAMS_PER_ADDRESS": "0"}, wantErr: true},
		{name: "no streams per channel", env: map[string]string{"WEBCHAT_STREAMS_PER_CHANNEL": "-1"}, wantErr: true},
		{name: "lease under a second", env: map[string]string{"WEBCHAT_STREAM_LEASE": "500ms"}, wantErr: true},
		{name: "tokens that never live", env: map[string]string{"WEBCHAT_TOKEN_TTL": "0s"}, wantErr: true},
		{name: "a proxy that is no address", env: map[string]string{"TRUSTED_PROXIES": "lb.internal"}, wantErr: true},
		{name: "proxies", env: map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,192.0.2.7"}},
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
			if tt.name != "defaults" {
				return
			}
			got := []any{cfg.WebchatMessagesPerMinute, cfg.WebchatAddressMessagesPerMinute, cfg.WebchatSessionsPerMinute,
				cfg.WebchatTokenTTL, cfg.WebchatStreamsPerVisitor, cfg.WebchatStreamsPerAddress, cfg.WebchatStreamsPerChannel,
				cfg.WebchatStreamLease, cfg.WebchatMaxStreams, len(cfg.Proxies())}
			want := []any{30, 120, 20, 168 * time.Hour, 5, 50, 2000, 30 * time.Second, 10000, 0}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("default %d = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestIdempotencySettings: the send routes' keys last IDEMPOTENCY_TTL and
// are taken over after IDEMPOTENCY_STUCK_AFTER, the flow-runner's names
// and defaults; a key taken over while its send may still run, or after
// it expired, is refused.
func TestIdempotencySettings(t *testing.T) {
	t.Parallel()
	cfg, err := pkgconfig.LoadFrom[config.Config](map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IdempotencyTTL != 24*time.Hour || cfg.IdempotencyStuckAfter != 5*time.Minute {
		t.Fatalf("defaults = %s, %s", cfg.IdempotencyTTL, cfg.IdempotencyStuckAfter)
	}
	for name, env := range map[string]map[string]string{
		"no TTL":                      {"IDEMPOTENCY_TTL": "0s"},
		"stuck within a request":      {"IDEMPOTENCY_STUCK_AFTER": "20s"},
		"stuck after the key expired": {"IDEMPOTENCY_TTL": "1m", "IDEMPOTENCY_STUCK_AFTER": "2m"},
	} {
		if _, err := pkgconfig.LoadFrom[config.Config](env); err == nil {
			t.Errorf("%s: loaded, want an error", name)
		}
	}
}

// TestOutboxSweepAge: the sweep waits 10 s by default, and an age the
// stream's duplicate window would not cover is refused: a swept event may
// have been published already.
func TestOutboxSweepAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantErr bool
	}{
		{name: "default", env: map[string]string{}, want: 10 * time.Second},
		{name: "a minute", env: map[string]string{"OUTBOX_SWEEP_AGE": "1m"}, want: time.Minute},
		{name: "none", env: map[string]string{"OUTBOX_SWEEP_AGE": "0s"}, wantErr: true},
		{name: "past half the window", env: map[string]string{"OUTBOX_SWEEP_AGE": "4m56s"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pkgconfig.LoadFrom[config.Config](tt.env)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("loaded OUTBOX_SWEEP_AGE %s, want an error", cfg.OutboxSweepAge)
				}
				return
			}
			if err != nil || cfg.OutboxSweepAge != tt.want {
				t.Fatalf("OUTBOX_SWEEP_AGE = %s, %v; want %s", cfg.OutboxSweepAge, err, tt.want)
			}
		})
	}
}

// TestDefaults: the limits of sends and private replies default to their
// documented values (docs/limits-and-errors.md "Sending and comments"),
// and so do the listen address and the platforms' base URLs
// (docs/operations.md "messaging"), so that an edited default fails here
// rather than in production.
func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := pkgconfig.LoadFrom[config.Config](map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		variable  string
		got, want any
	}{
		{"MESSAGING_WINDOW", cfg.MessagingWindow, 24 * time.Hour},
		{"PRIVATE_REPLY_WINDOW", cfg.PrivateReplyWindow, 7 * 24 * time.Hour},
		{"PRIVATE_REPLY_DAILY_CAP", cfg.PrivateReplyDailyCap, 200},
		{"PLATFORM_TIMEOUT", cfg.PlatformTimeout, 15 * time.Second},
		{"DAILY_RESET_TZ", cfg.DailyResetTZ, "Asia/Ulaanbaatar"},
		{"MESSAGING_ADDR", cfg.Addr, ":8081"},
		{"TELEGRAM_API_BASE", cfg.TelegramAPIBase, "https://api.telegram.org"},
		{"META_GRAPH_API_BASE", cfg.MetaGraphAPIBase, "https://graph.facebook.com/v21.0"},
	} {
		if d.got != d.want {
			t.Errorf("%s default = %v, want %v", d.variable, d.got, d.want)
		}
	}
	if _, err := pkgconfig.LoadFrom[config.Config](map[string]string{"PRIVATE_REPLY_DAILY_CAP": "0"}); err == nil {
		t.Error("PRIVATE_REPLY_DAILY_CAP=0 loaded, want an error")
	}
	if _, err := pkgconfig.LoadFrom[config.Config](map[string]string{"MESSAGING_ADDR": "8081"}); err == nil || !strings.Contains(err.Error(), "MESSAGING_ADDR") {
		t.Errorf("MESSAGING_ADDR=8081: %v, want an error naming it", err)
	}
}

// TestSettingsAreTheDocumentedOnes: every setting the messaging reads is in
// docs/operations.md "Configuration" under its name, with the default the
// code takes, and every setting documented for the messaging is read.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[config.Config](t, "messaging", []string{"Every service"})
}
