package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// useAIUnits makes one call of the flow-runner's billing route with uses
// (workspace id, units, in turn) and returns its answer, failing the test
// unless it is 200 with an answer to each use.
func (h *harness) useAIUnits(t *testing.T, uses ...any) []gatewayapi.AIUnitsUsed {
	t.Helper()
	out, err := h.tryAIUnits(t, uses...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryAIUnits is useAIUnits answering what is wrong, for a goroutine.
func (h *harness) tryAIUnits(t *testing.T, uses ...any) ([]gatewayapi.AIUnitsUsed, error) {
	t.Helper()
	in := gatewayapi.UseAIUnits{}
	for i := 0; i < len(uses); i += 2 {
		in.Uses = append(in.Uses, gatewayapi.AIUnitsUse{WorkspaceID: uses[i].(string), Units: int64(uses[i+1].(int))})
	}
	status, raw := h.adminBytes(t, http.MethodPost, "/admin/ai-units", in)
	if status != http.StatusOK {
		return nil, fmt.Errorf("use AI units %+v = %d %s", in, status, raw)
	}
	var out gatewayapi.AIUnitsAnswer
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Uses) != len(in.Uses) {
		return nil, fmt.Errorf("use AI units %+v = %s (%v)", in, raw, err)
	}
	for i, u := range out.Uses {
		if u.WorkspaceID != in.Uses[i].WorkspaceID {
			return nil, fmt.Errorf("answer %d is of %s, want %s: %s", i, u.WorkspaceID, in.Uses[i].WorkspaceID, raw)
		}
	}
	return out.Uses, nil
}

// aiUsed reads a workspace's units as stored.
func (h *harness) aiUsed(t *testing.T, id string) int64 {
	t.Helper()
	var used int64
	if err := h.gdb.Raw(`SELECT ai_used FROM accounts.workspaces WHERE id = ?`, id).Scan(&used).Error; err != nil {
		t.Fatal(err)
	}
	return used
}

// refusedWith reports whether u was refused with code.
func refusedWith(u gatewayapi.AIUnitsUsed, code string) bool {
	return u.Error != nil && u.Error.Code == code && u.Error.Message != ""
}

// TestAIUnits: the flow-runner's billing call adds to ai_used, never past
// ai_limit, whatever the concurrency; gives back never below 0; and
// GET /v1/me shows the count.
func TestAIUnits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, key := h.workspace(t, map[string]any{"name": "Billed", "ai_limit": 7})

	// 20 at once for 7 units: exactly 7 succeed.
	var wg sync.WaitGroup
	granted := make(chan bool, 20)
	for range 20 {
		wg.Go(func() {
			out, err := h.tryAIUnits(t, id, 1)
			if err != nil {
				t.Error(err)
				return
			}
			u := out[0]
			if u.Error != nil && !refusedWith(u, "quota_exceeded") {
				t.Errorf("refused with %+v", u.Error)
			}
			granted <- u.Error == nil
		})
	}
	wg.Wait()
	close(granted)
	count := map[bool]int{}
	for g := range granted {
		count[g]++
	}
	if count[true] != 7 || count[false] != 13 {
		t.Fatalf("%d granted, %d refused; want 7 and 13", count[true], count[false])
	}
	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, []byte(`{"channels":[]}`))
	})
	me := h.call(t, http.MethodGet, "/v1/me", key, nil, nil).json(t)
	if plan := me["plan"].(map[string]any); plan["ai_used"] != 7.0 || plan["ai_limit"] != 7.0 {
		t.Fatalf("/v1/me plan %v", plan)
	}

	// A unit given back can be used again; giving back stops at 0. A use
	// of several units is all or nothing (the flow-runner's shared
	// reserves count on it): 2 where 1 fits use none.
	if u := h.useAIUnits(t, id, -1)[0]; u != (gatewayapi.AIUnitsUsed{WorkspaceID: id, AIUsed: 6, AILimit: 7}) {
		t.Fatalf("give back = %+v", u)
	}
	if u := h.useAIUnits(t, id, 2)[0]; !refusedWith(u, "quota_exceeded") || u.AIUsed != 6 || u.AILimit != 7 {
		t.Fatalf("2 units where 1 fits = %+v, want quota_exceeded at 6 of 7", u)
	}
	if u := h.useAIUnits(t, id, 1)[0]; u != (gatewayapi.AIUnitsUsed{WorkspaceID: id, AIUsed: 7, AILimit: 7}) {
		t.Fatalf("the unit that fits = %+v", u)
	}
	if u := h.useAIUnits(t, id, -1000)[0]; u.Error != nil || u.AIUsed != 0 {
		t.Fatalf("give back past 0 = %+v", u)
	}
	// The key's credential was read (and kept) by the first /v1/me; the
	// count is still today's.
	me = h.call(t, http.MethodGet, "/v1/me", key, nil, nil).json(t)
	if plan := me["plan"].(map[string]any); plan["ai_used"] != 0.0 {
		t.Fatalf("/v1/me plan after the give-back %v", plan)
	}
}

// TestAIUnitsOfSeveralWorkspacesInOneCall: one call uses each
// workspace's units all or nothing, each on its own: a workspace past its
// limit is refused quota_exceeded, an unknown one workspace_not_found,
// and the others are granted as if asked alone.
func TestAIUnitsOfSeveralWorkspacesInOneCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	full, _ := h.workspace(t, map[string]any{"name": "Full", "ai_limit": 5})
	roomy, _ := h.workspace(t, map[string]any{"name": "Roomy", "ai_limit": 10})
	spent, _ := h.workspace(t, map[string]any{"name": "Spent", "ai_limit": 2})
	h.useAIUnits(t, full, 3, spent, 2)
	unknown := "00000000-0000-0000-0000-000000000000"

	got := h.useAIUnits(t, full, 3, roomy, 4, unknown, 1, spent, -1)
	switch {
	case !refusedWith(got[0], "quota_exceeded") || got[0].AIUsed != 3 || got[0].AILimit != 5:
		t.Errorf("3 units where 2 fit = %+v, want quota_exceeded at 3 of 5", got[0])
	case got[1] != (gatewayapi.AIUnitsUsed{WorkspaceID: roomy, AIUsed: 4, AILimit: 10}):
		t.Errorf("4 units of 10 = %+v", got[1])
	case !refusedWith(got[2], "workspace_not_found") || got[2].AIUsed != 0 || got[2].AILimit != 0:
		t.Errorf("an unknown workspace = %+v, want workspace_not_found", got[2])
	case got[3] != (gatewayapi.AIUnitsUsed{WorkspaceID: spent, AIUsed: 1, AILimit: 2}):
		t.Errorf("a unit given back = %+v", got[3])
	}
	for ws, want := range map[string]int64{full: 3, roomy: 4, spent: 1} {
		if used := h.aiUsed(t, ws); used != want {
			t.Errorf("workspace %s: %d used, want %d", ws, used, want)
		}
	}
	// Exactly what is left fits; an id in capitals is the same workspace.
	got = h.useAIUnits(t, strings.ToUpper(full), 2, roomy, 6)
	if got[0].Error != nil || got[0].AIUsed != 5 || got[1].Error != nil || got[1].AIUsed != 10 {
		t.Fatalf("the units left = %+v", got)
	}
}

// TestAIUnitsCallsNamingTheSameWorkspacesInAnyOrder: concurrent calls
// each naming the same workspaces in its own order wait on each other
// (no deadlock, which PostgreSQL would break with an error: a 500), and
// each workspace's units stop exactly at its limit.
func TestAIUnitsCallsNamingTheSameWorkspacesInAnyOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// As many workspaces as a platform has, and their statistics, so
	// that PostgreSQL finds each named row by its index, in the order the
	// call names them, rather than reading the whole table in its own.
	if err := h.gdb.Exec(`INSERT INTO accounts.workspaces (id, name, slug)
		SELECT gen_random_uuid(), 'filler', 'filler-' || n FROM generate_series(1, 20000) AS n`).Error; err != nil {
		t.Fatal(err)
	}
	if err := h.gdb.Exec(`ANALYZE accounts.workspaces`).Error; err != nil {
		t.Fatal(err)
	}
	const calls, limit = 40, 25
	var wsIDs []string
	for i := range 4 {
		id, _ := h.workspace(t, map[string]any{"name": fmt.Sprintf("Shared %d", i), "ai_limit": limit})
		wsIDs = append(wsIDs, id)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted = map[string]int{}
	)
	for range calls {
		order := append([]string(nil), wsIDs...)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		wg.Go(func() {
			var uses []any
			for _, id := range order {
				uses = append(uses, id, 1)
			}
			out, err := h.tryAIUnits(t, uses...)
			if err != nil {
				t.Error(err)
				return
			}
			for _, u := range out {
				if u.Error != nil && !refusedWith(u, "quota_exceeded") {
					t.Errorf("refused with %+v", u.Error)
				}
				mu.Lock()
				if u.Error == nil {
					granted[u.WorkspaceID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range wsIDs {
		if granted[id] != limit || h.aiUsed(t, id) != limit {
			t.Errorf("workspace %s: %d granted, %d used; want %d", id, granted[id], h.aiUsed(t, id), limit)
		}
	}
}

// TestAIUnitsRefusesBadInput: a call that is not a list of valid uses is
// 400 invalid_request in the error shape, and none of its uses is made.
func TestAIUnitsRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.workspace(t, map[string]any{"name": "Billed", "ai_limit": 5000})
	other, _ := h.workspace(t, map[string]any{"name": "Other", "ai_limit": 5000})
	use := func(ws string, units any) map[string]any { return map[string]any{"workspace_id": ws, "units": units} }
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = use(fmt.Sprintf("00000000-0000-0000-0000-%012d", i), 1)
	}
	tests := []struct {
		name string
		give any
	}{
		{"no body", nil},
		{"no uses", map[string]any{}},
		{"an empty list", map[string]any{"uses": []any{}}},
		{"a list of 1,001", map[string]any{"uses": tooMany}},
		{"a workspace twice", map[string]any{"uses": []any{use(id, 1), use(other, 1), use(id, 1)}}},
		{"a workspace twice, in capitals once", map[string]any{"uses": []any{use(id, 1), use(strings.ToUpper(id), 1)}}},
		{"no units", map[string]any{"uses": []any{use(other, 1), map[string]any{"workspace_id": id}}}},
		{"0 units", map[string]any{"uses": []any{use(other, 1), use(id, 0)}}},
		{"1,001 units", map[string]any{"uses": []any{use(other, 1), use(id, 1001)}}},
		{"-1,001 units", map[string]any{"uses": []any{use(other, 1), use(id, -1001)}}},
		{"1.5 units", map[string]any{"uses": []any{use(other, 1), use(id, 1.5)}}},
		{"units a string", map[string]any{"uses": []any{use(other, 1), use(id, "1")}}},
		{"no workspace", map[string]any{"uses": []any{use(other, 1), map[string]any{"units": 1}}}},
		{"a workspace not a uuid", map[string]any{"uses": []any{use(other, 1), use("not-a-uuid", 1)}}},
		{"a workspace as a URN", map[string]any{"uses": []any{use(other, 1), use("urn:uuid:"+id, 1)}}},
	}
	for _, tt := range tests {
		var body any
		if tt.give != nil {
			b, err := json.Marshal(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			body = json.RawMessage(b)
		}
		status, raw := h.adminBytes(t, http.MethodPost, "/admin/ai-units", body)
		apicheck.CheckRefusal(t, apicheck.Refusal{What: tt.name, Method: http.MethodPost, Path: "/admin/ai-units", Status: http.StatusBadRequest, Code: "invalid_request"}, status, raw)
	}
	if h.aiUsed(t, id) != 0 || h.aiUsed(t, other) != 0 {
		t.Fatalf("a refused call used units: %d and %d", h.aiUsed(t, id), h.aiUsed(t, other))
	}
	// At the bounds: 1,000 uses, and ±1,000 units.
	most := make([]any, 0, 2*1000)
	most = append(most, id, 1000, other, -1000)
	for i := range 998 {
		most = append(most, fmt.Sprintf("00000000-0000-0000-0000-%012d", i), 1)
	}
	if got := h.useAIUnits(t, most...); got[0].Error != nil || got[0].AIUsed != 1000 || got[1].Error != nil || !refusedWith(got[997], "workspace_not_found") {
		t.Fatalf("1,000 uses: %+v %+v %+v", got[0], got[1], got[997])
	}
}
