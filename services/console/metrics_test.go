package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// metricsText is the console's series as its /metrics serves them.
func (h *harness) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestMetrics: requests are counted by their route's pattern (never the
// ids in their path) and the status they were answered with, errors
// included; sign-ins by outcome; and the calls to the services behind by
// service and outcome.
func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme")
	h.operator(t, "ann@example.com", ws)
	b := h.browser(t)

	if r := b.signIn("ann@example.com", "not the password"); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong password = %d", r.status)
	}
	stale := b.do(http.MethodPost, "/login", url.Values{"email": {"ann@example.com"}, "password": {password}}, nil)
	if stale.status != http.StatusForbidden {
		t.Fatalf("sign-in without the form's token = %d", stale.status)
	}
	b.mustSignIn("ann@example.com")
	if r := b.get("/workspaces/" + ws); r.status != http.StatusOK {
		t.Fatalf("workspace page = %d", r.status)
	}
	// The gateway's 404 for a workspace the operator may see but which
	// is gone: a refusal in words.
	h.gateway.mu.Lock()
	delete(h.gateway.workspaces, ws)
	h.gateway.mu.Unlock()
	if r := b.get("/workspaces/" + ws); r.status != http.StatusNotFound {
		t.Fatalf("page of a workspace the gateway does not know = %d", r.status)
	}
	if r := b.get("/no/such/page"); r.status != http.StatusNotFound {
		t.Fatalf("unknown page = %d", r.status)
	}

	m := h.metricsText(t)
	for _, want := range []string{
		`parley_console_sign_ins_total{outcome="wrong_credentials"} 1`,
		`parley_console_sign_ins_total{outcome="stale_form"} 1`,
		`parley_console_sign_ins_total{outcome="signed_in"} 1`,
		`parley_console_sign_ins_total{outcome="limited"} 0`,
		`parley_console_requests_total{route="/login",status="401"} 1`,
		`parley_console_requests_total{route="/login",status="403"} 1`,
		`parley_console_requests_total{route="/workspaces/:id",status="200"} 1`,
		`parley_console_requests_total{route="/workspaces/:id",status="404"} 1`,
		`parley_console_requests_total{route="unmatched",status="404"} 1`,
		`parley_console_upstream_duration_seconds_count{outcome="answered",service="gateway"}`,
		`parley_console_upstream_duration_seconds_count{outcome="refused",service="gateway"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, ws) {
		t.Error("a workspace id is in a metric's labels")
	}
}

// TestSignInLimitCounted: a sign-in refused by the failed sign-in limits
// is counted as limited, apart from wrong passwords.
func TestSignInLimitCounted(t *testing.T) {
	t.Parallel()
	s := defaults()
	s.perAcct = 1
	h := newHarness(t, s)
	h.operator(t, "bob@example.com", h.workspace("Bobs"))
	b := h.browser(t)
	b.signIn("bob@example.com", "wrong")
	if r := b.signIn("bob@example.com", "wrong again"); r.status != http.StatusTooManyRequests {
		t.Fatalf("second failure with a limit of one = %d", r.status)
	}
	m := h.metricsText(t)
	for _, want := range []string{
		`parley_console_sign_ins_total{outcome="wrong_credentials"} 1`,
		`parley_console_sign_ins_total{outcome="limited"} 1`,
		`parley_console_requests_total{route="/login",status="429"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestUnavailableServiceCounted: a call no service answers is counted as
// unavailable, apart from the services' refusals.
func TestUnavailableServiceCounted(t *testing.T) {
	t.Parallel()
	s := defaults()
	s.withoutGateway = true
	h := newHarness(t, s)
	ws := h.workspace("Acme")
	// A platform operator: creating a workspace's needs the gateway.
	h.operator(t, "pat@example.com", "")
	b := h.browser(t)
	b.mustSignIn("pat@example.com")
	if r := b.get("/workspaces/" + ws); r.status != http.StatusServiceUnavailable {
		t.Fatalf("workspace page without the gateway = %d", r.status)
	}
	m := h.metricsText(t)
	for _, want := range []string{
		`parley_console_upstream_duration_seconds_count{outcome="unavailable",service="gateway"} 1`,
		`parley_console_requests_total{route="/workspaces/:id",status="503"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
