package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/rpc"
)

// TestOutcomeUnknown sorts a form's work failing: a service's refusal, the
// console's name for one and a call that reached no service did nothing;
// anything else may have done the work.
func TestOutcomeUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"a 4xx", errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "slow down"), false},
		{"a 4xx, wrapped", fmt.Errorf("create API key: %w", errs.InvalidRequest("name is too long")), false},
		{"no service running", fmt.Errorf("send reply: %w", errors.Join(errs.ServiceUnavailable("messaging is not running"), rpc.ErrNotSent)), false},
		{"the console's name for a 404", ErrConversationNotFound, false},
		{"a flow refused", &FlowRefusedError{Problem: FlowProblem{Reason: "unreachable"}}, false},
		{"a workspace gone", ErrWorkspaceNotFound, false},
		{"a flow gone", ErrFlowNotFound, false},
		{"no answer in time", errs.ServiceUnavailable("gateway did not answer in time"), true},
		{"a 5xx", fmt.Errorf("publish flow: %w", errs.Internal()), true},
		{"a 502 from the platform", errs.New(http.StatusBadGateway, errs.CodePlatformError, "telegram: timeout"), true},
		{"cancelled mid-call", fmt.Errorf("call messaging: %w", context.Canceled), true},
		{"an answer that could not be read", errors.New("decode gateway response: unexpected EOF"), true},
	}
	for _, tt := range tests {
		if got := outcomeUnknown(tt.give); got != tt.want {
			t.Errorf("%s: outcomeUnknown(%v) = %v, want %v", tt.name, tt.give, got, tt.want)
		}
	}
}
