// Command messaging runs Parley's messaging service: platform ingress and
// the website widget on MESSAGING_ADDR, the inbox and send API over the
// gateway's rpc, the channel and conversation admin over rpc, and the
// relay that publishes customer events and chat turns from the outbox to
// JetStream.
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/observe"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/telegram"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	porthttp "github.com/parleyhq/parley/services/messaging/internal/ports/http"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

const version = "1.0.0"

func main() {
	service.Main(rpc.ServiceMessaging, run)
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
	// clock dates what is stored, checks the messaging and private-reply
	// windows and issues visitor tokens; time.Now when nil.
	clock func() time.Time
}

// serve opens messaging's connections, wires it on them and serves until
// ctx ends. Tests run it with their own configuration and seams.
func serve(ctx context.Context, cfg svcconfig.Config, log *zap.Logger, s seams) error {
	svc, err := service.Open(ctx, rpc.ServiceMessaging, version, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS), service.Redis(), service.NATS())
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

// wire builds messaging's adapters, use cases and ports on svc's
// connections, and makes sure the events and chat streams exist. The
// widget streams it opens end when ctx does.
func wire(ctx context.Context, cfg svcconfig.Config, svc *service.App, s seams) (service.Ports, error) {
	log := svc.Log()
	js, err := jetstream.New(svc.NATS)
	if err != nil {
		return service.Ports{}, fmt.Errorf("jetstream: %w", err)
	}
	stream := natsx.Events(cfg.Connections)
	if _, err := stream.Ensure(ctx, js); err != nil {
		return service.Ports{}, err
	}
	chat := natsx.ChatStream(stream)
	if _, err := chat.EnsureChat(ctx, js); err != nil {
		return service.Ports{}, err
	}
	svc.ShowJetStream(ctx, js, natsx.Placement{Stream: stream.Name}, natsx.Placement{Stream: chat.Name})
	// Private replies count into the page's daily cap shared with every
	// other private-reply producer (pkg/dailycap), in DAILY_RESET_TZ days.
	resetZone, err := cfg.Location()
	if err != nil {
		return service.Ports{}, fmt.Errorf("DAILY_RESET_TZ: %w", err)
	}
	redisKeys := redisx.Keys{Prefix: cfg.RedisPrefix}

	// adapters
	// The sends' idempotency receipts are written with what each send
	// stores, and pruned once their keys are free again.
	receipts := adapters.NewReceiptStore(svc.DB, cfg.IdempotencyTTL)
	// Every platform delivery reads its channel: ingress takes it as read
	// up to ChannelMaxAge ago.
	channels := adapters.NewChannelCache(adapters.NewChannelStore(svc.DB), adapters.ChannelMaxAge)
	// One Graph API client for every Meta call: Messenger and Instagram
	// sends, and the profiles of new customers.
	metaGraph := meta.NewGraph(cfg.MetaGraphAPIBase, &http.Client{Timeout: cfg.PlatformTimeout})
	metaTransport := meta.NewTransport(metaGraph)
	// Webchat replies go out on NATS, so a widget connected to any instance
	// gets them.
	webchatBus := webchat.NewBus(svc.NATS, cfg.RPCSubjectPrefix, webchat.Limits{MaxStreams: cfg.WebchatMaxStreams})
	observer := observe.New(log, svc.Metrics, webchatBus.Streams)

	// app
	relay := app.NewRelay(app.RelayDeps{
		Store:     adapters.NewOutboxStore(svc.DB),
		Publisher: adapters.NewJetStreamPublisher(js, stream, chat),
		Observer:  observer,
		Clock:     s.clock,
		Poll:      cfg.OutboxPollInterval, SweepAge: cfg.OutboxSweepAge, PublishTimeout: cfg.OutboxPublishTimeout,
		Prune: []app.PruneTask{{
			Name: "ingress_receipts", Retention: cfg.IngressDedupeRetention,
			Prune: adapters.NewIngressReceiptStore(svc.DB).Prune,
		}, {
			Name: "idempotency_receipts", Retention: cfg.IdempotencyTTL,
			Prune: receipts.Prune,
		}},
	})
	use := app.New(app.Deps{
		Channels:       channels,
		RecentChannels: channels.Lookup(),
		Inbox:          adapters.NewConversationStore(svc.DB).WithReceipts(receipts),
		Suggestions:    adapters.NewSuggestionStore(svc.DB, receipts),
		Transports: map[channel.Kind]conversation.Transport{
			channel.KindTelegram:  telegram.NewClient(cfg.TelegramAPIBase, &http.Client{Timeout: cfg.PlatformTimeout}),
			channel.KindMessenger: metaTransport,
			channel.KindInstagram: metaTransport,
			channel.KindWebchat:   webchat.NewTransport(webchatBus),
		},
		Window:          cfg.MessagingWindow,
		EventSubject:    stream.Subject,
		ChatSubject:     chat.ChatSubject,
		EventsCommitted: relay.Publish,
		InboxChanged:    adapters.NewInboxNotices(svc.NATS, cfg.RPCSubjectPrefix, log).Changed,
		Observer:        observer,
		Clock:           s.clock,
		Comments: app.CommentDeps{
			Store:                adapters.NewCommentStore(svc.DB).WithReceipts(receipts),
			Replier:              meta.NewComments(metaGraph),
			DailyCap:             adapters.NewPrivateReplyCap(dailycap.New(svc.Redis, redisKeys, dailycap.PrivateReply, resetZone)),
			Commenters:           adapters.NewCommenterClaims(svc.Redis, redisKeys),
			PrivateReplyWindow:   cfg.PrivateReplyWindow,
			PrivateReplyDailyCap: cfg.PrivateReplyDailyCap,
		},
	})

	// The relay keeps publishing while the requests in flight finish, and
	// stops after publishing the events they committed.
	svc.Go("outbox relay", relay.Run)
	// Widget streams never end by themselves: they are closed as shutdown
	// begins, so the HTTP server's graceful stop does not wait on them.
	context.AfterFunc(ctx, webchatBus.Close)

	// ports
	// The send routes' Idempotency-Keys, in Redis so that every instance
	// sees the same claims, with the receipts as their durable side.
	// The chat runs' keys live the same way, in a scope of their own.
	keys := func(scope, refField string) *idempotency.Store {
		return idempotency.New(svc.Redis, redisKeys, scope, idempotency.Options{
			TTL: cfg.IdempotencyTTL, StuckAfter: cfg.IdempotencyStuckAfter, RefField: refField, Backstop: receipts, Log: log,
		})
	}
	public := porthttp.NewPublic(porthttp.PublicDeps{
		App: use, Observer: observer, Log: log,
		MetaAppSecret: cfg.MetaAppSecret, MetaVerifyToken: cfg.MetaVerifyToken, MetaProfiles: metaGraph,
		Webchat: porthttp.WebchatDeps{
			App: app.NewWebchat(app.WebchatDeps{App: use, Visitors: adapters.NewWebchatStore(svc.DB), TokenTTL: cfg.WebchatTokenTTL}),
			Bus: webchatBus, PingInterval: cfg.SSEPingInterval, FrameAncestors: cfg.WebchatFrameAncestors,
			// The widget's bounds are counted in Redis, so they hold across
			// instances.
			Limiter:                  ratelimit.New(svc.Redis, redisKeys, time.Minute),
			Streams:                  ratelimit.NewSlots(svc.Redis, redisKeys, cfg.WebchatStreamLease),
			MessagesPerMinute:        cfg.WebchatMessagesPerMinute,
			AddressMessagesPerMinute: cfg.WebchatAddressMessagesPerMinute,
			SessionsPerMinute:        cfg.WebchatSessionsPerMinute,
			StreamsPerVisitor:        cfg.WebchatStreamsPerVisitor,
			StreamsPerAddress:        cfg.WebchatStreamsPerAddress,
			StreamsPerChannel:        cfg.WebchatStreamsPerChannel,
			StreamLease:              cfg.WebchatStreamLease,
			Proxies:                  cfg.Proxies(),
		},
	})
	return service.Ports{
		Public: public,
		Endpoints: []service.Endpoint{
			{Name: rpc.EndpointAPI, Handler: porthttp.NewAPI(porthttp.APIDeps{
				App: use, Log: log,
				SendKeys: porthttp.SendKeys{
					Messages: keys(porthttp.SendKeyScope, porthttp.RefMessageID),
					Comments: keys(porthttp.SendKeyScope, porthttp.RefCommentID),
				},
			})},
			{Name: rpc.EndpointAdmin, Handler: porthttp.NewAdmin(porthttp.AdminDeps{
				App: use, Log: log,
				ChatKeys: porthttp.ChatKeys{
					Messages:    keys(porthttp.ChatKeyScope, porthttp.RefMessageID),
					Suggestions: keys(porthttp.ChatKeyScope, porthttp.RefRunID),
				},
			})},
		},
	}, nil
}
