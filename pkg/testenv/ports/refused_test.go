//go:build unix

package ports_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/ports"
)

// TestRefusedRefusesAndCannotBeTaken: a connection to the address is
// refused at once, and no server can listen there while the test runs.
func TestRefusedRefusesAndCannotBeTaken(t *testing.T) {
	t.Parallel()
	addr := ports.Refused(t)
	_, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server could listen on %s", addr)
	}
}
