package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/adminclient"
	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/services/console/internal/adapters/observe"
)

// TestRunServesAndStops starts the console as main does, from the
// environment, on a fresh database it migrates itself: an operator is
// created through its admin endpoint over NATS, signs in through the
// pages, sees the gateway's absence in words; then the console stops. Not
// parallel: it sets process environment variables.
func TestRunServesAndStops(t *testing.T) {
	env := testenv.New(t)
	env.Setenv(t)
	addr := ports.FreeAddr(t)
	t.Setenv("CONSOLE_ADDR", addr)

	bg := testenv.Serve(t, "console", func(ctx context.Context) error { return run(ctx, env.Logger(t)) })
	base := "http://" + addr
	bg.WaitReady(base, 20*time.Second)
	ctx := context.Background()

	admin := adminclient.New(rpc.NewClient(env.NATS(t), env.RPCPrefix))
	const pw = "correct horse battery staple"
	if _, err := admin.CreateOperator(ctx, consoleapi.NewOperator{Email: "root@example.com", Password: pw}); err != nil {
		t.Fatal(err)
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := get(t, browser, base+"/login")
	token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(form)
	if token == nil {
		t.Fatalf("no sign-in form: %s", form)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{
		"email": {"root@example.com"}, "password": {pw}, "csrf_token": {token[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in = %d", resp.StatusCode)
	}
	// No gateway runs here: the list says so in words.
	if page := get(t, browser, base+"/workspaces"); !strings.Contains(page, "gateway is not running") {
		t.Fatalf("workspaces without a gateway: %s", page)
	}

	bg.Stop()
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestMetricsAreTheDocumentedOnes: what main registers is what
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "console", func(reg prometheus.Registerer) { observe.New(reg) })
}
