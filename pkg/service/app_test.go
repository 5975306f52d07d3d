package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/db"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

var migrations = fstest.MapFS{"00001_init.sql": {Data: []byte("-- +goose Up\nCREATE TABLE lifecycle.t (id int);\n")}}

// open starts an App with every connection, logging to an observer.
func open(t *testing.T) (*service.App, *testenv.Env, *observer.ObservedLogs) {
	t.Helper()
	env := testenv.New(t)
	core, logs := observer.New(zapcore.InfoLevel)
	// Options in any order: the connections still open Postgres first.
	app, err := service.Open(context.Background(), "lifecycle", "1.0.0", zap.New(core), env.Connections(),
		service.NATS(), service.Redis(), service.Postgres("lifecycle", migrations))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	return app, env, logs
}

// connectionsUp checks that every connection of app still works.
func connectionsUp(ctx context.Context, app *service.App) error {
	return errors.Join(db.Ping(ctx, app.DB), app.Redis.Ping(ctx).Err(), app.NATS.FlushWithContext(ctx))
}

// messages are the lifecycle's log lines, without the migrations'.
func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		if e.Message != "migration applied" {
			out = append(out, e.Message)
		}
	}
	return out
}

func rpcRequest(path string) *rpcv1.Request {
	return &rpcv1.Request{Method: http.MethodGet, Path: path}
}

func logged(logs *observer.ObservedLogs, msg string) bool {
	return logs.FilterMessage(msg).Len() > 0
}

// The shutdown stops HTTP, then waits for the rpc request in flight (which
// is answered), then stops workers latest first while the connections still
// work, then drains NATS, closes Redis and the database, and says stopped.
func TestServeShutsDownInOrder(t *testing.T) {
	t.Parallel()
	app, env, logs := open(t)

	entered, release := make(chan struct{}, 1), make(chan struct{})
	api := echo.New()
	api.GET("/slow", func(c echo.Context) error {
		entered <- struct{}{}
		<-release
		// Answered with the database: it must still be open.
		if err := db.Ping(c.Request().Context(), app.DB); err != nil {
			return err
		}
		return c.String(http.StatusOK, "done")
	})

	var mu sync.Mutex
	var seen []string // each worker's stop, with whether the connections still worked
	record := func(what string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := connectionsUp(ctx, app); err != nil {
			what += ": " + err.Error()
		}
		mu.Lock()
		seen = append(seen, what)
		mu.Unlock()
	}
	app.OnStop("consumer", func(context.Context) error { record("consumer"); return nil })
	app.Go("worker", func(ctx context.Context) {
		<-ctx.Done()
		record("worker")
	})

	addr := ports.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- app.Serve(ctx, addr, service.Ports{Endpoints: []service.Endpoint{{Name: rpc.EndpointAPI, Handler: api}}})
	}()
	wait.For(t, 10*time.Second, "ready", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})

	answer := make(chan error, 1)
	go func() {
		var body []byte
		resp, err := rpc.NewClient(env.NATS(t), env.RPCPrefix).Do(context.Background(), "lifecycle", rpc.EndpointAPI, rpcRequest("/slow"))
		if err == nil {
			body = resp.GetBody()
			if string(body) != "done" {
				err = errors.New("answered " + string(body))
			}
		}
		answer <- err
	}()
	<-entered
	cancel()
	wait.Until(t, 15*time.Second, "http stopped", func() bool { return logged(logs, "http server stopped") })
	if logged(logs, "rpc server stopped") {
		t.Fatal("the rpc server stopped with a request in flight")
	}
	close(release)
	if err := <-answer; err != nil {
		t.Fatalf("the request in flight at shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}

	want := []string{"serving", "stopping", "http server stopped", "rpc server stopped", "worker stopped", "consumer stopped",
		"nats drained", "redis closed", "postgres closed", "stopped"}
	if got := messages(logs); !slices.Equal(got, want) {
		t.Fatalf("shutdown logged\n%q\nwant\n%q", got, want)
	}
	if want := []string{"worker", "consumer"}; !slices.Equal(seen, want) {
		t.Fatalf("workers stopped as %q, want %q with the connections up", seen, want)
	}
	if !app.NATS.IsClosed() {
		t.Fatal("nats connection not closed")
	}
}

// Close without Serve (start-up failed after Open) stops what was started
// and closes the connections, once.
func TestCloseWithoutServe(t *testing.T) {
	t.Parallel()
	app, _, logs := open(t)
	stops := 0
	app.OnStop("consumer", func(context.Context) error { stops++; return nil })
	app.Close()
	app.Close()
	want := []string{"consumer stopped", "nats drained", "redis closed", "postgres closed", "stopped"}
	if got := messages(logs); !slices.Equal(got, want) || stops != 1 {
		t.Fatalf("close logged %q, stopped the consumer %d times; want %q once", got, stops, want)
	}
}

// A listener that cannot start is Serve's error, after the same shutdown.
func TestServeFailsWhenTheAddressIsTaken(t *testing.T) {
	t.Parallel()
	app, _, logs := open(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = app.Serve(context.Background(), l.Addr().String(), service.Ports{Public: httpx.NewEcho(zap.NewNop())})
	if err == nil {
		t.Fatal("serve on a taken address returned nil")
	}
	if !logged(logs, "stopped") || !logged(logs, "postgres closed") {
		t.Fatalf("no orderly shutdown after the failure: %q", messages(logs))
	}
}

// The stops given in one registration run at once: here each waits for the
// other.
func TestStopsOfOneRegistrationRunTogether(t *testing.T) {
	t.Parallel()
	app, _, logs := open(t)
	both := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(2)
	meet := func(context.Context) error {
		arrived.Done()
		<-both
		return nil
	}
	app.OnStop("consumers", meet, meet)
	go func() { arrived.Wait(); close(both) }()
	app.Close()
	if !logged(logs, "consumers stopped") {
		t.Fatalf("logged %q", messages(logs))
	}
}

// Endpoints without NATS cannot be served: Serve says so, after the same
// orderly shutdown, instead of failing on a nil connection.
func TestServeRefusesEndpointsWithoutNATS(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	core, logs := observer.New(zapcore.InfoLevel)
	app, err := service.Open(context.Background(), "lifecycle", "1.0.0", zap.New(core), env.Connections(), service.Redis())
	if err != nil {
		t.Fatal(err)
	}
	err = app.Serve(context.Background(), ports.FreeAddr(t), service.Ports{Endpoints: []service.Endpoint{{Name: rpc.EndpointAPI, Handler: echo.New()}}})
	if err == nil || !strings.Contains(err.Error(), "service.NATS()") {
		t.Fatalf("serve = %v, want the missing NATS named", err)
	}
	if !logged(logs, "redis closed") || !logged(logs, "stopped") {
		t.Fatalf("no orderly shutdown after the refusal: %q", messages(logs))
	}
}

// ShowJetStream logs where each stream and consumer is at start, and
// /readyz shows it from then on without judging it: a stream that cannot
// be read is shown with its error, and the service is still ready.
func TestShowJetStream(t *testing.T) {
	t.Parallel()
	app, env, logs := open(t)
	ctx := context.Background()
	js, err := jetstream.New(app.NATS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Stream.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Stream.EnsureDurable(ctx, js, natsx.Durable{Name: "shown", AckWait: time.Minute, MaxAckPending: 10}); err != nil {
		t.Fatal(err)
	}
	missing := env.Stream.Named("missing").Name
	app.ShowJetStream(ctx, js, natsx.Placement{Stream: env.Stream.Name}, natsx.Placement{Stream: env.Stream.Name, Consumer: "shown"},
		natsx.Placement{Stream: missing})

	server := app.NATS.ConnectedServerName()
	for _, what := range []string{"stream ensured", "consumer ensured"} {
		entries := logs.FilterMessage(what).AllUntimed()
		if len(entries) != 1 {
			t.Fatalf("%d lines %q, want 1", len(entries), what)
		}
		fields := entries[0].ContextMap()
		if fields["stream"] != env.Stream.Name || fields["replicas"] != int64(1) || fields["leader"] != server ||
			!slices.Equal(fields["current"].([]any), []any{server}) {
			t.Errorf("%s logged %v; want the stream, 1 replica, %s leading and current", what, fields, server)
		}
	}
	if logs.FilterMessage("stream ensured").FilterField(zap.String("stream", missing)).Len() != 0 {
		t.Errorf("a stream that could not be read was logged as ensured")
	}

	addr := ports.FreeAddr(t)
	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- app.Serve(serveCtx, addr, service.Ports{}) }()
	var ready struct {
		Ready     bool              `json:"ready"`
		JetStream []natsx.Placement `json:"jetstream"`
	}
	wait.For(t, 10*time.Second, "ready", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(&ready)
	})
	if !ready.Ready || len(ready.JetStream) != 3 {
		t.Fatalf("/readyz %+v; want ready, with three placements", ready)
	}
	stream, cons, gone := ready.JetStream[0], ready.JetStream[1], ready.JetStream[2]
	if stream.Stream != env.Stream.Name || stream.Replicas != 1 || stream.Leader != server || stream.Error != "" ||
		cons.Consumer != "shown" || cons.Replicas != 1 || cons.Leader != server {
		t.Errorf("/readyz shows %+v and %+v", stream, cons)
	}
	if gone.Stream != missing || !strings.Contains(gone.Error, "not found") {
		t.Errorf("/readyz shows the missing stream as %+v", gone)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
