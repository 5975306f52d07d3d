// Command webhook-dispatcher delivers customer events to developers'
// webhooks: it consumes the EVENTS stream through a durable consumer shared
// by every instance, signs and posts each event with retries, pauses
// webhooks that keep failing, keeps the delivery log, and serves webhook
// management to the gateway and parleyctl over NATS.
package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/replaystream"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/webhookhttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/isolation"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/ports/events"
	porthttp "github.com/parleyhq/parley/services/webhook-dispatcher/internal/ports/http"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// version is the dispatcher's version, in the webhook User-Agent
// (Parley-Webhooks/<version>); set with -ldflags "-X main.version=...".
var version = "1.0.0"

const (
	// ackMargin is added to the longest round of attempts to give the
	// consumer's ack wait.
	ackMargin = 30 * time.Second
	// retentionEvery is how often the delivery log is purged.
	retentionEvery = time.Hour
)

func main() {
	service.Main(rpc.ServiceDispatcher, run)
}

// run reads the configuration from the environment and serves with
// production's seams.
func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := service.LoadConfig[svcconfig.Config](log, version)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, log, seams{})
}

// seams are what tests replace in the wiring; the zero value is
// production's.
type seams struct {
	// clock stamps deliveries and signatures; time.Now when nil.
	clock func() time.Time
	// resolver finds the addresses of webhook hosts, both for the check
	// when a URL is saved and for every dial (so a test can play DNS
	// rebinding); the system's when nil.
	resolver *net.Resolver
}

// serve opens the dispatcher's connections, wires it on them and serves
// until ctx ends. Tests run it with their own configuration and seams.
func serve(ctx context.Context, cfg svcconfig.Config, log *zap.Logger, s seams) error {
	// No Redis: nothing the dispatcher keeps lives there.
	svc, err := service.Open(ctx, rpc.ServiceDispatcher, version, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS), service.NATS())
	if err != nil {
		return err
	}
	defer svc.Close()
	ports, err := wire(ctx, cfg, svc, s)
	if err != nil {
		return err
	}
	return svc.Serve(ctx, cfg.Addr, ports)
}

// wire builds the dispatcher's adapters, use cases and ports on svc's
// connections, and starts its consumers.
func wire(ctx context.Context, cfg svcconfig.Config, svc *service.App, s seams) (service.Ports, error) {
	clock, resolver, log := s.clock, s.resolver, svc.Log()
	if clock == nil {
		clock = time.Now
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	js, err := jetstream.New(svc.NATS)
	if err != nil {
		return service.Ports{}, fmt.Errorf("jetstream: %w", err)
	}
	// The replay stream exists before the admin route that fills it
	// serves.
	eventsStream := natsx.Events(cfg.Connections)
	replayStream := replaystream.Stream(eventsStream)
	if err := replaystream.Ensure(ctx, js, replayStream); err != nil {
		return service.Ports{}, err
	}

	// adapters -> app -> ports
	policy := app.Policy{
		AllowPrivateTargets: cfg.AllowPrivateTargets,
		RetryDelays:         cfg.RetryDelays,
		AttemptTimeout:      cfg.AttemptTimeout,
		PauseAfter:          cfg.PauseAfter,
		Retention:           cfg.DeliveryRetention,
		Concurrency:         cfg.Concurrency,
		ReplayConcurrency:   cfg.ReplayConcurrency,
		WebhookConcurrency:  cfg.WebhookConcurrency,
		Circuit:             isolation.Policy{After: cfg.CircuitAfter, CoolDown: cfg.CircuitCoolDown},
	}
	webhooks := adapters.NewWebhookStore(svc.DB)
	// The capacity gauges read the use cases, which count on the
	// observer: uc is set before Serve, so before any scrape.
	var uc *app.App
	observer, sampler := observe.Register(svc.Metrics, log, observe.Sources{
		Capacity: func() app.Capacity { return uc.Capacity() },
		Lag: map[string]observe.LagFunc{
			"events": events.Lag(js, eventsStream, cfg.Consumer),
			"replay": events.Lag(js, replayStream, cfg.Consumer),
		},
		CountPaused: webhooks.CountPaused,
	})
	uc = app.New(app.Deps{
		Policy:     policy,
		Webhooks:   webhooks,
		Deliveries: adapters.NewDeliveryStore(svc.DB),
		Sender: webhookhttp.New(webhookhttp.Options{
			AllowPrivateTargets: cfg.AllowPrivateTargets,
			UserAgent:           "Parley-Webhooks/" + version,
			Clock:               clock,
			Resolver:            s.resolver,
			IdleConnsPerHost:    cfg.Concurrency + cfg.ReplayConcurrency,
		}),
		Resolver: resolver,
		Observer: observer,
		Clock:    clock,
	})
	replays := app.NewReplays(app.ReplaysDeps{
		App:        uc,
		Source:     replaystream.NewSource(js, eventsStream),
		Queue:      replaystream.NewQueue(js, replayStream),
		Deliveries: adapters.NewReplayStore(svc.DB),
	})

	// The consumer holds up to DISPATCHER_IN_HAND events; the use case
	// bounds the attempts in flight among them (DISPATCHER_CONCURRENCY,
	// DISPATCHER_WEBHOOK_CONCURRENCY), so events waiting between attempts
	// or for a busy webhook's place keep no other webhook waiting.
	consumer, err := events.Start(ctx, js, events.Config{
		Stream:  eventsStream,
		Durable: cfg.Consumer,
		InHand:  cfg.InHand,
		AckWait: policy.Schedule() + ackMargin,
		// An event handed out within ackMargin of being stored has a
		// full round of ack wait ahead: no extension before attempt 1.
		// Waits for a place extend it every half round, within that.
		Fresh: ackMargin,
	}, uc, log)
	if err != nil {
		return service.Ports{}, err
	}

	// Replayed events share the delivery path and the consumer's name,
	// on their own stream and with their own concurrency.
	replayConsumer, err := events.StartReplay(ctx, js, events.Config{
		Stream:  replayStream,
		Durable: cfg.Consumer,
		InHand:  cfg.ReplayConcurrency,
		AckWait: policy.Schedule() + ackMargin,
	}, events.HandlerFunc(replays.ReplayEvent), log)
	if err != nil {
		svc.OnStop("event consumer", consumer.Stop)
		return service.Ports{}, err
	}
	// Both consumers stop pulling at once, and their deliveries under
	// way finish together: a delivery waiting between attempts hands its
	// event back at once, an attempt in flight finishes and is stored.
	svc.OnStop("event consumers", consumer.Stop, replayConsumer.Stop)

	log.Info("consuming", zap.String("consumer", cfg.Consumer))
	svc.ShowJetStream(ctx, js,
		natsx.Placement{Stream: eventsStream.Name}, natsx.Placement{Stream: eventsStream.Name, Consumer: cfg.Consumer},
		natsx.Placement{Stream: replayStream.Name}, natsx.Placement{Stream: replayStream.Name, Consumer: cfg.Consumer})
	svc.Go("delivery log retention", func(ctx context.Context) { uc.RunRetention(ctx, retentionEvery) })
	svc.Go("metrics sampler", func(ctx context.Context) { sampler.Run(ctx, cfg.MetricsInterval) })
	return service.Ports{Endpoints: []service.Endpoint{
		{Name: rpc.EndpointAPI, Handler: porthttp.NewAPI(porthttp.APIDeps{App: uc, Log: log})},
		{Name: rpc.EndpointAdmin, Handler: porthttp.NewAdmin(porthttp.AdminDeps{App: uc, Replays: replays, Log: log})},
	}}, nil
}
