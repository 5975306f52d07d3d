package flowrunner

// The built-in AI's side of the flow-runner: which flow
// answers a channel's customers, and the chat runs it stores.

// Run kinds (RunSummary.Kind): a run invoked through the API, or a chat
// run answering a conversation's customer.
const (
	RunKindAPI  = "api"
	RunKindChat = "chat"
)

// ChatFlow is a channel's chat flow, the body of PUT
// /admin/channels/:channel_id/chat-flow and the answer of that route, of
// GET and of DELETE: the published, active flow with a chat trigger that
// answers the channel's customer messages, FlowID "" when none is assigned
// and the assistant answers (the knowledge base and the LLM).
type ChatFlow struct {
	WorkspaceID string `json:"workspace_id"`
	ChannelID   string `json:"channel_id"`
	FlowID      string `json:"flow_id"`
}

// ChatFlowAnswer is the answer of the chat-flow routes.
type ChatFlowAnswer struct {
	ChatFlow ChatFlow `json:"chat_flow"`
}
