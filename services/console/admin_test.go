package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/adminclient"
	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// TestCreateOperator: POST /admin/operators over NATS, through
// pkg/adminclient as parleyctl calls it: 201 with the operator (never its
// password or hash), 409 for a taken email in any case, 400 for a bad
// email, a short password or a workspace the gateway does not know.
func TestCreateOperator(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme")
	ctx := context.Background()

	platform, err := h.admin.CreateOperator(ctx, consoleapi.NewOperator{Email: "Root@Example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if platform.ID == "" || platform.Email != "Root@Example.com" || platform.WorkspaceID != nil {
		t.Fatalf("platform operator = %+v", platform)
	}
	scoped, err := h.admin.CreateOperator(ctx, consoleapi.NewOperator{Email: "ann@example.com", Password: password, WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	if scoped.WorkspaceID == nil || *scoped.WorkspaceID != ws {
		t.Fatalf("workspace operator = %+v", scoped)
	}
	var hash string
	h.gdb.Raw("SELECT password_hash FROM console.operators WHERE id = ?", scoped.ID).Scan(&hash)
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=") || strings.Contains(hash, password) {
		t.Fatalf("stored hash = %q, want argon2id in PHC form", hash)
	}

	tests := []struct {
		name       string
		give       consoleapi.NewOperator
		wantStatus int
		wantCode   string
		wantIn     string
	}{
		{"email taken in another case", consoleapi.NewOperator{Email: "ROOT@example.COM", Password: password}, http.StatusConflict, "operator_exists", "exists"},
		{"no email", consoleapi.NewOperator{Password: password}, http.StatusBadRequest, errs.CodeInvalidRequest, "email"},
		{"not an email", consoleapi.NewOperator{Email: "ann", Password: password}, http.StatusBadRequest, errs.CodeInvalidRequest, "email"},
		{"a display name", consoleapi.NewOperator{Email: "Ann <ann2@example.com>", Password: password}, http.StatusBadRequest, errs.CodeInvalidRequest, "email"},
		{"two addresses", consoleapi.NewOperator{Email: "a@example.com, b@example.com", Password: password}, http.StatusBadRequest, errs.CodeInvalidRequest, "email"},
		{"password of 11", consoleapi.NewOperator{Email: "cy@example.com", Password: "elevenchars"}, http.StatusBadRequest, errs.CodeInvalidRequest, "at least 12"},
		{"password too long", consoleapi.NewOperator{Email: "cy@example.com", Password: strings.Repeat("x", 257)}, http.StatusBadRequest, errs.CodeInvalidRequest, "at most 256"},
		{"a workspace that does not exist", consoleapi.NewOperator{Email: "cy@example.com", Password: password, WorkspaceID: uuid.NewString()}, http.StatusBadRequest, errs.CodeInvalidRequest, "workspace_id"},
		{"a workspace id that is no id", consoleapi.NewOperator{Email: "cy@example.com", Password: password, WorkspaceID: "acme"}, http.StatusBadRequest, errs.CodeInvalidRequest, "workspace_id"},
	}
	for _, tt := range tests {
		_, err := h.admin.CreateOperator(ctx, tt.give)
		e, ok := adminclient.AsError(err)
		if !ok || e.Status != tt.wantStatus || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantIn) {
			t.Errorf("%s: err = %v, want %d %s mentioning %q", tt.name, err, tt.wantStatus, tt.wantCode, tt.wantIn)
		}
	}
	var n int64
	h.gdb.Table("console.operators").Count(&n)
	if n != 2 {
		t.Fatalf("%d operators stored, want the 2 accepted", n)
	}
	// Exactly 12 characters is enough, counted as characters, not bytes.
	if _, err := h.admin.CreateOperator(ctx, consoleapi.NewOperator{Email: "dee@example.com", Password: "twelve chars"}); err != nil {
		t.Fatalf("a 12-character password: %v", err)
	}
	if _, err := h.admin.CreateOperator(ctx, consoleapi.NewOperator{Email: "eve@example.com", Password: "ééééééééééé"}); err == nil {
		t.Fatal("11 characters in 22 bytes were accepted")
	}
}

// TestOperatorAnswerIsTheDeclaredBody: POST /admin/operators answers
// consoleapi.Operator field for field: no field beside it (a hash, a
// time), and workspace_id null for a platform operator.
func TestOperatorAnswerIsTheDeclaredBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme")
	for _, give := range []consoleapi.NewOperator{
		{Email: "root@example.com", Password: password},
		{Email: "ann@example.com", Password: password, WorkspaceID: ws},
	} {
		body, err := json.Marshal(give)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rpc.NewClient(h.env.NATS(t), h.env.RPCPrefix).Do(context.Background(), rpc.ServiceConsole, rpc.EndpointAdmin, &rpcv1.Request{
			Method: http.MethodPost, Path: "/admin/operators", Body: body,
			Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}},
		})
		if err != nil || resp.GetStatus() != http.StatusCreated {
			t.Fatalf("create %s = %v, %v", give.Email, resp, err)
		}
		got := apicheck.Body[consoleapi.Operator](t, resp.GetBody())
		if got.ID == "" || got.Email != give.Email || (give.WorkspaceID == "") != (got.WorkspaceID == nil) ||
			(got.WorkspaceID != nil && *got.WorkspaceID != give.WorkspaceID) {
			t.Fatalf("created %s = %+v", give.Email, got)
		}
	}
}

// TestCreateOperatorPostedTwiceCreatesOne: parleyctl's create sent 4
// times at once (a retried call) makes one operator: its email is
// unique, so the others are 409 operator_exists, not a second operator
// (docs/console.md "Forms posted twice").
func TestCreateOperatorPostedTwiceCreatesOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme")
	answers := make([]error, 4)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			_, answers[i] = h.admin.CreateOperator(context.Background(), consoleapi.NewOperator{Email: "ann@example.com", Password: password, WorkspaceID: ws})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range answers {
		if err == nil {
			created++
			continue
		}
		if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusConflict || e.Code != "operator_exists" {
			t.Fatalf("a create sent again = %v, want 409 operator_exists", err)
		}
	}
	var n int64
	h.gdb.Table("console.operators").Count(&n)
	if created != 1 || n != 1 {
		t.Fatalf("4 creates at once: %d answered 201, %d stored; want 1 and 1", created, n)
	}
}
