package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
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

// RunStore keeps runs in flows.runs, their traces in flows.node_runs and
// the receipts of idempotent calls in flows.idempotency_receipts.
type RunStore struct {
	db    *gorm.DB
	holds chan struct{}
	// receiptTTL is IDEMPOTENCY_TTL: an older receipt no longer answers
	// its key.
	receiptTTL time.Duration
}

var _ catalog.RunStore = (*RunStore)(nil)

// NewRunStore returns the store over gdb (opened for Schema), whose
// receipts answer their keys for receiptTTL (IDEMPOTENCY_TTL).
func NewRunStore(gdb *gorm.DB, receiptTTL time.Duration) *RunStore {
	return &RunStore{db: gdb, holds: make(chan struct{}, MaxHeldContinues), receiptTTL: receiptTTL}
}

type runRow struct {
	ID string `gorm:"primaryKey"`
	// FlowID and Version are NULL for an assistant's chat run.
	FlowID      *string
	Version     *int
	WorkspaceID string
	Source      string
	// ConversationID and ChannelID are a chat run's, NULL for an API run.
	ConversationID *string
	ChannelID      *string
	WakeAt         *time.Time
	Status         string
	CurrentNodeID  string
	NodesExecuted  int
	Vars           string  `gorm:"type:json"`
	Output         string  `gorm:"type:json"`
	Messages       string  `gorm:"type:json"`
	Usage          string  `gorm:"type:json"`
	Error          *string `gorm:"type:json"`
	SessionID      *string
	StartedAt      time.Time
	CompletedAt    *time.Time
	UpdatedAt      time.Time `gorm:"autoUpdateTime:false"`
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

// runToRow is the row of r: a chat run (r.Chat set) has source chat and
// its conversation, channel and wake time, and no flow when r.FlowID is
// "" (the assistant's).
func runToRow(r *run.Run, now time.Time) (runRow, error) {
	row := runRow{
		ID: r.ID, WorkspaceID: r.WorkspaceID, Source: catalog.SourceAPI,
		Status: string(r.Status), CurrentNodeID: pgText(r.CurrentNodeID), NodesExecuted: r.NodesExecuted,
		StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, UpdatedAt: now,
	}
	if r.FlowID != "" {
		row.FlowID, row.Version = &r.FlowID, &r.Version
	}
	if r.Chat != nil {
		row.Source = catalog.SourceChat
		row.ConversationID, row.ChannelID = &r.Chat.ConversationID, &r.Chat.ChannelID
		row.WakeAt = r.WakeAt
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
		ID: r.ID, FlowID: deref(r.FlowID), Version: deref(r.Version), WorkspaceID: r.WorkspaceID,
		Status: run.Status(r.Status), CurrentNodeID: r.CurrentNodeID, NodesExecuted: r.NodesExecuted,
		StartedAt: r.StartedAt.UTC(),
	}
	if r.WakeAt != nil {
		t := r.WakeAt.UTC()
		out.WakeAt = &t
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
	if out.Usage, out.Error, err = decodeOutcome(r.ID, r.Usage, r.Error); err != nil {
		return nil, err
	}
	if r.Source == catalog.SourceChat {
		out.Chat = chatOf(r, out.Vars)
	}
	return out, nil
}

// chatOf is a stored chat run's run.Chat. The conversation and channel
// are columns of their own; the channel's kind and the contact are read
// back from the variables the run started with (vars.channel.kind,
// vars.contact.id and .name), and are "" when those are missing.
// WorkspaceName is not stored: it is "" and its reader fills it in.
func chatOf(r runRow, vars map[string]any) *run.Chat {
	c := &run.Chat{ConversationID: deref(r.ConversationID), ChannelID: deref(r.ChannelID)}
	field := func(object, name string) string {
		o, _ := vars[object].(map[string]any)
		s, _ := o[name].(string)
		return s
	}
	c.ChannelKind = field("channel", "kind")
	c.ContactID, c.ContactName = field("contact", "id"), field("contact", "name")
	return c
}

// deref is *p, or the zero value when p is nil (a NULL column).
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// decodeOutcome reads a run row's usage and error columns.
func decodeOutcome(runID, usage string, errJSON *string) (run.Usage, *run.Error, error) {
	var u run.Usage
	if err := json.Unmarshal([]byte(usage), &u); err != nil {
		return u, nil, fmt.Errorf("decode usage of run %s: %w", runID, err)
	}
	if errJSON == nil {
		return u, nil, nil
	}
	var e run.Error
	if err := json.Unmarshal([]byte(*errJSON), &e); err != nil {
		return u, nil, fmt.Errorf("decode error of run %s: %w", runID, err)
	}
	return u, &e, nil
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

// Create implements catalog.RunStore: the run, its node runs and the
// call's receipt in one statement, so a trace never shows half a call, a
// receipt never names a run that is not there, and an invoke pays one
// round trip to PostgreSQL for its storage instead of a transaction's four.
func (s *RunStore) Create(ctx context.Context, r *run.Run, nodeRuns []run.NodeRun, receipt *catalog.Receipt) error {
	args, err := insertRunArgs(r, nodeRuns)
	if err != nil {
		return err
	}
	pool, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	if receipt == nil {
		if _, err := pool.ExecContext(ctx, insertRunStatement, args...); err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		return nil
	}
	var stored int
	if err := pool.QueryRowContext(ctx, insertRunWithReceiptStatement, append(args, s.receiptArgs(receipt)...)...).Scan(&stored); err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	receipt.Superseded = stored == 0
	return nil
}

// InsertRun stores a new run (an API run, or a chat run when r.Chat is
// set) and its node runs, numbered from 1, inside tx, the caller's
// transaction: the chat consumer stores a run with what else its turn
// changed, together. It is Create's statement, without a receipt.
func InsertRun(tx *gorm.DB, r *run.Run, nodeRuns []run.NodeRun) error {
	return insertRunAlso(tx, insertRunStatement, r, nodeRuns)
}

// insertRunAlso is InsertRun with statement, insertRunStatement or one of
// insertRunWith's, whose own parameters (from $31) are alsoArgs.
func insertRunAlso(tx *gorm.DB, statement string, r *run.Run, nodeRuns []run.NodeRun, alsoArgs ...any) error {
	args, err := insertRunArgs(r, nodeRuns)
	if err != nil {
		return err
	}
	if _, err := tx.Statement.ConnPool.ExecContext(txContext(tx), statement, append(args, alsoArgs...)...); err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

// LoadRun reads a run of any kind inside tx, the caller's transaction,
// and locks its row (FOR UPDATE, waiting for another holder) until that
// transaction ends, so that what the caller then stores with UpdateRun is
// not lost to a writer in between. r.TraceBytes is what its node runs
// hold so far (see run.Run.TraceBytes). An unknown run is
// catalog.ErrRunNotFound.
func LoadRun(tx *gorm.DB, runID string) (*run.Run, error) {
	if !validID(runID) {
		return nil, catalog.ErrRunNotFound
	}
	var row runRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", runID).Take(&row).Error
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
	trace, err := measureTrace(tx, runID)
	if err != nil {
		return nil, err
	}
	r.TraceBytes = trace.Bytes
	return r, nil
}

// UpdateRun stores a run changed since it was stored, with the node runs
// its call added (numbered on from the run's last), inside tx, the
// caller's transaction. Its source stays what it was inserted with. An
// unknown run is catalog.ErrRunNotFound.
func UpdateRun(tx *gorm.DB, r *run.Run, nodeRuns []run.NodeRun) error {
	trace, err := measureTrace(tx, r.ID)
	if err != nil {
		return err
	}
	return updateRun(tx, r, trace.Last+1, nodeRuns)
}

// updateRun writes r's row and appends nodeRuns numbered from firstSeq:
// the storing half of Continue and UpdateRun.
func updateRun(tx *gorm.DB, r *run.Run, firstSeq int, nodeRuns []run.NodeRun) error {
	updated, err := runToRow(r, time.Now().UTC())
	if err != nil {
		return err
	}
	res := tx.Model(&runRow{}).Where("id = ?", r.ID).Select("*").Omit("id", "source").Updates(&updated)
	if res.Error != nil {
		return fmt.Errorf("update run: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return catalog.ErrRunNotFound
	}
	if len(nodeRuns) == 0 {
		return nil
	}
	nodes, err := nodeRunColumns(firstSeq, nodeRuns)
	if err != nil {
		return err
	}
	args := append([]any{r.ID}, nodes.args()...)
	if _, err := tx.Statement.ConnPool.ExecContext(txContext(tx), appendNodeRunsStatement, args...); err != nil {
		return fmt.Errorf("insert node runs: %w", err)
	}
	return nil
}

// traceSize is what a run's node runs hold: the last seq, and the bytes
// of their recorded inputs and outputs as the json columns keep them.
type traceSize struct {
	Last  int
	Bytes int
}

func measureTrace(tx *gorm.DB, runID string) (traceSize, error) {
	var trace traceSize
	if err := tx.Model(&nodeRunRow{}).Where("run_id = ?", runID).
		Select("coalesce(max(seq), 0) AS last, coalesce(sum(coalesce(octet_length(input::text), 0) + coalesce(octet_length(output::text), 0)), 0) AS bytes").
		Scan(&trace).Error; err != nil {
		return trace, fmt.Errorf("measure node runs: %w", err)
	}
	return trace, nil
}

// txContext is the context tx was given (WithContext), or Background.
func txContext(tx *gorm.DB) context.Context {
	if ctx := tx.Statement.Context; ctx != nil {
		return ctx
	}
	return context.Background()
}

// insertRunArgs are insertRunStatement's parameters for r and its node
// runs, numbered from 1.
func insertRunArgs(r *run.Run, nodeRuns []run.NodeRun) ([]any, error) {
	row, err := runToRow(r, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	nodes, err := nodeRunColumns(1, nodeRuns)
	if err != nil {
		return nil, err
	}
	return append([]any{
		row.ID, row.FlowID, row.Version, row.WorkspaceID, row.Source, row.Status, row.CurrentNodeID,
		row.NodesExecuted, row.Vars, row.Output, row.Messages, row.Usage, row.Error, row.SessionID,
		row.StartedAt, row.CompletedAt, row.UpdatedAt, row.ConversationID, row.ChannelID, row.WakeAt,
	}, nodes.args()...), nil
}

// insertRun inserts a run ($1–$20, insertRunArgs's order).
var insertRun = `INSERT INTO ` + Schema + `.runs (id, flow_id, version, workspace_id, source, status, current_node_id,
		nodes_executed, vars, output, messages, usage, error, session_id, started_at, completed_at, updated_at,
		conversation_id, channel_id, wake_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`

// insertRunStatement inserts a run ($1–$20) and its node runs (arrays
// from $21, see nodeRunArrays). The node runs' foreign key is checked at
// the end of the statement, when the run's row is there.
var insertRunStatement = `WITH run AS (
	` + insertRun + `
)
` + insertNodeRuns(21)

// insertRunWithReceiptStatement is insertRunStatement that also stores
// the call's receipt ($31–$37, see insertReceipt), and answers how many
// receipts it stored: 0 when another call's answers the key.
var insertRunWithReceiptStatement = `WITH run AS (
	` + insertRun + `
), receipt AS (
` + insertReceipt(31) + `
	RETURNING 1
), node_runs AS (
` + insertNodeRuns(21) + `
)
SELECT count(*) FROM receipt`

// insertRunWith is insertRunStatement that also runs also, a data-modifying
// statement whose parameters start at $31, in the same statement.
func insertRunWith(also string) string {
	return `WITH run AS (
	` + insertRun + `
), also AS (
` + also + `
)
` + insertNodeRuns(21)
}

// appendNodeRunsStatement adds the node runs (arrays from $2) of a
// continued run ($1).
var appendNodeRunsStatement = insertNodeRuns(2)

// insertNodeRuns inserts the node runs of run $1 from the ten arrays that
// start at parameter first (see nodeRunArrays). The JSON columns come as
// text and are cast, so that the driver sends them as they were encoded.
func insertNodeRuns(first int) string {
	p := make([]any, 10)
	for i := range p {
		p[i] = first + i
	}
	return fmt.Sprintf(`INSERT INTO `+Schema+`.node_runs (run_id, seq, node_id, node_type, started_at,
	duration_ms, input, output, error, tokens, cost_usd)
SELECT $1, n.* FROM unnest($%d::int[], $%d::text[], $%d::text[], $%d::timestamptz[], $%d::bigint[],
	$%d::text[]::json[], $%d::text[]::json[], $%d::text[], $%d::int[], $%d::float8[]) AS n`, p...)
}

// insertReceipt stores a receipt from the seven parameters that start at
// first: workspace, key hash, fingerprint, status, body, run id, and the
// age in seconds (IDEMPOTENCY_TTL) after which a receipt has expired; the
// age is on PostgreSQL's clock, like created_at. The key's
// earlier receipt is replaced only when it expired (its key was free
// again); a live one stays, since it answered the key first, and then no
// row is inserted or updated.
func insertReceipt(first int) string {
	p := func(i int) int { return first + i }
	return fmt.Sprintf(`INSERT INTO `+Schema+`.idempotency_receipts AS r
	(workspace_id, key_hash, fingerprint, status, body, run_id, created_at)
VALUES ($%d, $%d, $%d, $%d, $%d, $%d, now())
ON CONFLICT (workspace_id, key_hash) DO UPDATE
	SET fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body,
		run_id = excluded.run_id, created_at = excluded.created_at
	WHERE r.created_at < now() - make_interval(secs => $%d)`, p(0), p(1), p(2), p(3), p(4), p(5), p(6))
}

// receiptArgs are insertReceipt's seven parameters.
func (s *RunStore) receiptArgs(r *catalog.Receipt) []any {
	return []any{r.WorkspaceID, r.KeyHash, r.Fingerprint, r.Status, r.Body, r.RunID, s.receiptTTL.Seconds()}
}

// nodeRunArrays holds node runs column by column, so that any number of
// them is inserted by one statement with a fixed number of parameters (a
// VALUES list needs eleven a row, and PostgreSQL takes at most 65,535).
type nodeRunArrays struct {
	seq        []int32
	nodeID     []string
	nodeType   []string
	startedAt  []time.Time
	durationMS []int64
	input      []*string
	output     []*string
	errText    []*string
	tokens     []int32
	costUSD    []float64
}

func nodeRunColumns(firstSeq int, nodeRuns []run.NodeRun) (nodeRunArrays, error) {
	var a nodeRunArrays
	for i, n := range nodeRuns {
		row, err := nodeRunToRow("", firstSeq+i, n)
		if err != nil {
			return a, err
		}
		a.seq = append(a.seq, int32(row.Seq))
		a.nodeID = append(a.nodeID, row.NodeID)
		a.nodeType = append(a.nodeType, row.NodeType)
		a.startedAt = append(a.startedAt, row.StartedAt)
		a.durationMS = append(a.durationMS, row.DurationMS)
		a.input = append(a.input, row.Input)
		a.output = append(a.output, row.Output)
		a.errText = append(a.errText, row.Error)
		a.tokens = append(a.tokens, int32(row.Tokens))
		a.costUSD = append(a.costUSD, row.CostUSD)
	}
	return a, nil
}

// args are the ten arrays, in insertNodeRuns's order.
func (a nodeRunArrays) args() []any {
	return []any{a.seq, a.nodeID, a.nodeType, a.startedAt, a.durationMS, a.input, a.output, a.errText, a.tokens, a.costUSD}
}

// Get implements catalog.RunStore.
func (s *RunStore) Get(ctx context.Context, workspaceID, flowID, runID string) (*catalog.Trace, error) {
	if !validID(workspaceID) || !validID(flowID) || !validID(runID) {
		return nil, catalog.ErrRunNotFound
	}
	return s.trace(ctx, "id = ? AND workspace_id = ? AND flow_id = ? AND source = ?", runID, workspaceID, flowID, catalog.SourceAPI)
}

// Trace implements catalog.RunStore.
func (s *RunStore) Trace(ctx context.Context, workspaceID, runID string) (*catalog.Trace, error) {
	if !validID(workspaceID) || !validID(runID) {
		return nil, catalog.ErrRunNotFound
	}
	return s.trace(ctx, "id = ? AND workspace_id = ?", runID, workspaceID)
}

// trace reads the run that where selects, with its node runs.
func (s *RunStore) trace(ctx context.Context, where string, args ...any) (*catalog.Trace, error) {
	db := s.db.WithContext(ctx)
	var row runRow
	err := db.Where(where, args...).Take(&row).Error
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
	if err := db.Where("run_id = ?", row.ID).Order("seq").Find(&rows).Error; err != nil {
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

// runSummaryRow is the part of a run row a list reads.
type runSummaryRow struct {
	ID             string
	Source         string
	FlowID         *string
	Version        *int
	ConversationID *string
	Status         string
	NodesExecuted  int
	Usage          string  `gorm:"type:json"`
	Error          *string `gorm:"type:json"`
	StartedAt      time.Time
	CompletedAt    *time.Time
}

func (r runSummaryRow) toDomain() (catalog.RunSummary, error) {
	out := catalog.RunSummary{
		ID: r.ID, Kind: r.Source, FlowID: deref(r.FlowID), Version: deref(r.Version), ConversationID: deref(r.ConversationID),
		Status: run.Status(r.Status), NodesExecuted: r.NodesExecuted, StartedAt: r.StartedAt.UTC(),
	}
	if r.CompletedAt != nil {
		t := r.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	var err error
	out.Usage, out.Error, err = decodeOutcome(r.ID, r.Usage, r.Error)
	return out, err
}

// List implements catalog.RunStore. Runs of every source are listed; the
// runs_workspace_started, runs_flow_started and runs_conversation_started
// indexes serve the three orders.
func (s *RunStore) List(ctx context.Context, workspaceID string, q catalog.RunQuery) ([]catalog.RunSummary, error) {
	if !validID(workspaceID) || (q.FlowID != "" && !validID(q.FlowID)) || (q.ConversationID != "" && !validID(q.ConversationID)) {
		return nil, nil
	}
	tx := s.db.WithContext(ctx).Model(&runRow{}).
		Select("id, source, flow_id, version, conversation_id, status, nodes_executed, usage, error, started_at, completed_at").
		Where("workspace_id = ?", workspaceID)
	if q.FlowID != "" {
		tx = tx.Where("flow_id = ?", q.FlowID)
	}
	if q.ConversationID != "" {
		tx = tx.Where("conversation_id = ?", q.ConversationID)
	}
	if q.Status != "" {
		tx = tx.Where("status = ?", string(q.Status))
	}
	var rows []runSummaryRow
	if err := tx.Scopes(db.NewestFirst("started_at", "id", q.Before, q.At, q.Limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]catalog.RunSummary, 0, len(rows))
	for _, r := range rows {
		sum, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
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
func (s *RunStore) Continue(ctx context.Context, sessionID string, fn func(r *run.Run) (catalog.Changes, error)) error {
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
		// What the trace holds so far counts against the run's budget
		// (run.Run.TraceBytes).
		trace, err := measureTrace(tx, row.ID)
		if err != nil {
			return err
		}
		r.TraceBytes = trace.Bytes
		changes, err := fn(r)
		if err != nil {
			return err
		}
		if err := updateRun(tx, r, trace.Last+1, changes.NodeRuns); err != nil {
			return err
		}
		if changes.Receipt == nil {
			return nil
		}
		res, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, insertReceipt(1), s.receiptArgs(changes.Receipt)...)
		if err != nil {
			return fmt.Errorf("insert receipt: %w", err)
		}
		stored, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert receipt: %w", err)
		}
		changes.Receipt.Superseded = stored == 0
		return nil
	})
}

// FinishStream implements catalog.RunStore. Of a cut run only the outcome
// changes (status, error, output, session, completed_at): its vars,
// messages and trace are what it did. It is matched on its status and
// node count as stored, which any continue that took it since changed.
func (s *RunStore) FinishStream(ctx context.Context, cut *run.Run, was run.Status, receipt *catalog.Receipt) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if cut != nil {
			row, err := runToRow(cut, time.Now().UTC())
			if err != nil {
				return err
			}
			if err := tx.Model(&runRow{}).
				Where("id = ? AND status = ? AND nodes_executed = ?", cut.ID, string(was), cut.NodesExecuted).
				Select("status", "error", "output", "session_id", "completed_at", "updated_at").
				Updates(&row).Error; err != nil {
				return fmt.Errorf("mark run failed: %w", err)
			}
		}
		if receipt == nil {
			return nil
		}
		res := tx.Exec(insertReceipt(1), s.receiptArgs(receipt)...)
		if res.Error != nil {
			return fmt.Errorf("insert receipt: %w", res.Error)
		}
		receipt.Superseded = res.RowsAffected == 0
		return nil
	})
}

// FindReceipt returns the receipt of a workspace's key (by its hash) that
// has not expired, or nil.
func (s *RunStore) FindReceipt(ctx context.Context, workspaceID, keyHash string) (*catalog.Receipt, error) {
	if !validID(workspaceID) {
		return nil, nil
	}
	var rows []struct {
		Fingerprint string
		Status      int
		Body        []byte
		RunID       string
	}
	err := s.db.WithContext(ctx).Raw(`SELECT fingerprint, status, body, run_id FROM `+Schema+`.idempotency_receipts
		WHERE workspace_id = ? AND key_hash = ? AND created_at >= now() - make_interval(secs => ?)`,
		workspaceID, keyHash, s.receiptTTL.Seconds()).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("find receipt: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	r := rows[0]
	return &catalog.Receipt{WorkspaceID: workspaceID, KeyHash: keyHash, Fingerprint: r.Fingerprint, Status: r.Status, Body: r.Body, RunID: r.RunID}, nil
}

// PurgeReceipts deletes receipts that expired, at most limit of them, and
// says how many went.
func (s *RunStore) PurgeReceipts(ctx context.Context, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM `+Schema+`.idempotency_receipts WHERE ctid IN (
		SELECT ctid FROM `+Schema+`.idempotency_receipts WHERE created_at < now() - make_interval(secs => ?) LIMIT ?)`,
		s.receiptTTL.Seconds(), limit)
	if res.Error != nil {
		return 0, fmt.Errorf("purge receipts: %w", res.Error)
	}
	return res.RowsAffected, nil
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
