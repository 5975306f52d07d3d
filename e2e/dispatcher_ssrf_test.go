package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestWebhookURLsToNonPublicAddressesAreRefused is the SSRF matrix at the
// public API: without WEBHOOK_ALLOW_PRIVATE_TARGETS, PUT /v1/webhook
// through the gateway refuses a URL to every special-purpose range, in
// every spelling, with 400 invalid_request naming url, and saves nothing.
// (Names that resolve to such addresses are refused on every dial; see
// services/webhook-dispatcher/ssrf_test.go.)
func TestWebhookURLsToNonPublicAddressesAreRefused(t *testing.T) {
	t.Parallel()
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=false")
	_, key := s.developer(t)
	// A canary on loopback: the URLs aimed at it in any spelling must
	// never lead to a connection.
	var canaryConns atomic.Int32
	canary := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	canary.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			canaryConns.Add(1)
		}
	}
	canary.StartTLS()
	t.Cleanup(canary.Close)
	_, port, _ := net.SplitHostPort(canary.Listener.Addr().String())

	blocked := []struct{ kind, url string }{
		{"loopback", "https://127.0.0.1/hook"},
		{"loopback, anywhere in 127/8", "https://127.255.10.1:8443/hook"},
		{"loopback v6", "https://[::1]/hook"},
		{"unspecified", "https://0.0.0.0/hook"},
		{"this network (0/8)", "https://0.1.2.3/hook"},
		{"unspecified v6", "https://[::]/hook"},
		{"private 10/8", "https://10.0.0.1/hook"},
		{"private 10/8, top", "https://10.255.255.254/hook"},
		{"private 172.16/12", "https://172.16.0.1/hook"},
		{"private 172.16/12, top", "https://172.31.255.254/hook"},
		{"private 192.168/16", "https://192.168.1.10/hook"},
		{"link-local", "https://169.254.10.20/hook"},
		{"link-local v6", "https://[fe80::1]/hook"},
		{"link-local v6 with zone", "https://[fe80::1%25eth0]/hook"},
		{"cloud metadata", "https://169.254.169.254/latest/meta-data/"},
		{"cloud metadata v6 (AWS)", "https://[fd00:ec2::254]/latest/meta-data/"},
		{"CGNAT 100.64/10", "https://100.64.0.1/hook"},
		{"CGNAT 100.64/10, top", "https://100.127.255.254/hook"},
		{"IETF protocol assignments", "https://192.0.0.8/hook"},
		{"documentation TEST-NET-1", "https://192.0.2.10/hook"},
		{"documentation TEST-NET-2", "https://198.51.100.10/hook"},
		{"documentation TEST-NET-3", "https://203.0.113.10/hook"},
		{"documentation v6", "https://[2001:db8::1]/hook"},
		{"documentation v6 (3fff::/20)", "https://[3fff::1]/hook"},
		{"benchmarking 198.18/15", "https://198.18.0.1/hook"},
		{"benchmarking 198.18/15, top", "https://198.19.255.254/hook"},
		{"benchmarking v6", "https://[2001:2::1]/hook"},
		{"6to4 relay anycast", "https://192.88.99.1/hook"},
		{"6to4 v6", "https://[2002:7f00:1::1]/hook"},
		{"Teredo v6", "https://[2001::1]/hook"},
		{"multicast", "https://224.0.0.1/hook"},
		{"multicast, top", "https://239.255.255.250/hook"},
		{"multicast v6", "https://[ff02::1]/hook"},
		{"reserved 240/4", "https://240.0.0.1/hook"},
		{"broadcast", "https://255.255.255.255/hook"},
		{"unique local fc00::/7", "https://[fc00::1]/hook"},
		{"unique local fd00::/8", "https://[fd12:3456:789a::1]/hook"},
		{"IPv4-mapped loopback", "https://[::ffff:127.0.0.1]/hook"},
		{"IPv4-mapped loopback, hex", "https://[::ffff:7f00:1]/hook"},
		{"IPv4-mapped private", "https://[::ffff:10.0.0.1]/hook"},
		{"IPv4-mapped metadata", "https://[::ffff:169.254.169.254]/hook"},
		{"IPv4-compatible loopback", "https://[::127.0.0.1]/hook"},
		{"NAT64 of a private address", "https://[64:ff9b::10.0.0.1]/hook"},
		{"NAT64 of loopback", "https://[64:ff9b::7f00:1]/hook"},
		{"loopback, octal", "https://0177.0.0.1/hook"},
		{"loopback, short form", "https://127.1/hook"},
		{"loopback, one number", "https://2130706433/hook"},
		{"loopback, hex", "https://0x7f000001/hook"},
		{"loopback, trailing dot", "https://127.0.0.1./hook"},
		{"localhost", "https://localhost/hook"},
		{"localhost, trailing dot", "https://localhost./hook"},
		{"a name under localhost", "https://hooks.localhost/hook"},
		{"localhost.localdomain", "https://localhost.localdomain/hook"},
		{"single-label name", "https://intranet/hook"},
		{"mDNS .local", "https://printer.local/hook"},
		{"home.arpa", "https://nas.home.arpa/hook"},
		{".internal", "https://metadata.google.internal/computeMetadata/v1/"},
		{"the canary", "https://127.0.0.1:" + port + "/hook"},
		{"the canary, IPv4-mapped", "https://[::ffff:127.0.0.1]:" + port + "/hook"},
		{"the canary, octal", "https://0177.0.0.1:" + port + "/hook"},
		{"the canary by name", "https://localhost:" + port + "/hook"},
	}
	for _, tt := range blocked {
		status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", map[string]string{"url": tt.url})
		msg, _ := out["message"].(string)
		if status != http.StatusBadRequest || out["code"] != "invalid_request" ||
			!strings.HasPrefix(msg, "url ") || !strings.Contains(msg, "public address") {
			t.Errorf("%s: PUT /v1/webhook %s = %d %v, want 400 invalid_request naming url", tt.kind, tt.url, status, out)
		}
	}
	// Plain http is refused before any address is looked at.
	status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", map[string]string{"url": "http://93.184.216.34/hook"})
	if msg, _ := out["message"].(string); status != http.StatusBadRequest || out["code"] != "invalid_request" || msg != "url must use https" {
		t.Errorf("http URL: %d %v", status, out)
	}
	// None of it was saved, so there is nothing to send a test event to.
	status, _, out = s.api(t, key, http.MethodGet, "/v1/webhook", nil)
	if status != http.StatusNotFound || out["code"] != "webhook_not_found" {
		t.Fatalf("after the refusals GET /v1/webhook = %d %v", status, out)
	}
	status, _, out = s.api(t, key, http.MethodPost, "/v1/webhook/test", nil)
	if status != http.StatusNotFound || out["code"] != "webhook_not_found" {
		t.Fatalf("after the refusals POST /v1/webhook/test = %d %v", status, out)
	}
	if n := canaryConns.Load(); n != 0 {
		t.Fatalf("the canary on loopback got %d connections", n)
	}

	// Public addresses, v4 and v6, are saved: the refusals are about the
	// ranges, not about literals.
	for _, url := range []string{"https://93.184.216.34/hook", "https://[2606:4700:4700::1111]:8443/hook"} {
		status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", map[string]string{"url": url})
		if w, _ := out["webhook"].(map[string]any); status != http.StatusOK || w["url"] != url {
			t.Errorf("PUT /v1/webhook %s = %d %v, want saved", url, status, out)
		}
	}
}
