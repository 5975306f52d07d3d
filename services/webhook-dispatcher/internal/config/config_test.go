package config

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
)

// Defaults are the documented values (docs/operations.md
// "webhook-dispatcher").
func TestDefaults(t *testing.T) {
	for _, k := range []string{"DISPATCHER_ADDR", "WEBHOOK_ALLOW_PRIVATE_TARGETS", "WEBHOOK_RETRY_DELAYS", "WEBHOOK_ATTEMPT_TIMEOUT", "WEBHOOK_PAUSE_AFTER", "DELIVERY_RETENTION", "DISPATCHER_CONSUMER", "DISPATCHER_CONCURRENCY", "DISPATCHER_REPLAY_CONCURRENCY", "DISPATCHER_METRICS_INTERVAL", "DISPATCHER_IN_HAND", "DISPATCHER_WEBHOOK_CONCURRENCY", "DISPATCHER_CIRCUIT_AFTER", "DISPATCHER_CIRCUIT_COOLDOWN"} {
		t.Setenv(k, "")
	}
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8082" || cfg.AllowPrivateTargets || cfg.AttemptTimeout != 10*time.Second || cfg.PauseAfter != 20 ||
		cfg.DeliveryRetention != 336*time.Hour || cfg.Consumer != "webhook-dispatcher" || cfg.Concurrency < 1 ||
		cfg.ReplayConcurrency != 8 || cfg.MetricsInterval != 15*time.Second ||
		cfg.InHand != 4096 || cfg.WebhookConcurrency != 8 || cfg.CircuitAfter != 5 || cfg.CircuitCoolDown != 10*time.Second {
		t.Fatalf("defaults %+v", cfg)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	if len(cfg.RetryDelays) != 3 || cfg.RetryDelays[0] != want[0] || cfg.RetryDelays[1] != want[1] || cfg.RetryDelays[2] != want[2] {
		t.Fatalf("WEBHOOK_RETRY_DELAYS default %v", cfg.RetryDelays)
	}
}

func TestInvalidSettingsFailFast(t *testing.T) {
	tests := []struct {
		key, value, mention string
	}{
		{"WEBHOOK_RETRY_DELAYS", "1s,soon", "WEBHOOK_RETRY_DELAYS"}, // parse errors name the variable (pkg/config)
		{"WEBHOOK_RETRY_DELAYS", "-1s", "WEBHOOK_RETRY_DELAYS"},
		{"WEBHOOK_RETRY_DELAYS", "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", "at most 10"},
		{"WEBHOOK_ATTEMPT_TIMEOUT", "0s", "WEBHOOK_ATTEMPT_TIMEOUT"},
		{"WEBHOOK_PAUSE_AFTER", "0", "WEBHOOK_PAUSE_AFTER"},
		{"DELIVERY_RETENTION", "0s", "DELIVERY_RETENTION"},
		{"DISPATCHER_CONSUMER", "a.b", "DISPATCHER_CONSUMER"},
		{"DISPATCHER_CONCURRENCY", "0", "DISPATCHER_CONCURRENCY"},
		{"DISPATCHER_REPLAY_CONCURRENCY", "0", "DISPATCHER_REPLAY_CONCURRENCY"},
		{"DISPATCHER_METRICS_INTERVAL", "0s", "DISPATCHER_METRICS_INTERVAL"},
		{"DISPATCHER_IN_HAND", "63", "between DISPATCHER_CONCURRENCY (64) and 65536"},
		{"DISPATCHER_WEBHOOK_CONCURRENCY", "0", "DISPATCHER_WEBHOOK_CONCURRENCY"},
		{"DISPATCHER_WEBHOOK_CONCURRENCY", "65", "between 1 and DISPATCHER_CONCURRENCY (64)"},
		{"DISPATCHER_CIRCUIT_AFTER", "-1", "DISPATCHER_CIRCUIT_AFTER"},
		{"DISPATCHER_CIRCUIT_COOLDOWN", "0s", "DISPATCHER_CIRCUIT_COOLDOWN"},
		{"WEBHOOK_ALLOW_PRIVATE_TARGETS", "maybe", "WEBHOOK_ALLOW_PRIVATE_TARGETS"},
		{"DISPATCHER_ADDR", "8082", "DISPATCHER_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.key, tt.value)
			_, err := config.Load[Config]()
			if err == nil || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Load = %v, want an error naming %s", err, tt.mention)
			}
		})
	}
}

// TestSettingsAreTheDocumentedOnes: every setting the webhook-dispatcher reads is in
// docs/operations.md "Configuration" under its name, with the default the
// code takes, and every setting documented for the webhook-dispatcher is read.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[Config](t, "webhook-dispatcher", []string{"Every service"})
}
