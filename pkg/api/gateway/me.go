package gateway

import messagingapi "github.com/parleyhq/parley/pkg/api/messaging"

// Me is GET /v1/me: the workspace an API key belongs to, its plan's AI
// units, its channels and its per-minute request limit.
type Me struct {
	Workspace MeWorkspace `json:"workspace"`
	Plan      MePlan      `json:"plan"`
	// Channels are messaging's, as its GET /v1/channels answers them,
	// which is where the gateway reads them.
	Channels   []messagingapi.Channel `json:"channels"`
	RateLimit  RateLimit              `json:"rate_limit"`
	APIVersion string                 `json:"api_version"`
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
