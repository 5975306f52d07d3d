// Package ports finds free TCP ports on loopback for a test to give a
// server it starts, when that server must be told its address before it
// listens (a built binary's *_ADDR setting, an in-process serve that binds
// its own listener).
//
// The port is free when found and released at once, so another process may
// take it before the server binds it; tests whose servers can take an
// existing listener should prefer "127.0.0.1:0" and ask for the address.
package ports

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr returns "127.0.0.1:<port>" with a port that was free just now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Free(t, 1)[0]))
}

// Free returns n distinct ports that were free just now. They are held
// open together while found, so the n are distinct.
func Free(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("ports: %v", err)
		}
		listeners = append(listeners, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
