package service

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// HealthcheckCommand is the argument that turns a service binary into its
// own container healthcheck: `gateway healthcheck http://127.0.0.1:8080/readyz`
// exits 0 when the URL answers 2xx. The images are distroless (no shell, no
// curl), so the binary probes itself.
const HealthcheckCommand = "healthcheck"

// healthcheckTimeout bounds one probe; the orchestrator retries.
const healthcheckTimeout = 3 * time.Second

// healthcheck GETs target and reports whether it answered 2xx.
func healthcheck(target string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("healthcheck: %q is not an http(s) URL", target)
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("healthcheck: %s answered %s", target, resp.Status)
	}
	return nil
}
