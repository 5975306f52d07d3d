package webhookhttp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// A receiver busy with as many deliveries as the dispatcher runs at once
// keeps every connection: the next rounds reuse them instead of dialing.
func TestSenderKeepsAConnectionPerDeliveryUnderWay(t *testing.T) {
	t.Parallel()
	const concurrent = 80 // more than the default pool
	tests := []struct {
		name     string
		idle     int
		wantMore bool // dials beyond the first round's
	}{
		{"sized to the concurrency", concurrent, false},
		{"default", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var arrived sync.WaitGroup
			var dials atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				// Answer once every request of the round is in, so that
				// all of them hold a connection at once.
				arrived.Done()
				arrived.Wait()
				w.WriteHeader(http.StatusOK)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					dials.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			s := New(Options{AllowPrivateTargets: true, IdleConnsPerHost: tt.idle})
			for round := range 3 {
				arrived.Add(concurrent)
				var sent sync.WaitGroup
				for range concurrent {
					sent.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						if res := s.Send(ctx, delivery.Request{URL: srv.URL, Secret: "whsec_k", Event: "test", DeliveryID: "d", Body: []byte(`{}`)}); res.Status != 200 {
							t.Errorf("round %d: Send = %+v", round, res)
						}
					})
				}
				sent.Wait()
			}
			if got := dials.Load(); (got > concurrent) != tt.wantMore {
				t.Errorf("%d connections for %d concurrent deliveries over 3 rounds", got, concurrent)
			}
		})
	}
}
