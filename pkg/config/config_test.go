package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
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
		// The clients' parse errors quote the URL, password included.
		{"unescaped redis password", "REDIS_URL", "redis://:s3cr%zzet@127.0.0.1:6379/0"},
		{"unescaped nats password", "NATS_URL", "nats://parley:s3cr%zzet@127.0.0.1:4222"},
		{"unescaped password of a second server", "NATS_URL", "nats://127.0.0.1:4222, nats://parley:s3cr%zzet@n2:4222"},
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
			// The start-up log shows it: no secret in it.
			if strings.Contains(err.Error(), "s3cr") {
				t.Errorf("error %q repeats a password", err)
			}
		})
	}
}

// TestCheckListenAddr: a listen address is host:port; an empty host is
// every interface.
func TestCheckListenAddr(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{":8080": true, "127.0.0.1:8080": true, "[::1]:8080": true, "localhost:0": true,
		"": false, "8080": false, "127.0.0.1": false, "127.0.0.1:": false, "http://127.0.0.1:8080": false} {
		err := config.CheckListenAddr("GATEWAY_ADDR", addr)
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "GATEWAY_ADDR")) {
			t.Errorf("%q: %v", addr, err)
		}
	}
}

// TestValidURLsAreAccepted: what the clients take passes the check of
// TestLoadRejectsBadValues's URLs: a NATS server without a scheme, an
// escaped password.
func TestValidURLsAreAccepted(t *testing.T) {
	t.Setenv("NATS_URL", "127.0.0.1:4222,nats://parley:p%25w@n2:4222")
	t.Setenv("REDIS_URL", "redis://:p%25w@127.0.0.1:6379/0")
	if _, err := config.Load[testConfig](); err != nil {
		t.Fatalf("valid URLs refused: %v", err)
	}
}

// TestRedactURL: NATS_URL lists a cluster's servers; the password (or the
// token a NATS URL gives as its user) of every one is hidden, and the rest
// is kept to tell the servers apart.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, give, want string
	}{
		{"one", "nats://parley:s3cret@n1:4222", "nats://parley:***@n1:4222"},
		{"a list", "nats://parley:s3cret@n1:4222,nats://parley:s3cret2@n2:4222, tls://parley:s3cret3@n3:4222",
			"nats://parley:***@n1:4222,nats://parley:***@n2:4222,tls://parley:***@n3:4222"},
		{"tokens", "nats://s3cret-token@n1:4222,nats://s3cret-token@n2:4222", "nats://***@n1:4222,nats://***@n2:4222"},
		{"no credentials", "nats://n1:4222,nats://n2:4222", "nats://n1:4222,nats://n2:4222"},
		{"one of three unparsable", "nats://parley:s3cret@n1:4222,nats://parley:s3cret@[n2,nats://n3:4222",
			"nats://parley:***@n1:4222,***,nats://n3:4222"},
		{"a user is no secret elsewhere", "postgres://parley@db:5432/parley", "postgres://parley@db:5432/parley"},
		{"a password in the query", "postgres://parley@db/parley?sslmode=require&password=s3cret&sslpassword=s3cret", "postgres://parley@db/parley?sslmode=require&password=***&sslpassword=***"},
		{"a password in the query and the user's", "postgres://parley:s3cret@db/parley?password=s3cret", "postgres://parley:***@db/parley?password=***"},
		{"a keyword DSN", "host=db user=parley password=s3cret dbname=parley", "host=db user=parley password=*** dbname=parley"},
		{"a keyword DSN, quoted", "host=db password = 's3cret with \\' quote' sslpassword=s3cret dbname=parley", "host=db password=*** sslpassword=*** dbname=parley"},
	}
	for _, tt := range tests {
		got := config.RedactURL(tt.give)
		if got != tt.want {
			t.Errorf("%s: redacted as %q, want %q", tt.name, got, tt.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("%s: a secret shows: %q", tt.name, got)
		}
	}
}

// TestMaskedRedactsEveryURLOfAList: the start-up log shows a list of NATS
// servers with every password hidden.
func TestMaskedRedactsEveryURLOfAList(t *testing.T) {
	t.Setenv("NATS_URL", "nats://parley:s3cret@n1:4222,nats://parley:s3cret2@n2:4222")
	cfg, err := config.Load[testConfig]()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := config.Masked(cfg)["NATS_URL"], "nats://parley:***@n1:4222,nats://parley:***@n2:4222"; got != want {
		t.Errorf("NATS_URL masked as %q, want %q", got, want)
	}
}

// TestSharedSettingsAreTheDocumentedOnes: the settings every service
// reads have the names and defaults of docs/operations.md "Every
// service"; the logger reads LOG_LEVEL and LOG_FORMAT (pkg/logging).
func TestSharedSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[config.Connections](t, "Every service", nil, "LOG_LEVEL", "LOG_FORMAT")
}
