package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
	for _, name := range []string{"postgres", "redis", "nats", "gateway", "messaging", "webhook-dispatcher"} {
		svc, ok := project.Services[name]
		if !ok {
			// Profiled services are dropped unless enabled; the core ones never are.
			t.Errorf("service %s missing", name)
			continue
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
}
