package rpc_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/micro"

	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
)

// TestEndpointsAreOnTheDocumentedSubjects: a service's endpoints are
// served on <RPC_SUBJECT_PREFIX>.<service>.api and .admin
// (docs/operations.md "Every service"), as a NATS micro service of the
// service's name whose queue group is that name, so that an operator's
// nats CLI finds them there and instances share the requests.
func TestEndpointsAreOnTheDocumentedSubjects(t *testing.T) {
	t.Parallel()
	if got := rpc.Subject("parley.rpc", rpc.ServiceMessaging, rpc.EndpointAdmin); got != "parley.rpc.messaging.admin" {
		t.Fatalf("Subject = %q", got)
	}
	env := testenv.New(t)
	nc := env.NATS(t)
	service := "subjects-" + uuid.NewString()[:8]
	none := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	rpcserver.Serve(t, nc, env.RPCPrefix, service, env.Logger(t), map[string]http.Handler{rpc.EndpointAPI: none, rpc.EndpointAdmin: none})

	msg, err := nc.Request("$SRV.INFO."+service, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, ep := range info.Endpoints {
		subjects = append(subjects, ep.Subject)
		if ep.QueueGroup != service {
			t.Errorf("endpoint %s in queue group %q, want %q", ep.Name, ep.QueueGroup, service)
		}
	}
	slices.Sort(subjects)
	want := []string{env.RPCPrefix + "." + service + ".admin", env.RPCPrefix + "." + service + ".api"}
	if info.Name != service || !slices.Equal(subjects, want) {
		t.Fatalf("service %q on %v, want %q on %v", info.Name, subjects, service, want)
	}
}
