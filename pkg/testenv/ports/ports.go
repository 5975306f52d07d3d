// Package ports finds free TCP ports on loopback for a test to give a
// server it starts, when that server must be told its address before it
// listens (a built binary's *_ADDR setting, an in-process serve that binds
// its own listener).
//
// The port is free when found and released at once, so another process may
// take it before the server binds it; tests whose servers can take an
// existing listener should prefer "127.0.0.1:0" and ask for the address.
// Within one test process a port is handed out once: parallel tests of a
// package (the e2e suites start several servers each) never get the same
// port while the first is still starting its server.
package ports

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// handedOut holds the ports this process was given. A port found free
// and released is free again until its server binds it: without this,
// a parallel test could be given it in between, and its server would
// fail to bind (or, worse, the test would find the other test's server
// answering there).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut records port as given; false when it was given before.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// FreeAddr returns "127.0.0.1:<port>" with a port that was free just now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Free(t, 1)[0]))
}

// Free returns n distinct ports that were free just now. They are held
// open together while found, so the n are distinct.
//
// They are taken below the kernel's ephemeral range when it is known
// (Linux: /proc/sys/net/ipv4/ip_local_port_range). A port the kernel hands
// out for ":0" comes from that range, the same one every outgoing
// connection takes its local port from: with many tests connecting at
// once, such a port was seen taken by a client's connection between being
// found and the server binding it ("address already in use"). Below the
// range only a process that binds that very port can take it.
func Free(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	low, high := belowEphemeral()
	for i := 0; i < n; {
		l, err := listenFree(low, high)
		if err != nil {
			t.Fatalf("ports: %v", err)
		}
		listeners = append(listeners, l)
		if port := l.Addr().(*net.TCPAddr).Port; handOut(port) {
			ports[i] = port
			i++
		}
	}
	return ports
}

// listenFree listens on a random free port in [low, high], or on one the
// kernel picks when the range is empty or every try found its port taken.
func listenFree(low, high int) (net.Listener, error) {
	if high > low {
		for range 64 {
			port := low + rand.IntN(high-low+1)
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// belowEphemeral is the range of ports under the kernel's ephemeral range,
// from 10000 (clear of the well-known and usual service ports); empty when
// the ephemeral range is unknown or starts too low.
func belowEphemeral() (low, high int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start <= 11000 {
		return 0, 0
	}
	return 10000, start - 1
}
