package localserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/testenv/ports"

	"github.com/parleyhq/parley/pkg/testenv/proc"
)

// Redis is a test's own redis-server, which keeps nothing on disk: a
// restart finds it empty, as a Redis without persistence (or one failed
// over to an empty replica) comes back.
type Redis struct {
	// URL is redis://127.0.0.1:<port>/0, for REDIS_URL.
	URL  string
	Addr string
	proc *proc.Process
}

// StartRedis starts a redis-server on a free loopback port and waits until
// it answers. It is killed, and its directory removed, when t ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin := binary(t, "redis-server", "/usr/bin", "/usr/local/bin")
	dir, err := os.MkdirTemp("", "parley-redis-")
	if err != nil {
		t.Fatalf("localserver: %v", err)
	}
	port := ports.Free(t, 1)[0]
	r := &Redis{
		URL:  fmt.Sprintf("redis://127.0.0.1:%d/0", port),
		Addr: fmt.Sprintf("127.0.0.1:%d", port),
	}
	r.proc = &proc.Process{
		Name:    "redis-server " + r.Addr,
		LogPath: dir + "/redis.log",
		Command: func() *exec.Cmd {
			cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", dir)
			cmd.Dir = dir
			return cmd
		},
	}
	// Nothing to keep: SIGKILL is as good an end as any.
	r.proc.Cleanup(t, syscall.SIGKILL, dir)
	r.Start(t)
	return r
}

// Flush empties every database of the server (FLUSHALL), as an operator's
// mistake or a failover to an empty replica would.
func (r *Redis) Flush(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := r.client()
	defer client.Close()
	if err := client.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("localserver: FLUSHALL on %s: %v", r.Addr, err)
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited. What it held is gone.
func (r *Redis) Kill(t testing.TB) {
	t.Helper()
	r.proc.Stop(t, syscall.SIGKILL)
}

// Start starts the server (again, after Kill) on its port and waits until
// it answers PING.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	client := r.client()
	defer client.Close()
	r.proc.StartReady(t, func(ctx context.Context) error { return client.Ping(ctx).Err() })
}

// Restart is Kill, then Start: the server comes back empty on its port.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	r.Kill(t)
	r.Start(t)
}

// Running reports whether the server's process is alive.
func (r *Redis) Running() bool { return r.proc.Running() }

func (r *Redis) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.Addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
}
