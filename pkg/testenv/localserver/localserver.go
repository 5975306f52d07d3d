// Package localserver runs a test's own Redis and PostgreSQL servers, on
// free loopback ports, for a test that breaks them: flushes Redis, kills
// either with SIGKILL, restarts them on the same port. The shared servers
// (DATABASE_URL, REDIS_URL) are never touched, so such a test disturbs no
// other test or checkout. Point a testenv.Env at them with
// testenv.Servers.
//
// The servers are the machine's binaries (redis-server on PATH,
// PostgreSQL 15's under /usr/lib/postgresql/15/bin), run as real processes
// rather than anything embedded: what is tested is what an operator sees
// when a server crashes or restarts. Each lives in a directory of its own,
// removed with its process when the test ends; its output is kept there
// and written to the test's log when the test failed.
package localserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary finds name on PATH, or at one of the usual places.
func binary(t testing.TB, name string, places ...string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range places {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	t.Fatalf("localserver: no %s binary on PATH or in %v", name, places)
	return ""
}
