package gateway

// UseAIUnits is POST /admin/workspaces/:id/ai-units, the flow-runner's
// billing call: Units (non-zero, at most 1000 either way) are added to
// the plan's ai_used; a negative count gives units back. A use that would
// pass ai_limit is 409 quota_exceeded.
type UseAIUnits struct {
	Units int64 `json:"units"`
}

// AIUnitsAnswer is the plan's AI units after a use.
type AIUnitsAnswer struct {
	AIUsed  int64 `json:"ai_used"`
	AILimit int64 `json:"ai_limit"`
}
