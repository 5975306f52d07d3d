package config

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/testenv/configdoc"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[Config](map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8083" || cfg.SessionTTL != time.Hour || cfg.BudgetTime != 60*time.Second || cfg.BudgetNodes != 200 ||
		cfg.OutputLimit != bytesize.MiB || cfg.AllowPrivateTargets {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.Concurrency != 4 || cfg.SlotLease != 15*time.Second || cfg.InvokeDailyCap != 2000 ||
		cfg.IdempotencyTTL != 24*time.Hour || cfg.IdempotencyStuckAfter != 5*time.Minute || cfg.SSEPingInterval != 15*time.Second {
		t.Fatalf("invoke contract defaults: %+v", cfg)
	}
	for _, st := range flow.AllStages {
		if !cfg.Stages()[st] {
			t.Errorf("stage %s closed by default", st)
		}
	}
	// No provider and no guard until configured.
	if cfg.LLMBaseURL != "" || cfg.LLMAPIKey != "" || cfg.LLMModel != "gpt-4o-mini" || cfg.LLMTimeout != 30*time.Second ||
		cfg.GuardBaseURL != "" || cfg.GuardAPIKey != "" || len(cfg.GuardBlockList) != 0 ||
		cfg.GuardFallbackText != "Sorry, I can't help with that here." || cfg.GuardCheckInterval != 10*time.Second {
		t.Fatalf("AI defaults: %+v", cfg)
	}
	if p := cfg.Prices()["gpt-4o-mini"]; p.InputMicroUSD != 150_000 || p.OutputMicroUSD != 600_000 {
		t.Fatalf("default price of gpt-4o-mini: %+v", p)
	}
	if cfg.ChatSessionTTL != 24*time.Hour || cfg.ChatConcurrency != 16 || cfg.ChatAckWait != 30*time.Second ||
		cfg.ChatConsumer != "flow-runner-chat" || cfg.ChatWakeInterval != time.Second || cfg.ChatGapWait() != time.Minute {
		t.Fatalf("chat defaults: %+v, gap wait %s", cfg, cfg.ChatGapWait())
	}
}

func TestChatSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[Config](map[string]string{
		"CHAT_SESSION_TTL": "2h", "CHAT_CONCURRENCY": "4", "CHAT_ACK_WAIT": "5s", "CHAT_CONSUMER": "chat-b", "CHAT_WAKE_INTERVAL": "250ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ChatSessionTTL != 2*time.Hour || cfg.ChatConcurrency != 4 || cfg.ChatAckWait != 5*time.Second ||
		cfg.ChatConsumer != "chat-b" || cfg.ChatWakeInterval != 250*time.Millisecond || cfg.ChatGapWait() != 10*time.Second {
		t.Fatalf("chat settings: %+v, gap wait %s", cfg, cfg.ChatGapWait())
	}
}

func TestAISettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[Config](map[string]string{
		"LLM_BASE_URL": "http://127.0.0.1:11434/v1", "LLM_API_KEY": "sk-secret", "LLM_MODEL": "llama3.1",
		"LLM_PRICES": "llama3.1=0/0", "LLM_TIMEOUT": "5s",
		"GUARD_BASE_URL": "https://api.openai.com/v1", "GUARD_API_KEY": "sk-guard", "GUARD_BLOCKLIST": "spam, плохое слово",
		"GUARD_FALLBACK_TEXT": "Not here.", "GUARD_CHECK_INTERVAL": "1s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLMModel != "llama3.1" || cfg.LLMTimeout != 5*time.Second || len(cfg.Prices()) != 1 ||
		len(cfg.GuardBlockList) != 2 || cfg.GuardBlockList[1] != " плохое слово" || cfg.GuardFallbackText != "Not here." || cfg.GuardCheckInterval != time.Second {
		t.Fatalf("AI settings: %+v", cfg)
	}
	masked := config.Masked(cfg)
	if masked["LLM_API_KEY"] != "***" || masked["GUARD_API_KEY"] != "***" || masked["LLM_BASE_URL"] != "http://127.0.0.1:11434/v1" {
		t.Fatalf("masked: %v", masked)
	}
	keyed, err := config.LoadFrom[Config](map[string]string{"LLM_BASE_URL": "https://proxy:hunter2@llm.example/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := config.Masked(keyed)["LLM_BASE_URL"]; got != "https://proxy:***@llm.example/v1" {
		t.Fatalf("LLM_BASE_URL masked as %q", got)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[Config](map[string]string{
		"FLOW_RUNNER_ADDR": ":9999", "FLOW_SESSION_TTL": "2s", "RUN_BUDGET_TIME": "1s",
		"RUN_BUDGET_NODES": "10", "RUN_OUTPUT_LIMIT": "256 KiB", "FLOW_STAGES_OPEN": "script", "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":9999" || cfg.SessionTTL != 2*time.Second || cfg.BudgetTime != time.Second || cfg.BudgetNodes != 10 ||
		cfg.OutputLimit != 256*bytesize.KiB || !cfg.AllowPrivateTargets {
		t.Fatalf("settings: %+v", cfg)
	}
	if st := cfg.Stages(); !st[flow.StageScript] || st[flow.StageCallFlow] {
		t.Fatalf("stages: %v", st)
	}
}

func TestNoStages(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom[Config](map[string]string{"FLOW_STAGES_OPEN": "none"})
	if err != nil {
		t.Fatal(err)
	}
	if st := cfg.Stages(); st == nil || len(st) != 0 {
		t.Fatalf("stages: %v", st)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give map[string]string
		want string
	}{
		{"zero ttl", map[string]string{"FLOW_SESSION_TTL": "0s"}, "FLOW_SESSION_TTL"},
		{"an address without its colon", map[string]string{"FLOW_RUNNER_ADDR": "8083"}, "FLOW_RUNNER_ADDR"},
		{"zero chat session", map[string]string{"CHAT_SESSION_TTL": "0s"}, "CHAT_SESSION_TTL"},
		{"no chat concurrency", map[string]string{"CHAT_CONCURRENCY": "0"}, "CHAT_CONCURRENCY"},
		{"chat ack wait under a second", map[string]string{"CHAT_ACK_WAIT": "500ms"}, "CHAT_ACK_WAIT"},
		{"chat consumer not a name", map[string]string{"CHAT_CONSUMER": "flow.runner"}, "CHAT_CONSUMER"},
		{"zero wake interval", map[string]string{"CHAT_WAKE_INTERVAL": "0s"}, "CHAT_WAKE_INTERVAL"},
		{"negative budget", map[string]string{"RUN_BUDGET_TIME": "-1s"}, "RUN_BUDGET_TIME"},
		{"budget past the rpc bound", map[string]string{"RUN_BUDGET_TIME": "61s"}, "RUN_BUDGET_TIME"},
		{"no nodes", map[string]string{"RUN_BUDGET_NODES": "0"}, "RUN_BUDGET_NODES"},
		{"output limit too small", map[string]string{"RUN_OUTPUT_LIMIT": "1KiB"}, "RUN_OUTPUT_LIMIT: 1 KiB is not between 64 KiB and 16 MiB"},
		{"output limit past a reply", map[string]string{"RUN_OUTPUT_LIMIT": "17MiB"}, "RUN_OUTPUT_LIMIT"},
		{"output limit in decimal units", map[string]string{"RUN_OUTPUT_LIMIT": "1MB"}, "RUN_OUTPUT_LIMIT"},
		{"unknown stage", map[string]string{"FLOW_STAGES_OPEN": "scripts"}, "FLOW_STAGES_OPEN"},
		{"bad duration", map[string]string{"FLOW_SESSION_TTL": "soon"}, "FLOW_SESSION_TTL"},
		{"no concurrency", map[string]string{"FLOW_CONCURRENCY": "0"}, "FLOW_CONCURRENCY"},
		{"lease too short", map[string]string{"FLOW_SLOT_LEASE": "10ms"}, "FLOW_SLOT_LEASE"},
		{"negative cap", map[string]string{"INVOKE_DAILY_CAP": "-1"}, "INVOKE_DAILY_CAP"},
		{"no key ttl", map[string]string{"IDEMPOTENCY_TTL": "0s"}, "IDEMPOTENCY_TTL"},
		{"stuck within a run", map[string]string{"IDEMPOTENCY_STUCK_AFTER": "30s"}, "IDEMPOTENCY_STUCK_AFTER"},
		{"stuck past the ttl", map[string]string{"IDEMPOTENCY_TTL": "2m", "IDEMPOTENCY_STUCK_AFTER": "3m"}, "IDEMPOTENCY_STUCK_AFTER"},
		{"no ping", map[string]string{"SSE_PING_INTERVAL": "0s"}, "SSE_PING_INTERVAL"},
		{"relative provider URL", map[string]string{"LLM_BASE_URL": "/v1"}, "LLM_BASE_URL"},
		{"provider URL without a scheme", map[string]string{"LLM_BASE_URL": "api.openai.com/v1"}, "LLM_BASE_URL"},
		{"provider URL not http", map[string]string{"LLM_BASE_URL": "ftp://llm.example/v1"}, "LLM_BASE_URL"},
		{"guard URL not http", map[string]string{"GUARD_BASE_URL": "unix:///run/guard.sock"}, "GUARD_BASE_URL"},
		{"bad price table", map[string]string{"LLM_PRICES": "gpt-4o-mini=0.15"}, "LLM_PRICES"},
		{"no attempt time", map[string]string{"LLM_TIMEOUT": "0s"}, "LLM_TIMEOUT"},
		{"blank fallback", map[string]string{"GUARD_FALLBACK_TEXT": "  "}, "GUARD_FALLBACK_TEXT"},
		{"no check interval", map[string]string{"GUARD_CHECK_INTERVAL": "-1s"}, "GUARD_CHECK_INTERVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.LoadFrom[Config](tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestSettingsAreTheDocumentedOnes: every setting the flow-runner reads is in
// docs/operations.md "Configuration" under its name, with the default the
// code takes, and every setting documented for the flow-runner is read.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[Config](t, "flow-runner", []string{"Every service"})
}
