package gateway

// Workspace is a workspace as the admin routes answer it.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Slug      string    `json:"slug"`
	Plan      Plan      `json:"plan"`
	RateLimit RateLimit `json:"rate_limit"`
	// Features are the names of the features on for the workspace.
	Features  []string `json:"features"`
	CreatedAt string   `json:"created_at"`
}

// Plan is a workspace's plan: its modules and its AI units.
type Plan struct {
	Name    string   `json:"name"`
	Modules []string `json:"modules"`
	AIUsed  int64    `json:"ai_used"`
	AILimit int64    `json:"ai_limit"`
}

// RateLimit is the API requests a workspace may make a minute: its own,
// or the gateway's RATE_LIMIT_PER_MINUTE.
type RateLimit struct {
	PerMinute int `json:"per_minute"`
}

// WorkspaceAnswer is the answer of the routes that create, read or change
// one workspace.
type WorkspaceAnswer struct {
	Workspace Workspace `json:"workspace"`
}

// WorkspaceList is GET /admin/workspaces: every workspace, or the one of
// its ?slug= (none or one).
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// NewWorkspace is POST /admin/workspaces. Nil fields take the gateway's
// defaults (modules: developer_api; ai_limit: 0; rate: its
// RATE_LIMIT_PER_MINUTE); a non-nil empty Modules is a plan without
// modules. An empty Slug is made from the name.
type NewWorkspace struct {
	Name          string   `json:"name"`
	Slug          string   `json:"slug,omitempty"`
	Modules       []string `json:"modules,omitzero"`
	AILimit       *int64   `json:"ai_limit,omitempty"`
	RatePerMinute *int     `json:"rate_per_minute,omitempty"`
}

// WorkspaceChanges is PATCH /admin/workspaces/:id: the plan's changes;
// nil fields stay as they are, a non-nil empty Modules removes every
// module.
type WorkspaceChanges struct {
	Modules       []string `json:"modules,omitzero"`
	AILimit       *int64   `json:"ai_limit,omitempty"`
	RatePerMinute *int     `json:"rate_per_minute,omitempty"`
}

// FeatureSwitch is PUT /admin/workspaces/:id/features/:feature: On is
// required (false switches the feature off).
type FeatureSwitch struct {
	On *bool `json:"on"`
}
