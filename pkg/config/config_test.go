package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/config"
)

type testConfig struct {
	config.Connections
	Token   string          `env:"TEST_TOKEN" envDefault:"abc" secret:"true"`
	Window  time.Duration   `env:"TEST_WINDOW" envDefault:"24h"`
	Delays  []time.Duration `env:"TEST_DELAYS" envDefault:"500ms,1s,2s" envSeparator:","`
	Visible string          `env:"TEST_VISIBLE" envDefault:"shown"`
}

func TestLoadDefaultsAndOverrides(t *testing.T) {
	t.Setenv("TEST_WINDOW", "90m")
	t.Setenv("DATABASE_URL", "postgres://u:hunter2@db:5432/parley")
	cfg, err := config.Load[testConfig]()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Window != 90*time.Minute || len(cfg.Delays) != 3 || cfg.Delays[0] != 500*time.Millisecond {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg.EventsStream != "EVENTS" || cfg.NATSURL != "nats://127.0.0.1:4222" || cfg.DailyResetTZ != "Asia/Ulaanbaatar" ||
		cfg.HTTPReadTimeout != 30*time.Second || cfg.EventsReplicas != 1 {
		t.Fatalf("connection defaults = %+v", cfg.Connections)
	}
	masked := config.Masked(cfg)
	if masked["TEST_TOKEN"] != "***" || masked["TEST_VISIBLE"] != "shown" {
		t.Errorf("masked = %v", masked)
	}
	if masked["DATABASE_URL"] != "postgres://u:***@db:5432/parley" {
		t.Errorf("DATABASE_URL masked as %q", masked["DATABASE_URL"])
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	tests := []struct{ name, key, value string }{
		{"bad duration", "TEST_WINDOW", "soon"},
		{"bad list", "TEST_DELAYS", "1s,later"},
		{"bad zone", "DAILY_RESET_TZ", "Mars/Olympus"},
		{"bad stream name", "EVENTS_STREAM", "EVENTS >"},
		{"no replicas", "EVENTS_REPLICAS", "0"},
		{"too many replicas", "EVENTS_REPLICAS", "6"},
		{"replicas not a number", "EVENTS_REPLICAS", "three"},
		{"bad read timeout", "HTTP_READ_TIMEOUT", "soon"},
		{"no read timeout", "HTTP_READ_TIMEOUT", "0s"},
		{"negative read timeout", "HTTP_READ_TIMEOUT", "-1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.key, tt.value)
			_, err := config.Load[testConfig]()
			if err == nil {
				t.Fatalf("%s=%q accepted", tt.key, tt.value)
			}
			// The operator sets variables, so the error must name the variable.
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name %s", err, tt.key)
			}
		})
	}
}
