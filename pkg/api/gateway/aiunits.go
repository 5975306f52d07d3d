// Package gateway declares the gateway's JSON bodies (docs/architecture.md
// "Wire types").
//
// This file holds the AI-units route's bodies only, which the flow-runner
// calls to bill its AI nodes; the rest of the package (and its route
// tables) is the gateway's.
package gateway

// AIUnitsRequest is POST /admin/workspaces/:id/ai-units's body: Units is
// added to the plan's ai_used (a negative number gives units back); it is
// required, non-zero and at most 1000 either way.
type AIUnitsRequest struct {
	Units *int64 `json:"units"`
}

// AIUnits is the route's answer, the plan's units after the use; a use
// that would pass ai_limit is 409 quota_exceeded instead.
type AIUnits struct {
	AIUsed  int64 `json:"ai_used"`
	AILimit int64 `json:"ai_limit"`
}
