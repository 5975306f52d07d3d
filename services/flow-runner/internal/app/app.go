// Package app holds the flow-runner's use cases, one file per verb:
// publishing and deactivating flows and reading every flow, its versions
// and the runs (operators), listing them, invoking them or continuing a
// waiting run's session under the invoke contract (Invoke: concurrency,
// daily cap, idempotency), and reading a run's trace (developers). It
// decides; the domain holds the rules and runs the flows, the adapters do
// the I/O, and what the use cases cannot tell their callers goes to an
// Observer.
package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// TriggerAPI is the trigger that makes a flow listable and invokable over
// the Developer API.
const TriggerAPI = "api"

// ErrSessionExpired is a continue after FLOW_SESSION_TTL from the run's
// started_at.
var ErrSessionExpired = errors.New("session expired")

// ErrGuardNotWired refuses a run of a flow with AI nodes while the safety
// guard is not configured or not reachable.
var ErrGuardNotWired = errors.New("the safety guard is not wired")

// GuardReadiness says whether the safety guard can check text now.
type GuardReadiness interface {
	// Ready is nil when the guard is configured and reachable, an error
	// wrapping run.ErrGuardNotConfigured when none is configured; it must
	// be cheap, since every invoke of a flow with AI nodes asks.
	Ready(ctx context.Context) error
}

// Deps are what the use cases need.
type Deps struct {
	Flows  catalog.FlowStore
	Runs   catalog.RunStore
	Engine *run.Engine
	// Knowledge keeps the workspaces' knowledge bases (parleyctl kb).
	Knowledge catalog.KnowledgeStore
	// ChatFlows keeps each channel's chat flow (parleyctl channel
	// set-flow).
	ChatFlows catalog.ChatFlowStore
	// Contract is what every invoke and continue is held to (Invoke).
	Contract Contract
	// Stages are the staged features a published flow may use
	// (FLOW_STAGES_OPEN).
	Stages map[flow.Stage]bool
	// SessionTTL is how long after started_at a waiting run may be
	// continued (FLOW_SESSION_TTL).
	SessionTTL time.Duration
	// Guard is the safety guard's readiness; nil means none is wired, and
	// flows with AI nodes are refused (ErrGuardNotWired).
	Guard GuardReadiness
	// Chats, Conversations and Workspaces serve the chat runs
	// (answer_turn.go), with ChatFlows; ChatSessionTTL is how long a chat run waits at a
	// question (CHAT_SESSION_TTL), and ChatGapWait how long a turn waits
	// for its conversation's earlier turn before it is answered without
	// it (a turn lost with the stream's age limit must not stop the
	// conversation for good).
	Chats          catalog.ChatStore
	Conversations  Conversations
	Workspaces     Workspaces
	ChatSessionTTL time.Duration
	ChatGapWait    time.Duration
	// Observer hears what the use cases cannot tell their callers; nil
	// hears nothing.
	Observer Observer
	// Clock and NewID default to time.Now and UUIDv7.
	Clock func() time.Time
	NewID func() string
}

// App is the flow-runner's use cases.
type App struct {
	flows          catalog.FlowStore
	runs           catalog.RunStore
	knowledge      catalog.KnowledgeStore
	engine         *run.Engine
	contract       Contract
	stages         map[flow.Stage]bool
	sessionTTL     time.Duration
	guard          GuardReadiness
	obs            Observer
	chats          catalog.ChatStore
	chatFlows      catalog.ChatFlowStore
	conversations  Conversations
	workspaces     Workspaces
	chatSessionTTL time.Duration
	chatGapWait    time.Duration
	now            func() time.Time
	newID          func() string
}

// New returns the use cases over d.
func New(d Deps) *App {
	a := &App{
		flows: d.Flows, runs: d.Runs, knowledge: d.Knowledge, engine: d.Engine, contract: d.Contract,
		stages: d.Stages, sessionTTL: d.SessionTTL, guard: d.Guard, obs: d.Observer, now: d.Clock, newID: d.NewID,
		chats: d.Chats, chatFlows: d.ChatFlows, conversations: d.Conversations, workspaces: d.Workspaces,
		chatSessionTTL: d.ChatSessionTTL, chatGapWait: d.ChatGapWait,
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.newID == nil {
		a.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if a.obs == nil {
		a.obs = nopObserver{}
	}
	return a
}
