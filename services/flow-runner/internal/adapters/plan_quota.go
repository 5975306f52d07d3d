package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/groupcommit"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// PlanQuota is the run engine's Quota over the gateway, which owns the
// plan: units are used through its admin endpoint (POST /admin/ai-units),
// all or nothing per workspace in one statement there, so every
// flow-runner instance shares the same count and none reads the accounts
// schema.
//
// Reserves of every workspace share calls (group commit,
// pkg/groupcommit): one goes at once, and those that arrive while it is
// under way go together as the next call, each workspace for as many
// units as it has reserves in it. A workspace whose use is refused
// quota_exceeded is asked again for the units the refusal says are left,
// so that the reserves that still fit are granted, in the order they came,
// and exactly the rest refused; any other error is every caller's of that
// call.
type PlanQuota struct {
	client   adminclient.Caller
	reserves *groupcommit.Committer[string]
}

var _ run.Quota = (*PlanQuota)(nil)

// maxReservesPerCall is the most reserves one call carries: the gateway's
// bounds, both on the workspaces of a call and on one workspace's units.
const maxReservesPerCall = 1000

// NewPlanQuota returns the plan's AI units, reached through client.
func NewPlanQuota(client adminclient.Caller) *PlanQuota {
	q := &PlanQuota{client: client}
	// One call under way at a time, and no wait before it.
	q.reserves = groupcommit.New(maxReservesPerCall, 1, 0, nil, func(ctx context.Context, batch []*groupcommit.Job[string]) error {
		q.reserveAll(ctx, batch)
		return nil
	})
	return q
}

// Reserve implements run.Quota. A caller gone before its call's answer
// may have had its unit used; the engine takes such a run as interrupted
// either way.
func (q *PlanQuota) Reserve(ctx context.Context, workspaceID string) error {
	if !ids.Valid(workspaceID) {
		return notAWorkspace()
	}
	return q.reserves.Do(ctx, ids.Canonical(workspaceID))
}

// Refund implements run.Quota.
func (q *PlanQuota) Refund(ctx context.Context, workspaceID string) error {
	if !ids.Valid(workspaceID) {
		return notAWorkspace()
	}
	answers, err := q.use(ctx, []gatewayapi.AIUnitsUse{{WorkspaceID: workspaceID, Units: -1}})
	if err != nil {
		return err
	}
	return answers[0].err
}

// notAWorkspace answers a use for an id no workspace has, without a call
// (the gateway would refuse the whole call, the others' uses with it). It
// does not echo the id, which may be anything.
func notAWorkspace() error {
	return errors.New("use AI units: workspace_not_found: the workspace id is no id")
}

// reserveAll uses one unit for each job of batch, each workspace's in
// one use of one call, and sets each job's answer.
func (q *PlanQuota) reserveAll(ctx context.Context, batch []*groupcommit.Job[string]) {
	var order []string // the workspaces, in the order of their first job
	jobs := map[string][]*groupcommit.Job[string]{}
	for _, j := range batch {
		if _, ok := jobs[j.Item]; !ok {
			order = append(order, j.Item)
		}
		jobs[j.Item] = append(jobs[j.Item], j)
	}
	uses := make([]gatewayapi.AIUnitsUse, len(order))
	for i, ws := range order {
		uses[i] = gatewayapi.AIUnitsUse{WorkspaceID: ws, Units: int64(len(jobs[ws]))}
	}
	answers, err := q.use(ctx, uses)
	if err != nil {
		for _, j := range batch {
			j.Err = err
		}
		return
	}
	var full []*shortOfUnits
	for i, ws := range order {
		a := answers[i]
		if len(jobs[ws]) > 1 && errors.Is(a.err, run.ErrQuotaExceeded) {
			full = append(full, &shortOfUnits{workspaceID: ws, jobs: jobs[ws], left: a.AILimit - a.AIUsed, err: a.err})
			continue
		}
		for _, j := range jobs[ws] {
			j.Err = a.err
		}
	}
	q.reserveWhatIsLeft(ctx, full)
}

// shortOfUnits is a workspace whose reserves did not all fit: its jobs not
// answered yet, in order, and the units its plan had left when last seen.
type shortOfUnits struct {
	workspaceID string
	jobs        []*groupcommit.Job[string]
	left        int64
	err         error // the last refusal
}

// reserveWhatIsLeft answers the jobs of workspaces whose use was refused:
// each is asked, in one call for them all, for as many units as it had
// left, granting its first jobs; the rest are refused once the plan is
// seen full. A refusal shows fewer units left than were asked for, so
// each workspace is asked again at most as many times as it has jobs.
func (q *PlanQuota) reserveWhatIsLeft(ctx context.Context, full []*shortOfUnits) {
	for len(full) > 0 {
		var asked []*shortOfUnits
		var uses []gatewayapi.AIUnitsUse
		for _, r := range full {
			if r.left <= 0 {
				for _, j := range r.jobs {
					j.Err = r.err
				}
				continue
			}
			asked = append(asked, r)
			uses = append(uses, gatewayapi.AIUnitsUse{WorkspaceID: r.workspaceID, Units: min(r.left, int64(len(r.jobs)))})
		}
		if len(asked) == 0 {
			return
		}
		answers, err := q.use(ctx, uses)
		full = full[:0]
		for i, r := range asked {
			n := int(uses[i].Units)
			switch {
			case err != nil:
				for _, j := range r.jobs {
					j.Err = err
				}
				continue
			case answers[i].err == nil: // the first n jobs are granted
				r.jobs, r.left = r.jobs[n:], answers[i].AILimit-answers[i].AIUsed
			case errors.Is(answers[i].err, run.ErrQuotaExceeded):
				r.left, r.err = answers[i].AILimit-answers[i].AIUsed, answers[i].err
			default:
				for _, j := range r.jobs {
					j.Err = answers[i].err
				}
				continue
			}
			if len(r.jobs) > 0 {
				full = append(full, r)
			}
		}
	}
}

// aiUnitsAnswer is the gateway's answer to one use: the plan's units,
// and err, run.ErrQuotaExceeded or another refusal, when it was refused.
type aiUnitsAnswer struct {
	gatewayapi.AIUnitsUsed
	err error
}

// use makes uses in one call and answers each; an error means the call
// was not answered, and no use is known to have been made.
func (q *PlanQuota) use(ctx context.Context, uses []gatewayapi.AIUnitsUse) ([]aiUnitsAnswer, error) {
	var out gatewayapi.AIUnitsAnswer
	err := q.client.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost, "/admin/ai-units", gatewayapi.UseAIUnits{Uses: uses}, &out)
	if e, ok := errs.As(err); err != nil && (!ok || e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout) {
		// Not the plan's answer: the gateway could not give one.
		return nil, fmt.Errorf("use the AI units of %d workspaces: %w: %w", len(uses), run.ErrQuotaUnavailable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("use the AI units of %d workspaces: %w", len(uses), err)
	}
	if len(out.Uses) != len(uses) {
		return nil, fmt.Errorf("use the AI units of %d workspaces: %w: %d answers", len(uses), run.ErrQuotaUnavailable, len(out.Uses))
	}
	answers := make([]aiUnitsAnswer, len(uses))
	for i, a := range out.Uses {
		answers[i].AIUnitsUsed = a
		switch {
		case a.Error == nil:
		case a.Error.Code == errs.CodeQuotaExceeded:
			answers[i].err = run.ErrQuotaExceeded
		default:
			answers[i].err = fmt.Errorf("use %d AI units of %s: %s: %s", uses[i].Units, uses[i].WorkspaceID, a.Error.Code, a.Error.Message)
		}
	}
	return answers, nil
}
