package ports

import (
	"net"
	"os"
	"testing"
)

func TestFreeGivesDistinctPortsThatCanBeBound(t *testing.T) {
	t.Parallel()
	got := Free(t, 5)
	seen := map[int]bool{}
	for _, p := range got {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("ports %v: %d is out of range or repeated", got, p)
		}
		seen[p] = true
	}
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	t.Parallel()
	addr := FreeAddr(t)
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr = %q, want 127.0.0.1:<port>", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		// Another process may take the port in between; that is the
		// documented race, rare enough that a retry shows it is not ours.
		addr = FreeAddr(t)
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
	}
	_ = l.Close()
}

// Found ports stay below the kernel's ephemeral range, where no outgoing
// connection takes its local port, when that range is known.
func TestFreeStaysBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low, high := belowEphemeral()
	if high <= low {
		if os.Getenv("CI") != "" {
			t.Fatal("the ephemeral port range is not known here (/proc/sys/net/ipv4/ip_local_port_range): CI runs on Linux, where it is")
		}
		t.Skip("the ephemeral port range is not known here")
	}
	for _, p := range Free(t, 20) {
		if p < low || p > high {
			t.Fatalf("port %d is outside [%d, %d]", p, low, high)
		}
	}
}

// A port is handed out once per process, even to tests asking at the same
// time: a port found free is free again until its server binds it, and
// the next test must not be given it meanwhile.
func TestFreeNeverRepeatsAPort(t *testing.T) {
	t.Parallel()
	const callers, each = 8, 50
	got := make(chan int, callers*each)
	done := make(chan struct{})
	for range callers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				got <- Free(t, 1)[0]
			}
		}()
	}
	for range callers {
		<-done
	}
	close(got)
	seen := map[int]bool{}
	for p := range got {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
