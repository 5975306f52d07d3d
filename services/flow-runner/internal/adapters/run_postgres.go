package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// MaxHeldContinues bounds the continues one process runs at once. Each
// holds a pooled connection for its whole run (its lock's transaction) and
// may need another meanwhile (a version to load, a call_flow target), so
// they may take only half of db.Open's 20 connections: were every
// connection held, those loads would wait on each other until their
// requests timed out. A continue past the bound waits for a place.
const MaxHeldContinues = 10

// RunStore keeps runs in flows.runs and their traces in flows.node_runs.
type RunStore struct {
	db    *gorm.DB
	holds chan struct{}
}

var _ catalog.RunStore = (*RunStore)(nil)

// NewRunStore returns the store over gdb (opened for Schema).
func NewRunStore(gdb *gorm.DB) *RunStore {
	return &RunStore{db: gdb, holds: make(chan struct{}, MaxHeldContinues)}
}

type runRow struct {
	ID            string `gorm:"primaryKey"`
	FlowID        string
	Version       int
	WorkspaceID   string
	Source        string
	Status        string
	CurrentNodeID string
	NodesExecuted int
	Vars          string  `gorm:"type:json"`
	Output        string  `gorm:"type:json"`
	Messages      string  `gorm:"type:json"`
	Usage         string  `gorm:"type:json"`
	Error         *string `gorm:"type:json"`
	SessionID     *string
	StartedAt     time.Time
	CompletedAt   *time.Time
	UpdatedAt     time.Time `gorm:"autoUpdateTime:false"`
}

func (runRow) TableName() string { return Schema + ".runs" }

type nodeRunRow struct {
	RunID      string `gorm:"primaryKey"`
	Seq        int    `gorm:"primaryKey"`
	NodeID     string
	NodeType   string
	StartedAt  time.Time
	DurationMS int64   `gorm:"column:duration_ms"`
	Input      *string `gorm:"type:json"`
	Output     *string `gorm:"type:json"`
	Error      *string
	Tokens     int
	CostUSD    float64 `gorm:"column:cost_usd"`
}

func (nodeRunRow) TableName() string { return Schema + ".node_runs" }

func runToRow(r *run.Run, now time.Time) (runRow, error) {
	row := runRow{
		ID: r.ID, FlowID: r.FlowID, Version: r.Version, WorkspaceID: r.WorkspaceID, Source: catalog.SourceAPI,
		Status: string(r.Status), CurrentNodeID: pgText(r.CurrentNodeID), NodesExecuted: r.NodesExecuted,
		StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, UpdatedAt: now,
	}
	if r.SessionID != "" {
		row.SessionID = &r.SessionID
	}
	var err error
	vars, output, messages := r.Vars, r.Output, r.Messages
	if vars == nil {
		vars = map[string]any{}
	}
	if output == nil {
		output = map[string]any{}
	}
	if messages == nil {
		messages = []run.Message{}
	}
	if row.Vars, err = encode(vars); err != nil {
		return row, fmt.Errorf("encode vars: %w", err)
	}
	if row.Output, err = encode(output); err != nil {
		return row, fmt.Errorf("encode output: %w", err)
	}
	if row.Messages, err = encode(messages); err != nil {
		return row, fmt.Errorf("encode messages: %w", err)
	}
	if row.Usage, err = encode(r.Usage); err != nil {
		return row, fmt.Errorf("encode usage: %w", err)
	}
	if r.Error != nil {
		e, err := encode(r.Error)
		if err != nil {
			return row, fmt.Errorf("encode error: %w", err)
		}
		row.Error = &e
	}
	return row, nil
}

func (r runRow) toDomain() (*run.Run, error) {
	out := &run.Run{
		ID: r.ID, FlowID: r.FlowID, Version: r.Version, WorkspaceID: r.WorkspaceID,
		Status: run.Status(r.Status), CurrentNodeID: r.CurrentNodeID, NodesExecuted: r.NodesExecuted,
		StartedAt: r.StartedAt.UTC(),
	}
	if r.CompletedAt != nil {
		t := r.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if r.SessionID != nil {
		out.SessionID = *r.SessionID
	}
	var vars any
	if err := json.Unmarshal([]byte(r.Vars), &vars); err != nil {
		return nil, fmt.Errorf("decode vars of run %s: %w", r.ID, err)
	}
	// The engine reads vars as it made them: through its own JSON view.
	vars, err := expression.Normalize(vars, run.MaxVarsBytes)
	if err != nil {
		return nil, fmt.Errorf("read vars of run %s: %w", r.ID, err)
	}
	out.Vars, _ = vars.(map[string]any)
	if err := json.Unmarshal([]byte(r.Output), &out.Output); err != nil {
		return nil, fmt.Errorf("decode output of run %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.Messages), &out.Messages); err != nil {
		return nil, fmt.Errorf("decode messages of run %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.Usage), &out.Usage); err != nil {
		return nil, fmt.Errorf("decode usage of run %s: %w", r.ID, err)
	}
	if r.Error != nil {
		out.Error = &run.Error{}
		if err := json.Unmarshal([]byte(*r.Error), out.Error); err != nil {
			return nil, fmt.Errorf("decode error of run %s: %w", r.ID, err)
		}
	}
	return out, nil
}

func nodeRunToRow(runID string, seq int, n run.NodeRun) (nodeRunRow, error) {
	row := nodeRunRow{
		RunID: runID, Seq: seq, NodeID: pgText(n.NodeID), NodeType: pgText(n.NodeType), StartedAt: n.StartedAt,
		DurationMS: n.DurationMS, Tokens: n.Tokens, CostUSD: n.CostUSD,
	}
	var err error
	if row.Input, err = encodeOptional(n.Input); err != nil {
		return row, fmt.Errorf("encode node %s input: %w", n.NodeID, err)
	}
	if row.Output, err = encodeOptional(n.Output); err != nil {
		return row, fmt.Errorf("encode node %s output: %w", n.NodeID, err)
	}
	if n.Error != "" {
		e := pgText(n.Error)
		row.Error = &e
	}
	return row, nil
}

func (r nodeRunRow) toDomain() (run.NodeRun, error) {
	out := run.NodeRun{
		NodeID: r.NodeID, NodeType: r.NodeType, StartedAt: r.StartedAt.UTC(), DurationMS: r.DurationMS,
		Tokens: r.Tokens, CostUSD: r.CostUSD,
	}
	if r.Input != nil {
		if err := json.Unmarshal([]byte(*r.Input), &out.Input); err != nil {
			return out, fmt.Errorf("decode node %s input: %w", r.NodeID, err)
		}
	}
	if r.Output != nil {
		if err := json.Unmarshal([]byte(*r.Output), &out.Output); err != nil {
			return out, fmt.Errorf("decode node %s output: %w", r.NodeID, err)
		}
	}
	if r.Error != nil {
		out.Error = *r.Error
	}
	return out, nil
}

// Create implements catalog.RunStore: the run and its node runs in one
// transaction, so a trace never shows half a call.
func (s *RunStore) Create(ctx context.Context, r *run.Run, nodeRuns []run.NodeRun) error {
	row, err := runToRow(r, time.Now().UTC())
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		return insertNodeRuns(tx, r.ID, 1, nodeRuns)
	})
}

func insertNodeRuns(tx *gorm.DB, runID string, firstSeq int, nodeRuns []run.NodeRun) error {
	if len(nodeRuns) == 0 {
		return nil
	}
	rows := make([]nodeRunRow, 0, len(nodeRuns))
	for i, n := range nodeRuns {
		row, err := nodeRunToRow(runID, firstSeq+i, n)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if err := tx.CreateInBatches(rows, 500).Error; err != nil {
		return fmt.Errorf("insert node runs: %w", err)
	}
	return nil
}

// Get implements catalog.RunStore.
func (s *RunStore) Get(ctx context.Context, workspaceID, flowID, runID string) (*catalog.Trace, error) {
	if !validID(workspaceID) || !validID(flowID) || !validID(runID) {
		return nil, catalog.ErrRunNotFound
	}
	db := s.db.WithContext(ctx)
	var row runRow
	err := db.Where("id = ? AND workspace_id = ? AND flow_id = ? AND source = ?", runID, workspaceID, flowID, catalog.SourceAPI).
		Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, catalog.ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load run: %w", err)
	}
	r, err := row.toDomain()
	if err != nil {
		return nil, err
	}
	var rows []nodeRunRow
	if err := db.Where("run_id = ?", runID).Order("seq").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load node runs: %w", err)
	}
	t := &catalog.Trace{Run: r, NodeRuns: make([]run.NodeRun, 0, len(rows))}
	for _, nr := range rows {
		n, err := nr.toDomain()
		if err != nil {
			return nil, err
		}
		t.NodeRuns = append(t.NodeRuns, n)
	}
	return t, nil
}

// Continue implements catalog.RunStore. The run row is locked with FOR
// UPDATE NOWAIT in a transaction held while fn runs, and the result is
// written in that same transaction. A lock rather than a Redis lease:
// PostgreSQL drops it the moment the holder's connection or process dies,
// so there is no lease length to guess against RUN_BUDGET_TIME and no
// window where a lease ran out while its continue still writes; NOWAIT
// makes the second continue fail at once (409 session_busy) instead of
// queueing behind the first. The price is one pooled connection per
// continue in flight (see MaxHeldContinues).
//
// The transaction outlives a caller that has gone: a run that went on is
// stored. fn still sees the caller's ctx through its own closure.
func (s *RunStore) Continue(ctx context.Context, sessionID string, fn func(r *run.Run) ([]run.NodeRun, error)) error {
	if !validID(sessionID) {
		return catalog.ErrSessionNotFound
	}
	select {
	case s.holds <- struct{}{}:
		defer func() { <-s.holds }()
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.db.WithContext(context.WithoutCancel(ctx)).Transaction(func(tx *gorm.DB) error {
		var row runRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE", Options: "NOWAIT"}).
			Where("session_id = ? AND source = ?", sessionID, catalog.SourceAPI).Take(&row).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return catalog.ErrSessionNotFound
		case lockNotAvailable(err):
			return catalog.ErrSessionBusy
		case err != nil:
			return fmt.Errorf("lock run: %w", err)
		}
		r, err := row.toDomain()
		if err != nil {
			return err
		}
		added, err := fn(r)
		if err != nil {
			return err
		}
		updated, err := runToRow(r, time.Now().UTC())
		if err != nil {
			return err
		}
		if err := tx.Model(&runRow{}).Where("id = ?", row.ID).Select("*").Omit("id", "source").Updates(&updated).Error; err != nil {
			return fmt.Errorf("update run: %w", err)
		}
		var last int
		if err := tx.Model(&nodeRunRow{}).Where("run_id = ?", row.ID).Select("coalesce(max(seq), 0)").Scan(&last).Error; err != nil {
			return fmt.Errorf("count node runs: %w", err)
		}
		return insertNodeRuns(tx, row.ID, last+1, added)
	})
}

func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func encodeOptional(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	s, err := encode(v)
	if err != nil {
		return nil, err
	}
	return &s, nil
}
