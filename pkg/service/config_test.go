package service_test

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/service"
)

type testConfig struct {
	config.Connections
	Addr string `env:"LIFECYCLE_ADDR" envDefault:":9999"`
}

// LoadConfig reads the environment over the defaults and logs the result
// once, with the version and without the secrets.
func TestLoadConfigLogsTheConfigurationMasked(t *testing.T) {
	t.Setenv("LIFECYCLE_ADDR", "127.0.0.1:1234")
	t.Setenv("DATABASE_URL", "postgres://parley:hunter2@db:5432/parley")
	core, logs := observer.New(zapcore.InfoLevel)
	cfg, err := service.LoadConfig[testConfig](zap.New(core), "9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:1234" || cfg.RedisURL != "redis://127.0.0.1:6379/0" {
		t.Fatalf("config = %+v", cfg)
	}
	started := logs.FilterMessage("starting").All()
	if len(started) != 1 {
		t.Fatalf("logged %d starting lines", len(started))
	}
	fields := started[0].ContextMap()
	logged, _ := fields["config"].(map[string]string)
	if fields["version"] != "9.9.9" || logged["LIFECYCLE_ADDR"] != "127.0.0.1:1234" {
		t.Fatalf("starting fields = %v", fields)
	}
	if strings.Contains(logged["DATABASE_URL"], "hunter2") {
		t.Fatalf("the password was logged: %q", logged["DATABASE_URL"])
	}
}

// A setting that does not parse fails the start, naming the variable.
func TestLoadConfigFailsFast(t *testing.T) {
	t.Setenv("DAILY_RESET_TZ", "Mars/Olympus_Mons")
	_, err := service.LoadConfig[testConfig](zap.NewNop(), "1")
	if err == nil || !strings.Contains(err.Error(), "DAILY_RESET_TZ") {
		t.Fatalf("LoadConfig = %v, want DAILY_RESET_TZ named", err)
	}
}
