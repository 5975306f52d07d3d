// Package catalog is what the flow-runner keeps between calls: published
// flows with their immutable versions, and runs with their node runs. It
// declares the stores the use cases need; the adapters implement them on
// PostgreSQL.
package catalog

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Flow statuses.
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
)

// TriggerChat is the trigger that lets a flow answer a channel's
// customers as its chat flow.
const TriggerChat = "chat"

// Run sources, a run's kind: SourceAPI marks a run invoked over the
// Developer API, the only runs readable through it; SourceChat a chat run
// answering a conversation's customer (a run.Run with Chat set).
const (
	SourceAPI  = "api"
	SourceChat = "chat"
)

// Errors of the stores.
var (
	ErrFlowNotFound = errors.New("flow not found")
	ErrRunNotFound  = errors.New("run not found")
	// ErrVersionNotFound is a version its flow does not have.
	ErrVersionNotFound = errors.New("flow version not found")
	ErrSessionNotFound = errors.New("session not found")
	// ErrSessionBusy is a session another continue holds right now.
	ErrSessionBusy = errors.New("session busy")
	// ErrChannelOfAnotherWorkspace is a chat flow set for a channel that
	// already has one in another workspace.
	ErrChannelOfAnotherWorkspace = errors.New("channel of another workspace")
)

// Flow is a published flow: the fields of the latest version's document
// and which version is published.
type Flow struct {
	ID               string
	WorkspaceID      string
	Name             string
	Description      string
	Triggers         []string
	Status           string
	PublishedVersion int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Version is one published version of a flow: the document as published
// and its parsed definition.
type Version struct {
	FlowID     string
	Version    int
	Definition *flow.Definition
}

// VersionInfo describes one published version of a flow, for the list of
// its versions.
type VersionInfo struct {
	Version     int
	PublishedAt time.Time
	// Nodes is how many nodes the version's document has.
	Nodes int
}

// Publication is a new version to store.
type Publication struct {
	// FlowID is the flow to add a version to, or empty for a new flow with
	// NewID as its id.
	FlowID      string
	NewID       string
	WorkspaceID string
	Document    []byte
	Definition  *flow.Definition
	Now         time.Time
}

// FlowStore keeps flows and their versions.
type FlowStore interface {
	// Publish stores a new version and makes it the published one; the flow
	// becomes active. An unknown FlowID, or one of another workspace, is
	// ErrFlowNotFound.
	Publish(ctx context.Context, p Publication) (*Flow, error)
	// Deactivate sets a flow inactive; ErrFlowNotFound when unknown, or
	// when workspaceID is set and the flow is another workspace's.
	Deactivate(ctx context.Context, workspaceID, flowID string, now time.Time) (*Flow, error)
	// Get returns a flow of the workspace, whatever its status, or
	// ErrFlowNotFound.
	Get(ctx context.Context, workspaceID, flowID string) (*Flow, error)
	// ListActive returns the workspace's active flows with trigger, newest
	// first.
	ListActive(ctx context.Context, workspaceID, trigger string) ([]*Flow, error)
	// List returns every flow of the workspace, whatever its status and
	// triggers, newest change first.
	List(ctx context.Context, workspaceID string) ([]*Flow, error)
	// Versions describes every version of a flow, newest first.
	Versions(ctx context.Context, flowID string) ([]VersionInfo, error)
	// Document returns a version's document exactly as published, or
	// ErrVersionNotFound.
	Document(ctx context.Context, flowID string, version int) ([]byte, error)
	// Version returns a parsed version of a flow. Versions never change, so
	// implementations may cache them.
	Version(ctx context.Context, flowID string, version int) (*Version, error)
}

// Trace is a stored run with every node run, in the order they started.
type Trace struct {
	Run      *run.Run
	NodeRuns []run.NodeRun
}

// RunSummary is a run as a list shows it: what it ran, how it went and
// what it consumed, without its variables, output and messages.
type RunSummary struct {
	ID string
	// Kind is SourceAPI or SourceChat.
	Kind string
	// FlowID and Version are "" and 0 for an assistant's chat run, which
	// runs no flow.
	FlowID  string
	Version int
	// ConversationID is a chat run's conversation, "" for an API run.
	ConversationID string
	Status         run.Status
	NodesExecuted  int
	Usage          run.Usage
	// Error is the failed run's error; nil otherwise.
	Error       *run.Error
	StartedAt   time.Time
	CompletedAt *time.Time
}

// RunQuery selects part of a workspace's runs, newest first (started_at,
// then id, descending): the rows paging.Paginate fetches.
type RunQuery struct {
	// FlowID, ConversationID and Status filter when set.
	FlowID         string
	ConversationID string
	Status         run.Status
	Limit          int
	// Before, when set, keeps runs started strictly before it.
	Before *time.Time
	// At, when set, selects every run started at exactly this time, and
	// Before and Limit are ignored: a tie group is read whole.
	At *time.Time
}

// RunStatuses are the statuses a stored run can have.
var RunStatuses = []run.Status{run.StatusWaiting, run.StatusCompleted, run.StatusFailed}

// Receipt is the answer to a call made with an idempotency key. It is
// stored with the run it answered, in the same statement or transaction,
// so that a call that committed is never run again: the durable side of
// the keys the service also keeps in Redis. A stream's is stored once its
// end reached the reader or the stream was cut (FinishStream): its call
// is not over until then.
type Receipt struct {
	WorkspaceID string
	// KeyHash stands for the key, which is not stored.
	KeyHash string
	// Fingerprint is the request's (method, path, raw body).
	Fingerprint string
	Status      int
	// Body is the JSON answer; nil when it was too large to replay.
	Body  []byte
	RunID string
	// Superseded is set by the store that was asked to store the receipt
	// and found the key answered by another call's, which it keeps: Redis
	// lost the key while this call ran, and a repeat ran again beside it
	// (docs/flows.md "Idempotency"). The first receipt stored answers.
	Superseded bool
}

// Changes are what a continue adds to its run: the node runs, and the
// receipt of its answer when it was made with an idempotency key.
type Changes struct {
	NodeRuns []run.NodeRun
	Receipt  *Receipt
}

// RunStore keeps runs.
type RunStore interface {
	// Create stores a new API run, its node runs and, when not nil, the
	// receipt of the call that ran it, together (or marks the receipt
	// Superseded). Continue and FinishStream store receipts the same way.
	Create(ctx context.Context, r *run.Run, nodeRuns []run.NodeRun, receipt *Receipt) error
	// Get returns an API run of the workspace and flow, or ErrRunNotFound.
	Get(ctx context.Context, workspaceID, flowID, runID string) (*Trace, error)
	// Trace returns a run of the workspace, of any kind, for its
	// operators; ErrRunNotFound when unknown or another workspace's.
	Trace(ctx context.Context, workspaceID, runID string) (*Trace, error)
	// List returns the workspace's runs of every kind that q selects,
	// newest first.
	List(ctx context.Context, workspaceID string, q RunQuery) ([]RunSummary, error)
	// Continue takes the run of a session for the time of fn, so that no
	// other continue (in this process or another) runs it at once: a
	// session already taken is ErrSessionBusy, an unknown one
	// ErrSessionNotFound. fn decides (it may refuse with an error, which
	// Continue returns unchanged and nothing is stored) and returns what
	// the call added; the changed run and those are stored together, also
	// when ctx ends meanwhile.
	Continue(ctx context.Context, sessionID string, fn func(r *run.Run) (Changes, error)) error
	// FinishStream stores what a streamed call's end decided, once it
	// reached the reader or the stream was cut, in one transaction: cut,
	// when not nil, is the run failed in place of the one stored with
	// status was and cut's nodes_executed (a run changed since, which a
	// continue of its session did, is left as it is); receipt, when not
	// nil, is the call's receipt, held back until then.
	FinishStream(ctx context.Context, cut *run.Run, was run.Status, receipt *Receipt) error
	// PurgeReceipts deletes at most limit receipts older than the
	// idempotency keys' lifetime and says how many went.
	PurgeReceipts(ctx context.Context, limit int) (int64, error)
}

// ChatFlowStore keeps each channel's chat flow: the flow that answers the
// channel's customers in place of the assistant (docs/chat.md "A
// channel's chat flow"). The channel is messaging's; the store knows it
// by its id and workspace only.
type ChatFlowStore interface {
	// SetChatFlow assigns flowID to the channel of the workspace, in place
	// of any earlier one. A channel whose chat flow was set in another
	// workspace is ErrChannelOfAnotherWorkspace.
	SetChatFlow(ctx context.Context, workspaceID, channelID, flowID string, now time.Time) error
	// ChatFlow returns the flow that answers the channel's customers, and
	// its published version: its assigned flow while that flow is active
	// and has the chat trigger, else "" and 0 (the assistant answers).
	ChatFlow(ctx context.Context, workspaceID, channelID string) (flowID string, version int, err error)
	// ClearChatFlow removes the channel's chat flow, if it has one.
	ClearChatFlow(ctx context.Context, workspaceID, channelID string) error
}
