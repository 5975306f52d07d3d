// Package config is parleyctl's configuration: the same environment the
// services read (docs/operations.md "Configuration"), of which it needs
// the NATS connection,
// the RPC subject prefix and the public addresses it prints.
package config

import (
	"fmt"
	"net"
	"strings"

	"github.com/parleyhq/parley/pkg/config"
)

// Config is parleyctl's configuration.
type Config struct {
	config.Connections

	GatewayAddr   string `env:"GATEWAY_ADDR" envDefault:":8080"`
	MessagingAddr string `env:"MESSAGING_ADDR" envDefault:":8081"`
	// FlowRunnerAddr is where the flow-runner serves its probes; the demo
	// flow's http node calls its /healthz there, from the flow-runner
	// itself.
	FlowRunnerAddr string `env:"FLOW_RUNNER_ADDR" envDefault:":8083"`
	// PublicBaseURL and MessagingPublicURL are what `demo` prints; by default
	// they are derived from the listen addresses on localhost.
	PublicBaseURL      string `env:"PUBLIC_BASE_URL"`
	MessagingPublicURL string `env:"MESSAGING_PUBLIC_URL"`

	// The demo workspace's fixed API key and Telegram channel, so that the
	// README's quick start can be pasted as is. Local development only.
	DemoAPIKey         string `env:"PARLEY_DEMO_API_KEY" envDefault:"pk_demo_parley_local_development_key_2026" secret:"true"`
	DemoTelegramToken  string `env:"DEMO_TELEGRAM_TOKEN" envDefault:"123456:parley-demo-bot-token" secret:"true"`
	DemoTelegramSecret string `env:"DEMO_TELEGRAM_SECRET" envDefault:"parley-demo-telegram-secret" secret:"true"`
}

// Validate checks the settings.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if !strings.HasPrefix(c.DemoAPIKey, "pk_") {
		return fmt.Errorf("PARLEY_DEMO_API_KEY must start with pk_")
	}
	return nil
}

// GatewayURL is the public base address of the API.
func (c Config) GatewayURL() string {
	if c.PublicBaseURL != "" {
		return strings.TrimRight(c.PublicBaseURL, "/")
	}
	return localURL(c.GatewayAddr)
}

// MessagingURL is the base address of platform ingress.
func (c Config) MessagingURL() string {
	if c.MessagingPublicURL != "" {
		return strings.TrimRight(c.MessagingPublicURL, "/")
	}
	return localURL(c.MessagingAddr)
}

// FlowRunnerURL is the base address of the flow-runner's probes, as the
// flow-runner itself reaches them.
func (c Config) FlowRunnerURL() string {
	return localURL(c.FlowRunnerAddr)
}

func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
