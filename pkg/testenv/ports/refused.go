//go:build unix

package ports

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Refused returns "127.0.0.1:<port>" where every connection is refused
// until the test ends: a dependency that is down. The port is bound and
// not listening, so no other process can take it meanwhile, as one could
// take a port found free and released (a parallel test's server then
// answered there, or reset the connection, instead of refusing it).
func Refused(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("ports: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("ports: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("ports: getsockname: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
