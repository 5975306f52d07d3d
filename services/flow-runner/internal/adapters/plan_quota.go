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
	// reserves has a Committer for each workspace with a reserve under
	// way, dropped when its last caller returns, so that the map holds no
	// more than the workspaces being answered now.
	reserves map[string]*reserver
}

// reserver is a workspace's Committer and how many callers use it.
type reserver struct {
	commit *groupcommit.Committer[struct{}]
	users  int
}

var _ run.Quota = (*PlanQuota)(nil)

// maxUnitsPerCall is the most units one call uses: the gateway's bound.
const maxUnitsPerCall = 1000

// NewPlanQuota returns the plan's AI units, reached through client.
func NewPlanQuota(client adminclient.Caller) *PlanQuota {
	return &PlanQuota{client: client, reserves: map[string]*reserver{}}
}

// Reserve implements run.Quota. A caller gone before its call's answer
// may have had its unit used; the engine takes such a run as interrupted
// either way.
func (q *PlanQuota) Reserve(ctx context.Context, workspaceID string) error {
	r := q.join(workspaceID)
	defer q.leave(workspaceID, r)
	return r.commit.Do(ctx, struct{}{})
}

// Refund implements run.Quota.
func (q *PlanQuota) Refund(ctx context.Context, workspaceID string) error {
	return q.use(ctx, workspaceID, -1)
}

// join is the workspace's reserver, with the caller counted: one call
// under way at a time, and no wait before it.
func (q *PlanQuota) join(workspaceID string) *reserver {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.reserves[workspaceID]
	if !ok {
		r = &reserver{commit: groupcommit.New(maxUnitsPerCall, 1, 0, nil, func(ctx context.Context, batch []*groupcommit.Job[struct{}]) error {
			q.reserveAll(ctx, workspaceID, batch)
			return nil
		})}
		q.reserves[workspaceID] = r
	}
	r.users++
	return r
}

// leave uncounts a caller of r and drops r with its last. A call r still
// has under way for a caller gone early ends on its own; a reserve that
// comes meanwhile starts a new reserver, whose call may then run beside
// it, which the gateway's atomic update allows.
func (q *PlanQuota) leave(workspaceID string, r *reserver) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.users--; r.users == 0 && q.reserves[workspaceID] == r {
		delete(q.reserves, workspaceID)
	}
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
