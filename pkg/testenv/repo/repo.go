// Package repo finds the repository a test runs in, for tests that read
// its documents and files (docs/, the Makefile).
package repo

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository's root: the directory holding go.work, above
// the test's.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.work not found above the test's directory")
		}
		dir = parent
	}
}
