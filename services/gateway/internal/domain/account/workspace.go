package account

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Module is a part of the product a plan may include.
type Module string

// The modules a plan may carry.
const (
	ModuleDeveloperAPI Module = "developer_api"
	ModuleFlows        Module = "flows"
	ModuleFlowAI       Module = "flow_ai"
	ModuleFlowScript   Module = "flow_script"
)

// Modules lists every module, in the order plans present them.
var Modules = []Module{ModuleDeveloperAPI, ModuleFlows, ModuleFlowAI, ModuleFlowScript}

// Feature is a per-workspace switch of a part of the product: while a
// feature is off for a workspace, its routes answer 404 not_found as if
// they did not exist.
type Feature struct {
	Name string
	// DefaultOn is the feature's state in a workspace no operator switched
	// it for.
	DefaultOn bool
}

// FeatureFlowsAPI opens the headless flow routes (GET /v1/flows, invoke,
// a run's trace).
const FeatureFlowsAPI = "flows_api"

// Features are the known features. flows_api is on unless switched off for
// a workspace: flow invoke is generally available.
var Features = []Feature{{Name: FeatureFlowsAPI, DefaultOn: true}}

// Plan defaults: a new workspace gets the dedicated API plan, which includes
// the Developer API.
const (
	DefaultPlanName = "api"
	MaxNameLength   = 200
	MaxSlugLength   = 63
	// MaxRatePerMinute bounds a workspace's own API request limit: far
	// above what one gateway serves, and within what its column holds.
	MaxRatePerMinute = 1_000_000
)

// DefaultModules are the modules of a workspace created without a list.
var DefaultModules = []Module{ModuleDeveloperAPI}

// Plan is what a workspace pays for.
type Plan struct {
	Name    string
	Modules []Module
	// AIUsed and AILimit count AI replies consumed and allowed.
	AIUsed  int64
	AILimit int64
}

// Workspace is a tenant: everything in Parley belongs to one.
type Workspace struct {
	ID   string
	Name string
	Slug string
	Plan Plan
	// RatePerMinute is the workspace's own API request limit; 0 means the
	// gateway's default (RATE_LIMIT_PER_MINUTE), which may change later.
	RatePerMinute int
	// Switched are the features an operator switched for this workspace,
	// on (true) or off (false); every other feature takes its default.
	Switched  map[string]bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewWorkspace is the input of a workspace to create. Nil fields take their
// defaults.
type NewWorkspace struct {
	Name          string
	Slug          string
	Modules       []string // nil: DefaultModules; empty: none
	AILimit       *int64
	RatePerMinute *int
}

// Create checks in and returns the workspace it describes.
func Create(id string, in NewWorkspace, now time.Time) (Workspace, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return Workspace{}, invalid("name", "is required")
	}
	if utf8.RuneCountInString(name) > MaxNameLength {
		return Workspace{}, invalid("name", "must be at most %d characters", MaxNameLength)
	}
	slug := in.Slug
	if slug == "" {
		slug = Slugify(name)
		if slug == "" {
			return Workspace{}, invalid("slug", "cannot be derived from name %q; give one (lowercase letters, digits and hyphens)", name)
		}
	} else if err := ValidateSlug(slug); err != nil {
		return Workspace{}, err
	}
	w := Workspace{
		ID:        id,
		Name:      name,
		Slug:      slug,
		Plan:      Plan{Name: DefaultPlanName, Modules: slices.Clone(DefaultModules)},
		Switched:  map[string]bool{},
		CreatedAt: now,
		UpdatedAt: now,
	}
	if err := w.Apply(Changes{Modules: in.Modules, AILimit: in.AILimit, RatePerMinute: in.RatePerMinute}, now); err != nil {
		return Workspace{}, err
	}
	return w, nil
}

// Changes are the operator's edits to a workspace; nil fields stay as they
// are.
type Changes struct {
	Modules       []string
	AILimit       *int64
	RatePerMinute *int
}

// Apply validates c and applies it; on error w is unchanged.
func (w *Workspace) Apply(c Changes, now time.Time) error {
	next := *w
	if c.Modules != nil {
		mods, err := ParseModules(c.Modules)
		if err != nil {
			return err
		}
		next.Plan.Modules = mods
	}
	if c.AILimit != nil {
		if *c.AILimit < 0 {
			return invalid("ai_limit", "must be at least 0")
		}
		next.Plan.AILimit = *c.AILimit
	}
	if c.RatePerMinute != nil {
		if *c.RatePerMinute < 1 || *c.RatePerMinute > MaxRatePerMinute {
			return invalid("rate_per_minute", "must be from 1 to %d", MaxRatePerMinute)
		}
		next.RatePerMinute = *c.RatePerMinute
	}
	next.UpdatedAt = now
	*w = next
	return nil
}

// SetFeature switches a feature on or off for the workspace, whatever its
// default.
func (w *Workspace) SetFeature(feature string, on bool, now time.Time) error {
	if !slices.ContainsFunc(Features, func(f Feature) bool { return f.Name == feature }) {
		known := make([]string, len(Features))
		for i, f := range Features {
			known[i] = f.Name
		}
		return invalid("feature", "%q is unknown; known features: %s", feature, strings.Join(known, ", "))
	}
	switched := maps.Clone(w.Switched)
	if switched == nil {
		switched = map[string]bool{}
	}
	switched[feature] = on
	w.Switched = switched
	w.UpdatedAt = now
	return nil
}

// EnabledFeatures returns the names of the features on for the workspace,
// sorted: each one switched as it was switched, every other as its default.
func (w Workspace) EnabledFeatures() []string {
	on := []string{}
	for _, f := range Features {
		if enabled, switched := w.Switched[f.Name]; enabled || (!switched && f.DefaultOn) {
			on = append(on, f.Name)
		}
	}
	slices.Sort(on)
	return on
}

// HasModule reports whether the plan includes m.
func (w Workspace) HasModule(m Module) bool {
	return slices.Contains(w.Plan.Modules, m)
}

// RequireModule returns *ModuleInactiveError unless the plan includes m.
func (w Workspace) RequireModule(m Module) error {
	if !w.HasModule(m) {
		return &ModuleInactiveError{Module: m}
	}
	return nil
}

// RateLimit is the workspace's requests per minute, given the gateway's
// default.
func (w Workspace) RateLimit(defaultPerMinute int) int {
	if w.RatePerMinute > 0 {
		return w.RatePerMinute
	}
	return defaultPerMinute
}

// ParseModules checks a list of module names and returns it de-duplicated in
// the canonical order of Modules.
func ParseModules(names []string) ([]Module, error) {
	seen := map[Module]bool{}
	for _, n := range names {
		m := Module(n)
		if !slices.Contains(Modules, m) {
			known := make([]string, len(Modules))
			for i, k := range Modules {
				known[i] = string(k)
			}
			return nil, invalid("modules", "contains unknown module %q; allowed: %s", n, strings.Join(known, ", "))
		}
		seen[m] = true
	}
	out := make([]Module, 0, len(seen))
	for _, m := range Modules {
		if seen[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// WorkspaceStore keeps workspaces.
type WorkspaceStore interface {
	// Create stores a new workspace; ErrSlugTaken if its slug is in use.
	Create(ctx context.Context, w Workspace) error
	// Get returns a workspace or ErrWorkspaceNotFound.
	Get(ctx context.Context, id string) (Workspace, error)
	// List returns the workspaces with slug, or all when slug is "",
	// oldest first.
	List(ctx context.Context, slug string) ([]Workspace, error)
	// Update loads a workspace, lets change edit it and saves the result,
	// atomically; ErrWorkspaceNotFound if there is none.
	Update(ctx context.Context, id string, change func(*Workspace) error) (Workspace, error)
	// UseAIUnits adds each use's units (negative: gives them back) to its
	// workspace's ai_used, all or nothing per workspace, in one atomic
	// step, and answers each use in order. A use that would pass ai_limit
	// changes nothing and is ErrQuotaExceeded, one of a missing workspace
	// ErrWorkspaceNotFound, and neither changes what the others do; a give
	// back never takes ai_used below 0. The uses pass CheckAIUnitsUses. An
	// error returned means no use was made.
	UseAIUnits(ctx context.Context, uses []AIUnitsUse) ([]AIUnitsUsed, error)
}
