package rpc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// TestEndpointHandlerTimeout: a handler's deadline is HandlerTimeout unless
// its endpoint asks for another (a flow run may work for a minute).
func TestEndpointHandlerTimeout(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)
	e := httpx.NewEcho(log)
	e.GET("/v1/deadline", func(c echo.Context) error {
		deadline, ok := c.Request().Context().Deadline()
		if !ok {
			return c.JSON(http.StatusOK, map[string]float64{"left": -1})
		}
		return c.JSON(http.StatusOK, map[string]float64{"left": time.Until(deadline).Seconds()})
	})
	srv := serveAPI(t, env.NATS(t), env.RPCPrefix, "timeoutsvc", log, e)
	if err := srv.Handle(rpc.EndpointAdmin, e, rpc.WithHandlerTimeout(rpc.LongHandlerTimeout)); err != nil {
		t.Fatal(err)
	}
	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	tests := []struct {
		endpoint string
		want     time.Duration
	}{
		{rpc.EndpointAPI, rpc.HandlerTimeout},
		{rpc.EndpointAdmin, rpc.LongHandlerTimeout},
	}
	for _, tt := range tests {
		var out map[string]float64
		if err := client.CallJSON(context.Background(), "timeoutsvc", tt.endpoint, "ws", http.MethodGet, "/v1/deadline", nil, &out); err != nil {
			t.Fatalf("%s: %v", tt.endpoint, err)
		}
		left := time.Duration(out["left"] * float64(time.Second))
		// The call itself takes a little of it; five seconds is plenty on
		// a loaded machine and far less than the two bounds differ by.
		if left > tt.want || left < tt.want-5*time.Second {
			t.Errorf("%s: handler had %s left, want about %s", tt.endpoint, left, tt.want)
		}
	}
	if rpc.LongCallTimeout <= rpc.LongHandlerTimeout {
		t.Errorf("LongCallTimeout %s does not outwait LongHandlerTimeout %s", rpc.LongCallTimeout, rpc.LongHandlerTimeout)
	}
}
