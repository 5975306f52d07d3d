package rpc_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// Instances of one service share its requests (docs/architecture.md: each
// service is a NATS micro service in a queue group): every request is
// handled by exactly one of them, and each takes a part.
func TestInstancesShareTheRequests(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)
	var handled [2]atomic.Int64
	for i := range handled {
		e := httpx.NewEcho(log)
		e.GET("/v1/who", func(c echo.Context) error {
			handled[i].Add(1)
			return c.NoContent(http.StatusNoContent)
		})
		srv, err := rpc.NewServer(env.NATS(t), env.RPCPrefix, "sharedsvc", "1.0.0", log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		if err := srv.Handle(rpc.EndpointAPI, e); err != nil {
			t.Fatal(err)
		}
	}
	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	const calls = 40
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			if err := client.CallJSON(context.Background(), "sharedsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/who", nil, nil); err != nil {
				t.Errorf("call: %v", err)
			}
		})
	}
	wg.Wait()
	a, b := handled[0].Load(), handled[1].Load()
	if a+b != calls || a == 0 || b == 0 {
		t.Fatalf("instances handled %d and %d of %d requests; want each request once, shared by both", a, b, calls)
	}
}
