package httpcall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// The client reads exactly what the domain promises its nodes.
func TestCapsAgree(t *testing.T) {
	t.Parallel()
	if safehttp.MaxResponseBody != run.MaxResponseBytes {
		t.Fatalf("safehttp reads %d bytes, the domain expects %d", safehttp.MaxResponseBody, run.MaxResponseBytes)
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Method+" "+r.Header.Get("X-Order")+" "+r.UserAgent())
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	dev := New(true, "Parley-Flows/test")
	resp, err := dev.Call(ctx, run.HTTPRequest{Method: "PUT", URL: srv.URL + "/o", Headers: map[string]string{"X-Order": "42"}, Body: []byte(`{"a":1}`), Timeout: time.Second})
	if err != nil || resp.Status != http.StatusCreated || string(resp.Body) != `{"a":1}` || resp.Headers["x-echo"] != "PUT 42 Parley-Flows/test" {
		t.Fatalf("Call = %+v, %v", resp, err)
	}

	// Without private targets, the same loopback server is refused.
	strict := New(false, "Parley-Flows/test")
	_, err = strict.Call(ctx, run.HTTPRequest{Method: "GET", URL: strings.Replace(srv.URL, "http://", "https://", 1)})
	var ue *safehttp.URLError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("strict Call = %v, want the loopback address refused", err)
	}
}
