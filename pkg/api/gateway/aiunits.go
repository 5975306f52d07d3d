package gateway

// UseAIUnits is POST /admin/ai-units, the flow-runner's billing call:
// each use adds its Units (non-zero, at most 1000 either way) to its
// workspace's ai_used, all or nothing per workspace; a negative count
// gives units back. Uses name distinct workspaces, at most 1000 of them.
type UseAIUnits struct {
	Uses []AIUnitsUse `json:"uses"`
}

// AIUnitsUse is one workspace's units in a UseAIUnits.
type AIUnitsUse struct {
	WorkspaceID string `json:"workspace_id"`
	Units       int64  `json:"units"`
}

// AIUnitsAnswer answers each use of a UseAIUnits, in the order asked.
type AIUnitsAnswer struct {
	Uses []AIUnitsUsed `json:"uses"`
}

// AIUnitsUsed is what became of one use: granted, the plan's AI units
// after it; refused (nothing of it changed), Error says why:
// quota_exceeded (AIUsed and AILimit are the plan's as it stands) or
// workspace_not_found (both 0).
type AIUnitsUsed struct {
	WorkspaceID string          `json:"workspace_id"`
	AIUsed      int64           `json:"ai_used"`
	AILimit     int64           `json:"ai_limit"`
	Error       *AIUnitsRefusal `json:"error,omitempty"`
}

// AIUnitsRefusal is why a use was refused, in the shape of an error's
// body.
type AIUnitsRefusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
