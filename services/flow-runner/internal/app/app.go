// Package app holds the flow-runner's use cases, one file per verb:
// publishing and deactivating flows and reading every flow, its versions
// and the runs (operators), listing and invoking them,
// continuing a waiting run's session and reading a run's trace
// (developers). It decides; the domain holds the rules and runs the flows,
// the adapters do the I/O.
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
	// Ready is nil when the guard is configured and reachable; it must be
	// cheap, since every invoke of a flow with AI nodes asks.
	Ready(ctx context.Context) error
}

// Metrics hears every finished invoke and continue.
type Metrics interface {
	// RunCall is one invoke or continue that ran, with the status the run
	// reached and how long the engine took.
	RunCall(status run.Status, took time.Duration)
}

// Deps are what the use cases need.
type Deps struct {
	Flows  catalog.FlowStore
	Runs   catalog.RunStore
	Engine *run.Engine
	// Knowledge keeps the workspaces' knowledge bases (parleyctl kb).
	Knowledge catalog.KnowledgeStore
	// Stages are the staged features a published flow may use
	// (FLOW_STAGES_OPEN).
	Stages map[flow.Stage]bool
	// SessionTTL is how long after started_at a waiting run may be
	// continued (FLOW_SESSION_TTL).
	SessionTTL time.Duration
	Metrics    Metrics
	// Guard is the safety guard's readiness; nil means none is wired, and
	// flows with AI nodes are refused (ErrGuardNotWired).
	Guard GuardReadiness
	// Now and NewID default to the clock and UUIDv7.
	Now   func() time.Time
	NewID func() string
}

// App is the flow-runner's use cases.
type App struct {
	flows      catalog.FlowStore
	runs       catalog.RunStore
	knowledge  catalog.KnowledgeStore
	engine     *run.Engine
	stages     map[flow.Stage]bool
	sessionTTL time.Duration
	metrics    Metrics
	guard      GuardReadiness
	now        func() time.Time
	newID      func() string
}

// New returns the use cases over d.
func New(d Deps) *App {
	a := &App{
		flows: d.Flows, runs: d.Runs, knowledge: d.Knowledge, engine: d.Engine, stages: d.Stages, sessionTTL: d.SessionTTL,
		metrics: d.Metrics, guard: d.Guard, now: d.Now, newID: d.NewID,
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.newID == nil {
		a.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if a.metrics == nil {
		a.metrics = nopMetrics{}
	}
	return a
}

type nopMetrics struct{}

func (nopMetrics) RunCall(run.Status, time.Duration) {}
