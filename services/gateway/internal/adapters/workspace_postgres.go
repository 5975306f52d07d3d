package adapters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// WorkspaceStore keeps workspaces in accounts.workspaces.
type WorkspaceStore struct {
	db *gorm.DB
}

var _ account.WorkspaceStore = (*WorkspaceStore)(nil)

// NewWorkspaceStore returns a store on gdb.
func NewWorkspaceStore(gdb *gorm.DB) *WorkspaceStore {
	return &WorkspaceStore{db: gdb}
}

type workspaceRow struct {
	ID            string    `gorm:"column:id;primaryKey"`
	Name          string    `gorm:"column:name"`
	Slug          string    `gorm:"column:slug"`
	PlanName      string    `gorm:"column:plan_name"`
	Modules       textArray `gorm:"column:modules;type:text[]"`
	AIUsed        int64     `gorm:"column:ai_used"`
	AILimit       int64     `gorm:"column:ai_limit"`
	RatePerMinute *int      `gorm:"column:rate_per_minute"`
	// FeaturesOn and FeaturesOff are the features switched on and off;
	// the others take their defaults.
	FeaturesOn  textArray `gorm:"column:features;type:text[]"`
	FeaturesOff textArray `gorm:"column:features_off;type:text[]"`
	CreatedAt   time.Time `gorm:"column:created_at"`
	UpdatedAt   time.Time `gorm:"column:updated_at"`
}

func (workspaceRow) TableName() string { return Schema + ".workspaces" }

func toWorkspaceRow(w account.Workspace) workspaceRow {
	mods := make(textArray, len(w.Plan.Modules))
	for i, m := range w.Plan.Modules {
		mods[i] = string(m)
	}
	var rate *int
	if w.RatePerMinute > 0 {
		r := w.RatePerMinute
		rate = &r
	}
	on, off := textArray{}, textArray{}
	for _, name := range slices.Sorted(maps.Keys(w.Switched)) {
		if w.Switched[name] {
			on = append(on, name)
		} else {
			off = append(off, name)
		}
	}
	return workspaceRow{
		ID: w.ID, Name: w.Name, Slug: w.Slug, PlanName: w.Plan.Name, Modules: mods,
		AIUsed: w.Plan.AIUsed, AILimit: w.Plan.AILimit, RatePerMinute: rate, FeaturesOn: on, FeaturesOff: off,
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

func (r workspaceRow) toDomain() account.Workspace {
	mods := make([]account.Module, len(r.Modules))
	for i, m := range r.Modules {
		mods[i] = account.Module(m)
	}
	rate := 0
	if r.RatePerMinute != nil {
		rate = *r.RatePerMinute
	}
	switched := make(map[string]bool, len(r.FeaturesOn)+len(r.FeaturesOff))
	for _, name := range r.FeaturesOn {
		switched[name] = true
	}
	for _, name := range r.FeaturesOff {
		switched[name] = false
	}
	return account.Workspace{
		ID: r.ID, Name: r.Name, Slug: r.Slug,
		Plan:          account.Plan{Name: r.PlanName, Modules: mods, AIUsed: r.AIUsed, AILimit: r.AILimit},
		RatePerMinute: rate, Switched: switched,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// Create implements account.WorkspaceStore.
func (s *WorkspaceStore) Create(ctx context.Context, w account.Workspace) error {
	row := toWorkspaceRow(w)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if db.IsUniqueViolation(err) {
			return account.ErrSlugTaken
		}
		return fmt.Errorf("insert workspace: %w", err)
	}
	return nil
}

// Get implements account.WorkspaceStore.
func (s *WorkspaceStore) Get(ctx context.Context, id string) (account.Workspace, error) {
	row, err := s.get(s.db.WithContext(ctx), id)
	if err != nil {
		return account.Workspace{}, err
	}
	return row.toDomain(), nil
}

func (s *WorkspaceStore) get(tx *gorm.DB, id string) (workspaceRow, error) {
	// A malformed id cannot name a workspace; asking Postgres would only
	// turn it into a cast error.
	if !ids.Valid(id) {
		return workspaceRow{}, account.ErrWorkspaceNotFound
	}
	var row workspaceRow
	err := tx.Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return workspaceRow{}, account.ErrWorkspaceNotFound
	}
	if err != nil {
		return workspaceRow{}, fmt.Errorf("load workspace %s: %w", id, err)
	}
	return row, nil
}

// List implements account.WorkspaceStore.
func (s *WorkspaceStore) List(ctx context.Context, slug string) ([]account.Workspace, error) {
	q := s.db.WithContext(ctx).Order("created_at, id")
	if slug != "" {
		q = q.Where("slug = ?", slug)
	}
	var rows []workspaceRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	out := make([]account.Workspace, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// Update implements account.WorkspaceStore: the row is locked for the
// change, so concurrent edits apply one after the other.
func (s *WorkspaceStore) Update(ctx context.Context, id string, change func(*account.Workspace) error) (account.Workspace, error) {
	var out account.Workspace
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row, err := s.get(tx.Clauses(clause.Locking{Strength: "UPDATE"}), id)
		if err != nil {
			return err
		}
		w := row.toDomain()
		if err := change(&w); err != nil {
			return err
		}
		next := toWorkspaceRow(w)
		if err := tx.Save(&next).Error; err != nil {
			return fmt.Errorf("save workspace %s: %w", id, err)
		}
		out = next.toDomain()
		return nil
	})
	return out, err
}

// UseAIUnits implements account.WorkspaceStore in one statement, so that
// concurrent uses (from any instance) are serialised on each workspace's
// row and never pass ai_limit. The statement locks the rows in id order,
// so that two calls naming the same workspaces wait on each other rather
// than deadlock; it updates the rows whose use fits, and answers every use
// with whether its workspace was found and its use made.
func (s *WorkspaceStore) UseAIUnits(ctx context.Context, uses []account.AIUnitsUse) ([]account.AIUnitsUsed, error) {
	wsIDs, units := make([]string, len(uses)), make([]int64, len(uses))
	for i, u := range uses {
		wsIDs[i], units[i] = u.WorkspaceID, u.Units
	}
	out := make([]account.AIUnitsUsed, len(uses))
	answered := 0
	err := db.QueryRows(ctx, s.db, useAIUnitsStatement, []any{wsIDs, units}, func(rows pgx.Rows) error {
		var (
			n              int
			found, granted bool
			plan           account.Plan
			modules        []string
		)
		if err := rows.Scan(&n, &found, &granted, &plan.Name, &modules, &plan.AIUsed, &plan.AILimit); err != nil {
			return err
		}
		if n < 1 || n > len(out) {
			return fmt.Errorf("an answer to use %d of %d", n, len(out))
		}
		plan.Modules = make([]account.Module, len(modules))
		for i, m := range modules {
			plan.Modules[i] = account.Module(m)
		}
		switch {
		case !found:
			out[n-1] = account.AIUnitsUsed{Err: account.ErrWorkspaceNotFound}
		case !granted:
			out[n-1] = account.AIUnitsUsed{Plan: plan, Err: account.ErrQuotaExceeded}
		default:
			out[n-1] = account.AIUnitsUsed{Plan: plan}
		}
		answered++
		return nil
	})
	if err == nil && answered != len(uses) {
		err = fmt.Errorf("%d answers to %d uses", answered, len(uses))
	}
	if err != nil {
		return nil, fmt.Errorf("use the AI units of %d workspaces: %w", len(uses), err)
	}
	return out, nil
}

// useAIUnitsStatement takes the uses as two arrays, workspace ids and
// units. locked holds each named workspace that exists, locked, as it
// stands (in READ COMMITTED a row another call changed meanwhile is read
// again once that call commits); used updates those whose use fits; each
// use is answered once, by its number.
const useAIUnitsStatement = `
WITH uses AS (
	SELECT u.n, u.id, u.units
	  FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS u(id, units, n)
), locked AS (
	SELECT w.id, w.plan_name, w.modules, w.ai_used, w.ai_limit, u.units
	  FROM ` + Schema + `.workspaces w JOIN uses u ON u.id = w.id
	 ORDER BY w.id
	   FOR UPDATE OF w
), used AS (
	UPDATE ` + Schema + `.workspaces w
	   SET ai_used = GREATEST(l.ai_used + l.units, 0)
	  FROM locked l
	 WHERE w.id = l.id AND (l.units <= 0 OR l.ai_used + l.units <= l.ai_limit)
	RETURNING w.id, w.ai_used
)
SELECT u.n, l.id IS NOT NULL, d.id IS NOT NULL, COALESCE(l.plan_name, ''), COALESCE(l.modules, '{}'),
       COALESCE(d.ai_used, l.ai_used, 0), COALESCE(l.ai_limit, 0)
  FROM uses u LEFT JOIN locked l ON l.id = u.id LEFT JOIN used d ON d.id = u.id`
