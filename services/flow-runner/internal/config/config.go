// Package config is the flow-runner's configuration, read from the
// environment (docs/operations.md "Configuration") with its documented
// defaults.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/llm"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// Config is every setting of the flow-runner.
type Config struct {
	config.Connections

	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"FLOW_RUNNER_ADDR" envDefault:":8083"`
	// SessionTTL is how long after its started_at a waiting run may be
	// continued.
	SessionTTL time.Duration `env:"FLOW_SESSION_TTL" envDefault:"1h"`
	// BudgetTime bounds each call of a run (invoke or continue).
	BudgetTime time.Duration `env:"RUN_BUDGET_TIME" envDefault:"60s"`
	// BudgetNodes bounds the node runs over a whole run.
	BudgetNodes int `env:"RUN_BUDGET_NODES" envDefault:"200"`
	// OutputLimit bounds what a run holds of what its flow built, over
	// the whole run: its messages and output together, and apart its
	// trace's recorded inputs and outputs.
	OutputLimit bytesize.Size `env:"RUN_OUTPUT_LIMIT" envDefault:"1MiB"`
	// StagesOpen lists the staged features a published flow may use;
	// StagesNone closes them all (an empty value takes the default, all
	// open).
	StagesOpen string `env:"FLOW_STAGES_OPEN" envDefault:"call_flow,script,condition.cases,delay.until,variable.op"`
	// Concurrency is how many runs a workspace has at once, across every
	// instance, streams included.
	Concurrency int `env:"FLOW_CONCURRENCY" envDefault:"4"`
	// SlotLease is how long a run's concurrency slot outlives an instance
	// that died mid-run; a live run renews it every third of it.
	SlotLease time.Duration `env:"FLOW_SLOT_LEASE" envDefault:"15s"`
	// InvokeDailyCap is how many runs a workspace starts a day (invokes
	// and continues, streams included), reset at midnight DAILY_RESET_TZ.
	InvokeDailyCap int `env:"INVOKE_DAILY_CAP" envDefault:"2000"`
	// IdempotencyTTL is how long an Idempotency-Key answers repeats.
	IdempotencyTTL time.Duration `env:"IDEMPOTENCY_TTL" envDefault:"24h"`
	// IdempotencyStuckAfter is when a key's call still running counts as
	// broken: its key is taken over and the flow runs again.
	IdempotencyStuckAfter time.Duration `env:"IDEMPOTENCY_STUCK_AFTER" envDefault:"5m"`
	// SSEPingInterval is how often a stream sends ": ping".
	SSEPingInterval time.Duration `env:"SSE_PING_INTERVAL" envDefault:"15s"`
	// AllowPrivateTargets lets http nodes use plain http and reach loopback
	// and private addresses; for local development and tests only.
	AllowPrivateTargets bool `env:"WEBHOOK_ALLOW_PRIVATE_TARGETS" envDefault:"false"`

	// ChatSessionTTL is how long a chat run waits at a question for the
	// customer's next message; one later starts a new run.
	ChatSessionTTL time.Duration `env:"CHAT_SESSION_TTL" envDefault:"24h"`
	// ChatConcurrency is how many chat turns this instance holds at once;
	// adapters.MaxHeldChats of them are answered at a time.
	ChatConcurrency int `env:"CHAT_CONCURRENCY" envDefault:"16"`
	// ChatAckWait is how long a turn handed to an instance that died
	// waits before another instance answers it; a live instance extends
	// it while it answers.
	ChatAckWait time.Duration `env:"CHAT_ACK_WAIT" envDefault:"30s"`
	// ChatConsumer names the durable JetStream consumer of chat turns all
	// instances share.
	ChatConsumer string `env:"CHAT_CONSUMER" envDefault:"flow-runner-chat"`
	// ChatWakeInterval is how often an instance looks for chat runs whose
	// delay is over.
	ChatWakeInterval time.Duration `env:"CHAT_WAKE_INTERVAL" envDefault:"1s"`

	// LLMBaseURL is the AI nodes' OpenAI-compatible provider (its
	// /chat/completions); empty: no provider, and an AI node fails.
	LLMBaseURL string `env:"LLM_BASE_URL" secret:"url"`
	// LLMAPIKey is sent as a bearer token; empty sends none (Ollama).
	LLMAPIKey string `env:"LLM_API_KEY" secret:"true"`
	// LLMModel is the model of a node that names none.
	LLMModel string `env:"LLM_MODEL" envDefault:"gpt-4o-mini"`
	// LLMPrices prices the calls: "model=input/output,...", USD per
	// million tokens (llm.ParsePrices); a model not in it costs 0.
	LLMPrices string `env:"LLM_PRICES" envDefault:"gpt-4o-mini=0.15/0.60,gpt-4o=2.50/10.00"`
	// LLMTimeout bounds one attempt of a provider call; retries and the
	// run's budget bound the whole.
	LLMTimeout time.Duration `env:"LLM_TIMEOUT" envDefault:"30s"`
	// GuardBaseURL is the safety guard's moderation endpoint (its
	// /moderations); GuardAPIKey its own key, never LLM_API_KEY's.
	GuardBaseURL string `env:"GUARD_BASE_URL" secret:"url"`
	GuardAPIKey  string `env:"GUARD_API_KEY" secret:"true"`
	// GuardBlockList lists words and phrases the guard flags, matched on
	// whole words whatever their case.
	GuardBlockList []string `env:"GUARD_BLOCKLIST" envSeparator:","`
	// GuardFallbackText replaces AI text the guard flagged or could not
	// check.
	GuardFallbackText string `env:"GUARD_FALLBACK_TEXT" envDefault:"Sorry, I can't help with that here."`
	// GuardCheckInterval is how long the moderation endpoint's last known
	// state answers whether a flow with AI nodes may start.
	GuardCheckInterval time.Duration `env:"GUARD_CHECK_INTERVAL" envDefault:"10s"`
}

// MaxBudgetTime is the longest RUN_BUDGET_TIME: a synchronous run answers
// within one rpc request, which is bounded by rpc.LongHandlerTimeout (the
// gateway waits a little longer); the rest is the margin for storing the
// run and for an evaluation step that overruns (at most a few seconds).
const MaxBudgetTime = rpc.LongHandlerTimeout - 15*time.Second

// The bounds of RUN_OUTPUT_LIMIT. A JSON answer carries a call's messages
// and the run's output, so at most the limit and a little more: the top
// keeps it far under the largest reply (rpc.MaxReplyBytes). Below the
// bottom an honest flow could not send a few messages.
const (
	MinOutputLimit = 64 * bytesize.KiB
	MaxOutputLimit = bytesize.Size(rpc.MaxReplyBytes / 4)
)

// StagesNone is the FLOW_STAGES_OPEN value that opens no staged feature.
const StagesNone = "none"

// Stages is StagesOpen parsed; Validate has checked it.
func (c Config) Stages() map[flow.Stage]bool {
	if c.StagesOpen == StagesNone {
		return map[flow.Stage]bool{}
	}
	s, _ := flow.ParseStages(c.StagesOpen)
	return s
}

// Prices is LLMPrices parsed; Validate has checked it.
func (c Config) Prices() llm.Prices {
	p, _ := llm.ParsePrices(c.LLMPrices)
	return p
}

// ChatGapWait is how long a chat turn waits for its conversation's earlier
// turn before it is answered without it (docs/chat.md "Order and exactly
// one answer"): twice CHAT_ACK_WAIT, since a turn held by an instance
// that died comes back after one ack wait, so one missing past two was
// lost with the stream's age limit.
func (c Config) ChatGapWait() time.Duration {
	return 2 * c.ChatAckWait
}

// Validate checks the settings at start, so a bad value fails fast.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := config.CheckListenAddr("FLOW_RUNNER_ADDR", c.Addr); err != nil {
		return err
	}
	if c.SessionTTL <= 0 {
		return fmt.Errorf("FLOW_SESSION_TTL: must be positive, got %s", c.SessionTTL)
	}
	if c.BudgetTime <= 0 || c.BudgetTime > MaxBudgetTime {
		return fmt.Errorf("RUN_BUDGET_TIME: %s is not between 0 and %s", c.BudgetTime, MaxBudgetTime)
	}
	if c.BudgetNodes < 1 || c.BudgetNodes > 100000 {
		return fmt.Errorf("RUN_BUDGET_NODES: must be between 1 and 100000, got %d", c.BudgetNodes)
	}
	if c.OutputLimit < MinOutputLimit || c.OutputLimit > MaxOutputLimit {
		return fmt.Errorf("RUN_OUTPUT_LIMIT: %s is not between %s and %s", c.OutputLimit, MinOutputLimit, MaxOutputLimit)
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("FLOW_CONCURRENCY: must be at least 1, got %d", c.Concurrency)
	}
	if c.SlotLease < 300*time.Millisecond {
		return fmt.Errorf("FLOW_SLOT_LEASE: must be at least 300ms, got %s", c.SlotLease)
	}
	if c.InvokeDailyCap < 0 {
		return fmt.Errorf("INVOKE_DAILY_CAP: must not be negative, got %d", c.InvokeDailyCap)
	}
	if c.IdempotencyTTL <= 0 {
		return fmt.Errorf("IDEMPOTENCY_TTL: must be positive, got %s", c.IdempotencyTTL)
	}
	// A claim taken over while its first call may still run would run the
	// flow twice: the takeover must wait out the longest call.
	if c.IdempotencyStuckAfter <= c.BudgetTime || c.IdempotencyStuckAfter > c.IdempotencyTTL {
		return fmt.Errorf("IDEMPOTENCY_STUCK_AFTER: %s must be over RUN_BUDGET_TIME (%s) and at most IDEMPOTENCY_TTL (%s)",
			c.IdempotencyStuckAfter, c.BudgetTime, c.IdempotencyTTL)
	}
	if c.SSEPingInterval <= 0 {
		return fmt.Errorf("SSE_PING_INTERVAL: must be positive, got %s", c.SSEPingInterval)
	}
	if err := c.validateChat(); err != nil {
		return err
	}
	if _, err := flow.ParseStages(c.StagesOpen); err != nil && c.StagesOpen != StagesNone {
		return fmt.Errorf("FLOW_STAGES_OPEN: %w", err)
	}
	return c.validateAI()
}

// validateChat checks the chat runs' settings.
func (c Config) validateChat() error {
	switch {
	case c.ChatSessionTTL <= 0:
		return fmt.Errorf("CHAT_SESSION_TTL: must be positive, got %s", c.ChatSessionTTL)
	case c.ChatConcurrency < 1:
		return fmt.Errorf("CHAT_CONCURRENCY: must be at least 1, got %d", c.ChatConcurrency)
	case c.ChatAckWait < time.Second:
		return fmt.Errorf("CHAT_ACK_WAIT: must be at least 1s, got %s", c.ChatAckWait)
	case c.ChatConsumer == "" || strings.ContainsAny(c.ChatConsumer, " \t.*>"):
		return fmt.Errorf("CHAT_CONSUMER: %q is not a JetStream consumer name (no spaces, '.', '*' or '>')", c.ChatConsumer)
	case c.ChatWakeInterval <= 0:
		return fmt.Errorf("CHAT_WAKE_INTERVAL: must be positive, got %s", c.ChatWakeInterval)
	}
	return nil
}

// validateAI checks the provider's and the guard's settings. The URLs may
// be empty (not configured); given, they must be absolute http(s).
func (c Config) validateAI() error {
	for name, base := range map[string]string{"LLM_BASE_URL": c.LLMBaseURL, "GUARD_BASE_URL": c.GuardBaseURL} {
		if u, err := url.Parse(base); base != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return fmt.Errorf("%s: %q is not an absolute http(s) URL", name, base)
		}
	}
	if _, err := llm.ParsePrices(c.LLMPrices); err != nil {
		return fmt.Errorf("LLM_PRICES: %w", err)
	}
	if c.LLMTimeout <= 0 {
		return fmt.Errorf("LLM_TIMEOUT: must be positive, got %s", c.LLMTimeout)
	}
	if strings.TrimSpace(c.GuardFallbackText) == "" {
		return errors.New("GUARD_FALLBACK_TEXT: must not be empty")
	}
	if c.GuardCheckInterval <= 0 {
		return fmt.Errorf("GUARD_CHECK_INTERVAL: must be positive, got %s", c.GuardCheckInterval)
	}
	return nil
}
