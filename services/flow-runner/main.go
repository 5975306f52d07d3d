// Command flow-runner runs flows: operators publish flow definitions
// (immutable versions, in the "flows" schema) and deactivate them through
// the rpc "admin" endpoint with parleyctl; developers list flows, invoke
// them, continue waiting runs' sessions and read run traces through the
// gateway, which forwards /v1/flows* to the rpc "api" endpoint; and the
// chat runs answer the customers of channels in auto and suggest mode,
// from the chat turns messaging publishes. Instances share the load in one
// NATS queue group and one durable consumer of chat turns.
package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/guard"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/httpcall"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/llm"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/observe"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/script"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
	flowrun "github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/internal/ports/events"
	porthttp "github.com/parleyhq/parley/services/flow-runner/internal/ports/http"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// version is the flow-runner's version, also in the http nodes'
// User-Agent; set with -ldflags "-X main.version=...".
var version = "1.0.0"

func main() {
	// A script node runs in a worker process started from this binary:
	// one started so runs its script and exits here, before any service.
	script.RunWorkerIfAsked()
	service.Main(rpc.ServiceFlowRunner, run)
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
	// clock dates runs, sessions and idempotency keys; time.Now when nil.
	clock func() time.Time
}

// serve opens the flow-runner's connections, wires it on them and serves
// until ctx ends. Tests run it with their own configuration and seams.
func serve(ctx context.Context, cfg svcconfig.Config, log *zap.Logger, s seams) error {
	svc, err := service.Open(ctx, rpc.ServiceFlowRunner, version, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS, adapters.Settings...), service.Redis(), service.NATS())
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

// wire builds the flow-runner's adapters, use cases and ports on svc's
// connections, and starts answering chat turns.
func wire(ctx context.Context, cfg svcconfig.Config, svc *service.App, s seams) (service.Ports, error) {
	clock, log := s.clock, svc.Log()
	if clock == nil {
		clock = time.Now
	}
	resetZone, err := cfg.Location()
	if err != nil {
		return service.Ports{}, fmt.Errorf("DAILY_RESET_TZ: %w", err)
	}
	// The AI nodes' provider and safety guard. Without LLM_BASE_URL there
	// is no provider (nil), and an AI node fails with node_failed. The
	// guard is built whatever is configured: with nothing, its Ready is
	// guard.ErrNotConfigured, which refuses a flow with AI nodes before it
	// runs (503 guard_not_wired).
	var provider flowrun.LLM
	if cfg.LLMBaseURL != "" {
		provider = llm.New(llm.Options{
			BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel,
			Prices: cfg.Prices(), AttemptTimeout: cfg.LLMTimeout, Log: log,
		})
	}
	guardian := guard.New(guard.Options{
		BaseURL: cfg.GuardBaseURL, APIKey: cfg.GuardAPIKey, BlockList: cfg.GuardBlockList,
		CheckInterval: cfg.GuardCheckInterval, Log: log,
	})

	// adapters -> app -> ports
	flows := adapters.NewFlowStore(svc.DB)
	// Script nodes run in worker processes; the ones started ahead are
	// stopped once the runs have ended.
	scripts := script.New(script.Defaults)
	runs := adapters.NewRunStore(svc.DB, cfg.IdempotencyTTL)
	// The workspaces' knowledge bases: parleyctl kb fills them, knowledge
	// nodes search them.
	knowledge := adapters.NewKnowledgeStore(svc.DB)
	redisKeys := redisx.Keys{Prefix: cfg.RedisPrefix}
	// Redis keeps the invoke contract's state, shared by every instance;
	// the receipts stored with the runs back its idempotency keys.
	contract := app.Contract{
		Slots:       adapters.RunSlots{Slots: ratelimit.NewSlots(svc.Redis, redisKeys, cfg.SlotLease)},
		Concurrency: cfg.Concurrency,
		Daily:       adapters.DailyRuns{Counter: dailycap.New(svc.Redis, redisKeys, adapters.DailyCapCounter, resetZone)},
		DailyLimit:  cfg.InvokeDailyCap,
		Keys: adapters.InvokeKeys{Store: idempotency.New(svc.Redis, redisKeys, "flows.invoke", idempotency.Options{
			TTL: cfg.IdempotencyTTL, StuckAfter: cfg.IdempotencyStuckAfter, RefField: "run_id",
			Backstop: adapters.ReceiptBackstop{Runs: runs},
			Log:      log,
		})},
		// An answer travels in one rpc reply; the room left is for the
		// reply's envelope (status, headers).
		MaxAnswerBytes: rpc.MaxReplyBytes - 64<<10,
	}
	// The other services, over rpc: the gateway's plans (AI units,
	// workspaces) and messaging's conversations, which chat runs answer.
	rpcClient := rpc.NewClient(svc.NATS, cfg.RPCSubjectPrefix)
	services := adminclient.New(rpcClient)
	uc := app.New(app.Deps{
		Flows:     flows,
		Runs:      runs,
		Knowledge: knowledge,
		ChatFlows: adapters.NewChatFlowStore(svc.DB),
		Engine: &flowrun.Engine{
			HTTP:    httpcall.New(cfg.AllowPrivateTargets, "Parley-Flows/"+version),
			Flows:   adapters.RunnableFlows{Store: flows},
			Scripts: scripts,
			// The gateway owns the plan: AI units are counted there.
			Quota:         adapters.NewPlanQuota(rpcClient),
			LLM:           provider,
			Guard:         guardian,
			Knowledge:     knowledge,
			GuardFallback: cfg.GuardFallbackText,
			Now:           clock,
			Budget:        flowrun.Budget{Time: cfg.BudgetTime, Nodes: cfg.BudgetNodes, Output: int(cfg.OutputLimit)},
		},
		Contract:   contract,
		Guard:      guardian,
		Stages:     cfg.Stages(),
		SessionTTL: cfg.SessionTTL,
		Observer:   observe.New(log, svc.Metrics),
		Clock:      clock,

		Chats:          adapters.NewChatStore(svc.DB),
		Conversations:  adapters.NewConversations(services),
		Workspaces:     adapters.NewWorkspaces(services),
		ChatSessionTTL: cfg.ChatSessionTTL,
		ChatGapWait:    cfg.ChatGapWait(),
	})

	js, err := jetstream.New(svc.NATS)
	if err != nil {
		return service.Ports{}, fmt.Errorf("jetstream: %w", err)
	}
	chatStream := natsx.ChatStream(natsx.Events(cfg.Connections))
	chatTurns, err := events.Start(ctx, js, events.Config{
		Stream:      chatStream,
		Durable:     cfg.ChatConsumer,
		Concurrency: cfg.ChatConcurrency,
		AckWait:     cfg.ChatAckWait,
	}, uc, log)
	if err != nil {
		return service.Ports{}, err
	}
	svc.OnStop("chat turns", chatTurns.Stop)
	svc.ShowJetStream(ctx, js, natsx.Placement{Stream: chatStream.Name}, natsx.Placement{Stream: chatStream.Name, Consumer: cfg.ChatConsumer})
	svc.Go("chat runs' delays", func(ctx context.Context) { uc.WakeChatRuns(ctx, cfg.ChatWakeInterval) })

	svc.Go("idempotency receipt retention", func(ctx context.Context) { uc.RunReceiptRetention(ctx, receiptRetentionEvery) })
	svc.OnStop("script workers", func(context.Context) error { return scripts.Close() })
	return service.Ports{Endpoints: []service.Endpoint{
		// A synchronous run may use its whole RUN_BUDGET_TIME (60 s)
		// inside one request, past the default rpc bound.
		{Name: rpc.EndpointAPI, Handler: porthttp.NewAPI(porthttp.APIDeps{App: uc, PingInterval: cfg.SSEPingInterval, Log: log}),
			Options: []rpc.EndpointOption{rpc.WithHandlerTimeout(rpc.LongHandlerTimeout)}},
		{Name: rpc.EndpointAdmin, Handler: porthttp.NewAdmin(porthttp.AdminDeps{App: uc, Log: log})},
	}}, nil
}

// receiptRetentionEvery is how often expired idempotency receipts are
// purged.
const receiptRetentionEvery = time.Hour
