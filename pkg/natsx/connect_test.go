package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// authServer starts a nats-server on port that admits only user/password,
// or only token when token is set.
func authServer(t *testing.T, port int, user, password, token string) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		Username: user, Password: password, Authorization: token,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func TestConnectAuthenticates(t *testing.T) {
	t.Parallel()
	userPort, tokenPort := ports.Free(t, 1)[0], ports.Free(t, 1)[0]
	userSrv := authServer(t, userPort, "parley", "s3cret-password", "")
	tokenSrv := authServer(t, tokenPort, "", "", "s3cret-token")

	tests := []struct {
		name string
		url  string
		sec  config.NATSSecurity
		ok   bool
	}{
		{"user and password", userSrv.ClientURL(), config.NATSSecurity{NATSUser: "parley", NATSPassword: "s3cret-password"}, true},
		{"wrong password", userSrv.ClientURL(), config.NATSSecurity{NATSUser: "parley", NATSPassword: "guess"}, false},
		{"no credentials", userSrv.ClientURL(), config.NATSSecurity{}, false},
		{"token", tokenSrv.ClientURL(), config.NATSSecurity{NATSToken: "s3cret-token"}, true},
		{"wrong token", tokenSrv.ClientURL(), config.NATSSecurity{NATSToken: "guess"}, false},
		{"missing credentials file", tokenSrv.ClientURL(), config.NATSSecurity{NATSCreds: "/nonexistent/parley.creds"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A refusal is final: it must come back at once, not after
			// the retrying that waits for a NATS still starting.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			nc, err := natsx.Connect(ctx, config.Connections{NATSURL: tt.url, NATSSecurity: tt.sec}, "test", zap.NewNop())
			if tt.ok {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				nc.Close()
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected with bad credentials")
			}
			if waited := time.Since(start); waited > 10*time.Second {
				t.Fatalf("a refusal took %v: it was retried", waited)
			}
		})
	}
}

func TestConnectRefusesAmbiguousCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sec  config.NATSSecurity
		want string
	}{
		{"two ways", config.NATSSecurity{NATSToken: "x", NATSUser: "u", NATSPassword: "p"}, "at most one"},
		{"user without password", config.NATSSecurity{NATSUser: "u"}, "NATS_USER and NATS_PASSWORD"},
		{"cert without key", config.NATSSecurity{NATSTLSCert: "c.pem"}, "NATS_TLS_CERT and NATS_TLS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := natsx.Connect(context.Background(), config.Connections{NATSURL: "nats://127.0.0.1:1", NATSSecurity: tt.sec}, "test", zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// TestConnectWaitsForNATS: a service started before NATS connects once it
// is up, so start order does not matter.
func TestConnectWaitsForNATS(t *testing.T) {
	t.Parallel()
	port := ports.Free(t, 1)[0]
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	connected := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nc, err := natsx.Connect(ctx, config.Connections{NATSURL: url}, "test", zap.NewNop())
		if err == nil {
			nc.Close()
		}
		connected <- err
	}()
	select {
	case err := <-connected:
		t.Fatalf("connect returned before NATS was up: %v", err)
	case <-time.After(700 * time.Millisecond): // a few retries' worth
	}
	authServer(t, port, "", "", "")
	if err := <-connected; err != nil {
		t.Fatalf("connect after NATS came up: %v", err)
	}
}

func TestConnectGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := natsx.Connect(ctx, config.Connections{NATSURL: "nats://" + ports.Refused(t)}, "test", zap.NewNop())
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("err = %v, want no servers and the deadline", err)
	}
}

// TestRequestWhileDisconnectedFailsAtOnce: nothing waits in a reconnect
// buffer, so callers can answer 503 at once.
func TestRequestWhileDisconnectedFailsAtOnce(t *testing.T) {
	t.Parallel()
	srv := authServer(t, ports.Free(t, 1)[0], "", "", "")
	nc, err := natsx.Connect(context.Background(), config.Connections{NATSURL: srv.ClientURL()}, "test", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv.Shutdown()
	for deadline := time.Now().Add(10 * time.Second); nc.IsConnected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client never noticed the server was gone")
		}
	}
	start := time.Now()
	_, err = nc.Request("anything", []byte("x"), 5*time.Second)
	if !natsx.Unavailable(err) {
		t.Fatalf("request while disconnected: %v, want an unavailable error", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("request while disconnected took %v", waited)
	}
}

// TestConnectTakesAList: NATS_URL may list several servers; a list whose
// first server is down connects to another.
func TestConnectTakesAList(t *testing.T) {
	t.Parallel()
	srv := authServer(t, ports.Free(t, 1)[0], "", "", "")
	down := "nats://" + ports.Refused(t)
	// The client tries the servers in a random order: each run of a few
	// meets the dead one first at least once, almost surely.
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		nc, err := natsx.Connect(ctx, config.Connections{NATSURL: down + "," + srv.ClientURL()}, "test", zap.NewNop())
		cancel()
		if err != nil {
			t.Fatalf("connect to a list whose first server is down: %v", err)
		}
		if got := nc.ConnectedUrl(); got != srv.ClientURL() {
			t.Errorf("connected to %s, want %s", got, srv.ClientURL())
		}
		nc.Close()
	}
}

// TestWaitingForNATSRedactsEveryURL: the log of a service waiting for its
// NATS servers names them all, with no password.
func TestWaitingForNATSRedactsEveryURL(t *testing.T) {
	t.Parallel()
	free := ports.Free(t, 2)
	list := fmt.Sprintf("nats://parley:s3cret-1@127.0.0.1:%d,nats://parley:s3cret-2@127.0.0.1:%d", free[0], free[1])
	core, logs := observer.New(zapcore.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := natsx.Connect(ctx, config.Connections{NATSURL: list}, "test", zap.New(core)); err == nil {
		t.Fatal("connected to servers that are not there")
	}
	waiting := logs.FilterMessage("waiting for nats").AllUntimed()
	if len(waiting) == 0 {
		t.Fatal(`no "waiting for nats" logged`)
	}
	want := fmt.Sprintf("nats://parley:***@127.0.0.1:%d,nats://parley:***@127.0.0.1:%d", free[0], free[1])
	if got := waiting[0].ContextMap()["url"]; got != want {
		t.Fatalf("logged url %q, want %q", got, want)
	}
}

// TestConnectionLeavesAPausedServer: a server that stops answering without
// closing its connections (SIGSTOP: a frozen process, a cut network) is
// left for another of the cluster's within about ten seconds (three pings
// two seconds apart go unanswered, then the reconnect).
func TestConnectionLeavesAPausedServer(t *testing.T) {
	t.Parallel()
	c := natscluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := natsx.Connect(ctx, config.Connections{NATSURL: c.URL()}, "test", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frozen := c.Server(nc.ConnectedServerName())
	if frozen == nil {
		t.Fatalf("connected to %q, none of the cluster's servers", nc.ConnectedServerName())
	}
	frozen.Pause(t)
	defer frozen.Resume(t)
	start := time.Now()
	wait.For(t, 15*time.Second, "the connection on another server", func() error {
		if name := nc.ConnectedServerName(); !nc.IsConnected() || name == frozen.Name {
			return fmt.Errorf("on %q, connected %v", name, nc.IsConnected())
		}
		return nil
	})
	moved := time.Since(start)
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("flush on %s: %v", nc.ConnectedServerName(), err)
	}
	t.Logf("left the paused %s for %s after %v", frozen.Name, nc.ConnectedServerName(), moved.Round(100*time.Millisecond))
	if moved > 12*time.Second {
		t.Fatalf("left the paused server after %v, want about ten seconds at most", moved)
	}
}
