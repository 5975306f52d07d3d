package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/groupcommit"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// PlanQuota is the run engine's Quota over the gateway, which owns the
// plan: units are used through its admin endpoint (POST
// /admin/workspaces/:id/ai-units), one atomic, all-or-nothing update of
// the plan's ai_used there, so every flow-runner instance shares the same
// count and none reads the accounts schema.
//
// Reserves of one workspace share calls (group commit, pkg/groupcommit):
// one goes at once, and those that arrive while it is under way go
// together as the next call, for as many units as they are. A shared call
// refused quota_exceeded is made again one unit at a time, so that the
// units that still fit are granted and exactly the rest refused; any
// other error is every caller's.
type PlanQuota struct {
	client adminclient.Caller

	mu sync.Mutex
	// reserves has a Committer for each workspace met since the start
	// (an idle one holds no goroutine and no job).
	reserves map[string]*groupcommit.Committer[struct{}]
}

var _ run.Quota = (*PlanQuota)(nil)

// maxUnitsPerCall is the most units one call uses: the gateway's bound.
const maxUnitsPerCall = 1000

// NewPlanQuota returns the plan's AI units, reached through client.
func NewPlanQuota(client adminclient.Caller) *PlanQuota {
	return &PlanQuota{client: client, reserves: map[string]*groupcommit.Committer[struct{}]{}}
}

// Reserve implements run.Quota. A caller gone before its call's answer
// may have had its unit used; the engine takes such a run as interrupted
// either way.
func (q *PlanQuota) Reserve(ctx context.Context, workspaceID string) error {
	return q.reserver(workspaceID).Do(ctx, struct{}{})
}

// Refund implements run.Quota.
func (q *PlanQuota) Refund(ctx context.Context, workspaceID string) error {
	return q.use(ctx, workspaceID, -1)
}

// reserver is the workspace's Committer: one call under way at a time,
// and no wait before it.
func (q *PlanQuota) reserver(workspaceID string) *groupcommit.Committer[struct{}] {
	q.mu.Lock()
	defer q.mu.Unlock()
	g, ok := q.reserves[workspaceID]
	if !ok {
		g = groupcommit.New(maxUnitsPerCall, 1, 0, nil, func(ctx context.Context, batch []*groupcommit.Job[struct{}]) error {
			q.reserveAll(ctx, workspaceID, batch)
			return nil
		})
		q.reserves[workspaceID] = g
	}
	return g
}

// reserveAll uses one unit for each job of batch, in one call, and sets
// each job's answer.
func (q *PlanQuota) reserveAll(ctx context.Context, workspaceID string, batch []*groupcommit.Job[struct{}]) {
	err := q.use(ctx, workspaceID, int64(len(batch)))
	if len(batch) > 1 && errors.Is(err, run.ErrQuotaExceeded) {
		// Not all fit (the call used none): each is asked for alone.
		for _, j := range batch {
			j.Err = q.use(ctx, workspaceID, 1)
		}
		return
	}
	for _, j := range batch {
		j.Err = err
	}
}

func (q *PlanQuota) use(ctx context.Context, workspaceID string, units int64) error {
	err := q.client.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost,
		"/admin/workspaces/"+workspaceID+"/ai-units", gatewayapi.UseAIUnits{Units: units}, nil)
	if e, ok := errs.As(err); ok && e.Code == errs.CodeQuotaExceeded {
		return run.ErrQuotaExceeded
	}
	if e, ok := errs.As(err); err != nil && (!ok || e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout) {
		// Not the plan's answer: the gateway could not give one.
		return fmt.Errorf("use %d AI units: %w: %w", units, run.ErrQuotaUnavailable, err)
	}
	if err != nil {
		return fmt.Errorf("use %d AI units: %w", units, err)
	}
	return nil
}
