package account

import (
	"fmt"

	"github.com/parleyhq/parley/pkg/ids"
)

// Bounds of one use of AI units (WorkspaceStore.UseAIUnits).
const (
	// MaxAIUnitsPerUse bounds one workspace's units in a use, so that a
	// mistaken call cannot spend a plan at once.
	MaxAIUnitsPerUse = 1000
	// MaxAIUnitsUses bounds the workspaces of one call.
	MaxAIUnitsUses = 1000
)

// AIUnitsUse is a workspace's AI units to use (negative: to give back).
type AIUnitsUse struct {
	WorkspaceID string
	Units       int64
}

// AIUnitsUsed is what became of one use: Plan is the workspace's plan
// after it; Err, when set, is why it was refused and nothing of it
// changed: ErrQuotaExceeded (Plan is the plan as it stands) or
// ErrWorkspaceNotFound.
type AIUnitsUsed struct {
	Plan Plan
	Err  error
}

// CheckAIUnitsUses reports the first thing wrong with uses, as a
// *ValidationError naming it: no use, more than MaxAIUnitsUses, a
// workspace id that is no id or named twice, units 0 or past
// ±MaxAIUnitsPerUse.
func CheckAIUnitsUses(uses []AIUnitsUse) error {
	switch {
	case len(uses) == 0:
		return invalid("uses", "must hold at least one use")
	case len(uses) > MaxAIUnitsUses:
		return invalid("uses", "must hold at most %d uses, not %d", MaxAIUnitsUses, len(uses))
	}
	seen := make(map[string]bool, len(uses))
	for i, u := range uses {
		if !ids.Valid(u.WorkspaceID) {
			return invalid(useField(i, "workspace_id"), "must be a workspace id (UUID)")
		}
		id := ids.Canonical(u.WorkspaceID)
		if seen[id] {
			return invalid(useField(i, "workspace_id"), "names a workspace an earlier use names: one use per workspace")
		}
		seen[id] = true
		if u.Units == 0 || u.Units > MaxAIUnitsPerUse || u.Units < -MaxAIUnitsPerUse {
			return invalid(useField(i, "units"), "must be a non-zero integer from %d to %d", -MaxAIUnitsPerUse, MaxAIUnitsPerUse)
		}
	}
	return nil
}

func useField(i int, name string) string {
	return fmt.Sprintf("uses[%d].%s", i, name)
}
