package apicheck

import (
	"net/http"
	"sync"
	"testing"
)

// Hosts sends each request to the checker of its host (host:port), and
// every request to a host without one straight through. One Transport over
// it serves a whole test binary whose tests run in parallel, each with its
// own servers on their own ports: a mismatch fails the test that started
// the server, whichever client sent the request.
type Hosts struct {
	mu       sync.RWMutex
	checkers map[string]*Checker
}

// Watch validates the requests to host with c until t ends.
func (h *Hosts) Watch(t testing.TB, host string, c *Checker) {
	h.mu.Lock()
	if h.checkers == nil {
		h.checkers = map[string]*Checker{}
	}
	h.checkers[host] = c
	h.mu.Unlock()
	t.Cleanup(func() {
		h.mu.Lock()
		if h.checkers[host] == c {
			delete(h.checkers, host)
		}
		h.mu.Unlock()
	})
}

func (h *Hosts) checker(host string) *Checker {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.checkers[host]
}

// Transport returns base (http.DefaultTransport when nil) validating the
// requests to watched hosts.
func (h *Hosts) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &hostsTransport{hosts: h, base: base}
}

type hostsTransport struct {
	hosts *Hosts
	base  http.RoundTripper
}

func (ht *hostsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := ht.hosts.checker(req.URL.Host)
	if c == nil {
		return ht.base.RoundTrip(req)
	}
	return c.Transport(ht.base).RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (ht *hostsTransport) CloseIdleConnections() {
	if ci, ok := ht.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
