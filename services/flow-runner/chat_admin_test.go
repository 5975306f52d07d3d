package main

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	flowrun "github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// insertChatRun stores a completed chat run of ws in a new conversation
// through the store, as the chat consumer does: of flowID, or of the
// assistant when flowID is "".
func (h *harness) insertChatRun(ws, flowID string) *flowrun.Run {
	h.t.Helper()
	started := time.Now().UTC().Truncate(time.Microsecond)
	done := started.Add(time.Second)
	r := &flowrun.Run{
		ID: uuid.NewString(), FlowID: flowID, WorkspaceID: ws, Status: flowrun.StatusCompleted, CurrentNodeID: "answer",
		NodesExecuted: 1, StartedAt: started, CompletedAt: &done, Output: map[string]any{},
		Vars: map[string]any{"input": map[string]any{"text": "hi"}, "message": map[string]any{"id": "m1", "text": "hi", "type": "text"}},
		Chat: &flowrun.Chat{ConversationID: uuid.NewString(), ChannelID: uuid.NewString()},
	}
	if flowID != "" {
		r.Version = 1
	}
	gdb := h.env.DB(h.t, adapters.Schema, migrations.FS)
	err := gdb.Transaction(func(tx *gorm.DB) error {
		return adapters.InsertRun(tx, r, []flowrun.NodeRun{{NodeID: "answer", NodeType: "ai_response", StartedAt: started, DurationMS: 1000,
			Input: map[string]any{"text": "hi"}, Output: map[string]any{"text": "hello"}, Tokens: 12}})
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// TestOperatorsReadChatRuns: a chat run, of a flow or of the assistant,
// is in the operators' list with its kind and conversation, filtered by
// conversation, and readable by the operators' run route in the public
// trace's shape; the public run route answers 404 run_not_found for it,
// and another workspace's operators do not find it.
func TestOperatorsReadChatRuns(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	chatFlow := h.publish(ws, "", doc("Chat and API", []string{"api", "chat"}, "hi", greet, endNode))
	api := h.invoke(ws, chatFlow, map[string]any{"input": map[string]any{"name": "Ann"}})
	assistant := h.insertChatRun(ws, "")
	flowed := h.insertChatRun(ws, chatFlow)

	for _, r := range []*flowrun.Run{assistant, flowed} {
		status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/runs/"+r.ID, nil)
		if status != http.StatusOK {
			t.Fatalf("operators' trace: %d %s", status, body)
		}
		tr := apicheck.Body[flowrunnerapi.Trace](t, body)
		if tr.Run.ID != r.ID || tr.Run.FlowID != r.FlowID || tr.Run.Status != "completed" || tr.Run.CompletedAt == nil ||
			len(tr.NodeRuns) != 1 || tr.NodeRuns[0].NodeType != "ai_response" || tr.NodeRuns[0].Tokens != 12 ||
			!reflect.DeepEqual(tr.NodeRuns[0].Output, map[string]any{"text": "hello"}) {
			t.Fatalf("operators' trace = %s", body)
		}
		// The Developer API never shows a chat run, even of a flow it can read.
		for _, flowID := range []string{chatFlow, uuid.NewString()} {
			status, body = h.api(ws, full, http.MethodGet, "/v1/flows/"+flowID+"/runs/"+r.ID, nil)
			wantError(t, status, body, http.StatusNotFound, "run_not_found")
		}
		status, body = h.admin(http.MethodGet, "/admin/workspaces/"+other+"/runs/"+r.ID, nil)
		wantError(t, status, body, http.StatusNotFound, "run_not_found")
	}
	// An API run reads the same through both routes.
	_, public := h.api(ws, full, http.MethodGet, "/v1/flows/"+chatFlow+"/runs/"+api.RunID, nil)
	_, operators := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/runs/"+api.RunID, nil)
	if string(public) != string(operators) {
		t.Fatalf("an API run's trace: public %s, operators' %s", public, operators)
	}
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/admin/workspaces/" + ws + "/runs/" + uuid.NewString(), http.StatusNotFound, "run_not_found"},
		{"/admin/workspaces/" + ws + "/runs/nope", http.StatusNotFound, "run_not_found"},
		{"/admin/workspaces/nope/runs/" + api.RunID, http.StatusBadRequest, "invalid_request"},
		{"/admin/workspaces/" + ws + "/runs?conversation_id=nope", http.StatusBadRequest, "invalid_request"},
	} {
		status, body := h.admin(http.MethodGet, tc.path, nil)
		wantError(t, status, body, tc.status, tc.code)
	}

	status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/runs", nil)
	if status != http.StatusOK {
		t.Fatalf("runs: %d %s", status, body)
	}
	page := apicheck.Body[flowrunnerapi.RunPage](t, body)
	var got []string
	for _, r := range page.Runs {
		got = append(got, r.Kind+" "+r.FlowID+" "+r.ConversationID)
	}
	want := []string{
		"chat " + chatFlow + " " + flowed.Chat.ConversationID,
		"chat  " + assistant.Chat.ConversationID,
		"api " + chatFlow + " ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if strings.Count(string(body), `"conversation_id"`) != 2 {
		t.Fatalf("an API run lists a conversation: %s", body)
	}

	// Through pkg/adminclient, as the console reads them.
	client := adminclient.New(h.rpc)
	ctx := context.Background()
	one, err := client.ListRuns(ctx, ws, adminclient.RunFilter{ConversationID: assistant.Chat.ConversationID})
	if err != nil || len(one.Runs) != 1 || one.Runs[0].ID != assistant.ID || one.Runs[0].Kind != flowrunnerapi.RunKindChat || one.Runs[0].FlowVersion != 0 {
		t.Fatalf("one conversation's runs = %+v, %v", one, err)
	}
	tr, err := client.RunTrace(ctx, ws, flowed.ID)
	if err != nil || tr.Run.ID != flowed.ID || len(tr.NodeRuns) != 1 {
		t.Fatalf("RunTrace = %+v, %v", tr, err)
	}
	if _, err := client.RunTrace(ctx, other, flowed.ID); err == nil {
		t.Fatal("another workspace read the run")
	} else if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code != "run_not_found" {
		t.Fatalf("RunTrace from another workspace = %#v", err)
	}
	if _, err := client.GetRunTrace(ctx, ws, chatFlow, flowed.ID); err == nil {
		t.Fatal("the Developer API read a chat run")
	}
}

// TestChannelChatFlowRoutes: a channel's chat flow is set, read, replaced
// and cleared through the admin routes and pkg/adminclient; a flow not of
// the workspace is 404 flow_not_found, an inactive one or one without the
// chat trigger 422 flow_not_for_chat, a channel another workspace holds
// 404 channel_not_found, and what the routes cannot read 400.
func TestChannelChatFlowRoutes(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other, channel := uuid.NewString(), uuid.NewString(), uuid.NewString()
	chat := h.publish(ws, "", doc("Chat", []string{"chat"}, "done", endNode))
	both := h.publish(ws, "", doc("Both", []string{"api", "chat"}, "done", endNode))
	apiFlow := h.publish(ws, "", doc("API", apiOnly, "done", endNode))
	gone := h.publish(ws, "", doc("Gone", []string{"chat"}, "done", endNode))
	theirs := h.publish(other, "", doc("Theirs", []string{"chat"}, "done", endNode))
	if status, body := h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate", nil); status != http.StatusOK {
		t.Fatalf("deactivate: %d %s", status, body)
	}
	path := "/admin/channels/" + channel + "/chat-flow"
	answer := func(status int, body []byte) flowrunnerapi.ChatFlow {
		t.Helper()
		if status != http.StatusOK {
			t.Fatalf("chat flow: %d %s", status, body)
		}
		return apicheck.Body[flowrunnerapi.ChatFlowAnswer](t, body).ChatFlow
	}
	flowOf := func(ws string) string {
		t.Helper()
		return answer(h.admin(http.MethodGet, path+"?workspace_id="+ws, nil)).FlowID
	}

	if got := flowOf(ws); got != "" {
		t.Fatalf("a new channel's chat flow = %q", got)
	}
	set := answer(h.admin(http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: chat}))
	if set != (flowrunnerapi.ChatFlow{WorkspaceID: ws, ChannelID: channel, FlowID: chat}) {
		t.Fatalf("set = %+v", set)
	}
	if got := flowOf(ws); got != chat {
		t.Fatalf("chat flow = %q, want %q", got, chat)
	}
	answer(h.admin(http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, ChannelID: channel, FlowID: both}))
	if got := flowOf(ws); got != both {
		t.Fatalf("replaced chat flow = %q, want %q", got, both)
	}
	if got := flowOf(other); got != "" {
		t.Fatalf("another workspace reads %q", got)
	}

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"another workspace's flow", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: theirs}, 404, "flow_not_found"},
		{"an unknown flow", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: uuid.NewString()}, 404, "flow_not_found"},
		{"no flow id", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: "nope"}, 404, "flow_not_found"},
		{"an inactive flow", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: gone}, 422, "flow_not_for_chat"},
		{"a flow without the chat trigger", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: apiFlow}, 422, "flow_not_for_chat"},
		{"a channel another workspace holds", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: other, FlowID: theirs}, 404, "channel_not_found"},
		{"flow id missing", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws}, 400, "invalid_request"},
		{"workspace missing", http.MethodPut, path, flowrunnerapi.ChatFlow{FlowID: chat}, 400, "invalid_request"},
		{"another channel in the body", http.MethodPut, path, flowrunnerapi.ChatFlow{WorkspaceID: ws, ChannelID: uuid.NewString(), FlowID: chat}, 400, "invalid_request"},
		{"not JSON", http.MethodPut, path, "{", 400, "invalid_request"},
		{"a wrong type", http.MethodPut, path, `{"workspace_id": 1}`, 400, "invalid_request"},
		{"channel not an id", http.MethodPut, "/admin/channels/nope/chat-flow", flowrunnerapi.ChatFlow{WorkspaceID: ws, FlowID: chat}, 400, "invalid_request"},
		{"get without workspace", http.MethodGet, path, nil, 400, "invalid_request"},
		{"get with a bad workspace", http.MethodGet, path + "?workspace_id=nope", nil, 400, "invalid_request"},
		{"get of no channel id", http.MethodGet, "/admin/channels/nope/chat-flow?workspace_id=" + ws, nil, 400, "invalid_request"},
		{"clear without workspace", http.MethodDelete, path, nil, 400, "invalid_request"},
		{"clear of no channel id", http.MethodDelete, "/admin/channels/nope/chat-flow?workspace_id=" + ws, nil, 400, "invalid_request"},
	} {
		status, body := h.admin(tc.method, tc.path, tc.body)
		var e errorBody
		decode(t, body, &e)
		if status != tc.status || e.Code != tc.code || e.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	if got := flowOf(ws); got != both {
		t.Fatalf("after the refusals the chat flow = %q, want %q", got, both)
	}

	// A deactivated chat flow answers no more: the assistant does.
	if status, body := h.admin(http.MethodPost, "/admin/flows/"+both+"/deactivate", nil); status != http.StatusOK {
		t.Fatalf("deactivate: %d %s", status, body)
	}
	if got := flowOf(ws); got != "" {
		t.Fatalf("a deactivated chat flow still answers: %q", got)
	}

	// Through pkg/adminclient, as parleyctl sets it.
	client := adminclient.New(h.rpc)
	ctx := context.Background()
	if cf, err := client.SetChatFlow(ctx, ws, channel, chat); err != nil || cf.FlowID != chat || cf.ChannelID != channel || cf.WorkspaceID != ws {
		t.Fatalf("SetChatFlow = %+v, %v", cf, err)
	}
	if cf, err := client.ChatFlow(ctx, ws, channel); err != nil || cf.FlowID != chat {
		t.Fatalf("ChatFlow = %+v, %v", cf, err)
	}
	if _, err := client.SetChatFlow(ctx, ws, channel, apiFlow); err == nil {
		t.Fatal("a flow without the chat trigger was set")
	} else if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusUnprocessableEntity || e.Code != "flow_not_for_chat" {
		t.Fatalf("SetChatFlow of an API flow = %#v", err)
	}
	if cf, err := client.ClearChatFlow(ctx, ws, channel); err != nil || cf.FlowID != "" || cf.ChannelID != channel {
		t.Fatalf("ClearChatFlow = %+v, %v", cf, err)
	}
	if cf, err := client.ChatFlow(ctx, ws, channel); err != nil || cf.FlowID != "" {
		t.Fatalf("ChatFlow after clearing = %+v, %v", cf, err)
	}
	// Clearing again is no error.
	if _, err := client.ClearChatFlow(ctx, ws, channel); err != nil {
		t.Fatal(err)
	}
}
