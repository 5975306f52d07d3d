package run

import (
	"context"
	"errors"
)

// The AI nodes reach the outside through the ports below: the LLM provider
// (llm, intent, extract), the safety guard (the text an AI node sends), the
// workspace's knowledge base (knowledge) and the plan's AI units (billing).

// Chat roles of a ChatMessage.
const (
	RoleSystem = "system"
	RoleUser   = "user"
)

// ChatMessage is one message of a chat-completions request.
type ChatMessage struct {
	Role    string
	Content string
}

// ChatRequest is one call to the LLM provider.
type ChatRequest struct {
	// Model is the node's model; empty means the provider's configured one.
	Model    string
	Messages []ChatMessage
	// Temperature and MaxTokens are sent only when set.
	Temperature *float64
	MaxTokens   int
	// JSON asks for response_format {"type": "json_object"}.
	JSON bool
}

// ChatReply is the provider's answer.
type ChatReply struct {
	// Text is the first choice's message content.
	Text string
	// Model is the model the call was priced as (the request's, or the
	// configured default).
	Model string
	// Tokens is usage.total_tokens; CostUSD its price by the configured
	// per-model table (0 for a model without a price).
	Tokens  int
	CostUSD float64
}

// LLM calls an OpenAI-compatible chat-completions endpoint. It retries a
// 429 or 5xx with backoff while ctx allows (ctx carries the run's
// remaining budget). Its errors are safe to show in a run's trace: they
// carry the provider's reason, never its key.
type LLM interface {
	Chat(ctx context.Context, req ChatRequest) (ChatReply, error)
}

// ErrGuardNotConfigured is what a guard's readiness wraps when no guard is
// configured at all, as opposed to one configured that cannot be reached
// now.
var ErrGuardNotConfigured = errors.New("no safety guard is configured")

// Guard checks text a flow sends from an AI node before it is sent.
type Guard interface {
	// Check reports whether text is flagged. An error means it could not
	// be checked.
	Check(ctx context.Context, text string) (flagged bool, err error)
}

// Passage is one knowledge-base passage a search found.
type Passage struct {
	Title string  `json:"title"`
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

// KnowledgeBase searches a workspace's knowledge base.
type KnowledgeBase interface {
	// Search returns at most topK passages, best first, that share words
	// with query (a question in natural language); none is an empty list.
	Search(ctx context.Context, workspaceID, query string, topK int) ([]Passage, error)
}

// ErrQuotaExceeded is Quota.Reserve's answer once the plan's ai_used has
// reached its ai_limit.
var ErrQuotaExceeded = errors.New("the plan's AI units are used up")

// ErrQuotaUnavailable wraps Quota.Reserve's error when the plan's count
// could not be reached at all (the service keeping it is down or timed
// out): no refusal, and no fault of the flow's.
var ErrQuotaUnavailable = errors.New("the plan's AI units could not be reached")

// Quota is the plan's AI units (ai_used of ai_limit), shared by every
// instance and every run of the workspace.
type Quota interface {
	// Reserve takes one unit before an AI node calls the provider, so that
	// concurrent runs never take more than ai_limit; ErrQuotaExceeded when
	// none is left.
	Reserve(ctx context.Context, workspaceID string) error
	// Refund gives back a unit whose node did not succeed.
	Refund(ctx context.Context, workspaceID string) error
}
