package adapters

import (
	"context"
	"fmt"
	"net/http"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// PlanQuota is the run engine's Quota over the gateway, which owns the
// plan: each unit is one call to its admin endpoint (POST
// /admin/workspaces/:id/ai-units), one atomic update of the plan's ai_used
// there, so every flow-runner instance shares the same count and none
// reads the accounts schema.
type PlanQuota struct {
	client *rpc.Client
}

var _ run.Quota = (*PlanQuota)(nil)

// NewPlanQuota returns the plan's AI units, reached through client.
func NewPlanQuota(client *rpc.Client) *PlanQuota { return &PlanQuota{client: client} }

// Reserve implements run.Quota.
func (q *PlanQuota) Reserve(ctx context.Context, workspaceID string) error {
	return q.use(ctx, workspaceID, 1)
}

// Refund implements run.Quota.
func (q *PlanQuota) Refund(ctx context.Context, workspaceID string) error {
	return q.use(ctx, workspaceID, -1)
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
