// Command messaging runs Parley's messaging service: platform ingress on
// MESSAGING_ADDR, the inbox and send API over the gateway's rpc, and the
// relay that publishes customer events from the outbox to JetStream.
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/telegram"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	httpport "github.com/parleyhq/parley/services/messaging/internal/ports/http"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

const (
	schema  = "messaging"
	version = "1.0.0"
)

func main() {
	service.Main(rpc.ServiceMessaging, run)
}

func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := service.LoadConfig[svcconfig.Config](log, version)
	if err != nil {
		return err
	}

	svc, err := service.Open(ctx, rpc.ServiceMessaging, version, log, cfg.Connections,
		service.Postgres(schema, migrations.FS), service.Redis(), service.NATS())
	if err != nil {
		return err
	}
	defer svc.Close()

	w, err := build(ctx, cfg, svc.DB, svc.Redis, svc.NATS, log, svc.Metrics)
	if err != nil {
		return err
	}
	// The relay keeps publishing while the requests in flight finish, and
	// stops after them with its current event done.
	svc.Go("outbox relay", w.relay.Run)

	// Widget streams never end by themselves: close them as shutdown
	// begins, so the HTTP server's graceful stop does not wait on them.
	stopStreams := context.AfterFunc(ctx, w.webchat.Close)
	defer stopStreams()
	return svc.Serve(ctx, cfg.Addr, service.Ports{Public: w.public, Endpoints: []service.Endpoint{
		{Name: rpc.EndpointAPI, Handler: w.api},
		{Name: rpc.EndpointAdmin, Handler: w.admin},
	}})
}

// wired is the messaging service put together: its three HTTP surfaces and the
// outbox relay.
type wired struct {
	public *echo.Echo // platform ingress, on MESSAGING_ADDR (run adds the probes)
	api    *echo.Echo // rpc endpoint "api": the public /v1 routes
	admin  *echo.Echo // rpc endpoint "admin": parleyctl
	relay  *app.Relay
	// webchat holds this instance's widget streams.
	webchat *webchat.Bus
}

// build wires adapters, use cases and ports, and makes sure the events
// stream exists.
func build(ctx context.Context, cfg svcconfig.Config, gdb *gorm.DB, rdb *redis.Client, nc *nats.Conn, log *zap.Logger, reg *prometheus.Registry) (*wired, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	stream := natsx.EventsStream{Name: cfg.EventsStream, SubjectPrefix: cfg.EventsSubjectPrefix}
	if _, err := stream.Ensure(ctx, js); err != nil {
		return nil, err
	}

	metrics := app.NewMetrics(reg)
	// The sends' idempotency receipts are written with what each send
	// stores, and pruned once their keys are free again.
	receipts := adapters.NewReceiptStore(gdb, cfg.IdempotencyTTL)
	relay := app.NewRelay(
		adapters.NewOutboxStore(gdb),
		adapters.NewJetStreamPublisher(js, stream.Name),
		app.RelayConfig{Poll: cfg.OutboxPollInterval, Retention: cfg.OutboxRetention, PublishTimeout: cfg.OutboxPublishTimeout,
			Prune: []app.PruneTask{{
				Name: "ingress_receipts", Retention: cfg.IngressDedupeRetention,
				Prune: adapters.NewIngressReceiptStore(gdb).Prune,
			}, {
				Name: "idempotency_receipts", Retention: cfg.IdempotencyTTL,
				Prune: receipts.Prune,
			}}},
		metrics, log)
	// One Graph API client for every Meta call: Messenger and Instagram
	// sends, and the profiles of new customers.
	metaGraph := meta.NewGraph(cfg.MetaGraphAPIBase, &http.Client{Timeout: cfg.PlatformTimeout})
	metaTransport := meta.NewTransport(metaGraph)
	// Private replies count into the page's daily cap shared with every
	// other private-reply producer (pkg/dailycap), in DAILY_RESET_TZ days.
	resetZone, err := cfg.Location()
	if err != nil {
		return nil, fmt.Errorf("DAILY_RESET_TZ: %w", err)
	}
	redisKeys := redisx.Keys{Prefix: cfg.RedisPrefix}
	// Webchat replies go out on NATS, so a widget connected to any instance
	// gets them.
	webchatBus := webchat.NewBus(nc, cfg.RPCSubjectPrefix, webchat.Limits{MaxStreams: cfg.WebchatMaxStreams})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "messaging_webchat_streams",
		Help: "Webchat widget streams (SSE) open in this process.",
	}, func() float64 { return float64(webchatBus.Streams()) }))
	use := app.New(app.Deps{
		Channels: adapters.NewChannelStore(gdb),
		Inbox:    adapters.NewConversationStore(gdb).WithReceipts(receipts),
		Transports: map[channel.Kind]conversation.Transport{
			channel.KindTelegram:  telegram.NewClient(cfg.TelegramAPIBase, &http.Client{Timeout: cfg.PlatformTimeout}),
			channel.KindMessenger: metaTransport,
			channel.KindInstagram: metaTransport,
			channel.KindWebchat:   webchat.NewTransport(webchatBus),
		},
		Window:       cfg.MessagingWindow,
		EventSubject: stream.Subject,
		EventWritten: relay.Kick,
		Metrics:      metrics,
		Log:          log,
		Comments: app.CommentDeps{
			Store:                adapters.NewCommentStore(gdb).WithReceipts(receipts),
			Replier:              meta.NewComments(metaGraph),
			DailyCap:             adapters.NewPrivateReplyCap(dailycap.New(rdb, redisKeys, dailycap.PrivateReply, resetZone)),
			Commenters:           adapters.NewCommenterClaims(rdb, redisKeys),
			PrivateReplyWindow:   cfg.PrivateReplyWindow,
			PrivateReplyDailyCap: cfg.PrivateReplyDailyCap,
		},
	})
	// The send routes' Idempotency-Keys, in Redis so that every instance
	// sees the same claims, with the receipts as their durable side.
	sendKeys := func(refField string) *idempotency.Store {
		return idempotency.New(rdb, redisKeys, httpport.SendKeyScope, idempotency.Options{
			TTL: cfg.IdempotencyTTL, StuckAfter: cfg.IdempotencyStuckAfter, RefField: refField, Backstop: receipts, Log: log,
		})
	}
	handlers := httpport.New(use, metrics, httpport.Options{MetaAppSecret: cfg.MetaAppSecret, MetaVerifyToken: cfg.MetaVerifyToken, MetaProfiles: metaGraph,
		SendKeys: httpport.SendKeys{Messages: sendKeys(httpport.RefMessageID), Comments: sendKeys(httpport.RefCommentID)},
		Webchat: &httpport.WebchatOptions{
			App: app.NewWebchat(use, adapters.NewWebchatStore(gdb), cfg.WebchatTokenTTL), Bus: webchatBus,
			PingInterval: cfg.SSEPingInterval, FrameAncestors: cfg.WebchatFrameAncestors,
			// The widget's bounds are counted in Redis, so they hold across
			// instances.
			Limiter:                  ratelimit.New(rdb, redisKeys, time.Minute),
			Streams:                  ratelimit.NewSlots(rdb, redisKeys, cfg.WebchatStreamLease),
			MessagesPerMinute:        cfg.WebchatMessagesPerMinute,
			AddressMessagesPerMinute: cfg.WebchatAddressMessagesPerMinute,
			SessionsPerMinute:        cfg.WebchatSessionsPerMinute,
			StreamsPerVisitor:        cfg.WebchatStreamsPerVisitor,
			StreamsPerAddress:        cfg.WebchatStreamsPerAddress,
			StreamsPerChannel:        cfg.WebchatStreamsPerChannel,
			StreamLease:              cfg.WebchatStreamLease,
			Proxies:                  cfg.Proxies(),
		}}, log)

	public := httpx.NewEcho(log)
	handlers.RegisterPublic(public)
	api := httpx.NewEcho(log)
	handlers.RegisterAPI(api)
	admin := httpx.NewEcho(log)
	handlers.RegisterAdmin(admin)
	return &wired{public: public, api: api, admin: admin, relay: relay, webchat: webchatBus}, nil
}
