package main

import (
	"net/http"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/rpc"
)

// TestAIUnits: the flow-runner's billing call adds to ai_used, never past
// ai_limit, whatever the concurrency; gives back never below 0; and
// GET /v1/me shows the count.
func TestAIUnits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, key := h.workspace(t, map[string]any{"name": "Billed", "ai_limit": 7})
	path := "/admin/workspaces/" + id + "/ai-units"

	// 20 at once for 7 units: exactly 7 succeed.
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, out := h.admin(t, http.MethodPost, path, map[string]any{"units": 1})
			if status == http.StatusConflict && out["code"] != "quota_exceeded" {
				t.Errorf("409 with %v", out)
			}
			statuses <- status
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusOK] != 7 || count[http.StatusConflict] != 13 {
		t.Fatalf("statuses %v, want 7 × 200 and 13 × 409", count)
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
	if out := h.mustAdmin(t, http.StatusOK, http.MethodPost, path, map[string]any{"units": -1}); out["ai_used"] != 6.0 || out["ai_limit"] != 7.0 {
		t.Fatalf("give back = %v", out)
	}
	if status, out := h.admin(t, http.MethodPost, path, map[string]any{"units": 2}); status != http.StatusConflict || out["code"] != "quota_exceeded" {
		t.Fatalf("2 units where 1 fits = %d %v, want 409 quota_exceeded", status, out)
	}
	if out := h.mustAdmin(t, http.StatusOK, http.MethodPost, path, map[string]any{"units": 1}); out["ai_used"] != 7.0 {
		t.Fatalf("the unit that fits = %v", out)
	}
	if out := h.mustAdmin(t, http.StatusOK, http.MethodPost, path, map[string]any{"units": -1000}); out["ai_used"] != 0.0 {
		t.Fatalf("give back past 0 = %v", out)
	}
	// The key's credential was read (and kept) by the first /v1/me; the
	// count is still today's.
	me = h.call(t, http.MethodGet, "/v1/me", key, nil, nil).json(t)
	if plan := me["plan"].(map[string]any); plan["ai_used"] != 0.0 {
		t.Fatalf("/v1/me plan after the give-back %v", plan)
	}

	for _, body := range []map[string]any{{}, {"units": 0}, {"units": 1001}, {"units": -1001}, {"units": 1.5}, {"units": "1"}} {
		if status, out := h.admin(t, http.MethodPost, path, body); status != http.StatusBadRequest || out["code"] != "invalid_request" {
			t.Errorf("units %v = %d %v, want 400 invalid_request", body, status, out)
		}
	}
	for _, ws := range []string{"00000000-0000-0000-0000-000000000000", "not-a-uuid"} {
		if status, out := h.admin(t, http.MethodPost, "/admin/workspaces/"+ws+"/ai-units", map[string]any{"units": 1}); status != http.StatusNotFound || out["code"] != "workspace_not_found" {
			t.Errorf("workspace %s = %d %v, want 404 workspace_not_found", ws, status, out)
		}
	}
}
