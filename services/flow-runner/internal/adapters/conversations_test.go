package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// answering is a Caller whose every call answers err.
type answering struct{ err error }

func (a answering) CallJSON(context.Context, string, string, string, string, string, any, any) error {
	return a.err
}

func (a answering) CallRaw(context.Context, string, string, *rpcv1.Request, any) error { return a.err }

// TestConversationsRefusals: messaging's refusals for good (4xx, and 502
// platform_error) are app.ErrSendRefused; what a retry may cure
// (unavailable, failing, rate limited, timed out, unreachable, a send
// still in progress under its key) is not.
func TestConversationsRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err     error
		refused bool
	}{
		{nil, false},
		{errs.New(http.StatusConflict, "conversation_handed_over", "handed over"), true},
		{errs.New(http.StatusUnprocessableEntity, "window_closed", "the 24-hour window is closed"), true},
		{errs.New(http.StatusNotFound, "conversation_not_found", "no such conversation"), true},
		{errs.New(http.StatusBadRequest, errs.CodeInvalidRequest, "bad"), true},
		{errs.New(http.StatusForbidden, "forbidden", "blocked by the user"), true},
		{errs.New(http.StatusBadGateway, errs.CodePlatformError, "the platform said no"), true},
		// The same key's first send, still in progress (its instance
		// died mid-send), is sent by a retry once messaging takes it over.
		{errs.New(http.StatusConflict, idempotency.CodeInProgress, "in progress"), false},
		{errs.New(http.StatusBadGateway, "bad_gateway", "upstream failed"), false},
		{errs.New(http.StatusServiceUnavailable, "unavailable", "try later"), false},
		{errs.New(http.StatusInternalServerError, "internal_error", "oops"), false},
		{errs.New(http.StatusTooManyRequests, "rate_limited", "slow down"), false},
		{errs.New(http.StatusRequestTimeout, "timeout", "too slow"), false},
		{errs.New(http.StatusGatewayTimeout, "timeout", "too slow"), false},
		{fmt.Errorf("call messaging: %w", errors.New("nats: no responders")), false},
		{context.DeadlineExceeded, false},
	} {
		conv := NewConversations(adminclient.New(answering{tc.err}))
		ctx := context.Background()
		for what, err := range map[string]error{
			"send":       conv.Send(ctx, "ws", "c", "k", "r", run.Message{Type: "text", Text: "hi"}),
			"draft":      conv.Draft(ctx, "ws", "c", "k", "r", []run.Message{{Type: "text", Text: "hi"}}),
			"handover":   conv.HandOver(ctx, "ws", "c", "why"),
			"resume":     conv.ResumeAI(ctx, "ws", "c"),
			"tags":       conv.AddTags(ctx, "ws", "c", []string{"a"}),
			"assign":     conv.Assign(ctx, "ws", "c", "ann@example.com"),
			"unanswered": conv.MarkUnanswered(ctx, "ws", "c", app.UnansweredAILimitReached),
		} {
			switch {
			case tc.err == nil && err != nil:
				t.Errorf("%s with no error: %v", what, err)
			case tc.err == nil:
			case errors.Is(err, app.ErrSendRefused) != tc.refused:
				t.Errorf("%s answered %v: %v, refused %v, want %v", what, tc.err, err, !tc.refused, tc.refused)
			case !tc.refused && !errors.Is(err, tc.err):
				t.Errorf("%s: the transient error %v is lost: %v", what, tc.err, err)
			}
		}
	}
}

// TestWorkspacesGone: a workspace the gateway answers 404 for is
// app.ErrWorkspaceNotFound (its turns can never be answered); an outage
// is not.
func TestWorkspacesGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gone := NewWorkspaces(adminclient.New(answering{errs.New(http.StatusNotFound, "workspace_not_found", "no such workspace")}))
	if _, err := gone.Workspace(ctx, "ws"); !errors.Is(err, app.ErrWorkspaceNotFound) {
		t.Fatalf("404: %v, want ErrWorkspaceNotFound", err)
	}
	down := NewWorkspaces(adminclient.New(answering{errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "gateway is not running")}))
	if _, err := down.Workspace(ctx, "ws"); err == nil || errors.Is(err, app.ErrWorkspaceNotFound) {
		t.Fatalf("503: %v, want a transient error", err)
	}
}

// workspaceAnswer is a Caller answering every call with ws.
type workspaceAnswer struct{ ws gatewayapi.Workspace }

func (a workspaceAnswer) CallJSON(_ context.Context, _, _, _, _, _ string, _, out any) error {
	*out.(*gatewayapi.WorkspaceAnswer) = gatewayapi.WorkspaceAnswer{Workspace: a.ws}
	return nil
}

func (a workspaceAnswer) CallRaw(context.Context, string, string, *rpcv1.Request, any) error {
	return nil
}

// TestWorkspacesReadThePlansModules: the gateway's module names become
// the plan a chat run is held to.
func TestWorkspacesReadThePlansModules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		modules []string
		want    app.Plan
	}{
		{nil, app.Plan{}},
		{[]string{gatewayapi.ModuleDeveloperAPI, gatewayapi.ModuleFlows}, app.Plan{Flows: true}},
		{gatewayapi.Modules, app.Plan{Flows: true, Modules: run.Modules{FlowAI: true, FlowScript: true}}},
	} {
		ws := gatewayapi.Workspace{Name: "Shop", Plan: gatewayapi.Plan{Modules: tc.modules, AIUsed: 3, AILimit: 10}}
		got, err := NewWorkspaces(adminclient.New(workspaceAnswer{ws})).Workspace(context.Background(), "ws")
		want := app.Workspace{Name: "Shop", Plan: tc.want, AIUsed: 3, AILimit: 10}
		if err != nil || got != want {
			t.Fatalf("modules %v: %+v, %v; want %+v", tc.modules, got, err, want)
		}
	}
}

// countingWorkspaces is a Caller that answers the workspace named by the
// call with ai_used the number of calls so far, or err.
type countingWorkspaces struct {
	mu    sync.Mutex
	calls int
	err   error
}

func (c *countingWorkspaces) CallJSON(_ context.Context, _, _, _, _, _ string, _, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return c.err
	}
	*out.(*gatewayapi.WorkspaceAnswer) = gatewayapi.WorkspaceAnswer{Workspace: gatewayapi.Workspace{
		Name: "Shop", Plan: gatewayapi.Plan{AIUsed: int64(c.calls), AILimit: 10},
	}}
	return nil
}

func (c *countingWorkspaces) CallRaw(context.Context, string, string, *rpcv1.Request, any) error {
	return nil
}

// TestWorkspacesReadOnceAMaxAge: a workspace is asked of the gateway once
// every WorkspaceMaxAge, each workspace apart; a failed read is not kept.
func TestWorkspacesReadOnceAMaxAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gateway := &countingWorkspaces{}
	ws := NewWorkspaces(adminclient.New(gateway))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ws.known.Now = func() time.Time { return now }
	used := func(id string) int64 {
		t.Helper()
		got, err := ws.Workspace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.AIUsed
	}
	if u := used("a"); u != 1 {
		t.Fatalf("first read: ai_used %d, want 1", u)
	}
	now = now.Add(WorkspaceMaxAge - time.Millisecond)
	if u := used("a"); u != 1 || gateway.calls != 1 {
		t.Fatalf("within the max age: ai_used %d after %d calls, want 1 after 1", u, gateway.calls)
	}
	if u := used("b"); u != 2 {
		t.Fatalf("another workspace: ai_used %d, want 2 (read anew)", u)
	}
	now = now.Add(time.Millisecond)
	if u := used("a"); u != 3 {
		t.Fatalf("at the max age: ai_used %d, want 3 (read anew)", u)
	}
	now = now.Add(WorkspaceMaxAge)
	gateway.err = errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "gateway is not running")
	if _, err := ws.Workspace(ctx, "a"); err == nil {
		t.Fatal("an outdated workspace answered while the gateway is down")
	}
	gateway.err = nil
	if u := used("a"); u != 5 {
		t.Fatalf("after a failed read: ai_used %d, want 5 (read anew)", u)
	}
}
