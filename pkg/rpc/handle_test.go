package rpc

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv"
)

// Once Handle returns, a request from another connection reaches the
// endpoint: no window in which the service looks not running.
func TestHandleReturnsWithTheEndpointLive(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	client := NewClient(env.NATS(t), env.RPCPrefix)
	for i := range 20 {
		name := fmt.Sprintf("live%d", i)
		srv, err := NewServer(env.NATS(t), env.RPCPrefix, name, "1.0.0", env.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		if err := srv.Handle(EndpointAPI, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })); err != nil {
			t.Fatal(err)
		}
		if err := client.CallJSON(context.Background(), name, EndpointAPI, "", http.MethodGet, "/", nil, nil); err != nil {
			t.Fatalf("call %d right after Handle: %v", i, err)
		}
	}
}
