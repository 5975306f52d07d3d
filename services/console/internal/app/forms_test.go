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

// TestOnlyAWriteLeavesTheOutcomeUnknown sorts a form's work failing: a
// call that writes and gets a service's refusal, or reaches no service,
// did nothing; one not answered in time, cut off, answered 5xx or whose
// answer could not be read may have done the work. Whatever fails outside
// such a call (a read before the write, the console's own refusal) did
// nothing, however it is worded.
func TestOnlyAWriteLeavesTheOutcomeUnknown(t *testing.T) {
	t.Parallel()
	timeout := errs.ServiceUnavailable("dispatcher did not answer in time")
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"a write refused (4xx)", failure(written(0, errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "slow down"))), false},
		{"a write refused, worded by the console", fmt.Errorf("create API key: %w", failure(written(0, errs.InvalidRequest("name is too long")))), false},
		{"a write that reached no service", failure(written(0, errors.Join(errs.ServiceUnavailable("messaging is not running"), rpc.ErrNotSent))), false},
		{"a write not answered in time", failure(written(0, timeout)), true},
		{"a write answered 5xx, wrapped", fmt.Errorf("publish flow: %w", failure(written(0, errs.Internal()))), true},
		{"a write answered 502 by the platform", failure(written(0, errs.New(http.StatusBadGateway, errs.CodePlatformError, "telegram: timeout"))), true},
		{"a write cancelled mid-call", failure(written(0, fmt.Errorf("call messaging: %w", context.Canceled))), true},
		{"a write whose answer could not be read", failure(written(0, errors.New("decode gateway response: unexpected EOF"))), true},
		{"a read not answered in time", fmt.Errorf("get webhook: %w", timeout), false},
		{"a read answered 5xx", errs.Internal(), false},
		{"the console's name for a refusal", ErrWorkspaceNotFound, false},
		{"a flow refused", &FlowRefusedError{Problem: FlowProblem{Reason: "unreachable"}}, false},
	}
	for _, tt := range tests {
		var unsettled *unsettledWrite
		if got := errors.As(tt.give, &unsettled); got != tt.want {
			t.Errorf("%s: outcome unknown = %v, want %v (%v)", tt.name, got, tt.want, tt.give)
		}
	}
	if _, err := written(1, nil); err != nil {
		t.Errorf("a write that succeeded = %v", err)
	}
}

// failure is the error of a call's result.
func failure(_ int, err error) error { return err }
