package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeFileIsValid loads docker-compose.yml with compose-go, the
// loader `docker compose config` uses, so a broken file fails `make test`
// on machines without Docker too.
func TestComposeFileIsValid(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithOsEnv, cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "redis", "nats", "gateway", "messaging", "webhook-dispatcher", "flow-runner", "console"} {
		svc, ok := project.Services[name]
		if !ok {
			// Profiled services are dropped unless enabled; the core ones never are.
			t.Errorf("service %s missing", name)
			continue
		}
		// Safe to leave running: everything is probed and comes back.
		if svc.HealthCheck == nil || len(svc.HealthCheck.Test) == 0 {
			t.Errorf("%s has no healthcheck", name)
		}
		if svc.Restart != "unless-stopped" {
			t.Errorf("%s restart = %q, want unless-stopped", name, svc.Restart)
		}
		if dep, ok := svc.DependsOn["nats"]; ok && dep.Condition != "service_healthy" {
			t.Errorf("%s waits for nats to be %s, want service_healthy", name, dep.Condition)
		}
		if svc.Build != nil {
			// NATS is a trust boundary: every service authenticates.
			env := svc.Environment
			if env["NATS_USER"] == nil || env["NATS_PASSWORD"] == nil || *env["NATS_PASSWORD"] == "" {
				t.Errorf("%s does not authenticate to nats: NATS_USER/NATS_PASSWORD missing", name)
			}
		}
		if svc.Build != nil {
			dockerfile := svc.Build.Dockerfile
			if !filepath.IsAbs(dockerfile) {
				dockerfile = filepath.Join(svc.Build.Context, dockerfile)
			}
			if _, err := os.Stat(dockerfile); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	// Services that serve only probes and metrics stay on the host's loopback.
	for _, name := range []string{"webhook-dispatcher", "flow-runner"} {
		for _, p := range project.Services[name].Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes port %d on %q, want 127.0.0.1 only", name, p.Target, p.HostIP)
			}
		}
	}
	// The browser reaches the console through a published port, from
	// Docker's bridge, not loopback: without CONSOLE_INSECURE_COOKIES its
	// Secure cookie never comes back over http:// and sign-in fails. With
	// it, the port is published to this machine alone.
	// TestInsecureCookiesOnlyInCompose keeps the setting out of deploy/.
	console := project.Services["console"]
	if v := console.Environment["CONSOLE_INSECURE_COOKIES"]; v == nil || *v != "true" {
		t.Error("the console does not set CONSOLE_INSECURE_COOKIES=true: sign-in over http://localhost:8084 would fail")
	}
	for _, p := range console.Ports {
		if p.HostIP != "127.0.0.1" {
			t.Errorf("the console sends its cookie over plain HTTP but publishes port %d on %q, want 127.0.0.1 only", p.Target, p.HostIP)
		}
	}
	// parleyctl (the tools profile) creates console operators through the
	// console's rpc endpoint, so it waits for every service the suite runs.
	parleyctl, err := project.GetDisabledService("parleyctl")
	if err != nil {
		t.Fatalf("parleyctl: %v", err)
	}
	for name, svc := range project.Services {
		if svc.Build == nil {
			continue
		}
		if dep, ok := parleyctl.DependsOn[name]; !ok || dep.Condition != "service_healthy" {
			t.Errorf("parleyctl does not wait for %s to be healthy", name)
		}
	}
	// Compose SIGKILLs after stop_grace_period (10 s unless set): each
	// service gets at least its Kubernetes grace period, which
	// TestK8sBase derives from its shutdown steps.
	for _, d := range renderK8s(t, "base").deployments {
		svc, ok := project.Services[d.Name]
		want := d.Spec.Template.Spec.TerminationGracePeriodSeconds
		if !ok || want == nil {
			continue
		}
		if svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) < time.Duration(*want)*time.Second {
			t.Errorf("%s: stop_grace_period %v, want at least %ds (its Kubernetes grace period)", d.Name, svc.StopGracePeriod, *want)
		}
	}
	nats := project.Services["nats"]
	if cmd := strings.Join(nats.Command, " "); !strings.Contains(cmd, "--user") || !strings.Contains(cmd, "--pass") {
		t.Errorf("nats runs without authentication: %q", cmd)
	}
	// One NATS server (the file says why), which holds one replica of a
	// stream: a service asking for more would not start.
	if cmd := strings.Join(nats.Command, " "); strings.Contains(cmd, "--routes") || strings.Contains(cmd, "--cluster") {
		t.Errorf("nats is clustered in compose: %q", cmd)
	}
	for name, svc := range project.Services {
		if v := svc.Environment["EVENTS_REPLICAS"]; v != nil && *v != "1" {
			t.Errorf("%s: EVENTS_REPLICAS = %s on compose's one NATS server", name, *v)
		}
	}
}

// TestInsecureCookiesOnlyInCompose: nothing under deploy/ (the Kubernetes
// manifests, the Dockerfiles) turns on CONSOLE_INSECURE_COOKIES, the
// plain-HTTP session cookie of a local compose try-out.
func TestInsecureCookiesOnlyInCompose(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(filepath.Join("..", "deploy"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(body), "CONSOLE_INSECURE_COOKIES") {
			t.Errorf("%s sets CONSOLE_INSECURE_COOKIES: only docker-compose.yml may", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
