package adminclient_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
)

// received is one request as a fake service's handler saw it.
type received struct {
	service     string
	endpoint    string
	method      string
	path        string
	query       string
	body        []byte
	contentType string
	workspaceID string
	flowsAPI    bool
}

// answer is what a fake service answers a route with.
type answer struct {
	status int
	body   string
}

// services stands in for the gateway, messaging, the dispatcher and the
// flow-runner on real NATS, through pkg/rpc's server: each answers
// "SERVICE METHOD path" from a table and records what it received.
type services struct {
	mu       sync.Mutex
	answers  map[string]answer
	requests []received
	// queued answers a route from a list, one each call, before answers.
	queued map[string][]answer
}

// newClient starts the fake services under a prefix of the test's own and
// returns a client of them.
func newClient(t *testing.T, answers map[string]answer) (*adminclient.Client, *services) {
	t.Helper()
	return newClientQueued(t, answers, nil)
}

// newClientQueued is newClient with routes answered from lists.
func newClientQueued(t *testing.T, answers map[string]answer, queued map[string][]answer) (*adminclient.Client, *services) {
	t.Helper()
	env := testenv.New(t)
	s := &services{answers: answers, queued: queued}
	for _, service := range []string{rpc.ServiceGateway, rpc.ServiceMessaging, rpc.ServiceDispatcher, rpc.ServiceFlowRunner} {
		rpcserver.Serve(t, env.NATS(t), env.RPCPrefix, service, env.Logger(t), map[string]http.Handler{
			rpc.EndpointAdmin: s.handler(service, rpc.EndpointAdmin),
			rpc.EndpointAPI:   s.handler(service, rpc.EndpointAPI),
		})
	}
	return adminclient.New(rpc.NewClient(env.NATS(t), env.RPCPrefix)), s
}

func (s *services) handler(service, endpoint string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, received{
			service: service, endpoint: endpoint, method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			body: body, contentType: r.Header.Get("Content-Type"),
			workspaceID: rpc.WorkspaceID(r.Context()), flowsAPI: rpc.HasFeature(r.Context(), gatewayapi.FeatureFlowsAPI),
		})
		route := service + " " + r.Method + " " + r.URL.Path
		a, ok := s.answers[route]
		if list := s.queued[route]; len(list) > 0 {
			a, ok, s.queued[route] = list[0], true, list[1:]
		}
		s.mu.Unlock()
		if !ok {
			a = answer{http.StatusNotFound, `{"code":"not_found","message":"no such route"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	})
}

// last returns the last request received.
func (s *services) last(t *testing.T) received {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("no request reached the services")
	}
	return s.requests[len(s.requests)-1]
}

// all returns every request received, in order.
func (s *services) all() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.requests...)
}

// bodyOf decodes a request body into a map, nil for none.
func bodyOf(t *testing.T, r received) map[string]any {
	t.Helper()
	if len(r.body) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("request body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

var ctx = context.Background()
