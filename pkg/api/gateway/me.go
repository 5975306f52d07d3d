package gateway

// Me is GET /v1/me: the workspace an API key belongs to, its plan's AI
// units, its channels and its per-minute request limit.
type Me struct {
	Workspace  MeWorkspace `json:"workspace"`
	Plan       MePlan      `json:"plan"`
	Channels   []MeChannel `json:"channels"`
	RateLimit  RateLimit   `json:"rate_limit"`
	APIVersion string      `json:"api_version"`
}

// MeWorkspace is who the workspace is.
type MeWorkspace struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

// MePlan is the plan's name and AI units, without its modules.
type MePlan struct {
	Name    string `json:"name"`
	AIUsed  int64  `json:"ai_used"`
	AILimit int64  `json:"ai_limit"`
}

// MeChannel is a channel of the workspace as messaging's GET /v1/channels
// answers it, which is where the gateway reads it.
type MeChannel struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	AIMode     string `json:"ai_mode"`
	Status     string `json:"status"`
}
