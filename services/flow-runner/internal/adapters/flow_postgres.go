package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// FlowStore keeps flows in flows.flows and their versions in
// flows.flow_versions.
type FlowStore struct {
	db *gorm.DB
	// parsed caches versions by flowID/version: they are immutable, so each
	// is read and parsed once per process, and every run of it shares the
	// compiled expressions.
	parsed sync.Map // versionKey -> *catalog.Version
}

var (
	_ catalog.FlowStore = (*FlowStore)(nil)
	_ run.Flows         = (*RunnableFlows)(nil)
)

// NewFlowStore returns the store over gdb (opened for Schema).
func NewFlowStore(gdb *gorm.DB) *FlowStore {
	return &FlowStore{db: gdb}
}

type flowRow struct {
	ID               string `gorm:"primaryKey"`
	WorkspaceID      string
	Name             string
	Description      string
	Triggers         jsonList
	Status           string
	PublishedVersion int
	CreatedAt        time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt        time.Time `gorm:"autoUpdateTime:false"`
}

func (flowRow) TableName() string { return Schema + ".flows" }

func (r flowRow) toDomain() *catalog.Flow {
	return &catalog.Flow{
		ID:               r.ID,
		WorkspaceID:      r.WorkspaceID,
		Name:             r.Name,
		Description:      r.Description,
		Triggers:         []string(r.Triggers),
		Status:           r.Status,
		PublishedVersion: r.PublishedVersion,
		CreatedAt:        r.CreatedAt.UTC(),
		UpdatedAt:        r.UpdatedAt.UTC(),
	}
}

type versionRow struct {
	FlowID    string `gorm:"primaryKey"`
	Version   int    `gorm:"primaryKey"`
	Document  []byte
	CreatedAt time.Time `gorm:"autoCreateTime:false"`
}

func (versionRow) TableName() string { return Schema + ".flow_versions" }

type versionKey struct {
	flowID  string
	version int
}

// Publish implements catalog.FlowStore. The flow row is locked while the
// next version number is taken, so two publishes of one flow at once get
// consecutive versions instead of one failing on the key.
func (s *FlowStore) Publish(ctx context.Context, p catalog.Publication) (*catalog.Flow, error) {
	def := p.Definition
	var out flowRow
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := flowRow{
			ID: p.NewID, WorkspaceID: p.WorkspaceID, Name: pgText(def.Name), Description: pgText(def.Description),
			Triggers: jsonList(nonNil(def.Triggers)), Status: catalog.StatusActive, PublishedVersion: 1,
			CreatedAt: p.Now, UpdatedAt: p.Now,
		}
		if p.FlowID != "" {
			if !validID(p.FlowID) {
				return catalog.ErrFlowNotFound
			}
			var cur flowRow
			err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).
				Where("id = ? AND workspace_id = ?", p.FlowID, p.WorkspaceID).Take(&cur).Error
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return catalog.ErrFlowNotFound
			}
			if err != nil {
				return fmt.Errorf("lock flow: %w", err)
			}
			row.ID, row.CreatedAt, row.PublishedVersion = cur.ID, cur.CreatedAt, cur.PublishedVersion+1
			if err := tx.Save(&row).Error; err != nil {
				return fmt.Errorf("update flow: %w", err)
			}
		} else if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert flow: %w", err)
		}
		v := versionRow{FlowID: row.ID, Version: row.PublishedVersion, Document: p.Document, CreatedAt: p.Now}
		if err := tx.Create(&v).Error; err != nil {
			return fmt.Errorf("insert flow version: %w", err)
		}
		out = row
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The definition was parsed at publish: the first runs need not parse
	// it again.
	s.parsed.Store(versionKey{out.ID, out.PublishedVersion}, &catalog.Version{FlowID: out.ID, Version: out.PublishedVersion, Definition: def})
	return out.toDomain(), nil
}

// Deactivate implements catalog.FlowStore.
func (s *FlowStore) Deactivate(ctx context.Context, workspaceID, flowID string, now time.Time) (*catalog.Flow, error) {
	if !validID(flowID) || (workspaceID != "" && !validID(workspaceID)) {
		return nil, catalog.ErrFlowNotFound
	}
	var row flowRow
	q := s.db.WithContext(ctx).Model(&row).Clauses(clause.Returning{}).Where("id = ?", flowID)
	if workspaceID != "" {
		q = q.Where("workspace_id = ?", workspaceID)
	}
	res := q.Updates(map[string]any{"status": catalog.StatusInactive, "updated_at": now})
	if res.Error != nil {
		return nil, fmt.Errorf("deactivate flow: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, catalog.ErrFlowNotFound
	}
	return row.toDomain(), nil
}

// Get implements catalog.FlowStore.
func (s *FlowStore) Get(ctx context.Context, workspaceID, flowID string) (*catalog.Flow, error) {
	if !validID(flowID) || !validID(workspaceID) {
		return nil, catalog.ErrFlowNotFound
	}
	var row flowRow
	err := s.db.WithContext(ctx).Where("id = ? AND workspace_id = ?", flowID, workspaceID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, catalog.ErrFlowNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load flow: %w", err)
	}
	return row.toDomain(), nil
}

// ListActive implements catalog.FlowStore.
func (s *FlowStore) ListActive(ctx context.Context, workspaceID, trigger string) ([]*catalog.Flow, error) {
	if !validID(workspaceID) {
		return nil, nil
	}
	var rows []flowRow
	err := s.db.WithContext(ctx).
		Where("workspace_id = ? AND status = ? AND triggers @> ?::jsonb", workspaceID, catalog.StatusActive, jsonList{trigger}).
		Order("updated_at DESC, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list flows: %w", err)
	}
	out := make([]*catalog.Flow, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toDomain())
	}
	return out, nil
}

// List implements catalog.FlowStore.
func (s *FlowStore) List(ctx context.Context, workspaceID string) ([]*catalog.Flow, error) {
	if !validID(workspaceID) {
		return nil, nil
	}
	var rows []flowRow
	if err := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID).Order("updated_at DESC, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list all flows: %w", err)
	}
	out := make([]*catalog.Flow, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toDomain())
	}
	return out, nil
}

// Versions implements catalog.FlowStore. No column holds the node count
// (versions published before this list existed have their documents alone),
// so PostgreSQL counts the nodes array of each document: a listing reads no
// document out of the database, whatever the number of versions.
func (s *FlowStore) Versions(ctx context.Context, flowID string) ([]catalog.VersionInfo, error) {
	if !validID(flowID) {
		return nil, nil
	}
	var rows []struct {
		Version   int
		CreatedAt time.Time
		Nodes     int
	}
	// json rather than jsonb: a document is read once, for one key, and
	// need not be converted to binary first.
	err := s.db.WithContext(ctx).Model(&versionRow{}).
		Select("version, created_at, COALESCE(json_array_length(convert_from(document, 'UTF8')::json->'nodes'), 0) AS nodes").
		Where("flow_id = ?", flowID).Order("version DESC").Scan(&rows).Error
	if unreadableJSON(err) {
		return s.versionsDecoded(ctx, flowID)
	}
	if err != nil {
		return nil, fmt.Errorf("list flow versions: %w", err)
	}
	out := make([]catalog.VersionInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, catalog.VersionInfo{Version: r.Version, PublishedAt: r.CreatedAt.UTC(), Nodes: r.Nodes})
	}
	return out, nil
}

// unreadableJSON reports whether err is PostgreSQL failing to read a
// document that Go read when it was published: bytes that are not UTF-8, a
// \u0000 or a lone surrogate escape, all data exceptions (class 22).
func unreadableJSON(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// versionsDecoded is Versions for a flow with a document PostgreSQL cannot
// read: the documents are read one at a time and counted in Go, as Parse
// reads them. Should one not decode now, it is listed with no nodes rather
// than hiding the others.
func (s *FlowStore) versionsDecoded(ctx context.Context, flowID string) ([]catalog.VersionInfo, error) {
	rows, err := s.db.WithContext(ctx).Model(&versionRow{}).Where("flow_id = ?", flowID).Order("version DESC").Rows()
	if err != nil {
		return nil, fmt.Errorf("list flow versions: %w", err)
	}
	defer rows.Close()
	out := []catalog.VersionInfo{}
	for rows.Next() {
		var r versionRow
		if err := s.db.ScanRows(rows, &r); err != nil {
			return nil, fmt.Errorf("read flow version: %w", err)
		}
		var doc map[string]json.RawMessage
		var nodes []json.RawMessage
		if json.Unmarshal(r.Document, &doc) == nil {
			_ = json.Unmarshal(doc["nodes"], &nodes)
		}
		out = append(out, catalog.VersionInfo{Version: r.Version, PublishedAt: r.CreatedAt.UTC(), Nodes: len(nodes)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list flow versions: %w", err)
	}
	return out, nil
}

// Document implements catalog.FlowStore.
func (s *FlowStore) Document(ctx context.Context, flowID string, version int) ([]byte, error) {
	if !validID(flowID) {
		return nil, catalog.ErrVersionNotFound
	}
	var row versionRow
	err := s.db.WithContext(ctx).Where("flow_id = ? AND version = ?", flowID, version).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, catalog.ErrVersionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load flow version document: %w", err)
	}
	return row.Document, nil
}

// Version implements catalog.FlowStore. A stored version is parsed with
// every stage open: the stages gate publishing, and a version once accepted
// keeps running if a stage is closed later.
func (s *FlowStore) Version(ctx context.Context, flowID string, version int) (*catalog.Version, error) {
	key := versionKey{flowID, version}
	if v, ok := s.parsed.Load(key); ok {
		return v.(*catalog.Version), nil
	}
	doc, err := s.Document(ctx, flowID, version)
	if errors.Is(err, catalog.ErrVersionNotFound) {
		// Version's callers ask for versions that runs and flows name, and
		// take a missing one for a missing flow.
		return nil, catalog.ErrFlowNotFound
	}
	if err != nil {
		return nil, err
	}
	def, err := flow.Parse(doc, flow.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("parse stored flow %s version %d: %w", flowID, version, err)
	}
	v, _ := s.parsed.LoadOrStore(key, &catalog.Version{FlowID: flowID, Version: version, Definition: def})
	return v.(*catalog.Version), nil
}

// RunnableFlows is the engine's Flows port (call_flow targets) over a
// FlowStore: the published version of an active flow of the workspace.
type RunnableFlows struct {
	Store catalog.FlowStore
}

// Load implements run.Flows.
func (f RunnableFlows) Load(ctx context.Context, workspaceID, flowID string) (*flow.Definition, error) {
	fl, err := f.Store.Get(ctx, workspaceID, flowID)
	if errors.Is(err, catalog.ErrFlowNotFound) || (err == nil && fl.Status != catalog.StatusActive) {
		return nil, fmt.Errorf("flow %s: %w", flowID, run.ErrFlowNotFound)
	}
	if err != nil {
		return nil, err
	}
	v, err := f.Store.Version(ctx, fl.ID, fl.PublishedVersion)
	if err != nil {
		return nil, err
	}
	return v.Definition, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
