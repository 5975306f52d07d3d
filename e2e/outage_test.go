package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestDependencyOutagesAre503AtOnceAndHeal takes PostgreSQL, Redis and NATS
// away from each service in turn (each service reaches each through its own
// proxy, which the test cuts), while a developer keeps calling the gateway
// and a customer keeps writing. During each outage the calls that need the
// missing dependency are answered 503 service_unavailable with Retry-After
// within moments, the service's /readyz says it is not ready, and nothing
// else breaks; once it is back, everything works again by itself and every
// customer message reaches the webhook exactly once.
func TestDependencyOutagesAre503AtOnceAndHeal(t *testing.T) {
	t.Parallel()
	deps := map[string]map[string]*proxy.Proxy{}
	s := startSuiteOwn(t, func(service string, env *testenv.Env) []string {
		pg, dbURL := proxy.Front(t, env.DatabaseURL)
		rd, redisURL := proxy.Front(t, env.RedisURL)
		ns, natsURL := proxy.Front(t, env.NATSURL)
		deps[service] = map[string]*proxy.Proxy{"postgres": pg, "redis": rd, "nats": ns}
		return []string{"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL, "NATS_URL=" + natsURL}
	}, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	ws, key := s.developer(t)
	ch := s.addChannel(t, ws, "external", "--kind", "telegram", "--token", "700100200:AAH-outage-e2e-token")
	rcv := receiver.New(t, receiver.Status(http.StatusNoContent), receiver.Within(45*time.Second), checkDeliveries(t))
	s.saveWebhook(t, key, rcv.URL)
	readyz := map[string]string{
		"gateway":            s.gatewayURL + "/readyz",
		"messaging":          s.messagingURL + "/readyz",
		"webhook-dispatcher": s.dispatcherURL + "/readyz",
		"flow-runner":        s.flowRunnerURL + "/readyz",
	}

	// A customer message; Telegram repeats an update that was not
	// answered 200, and ingress stores each update once.
	updates := 0
	write := func(id int) int {
		body := telegramMessage(id, 4242, "Ada", fmt.Sprintf("message %d", id))
		return postUpdateStatus(t, s.messagingURL+"/ingress/telegram/"+ch.ID, ch.Secret, body)
	}
	var conversation string
	updates++
	if st := write(updates); st != http.StatusOK {
		t.Fatalf("telegram ingress = %d before any outage", st)
	}
	var first customerEvent
	if err := json.Unmarshal(rcv.WaitFor(t, "message.received").Body, &first); err != nil || first.Data.ConversationID == "" {
		t.Fatalf("the first event: %v", err)
	}
	conversation = first.Data.ConversationID

	tests := []struct {
		service, dep string
		// down is a call that needs the dependency: 503 while it is
		// away; works is one that does not and keeps working.
		down, works string
		// stillReady: the service does not use the dependency at all.
		stillReady bool
	}{
		{"gateway", "postgres", "/v1/me", "", false},
		{"gateway", "redis", "/v1/me", "", false},
		{"gateway", "nats", "/v1/conversations", "", false},
		{"messaging", "postgres", "/v1/conversations/" + conversation + "/messages", "/v1/webhook", false},
		{"messaging", "redis", "", "/v1/conversations/" + conversation + "/messages", false},
		{"messaging", "nats", "/v1/conversations", "/v1/webhook", false},
		{"webhook-dispatcher", "postgres", "/v1/webhook/deliveries", "/v1/conversations", false},
		{"webhook-dispatcher", "redis", "", "/v1/webhook/deliveries", true},
		{"webhook-dispatcher", "nats", "/v1/webhook", "/v1/conversations", false},
		// The flow-runner keeps nothing in Redis yet, but opens it for the
		// invoke contract's keys and says so on /readyz.
		{"flow-runner", "postgres", "/v1/flows", "/v1/conversations", false},
		{"flow-runner", "redis", "", "/v1/flows", false},
		{"flow-runner", "nats", "/v1/flows", "/v1/conversations", false},
	}
	for _, tt := range tests {
		what := tt.service + " without " + tt.dep
		p := deps[tt.service][tt.dep]
		p.Cut()
		if tt.stillReady {
			// Give it time to show it would care, then check it does not.
			wait.Until(t, 2*time.Second, what+": a round of probes", func() bool { return probe(readyz[tt.service]) != 0 })
			if st := probe(readyz[tt.service]); st != http.StatusOK {
				t.Fatalf("%s: /readyz = %d, want 200 (it does not use %s)", what, st, tt.dep)
			}
		} else {
			wait.Until(t, 10*time.Second, what+": /readyz 503", func() bool { return probe(readyz[tt.service]) == http.StatusServiceUnavailable })
		}
		if tt.dep == "nats" && tt.service != rpc.ServiceGateway {
			waitUnrouted(t, s, tt.service)
		}
		if tt.down != "" {
			for range 3 {
				wantUnavailable(t, s, key, what, tt.down)
			}
		}
		if tt.works != "" {
			if st, _, body := s.api(t, key, http.MethodGet, tt.works, nil); st != http.StatusOK {
				t.Fatalf("%s: GET %s = %d %v, want 200 (it does not need %s's %s)", what, tt.works, st, body, tt.service, tt.dep)
			}
		}
		updates++
		id := updates
		// Ingress needs only messaging's database: without it, 503, which
		// Telegram retries; the relay waits out a NATS outage.
		want := http.StatusOK
		if tt.service == "messaging" && tt.dep == "postgres" {
			want = http.StatusServiceUnavailable
		}
		if st := write(id); st != want {
			t.Fatalf("%s: telegram ingress = %d, want %d", what, st, want)
		}

		p.Restore()
		wait.Until(t, 15*time.Second, what+": /readyz 200 again", func() bool { return probe(readyz[tt.service]) == http.StatusOK })
		for _, path := range []string{tt.down, tt.works} {
			if path == "" {
				continue
			}
			wait.Until(t, 15*time.Second, what+": GET "+path+" 200 again", func() bool {
				st, _, _ := s.api(t, key, http.MethodGet, path, nil)
				return st == http.StatusOK
			})
		}
		// Telegram's retry of an update refused during the outage.
		if st := write(id); st != http.StatusOK {
			t.Fatalf("%s, back: telegram ingress = %d", what, st)
		}
		rcv.WaitForN(t, "message.received", updates)
	}
	if n := rcv.Distinct(); n != updates {
		t.Fatalf("the webhook got %d distinct deliveries for %d customer messages", n, updates)
	}
}

// waitUnrouted waits until the NATS server has dropped the subscriptions
// of a service whose NATS connection was cut. The service sees the cut
// (and its /readyz says so) a moment before the server does, and a call
// the server routes to the dead subscription in that moment is lost: the
// gateway answers it 503 only when its rpc call times out (30 s), as for
// a call in flight to an instance that crashes. This test is about calls
// made while the service is away, so it starts them once nothing routes
// there.
func waitUnrouted(t *testing.T, s *suite, service string) {
	t.Helper()
	nc := s.env.NATS(t)
	subject := rpc.Subject(s.env.RPCPrefix, service, rpc.EndpointAdmin)
	wait.Until(t, 10*time.Second, service+": no responders on "+subject, func() bool {
		_, err := nc.Request(subject, nil, 250*time.Millisecond)
		return errors.Is(err, nats.ErrNoResponders)
	})
}

// wantUnavailable calls path through the gateway and wants 503
// service_unavailable with Retry-After, within about a second.
func wantUnavailable(t *testing.T, s *suite, key, what, path string) {
	t.Helper()
	start := time.Now()
	st, h, body := s.api(t, key, http.MethodGet, path, nil)
	took := time.Since(start)
	if st != http.StatusServiceUnavailable || body["code"] != "service_unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("%s: GET %s = %d %v (Retry-After %q) after %s, want 503 service_unavailable with Retry-After", what, path, st, body, h.Get("Retry-After"), took)
	}
	if took > 1500*time.Millisecond {
		t.Fatalf("%s: GET %s answered 503 after %s, want within about a second", what, path, took)
	}
}

// probe is the status of GET url, 0 when it does not answer.
func probe(url string) int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
