// Package config is the messaging service's configuration, read from the
// environment (docs/operations.md "Configuration").
package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Config is every setting of the messaging service.
type Config struct {
	config.Connections
	// Proxying is TRUSTED_PROXIES, for the client address the per-address
	// limits count.
	httpx.Proxying

	// Addr is where platform ingress and the probes listen.
	Addr string `env:"MESSAGING_ADDR" envDefault:":8081"`
	// TelegramAPIBase is the Bot API's address; tests point it at a fake.
	TelegramAPIBase string `env:"TELEGRAM_API_BASE" envDefault:"https://api.telegram.org"`
	// MetaGraphAPIBase is the Graph API's address (Messenger, Instagram,
	// comments); tests point it at a fake.
	MetaGraphAPIBase string `env:"META_GRAPH_API_BASE" envDefault:"https://graph.facebook.com/v21.0"`
	// MetaAppSecret signs Meta's webhook posts (X-Hub-Signature-256).
	MetaAppSecret string `env:"META_APP_SECRET" secret:"true"`
	// MetaVerifyToken answers Meta's hub.challenge subscription check.
	MetaVerifyToken string `env:"META_VERIFY_TOKEN" secret:"true"`
	// MessagingWindow is how long after the customer's last message
	// Messenger and Instagram take replies (docs/sending.md).
	MessagingWindow time.Duration `env:"MESSAGING_WINDOW" envDefault:"24h"`
	// PrivateReplyWindow is how long after a comment a private reply may be
	// sent, and how long a commenter who got one waits for the next.
	PrivateReplyWindow time.Duration `env:"PRIVATE_REPLY_WINDOW" envDefault:"168h"`
	// PrivateReplyDailyCap is a page's private replies per day (reset at
	// midnight in DAILY_RESET_TZ).
	PrivateReplyDailyCap int `env:"PRIVATE_REPLY_DAILY_CAP" envDefault:"200"`
	// PlatformTimeout bounds one call to a platform's API.
	PlatformTimeout time.Duration `env:"PLATFORM_TIMEOUT" envDefault:"15s"`
	// IdempotencyTTL is how long a send's Idempotency-Key answers
	// repeats, from its first request.
	IdempotencyTTL time.Duration `env:"IDEMPOTENCY_TTL" envDefault:"24h"`
	// IdempotencyStuckAfter is when a keyed send still running counts as
	// broken (its process died): its key is taken over and a repeat sends.
	IdempotencyStuckAfter time.Duration `env:"IDEMPOTENCY_STUCK_AFTER" envDefault:"5m"`

	// OutboxPollInterval is how often the relay sweeps the outbox for
	// events left unpublished (after a crash or a NATS outage); events are
	// otherwise published right after the commit that writes them.
	OutboxPollInterval time.Duration `env:"OUTBOX_POLL_INTERVAL" envDefault:"1s"`
	// OutboxSweepAge is how old an unpublished event must be before the
	// sweep publishes it: younger ones are still on their way after their
	// commit.
	OutboxSweepAge time.Duration `env:"OUTBOX_SWEEP_AGE" envDefault:"10s"`
	// OutboxPublishTimeout bounds the wait for the stream's ack of one
	// event; past it the event is retried (its Nats-Msg-Id keeps the stream
	// from storing it twice).
	OutboxPublishTimeout time.Duration `env:"OUTBOX_PUBLISH_TIMEOUT" envDefault:"5s"`
	// IngressDedupeRetention is how long a platform delivery's key (a
	// Telegram update_id, a Meta mid) is remembered to drop redeliveries.
	// It must outlast every platform's redelivery: Telegram keeps an update
	// for 24 hours, Meta retries for up to 36.
	IngressDedupeRetention time.Duration `env:"INGRESS_DEDUPE_RETENTION" envDefault:"72h"`

	// SSEPingInterval is the keep-alive comment of the webchat widget's
	// event streams.
	SSEPingInterval time.Duration `env:"SSE_PING_INTERVAL" envDefault:"15s"`
	// WebchatMessagesPerMinute bounds one webchat visitor's messages and
	// button taps, and WebchatAddressMessagesPerMinute those of one client
	// address, whatever visitors it holds (a fresh token per message gains
	// nothing). Counted in Redis, so the bounds hold across instances.
	WebchatMessagesPerMinute        int `env:"WEBCHAT_MESSAGES_PER_MINUTE" envDefault:"30"`
	WebchatAddressMessagesPerMinute int `env:"WEBCHAT_ADDRESS_MESSAGES_PER_MINUTE" envDefault:"120"`
	// WebchatSessionsPerMinute bounds the new visitors (POST .../session)
	// one client address may start per minute, counted in Redis.
	WebchatSessionsPerMinute int `env:"WEBCHAT_SESSIONS_PER_MINUTE" envDefault:"20"`
	// WebchatTokenTTL is how long a visitor token is taken; the widget
	// renews it while it is good, so a returning visitor keeps their thread.
	WebchatTokenTTL time.Duration `env:"WEBCHAT_TOKEN_TTL" envDefault:"168h"`
	// WebchatMaxStreams bounds the widget streams (SSE) one instance holds.
	// The others bound, across every instance, one visitor's streams (open
	// tabs), one client address's and one channel's, so no visitor, address
	// or tenant can fill an instance: each stream holds a lease in Redis,
	// renewed while it is open, lasting WebchatStreamLease once its instance
	// stops renewing it (died).
	WebchatMaxStreams        int           `env:"WEBCHAT_MAX_STREAMS" envDefault:"10000"`
	WebchatStreamsPerVisitor int           `env:"WEBCHAT_STREAMS_PER_VISITOR" envDefault:"5"`
	WebchatStreamsPerAddress int           `env:"WEBCHAT_STREAMS_PER_ADDRESS" envDefault:"50"`
	WebchatStreamsPerChannel int           `env:"WEBCHAT_STREAMS_PER_CHANNEL" envDefault:"2000"`
	WebchatStreamLease       time.Duration `env:"WEBCHAT_STREAM_LEASE" envDefault:"30s"`
	// WebchatFrameAncestors are the sites allowed to embed the widget, as
	// CSP frame-ancestors sources ("*": any; "https://shop.example").
	WebchatFrameAncestors string `env:"WEBCHAT_FRAME_ANCESTORS" envDefault:"*"`
}

// Validate checks the settings at start.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := config.CheckListenAddr("MESSAGING_ADDR", c.Addr); err != nil {
		return err
	}
	for name, base := range map[string]string{"TELEGRAM_API_BASE": c.TelegramAPIBase, "META_GRAPH_API_BASE": c.MetaGraphAPIBase} {
		if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: %q is not an http(s) URL", name, base)
		}
	}
	if c.PrivateReplyDailyCap < 1 {
		return fmt.Errorf("PRIVATE_REPLY_DAILY_CAP: must be at least 1, got %d", c.PrivateReplyDailyCap)
	}
	if err := c.validateWebchat(); err != nil {
		return err
	}
	if c.IdempotencyTTL <= 0 {
		return fmt.Errorf("IDEMPOTENCY_TTL: must be positive, got %s", c.IdempotencyTTL)
	}
	// A send lives at most as long as its request (rpc.HandlerTimeout):
	// a key taken over sooner could send a second time.
	if c.IdempotencyStuckAfter <= rpc.HandlerTimeout || c.IdempotencyStuckAfter > c.IdempotencyTTL {
		return fmt.Errorf("IDEMPOTENCY_STUCK_AFTER: %s must be over a request's longest run (%s) and at most IDEMPOTENCY_TTL (%s)",
			c.IdempotencyStuckAfter, rpc.HandlerTimeout, c.IdempotencyTTL)
	}
	for name, d := range map[string]time.Duration{
		"MESSAGING_WINDOW":       c.MessagingWindow,
		"PRIVATE_REPLY_WINDOW":   c.PrivateReplyWindow,
		"PLATFORM_TIMEOUT":       c.PlatformTimeout,
		"OUTBOX_POLL_INTERVAL":   c.OutboxPollInterval,
		"OUTBOX_SWEEP_AGE":       c.OutboxSweepAge,
		"OUTBOX_PUBLISH_TIMEOUT": c.OutboxPublishTimeout,

		"INGRESS_DEDUPE_RETENTION": c.IngressDedupeRetention,
	} {
		if d <= 0 {
			return fmt.Errorf("%s: must be positive, got %s", name, d)
		}
	}
	// A swept event may have been published already (killed between
	// publish and delete): the stream must still remember its id.
	if c.OutboxSweepAge+c.OutboxPublishTimeout > natsx.EventsDedupWindow/2 {
		return fmt.Errorf("OUTBOX_SWEEP_AGE: %s plus OUTBOX_PUBLISH_TIMEOUT (%s) must be at most half the stream's duplicate window (%s)",
			c.OutboxSweepAge, c.OutboxPublishTimeout, natsx.EventsDedupWindow)
	}
	return nil
}

// validateWebchat checks the widget's settings.
func (c Config) validateWebchat() error {
	if c.SSEPingInterval <= 0 {
		return fmt.Errorf("SSE_PING_INTERVAL: must be positive, got %s", c.SSEPingInterval)
	}
	for name, n := range map[string]int{
		"WEBCHAT_MESSAGES_PER_MINUTE":         c.WebchatMessagesPerMinute,
		"WEBCHAT_ADDRESS_MESSAGES_PER_MINUTE": c.WebchatAddressMessagesPerMinute,
		"WEBCHAT_SESSIONS_PER_MINUTE":         c.WebchatSessionsPerMinute,
		"WEBCHAT_MAX_STREAMS":                 c.WebchatMaxStreams,
		"WEBCHAT_STREAMS_PER_VISITOR":         c.WebchatStreamsPerVisitor,
		"WEBCHAT_STREAMS_PER_ADDRESS":         c.WebchatStreamsPerAddress,
		"WEBCHAT_STREAMS_PER_CHANNEL":         c.WebchatStreamsPerChannel,
	} {
		if n < 1 {
			return fmt.Errorf("%s: must be at least 1, got %d", name, n)
		}
	}
	// A lease is renewed every third of it; under a second, renewals would
	// be most of the traffic.
	if c.WebchatStreamLease < time.Second {
		return fmt.Errorf("WEBCHAT_STREAM_LEASE: must be at least 1s, got %s", c.WebchatStreamLease)
	}
	if c.WebchatTokenTTL < time.Second {
		return fmt.Errorf("WEBCHAT_TOKEN_TTL: must be at least 1s, got %s", c.WebchatTokenTTL)
	}
	if err := c.Proxying.Validate(); err != nil {
		return err
	}
	// The value goes into a response header as one CSP directive.
	if strings.TrimSpace(c.WebchatFrameAncestors) == "" || strings.ContainsAny(c.WebchatFrameAncestors, ";,\r\n") {
		return fmt.Errorf("WEBCHAT_FRAME_ANCESTORS: %q must be space-separated CSP sources", c.WebchatFrameAncestors)
	}
	return nil
}
