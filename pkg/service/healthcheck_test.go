package service

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/ports"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(ready.Close)

	tests := []struct {
		name    string
		target  string
		healthy bool
	}{
		{"ready", ready.URL + "/readyz", true},
		{"not ready", ready.URL + "/other", false},
		{"nothing listening", "http://" + ports.Refused(t) + "/readyz", false},
		{"not a URL", "127.0.0.1:8080", false},
		{"not http", "ftp://127.0.0.1/readyz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := healthcheck(tt.target)
			if (err == nil) != tt.healthy {
				t.Fatalf("healthcheck(%q) = %v, want healthy %v", tt.target, err, tt.healthy)
			}
		})
	}
}
