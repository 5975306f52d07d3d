package adapters

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// planGateway is the gateway's AI-units endpoint in memory: each call is
// one atomic, all-or-nothing use of a workspace's units, as the gateway's
// UPDATE is, and is recorded. Each call waits for a value of hold (closed,
// none waits) after telling started.
type planGateway struct {
	mu      sync.Mutex
	used    map[string]int64
	limit   int64
	calls   map[string][]int64 // the units of each call, by workspace
	err     error              // when set, every call fails with it
	hold    chan struct{}
	started chan string
}

func newPlanGateway(limit int64) *planGateway {
	return &planGateway{used: map[string]int64{}, limit: limit, calls: map[string][]int64{},
		hold: make(chan struct{}), started: make(chan string, 1000)}
}

func (g *planGateway) CallJSON(_ context.Context, _, _, _, _, path string, in, _ any) error {
	ws := strings.TrimSuffix(strings.TrimPrefix(path, "/admin/workspaces/"), "/ai-units")
	units := in.(gatewayapi.UseAIUnits).Units
	g.started <- ws
	<-g.hold
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[ws] = append(g.calls[ws], units)
	switch {
	case g.err != nil:
		return g.err
	case units > 0 && g.used[ws]+units > g.limit:
		return errs.New(http.StatusConflict, errs.CodeQuotaExceeded, "the plan's AI units are used up")
	}
	g.used[ws] = max(g.used[ws]+units, 0)
	return nil
}

func (g *planGateway) CallRaw(context.Context, string, string, *rpcv1.Request, any) error {
	return errors.New("not the gateway's AI units")
}

func (g *planGateway) usedOf(ws string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used[ws]
}

func (g *planGateway) callsOf(ws string) []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls[ws])
}

// reserveWhileHeld starts one Reserve for ws, and n more once its call
// is under way, all queued behind it; then lets the calls go and returns
// every Reserve's answer.
func reserveWhileHeld(t *testing.T, q *PlanQuota, g *planGateway, ws string, n int) []error {
	t.Helper()
	answers := make(chan error, n+1)
	var wg sync.WaitGroup
	reserve := func() { wg.Go(func() { answers <- q.Reserve(context.Background(), ws) }) }
	reserve()
	if got := <-g.started; got != ws {
		t.Fatalf("a call for %s, want %s", got, ws)
	}
	for range n {
		reserve()
	}
	wait.Until(t, 5*time.Second, "the reserves queued behind the call", func() bool { return queuedReserves(q, ws) == n })
	close(g.hold)
	wg.Wait()
	close(answers)
	var out []error
	for err := range answers {
		out = append(out, err)
	}
	return out
}

// queuedReserves is how many reserves of ws wait behind its call.
func queuedReserves(q *PlanQuota, ws string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.reserves[ws]; ok {
		return r.commit.Queued()
	}
	return 0
}

// TestPlanQuotaSharesCalls: the reserves of a workspace that arrive while
// its call is under way go as one call for as many units; another
// workspace's reserve does not wait for it; a lone reserve goes at once.
func TestPlanQuotaSharesCalls(t *testing.T) {
	t.Parallel()
	g := newPlanGateway(100)
	q := NewPlanQuota(g)

	// Another workspace's reserve is not queued behind a call under way.
	other := make(chan error, 1)
	go func() { other <- q.Reserve(context.Background(), "ws-other") }()
	if got := <-g.started; got != "ws-other" {
		t.Fatalf("a call for %s", got)
	}
	for _, err := range reserveWhileHeld(t, q, g, "ws", 9) {
		if err != nil {
			t.Errorf("reserve: %v", err)
		}
	}
	if err := <-other; err != nil {
		t.Fatalf("the other workspace's reserve: %v", err)
	}
	if got := g.callsOf("ws"); !slices.Equal(got, []int64{1, 9}) {
		t.Fatalf("calls %v, want [1 9]", got)
	}
	// Alone (hold is closed now), a reserve is a call of its own; a
	// refund is one unit back.
	if err := q.Reserve(context.Background(), "ws"); err != nil {
		t.Fatal(err)
	}
	if err := q.Refund(context.Background(), "ws"); err != nil {
		t.Fatal(err)
	}
	if got := g.callsOf("ws"); !slices.Equal(got, []int64{1, 9, 1, -1}) || g.usedOf("ws") != 10 {
		t.Fatalf("calls %v (%d used), want [1 9 1 -1] and 10 used", got, g.usedOf("ws"))
	}
	// Every caller has returned: no workspace's reserver is kept.
	q.mu.Lock()
	kept := len(q.reserves)
	q.mu.Unlock()
	if kept != 0 {
		t.Fatalf("%d reservers kept after every reserve returned, want none", kept)
	}
}

// TestPlanQuotaAtTheLimit: a shared call refused at the plan's limit is
// made again one unit at a time: exactly the units that fit are granted,
// and the rest are refused quota_exceeded.
func TestPlanQuotaAtTheLimit(t *testing.T) {
	t.Parallel()
	g := newPlanGateway(5)
	q := NewPlanQuota(g)
	granted, refused := 0, 0
	for _, err := range reserveWhileHeld(t, q, g, "ws", 7) {
		switch {
		case err == nil:
			granted++
		case errors.Is(err, run.ErrQuotaExceeded):
			refused++
		default:
			t.Errorf("reserve: %v", err)
		}
	}
	if granted != 5 || refused != 3 || g.usedOf("ws") != 5 {
		t.Fatalf("%d granted, %d refused, %d used; want 5, 3, 5", granted, refused, g.usedOf("ws"))
	}
	if got := g.callsOf("ws"); !slices.Equal(got, []int64{1, 7, 1, 1, 1, 1, 1, 1, 1}) {
		t.Fatalf("calls %v, want the first, the shared 7 refused, then one at a time", got)
	}
}

// TestPlanQuotaErrorForAll: a shared call that fails fails every reserve
// that shared it, with the gateway's error, and is not made again.
func TestPlanQuotaErrorForAll(t *testing.T) {
	t.Parallel()
	g := newPlanGateway(100)
	down := errs.New(http.StatusServiceUnavailable, "unavailable", "try later")
	g.err = down
	q := NewPlanQuota(g)
	for _, err := range reserveWhileHeld(t, q, g, "ws", 4) {
		if !errors.Is(err, run.ErrQuotaUnavailable) || !errors.Is(err, down) {
			t.Errorf("reserve = %v, want unavailable with the gateway's error", err)
		}
	}
	if got := g.callsOf("ws"); !slices.Equal(got, []int64{1, 4}) {
		t.Fatalf("calls %v, want [1 4]", got)
	}
}
