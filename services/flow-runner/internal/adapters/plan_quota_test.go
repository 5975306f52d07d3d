package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// planGateway is the gateway's AI-units route in memory, on the wire's
// bodies: each use of a call is all or nothing for its workspace, as the
// gateway's statement is, and every call is recorded. Each call waits for
// a value of hold (closed, none waits) after telling started.
type planGateway struct {
	mu     sync.Mutex
	used   map[string]int64
	limits map[string]int64 // a workspace not in it is unknown
	calls  []map[string]int64
	err    error // when set, every call fails with it
	// meanwhile, when set, runs before call n (from 0) is answered: what
	// another instance does at that moment.
	meanwhile func(n int)
	hold      chan struct{}
	started   chan map[string]int64
}

func newPlanGateway(limits map[string]int64) *planGateway {
	return &planGateway{used: map[string]int64{}, limits: limits,
		hold: make(chan struct{}), started: make(chan map[string]int64, 1000)}
}

func (g *planGateway) CallJSON(_ context.Context, service, endpoint, _, method, path string, in, out any) error {
	if service != "gateway" || endpoint != "admin" || method != http.MethodPost || path != "/admin/ai-units" {
		return fmt.Errorf("not the gateway's AI units: %s %s %s %s", service, endpoint, method, path)
	}
	var body gatewayapi.UseAIUnits
	if err := roundTrip(in, &body); err != nil {
		return err
	}
	call := map[string]int64{}
	for _, u := range body.Uses {
		if _, dup := call[u.WorkspaceID]; dup {
			return errs.InvalidRequest("uses[].workspace_id: %s twice", u.WorkspaceID)
		}
		call[u.WorkspaceID] = u.Units
	}
	g.started <- call
	<-g.hold
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, call)
	if g.err != nil {
		return g.err
	}
	if g.meanwhile != nil {
		g.meanwhile(len(g.calls) - 1)
	}
	var answer gatewayapi.AIUnitsAnswer
	for _, u := range body.Uses {
		a := gatewayapi.AIUnitsUsed{WorkspaceID: u.WorkspaceID}
		limit, ok := g.limits[u.WorkspaceID]
		switch {
		case !ok:
			a.Error = &gatewayapi.AIUnitsRefusal{Code: "workspace_not_found", Message: "workspace not found"}
		case u.Units > 0 && g.used[u.WorkspaceID]+u.Units > limit:
			a.Error = &gatewayapi.AIUnitsRefusal{Code: errs.CodeQuotaExceeded, Message: "the plan's AI units are used up"}
		default:
			g.used[u.WorkspaceID] = max(g.used[u.WorkspaceID]+u.Units, 0)
		}
		if ok {
			a.AIUsed, a.AILimit = g.used[u.WorkspaceID], limit
		}
		answer.Uses = append(answer.Uses, a)
	}
	return roundTrip(answer, out)
}

// roundTrip decodes what encoding v gives into out, as the wire would.
func roundTrip(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (g *planGateway) CallRaw(context.Context, string, string, *rpcv1.Request, any) error {
	return errors.New("not the gateway's AI units")
}

func (g *planGateway) usedOf(ws string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used[ws]
}

func (g *planGateway) allCalls() []map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

// reserveWhileHeld starts one Reserve of first, and once its call is
// under way a Reserve of each of queued, one after the other, each queued
// behind that call in turn; then lets the calls go and returns the
// queued Reserves' answers, in their order.
func reserveWhileHeld(t *testing.T, q *PlanQuota, g *planGateway, first string, queued ...string) []error {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := q.Reserve(context.Background(), first); err != nil {
			t.Errorf("the first reserve: %v", err)
		}
	})
	if got := <-g.started; !maps.Equal(got, map[string]int64{first: 1}) {
		t.Fatalf("the first call %v, want one unit of %s", got, first)
	}
	answers := make([]error, len(queued))
	for i, ws := range queued {
		wg.Go(func() { answers[i] = q.Reserve(context.Background(), ws) })
		wait.Until(t, 5*time.Second, "the reserves queued behind the call", func() bool { return q.reserves.Queued() == i+1 })
	}
	close(g.hold)
	wg.Wait()
	return answers
}

// repeat is n times ws.
func repeat(ws string, n int) []string { return slices.Repeat([]string{ws}, n) }

// TestPlanQuotaSharesCallsAcrossWorkspaces: the reserves of every
// workspace that arrive while a call is under way go as one call, each
// workspace for as many units as it has reserves; a lone reserve goes at
// once; a refund is one unit back.
func TestPlanQuotaSharesCallsAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	g := newPlanGateway(map[string]int64{a: 100, b: 100, c: 100})
	q := NewPlanQuota(g)

	queued := slices.Concat([]string{b, a, c}, repeat(a, 2), repeat(c, 3), []string{b})
	for i, err := range reserveWhileHeld(t, q, g, a, queued...) {
		if err != nil {
			t.Errorf("reserve %d: %v", i, err)
		}
	}
	want := []map[string]int64{{a: 1}, {a: 3, b: 2, c: 4}}
	if got := g.allCalls(); !slices.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("calls %v, want %v: 10 reserves in 2 calls", got, want)
	}
	// Alone (hold is closed now), a reserve is a call of its own; a
	// refund is one unit back. A workspace id in capitals is the same
	// workspace.
	if err := q.Reserve(context.Background(), strings.ToUpper(b)); err != nil {
		t.Fatal(err)
	}
	if err := q.Refund(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	want = append(want, map[string]int64{b: 1}, map[string]int64{a: -1})
	if got := g.allCalls(); !slices.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if g.usedOf(a) != 3 || g.usedOf(b) != 3 || g.usedOf(c) != 4 {
		t.Fatalf("used %d, %d and %d; want 3, 3 and 4", g.usedOf(a), g.usedOf(b), g.usedOf(c))
	}
}

// TestPlanQuotaAtTheLimit: in one shared call two workspaces ask for more
// than they have left (N left, N+k asked) and a third for what it has
// left: the third is granted, and each of the two is asked again for its
// N units, in one call; exactly its first N reserves are granted, in the
// order they came, and its k others are refused quota_exceeded with no
// call more.
func TestPlanQuotaAtTheLimit(t *testing.T) {
	t.Parallel()
	first, a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	g := newPlanGateway(map[string]int64{first: 100, a: 5, b: 3, c: 2})
	g.used[b] = 1
	q := NewPlanQuota(g)
	queued := []string{a, b, c, a, a, b, a, b, a, c, a, a, b} // a 7 (5 left), b 4 (2 left), c 2 (2 left)
	answers := reserveWhileHeld(t, q, g, first, queued...)
	granted := map[string]int{}
	for i, ws := range queued {
		switch err := answers[i]; {
		case err == nil:
			granted[ws]++
			if n := map[string]int{a: 5, b: 2, c: 2}[ws]; granted[ws] > n {
				t.Errorf("reserve %d of %s granted after its workspace's %d units", i, ws, n)
			}
		case !errors.Is(err, run.ErrQuotaExceeded):
			t.Errorf("reserve %d: %v", i, err)
		}
	}
	if granted[a] != 5 || granted[b] != 2 || granted[c] != 2 {
		t.Fatalf("granted %v, want 5 of a, 2 of b, 2 of c", granted)
	}
	if g.usedOf(a) != 5 || g.usedOf(b) != 3 || g.usedOf(c) != 2 {
		t.Fatalf("used %d, %d and %d; want the limits", g.usedOf(a), g.usedOf(b), g.usedOf(c))
	}
	want := []map[string]int64{{first: 1}, {a: 7, b: 4, c: 2}, {a: 5, b: 2}}
	if got := g.allCalls(); !slices.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

// TestPlanQuotaAtTheLimitWhileOthersUseIt: units another instance takes
// between the refusal and the next call leave fewer: the next call is
// refused too, and the workspace is asked again for what that refusal
// says is left.
func TestPlanQuotaAtTheLimitWhileOthersUseIt(t *testing.T) {
	t.Parallel()
	first, a := uuid.NewString(), uuid.NewString()
	g := newPlanGateway(map[string]int64{first: 100, a: 5})
	g.meanwhile = func(n int) {
		if n == 2 {
			g.used[a] += 2
		}
	}
	q := NewPlanQuota(g)
	answers := reserveWhileHeld(t, q, g, first, repeat(a, 7)...)
	for i, err := range answers {
		if want := i < 3; (err == nil) != want || (err != nil && !errors.Is(err, run.ErrQuotaExceeded)) {
			t.Errorf("reserve %d: %v, want granted %v", i, err, want)
		}
	}
	want := []map[string]int64{{first: 1}, {a: 7}, {a: 5}, {a: 3}}
	if got := g.allCalls(); !slices.EqualFunc(got, want, maps.Equal) || g.usedOf(a) != 5 {
		t.Fatalf("calls %v (%d used), want %v", got, g.usedOf(a), want)
	}
}

// TestPlanQuotaErrorForAll: a shared call that fails fails every reserve
// that shared it, of every workspace, with the gateway's error, and is
// not made again.
func TestPlanQuotaErrorForAll(t *testing.T) {
	t.Parallel()
	first, a, b := uuid.NewString(), uuid.NewString(), uuid.NewString()
	g := newPlanGateway(map[string]int64{first: 100, a: 100, b: 100})
	down := errs.New(http.StatusServiceUnavailable, "unavailable", "try later")
	q := NewPlanQuota(g)
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.Reserve(context.Background(), first) })
	<-g.started
	g.mu.Lock()
	g.err = down
	g.mu.Unlock()
	answers := make([]error, 4)
	for i, ws := range []string{a, b, a, b} {
		wg.Go(func() { answers[i] = q.Reserve(context.Background(), ws) })
		wait.Until(t, 5*time.Second, "the reserves queued", func() bool { return q.reserves.Queued() == i+1 })
	}
	close(g.hold)
	wg.Wait()
	for i, err := range answers {
		if !errors.Is(err, run.ErrQuotaUnavailable) || !errors.Is(err, down) {
			t.Errorf("reserve %d = %v, want unavailable with the gateway's error", i, err)
		}
	}
	if got := g.allCalls(); len(got) != 2 || !maps.Equal(got[1], map[string]int64{a: 2, b: 2}) {
		t.Fatalf("calls %v, want the first and {a: 2, b: 2}", got)
	}
}

// TestPlanQuotaUnknownWorkspace: a workspace the gateway does not know
// fails its own reserves, not the others of the call; an id that is no
// workspace id fails without a call.
func TestPlanQuotaUnknownWorkspace(t *testing.T) {
	t.Parallel()
	first, known, unknown := uuid.NewString(), uuid.NewString(), uuid.NewString()
	g := newPlanGateway(map[string]int64{first: 100, known: 100})
	q := NewPlanQuota(g)
	answers := reserveWhileHeld(t, q, g, first, unknown, known, unknown)
	for i, err := range answers {
		if known := i == 1; (err == nil) != known || (err != nil && (errors.Is(err, run.ErrQuotaExceeded) || errors.Is(err, run.ErrQuotaUnavailable) || !strings.Contains(err.Error(), "workspace_not_found"))) {
			t.Errorf("reserve %d: %v", i, err)
		}
	}
	for _, bad := range []string{"not-a-uuid", "urn:uuid:" + known} {
		if err := q.Reserve(context.Background(), bad); err == nil || errors.Is(err, run.ErrQuotaExceeded) || errors.Is(err, run.ErrQuotaUnavailable) {
			t.Errorf("reserve of %q: %v", bad, err)
		}
		if err := q.Refund(context.Background(), bad); err == nil {
			t.Errorf("refund of %q: no error", bad)
		}
	}
	if got := g.allCalls(); len(got) != 2 || !maps.Equal(got[1], map[string]int64{known: 1, unknown: 2}) {
		t.Fatalf("calls %v", got)
	}
}
