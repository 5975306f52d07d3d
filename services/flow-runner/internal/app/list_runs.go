package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// RunPage is one page of a workspace's runs and the cursor to the next.
type RunPage struct {
	Runs []catalog.RunSummary
	// NextBefore, passed back as q.Before, gives the next page; nil on the
	// last page.
	NextBefore *time.Time
}

// ListRuns returns a page of the workspace's runs, newest first, for its
// operators. q.Limit is paging.DefaultLimit when zero (the port bounds
// it); q.At is ignored. A q.FlowID that is not a flow of the workspace is
// catalog.ErrFlowNotFound. Runs started in the same microsecond are never
// split across pages (paging.Paginate).
func (a *App) ListRuns(ctx context.Context, workspaceID string, q catalog.RunQuery) (RunPage, error) {
	if q.FlowID != "" {
		if _, err := a.flows.Get(ctx, workspaceID, q.FlowID); err != nil {
			return RunPage{}, err
		}
	}
	if q.Limit == 0 {
		q.Limit = paging.DefaultLimit
	}
	fetch := func(before, at *time.Time, limit int) ([]catalog.RunSummary, error) {
		p := q
		p.Before, p.At, p.Limit = before, at, limit
		return a.runs.List(ctx, workspaceID, p)
	}
	stamp := func(r catalog.RunSummary) time.Time { return r.StartedAt }
	rows, next, err := paging.Paginate(q.Before, q.Limit, fetch, stamp)
	if err != nil {
		return RunPage{}, err
	}
	return RunPage{Runs: rows, NextBefore: next}, nil
}
