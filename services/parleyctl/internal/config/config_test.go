package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/configdoc"
)

// TestSettingsAreTheDocumentedOnes: parleyctl reads the settings every
// service reads and those of docs/operations.md "parleyctl", under those
// names, and no other.
func TestSettingsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	configdoc.Check[Config](t, "parleyctl", []string{"Every service"})
}
