package localserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/testenv/ports"

	"github.com/parleyhq/parley/pkg/testenv/proc"
)

// pgBin is where Debian puts PostgreSQL 15's server binaries, which are not
// on PATH there.
const pgBin = "/usr/lib/postgresql/15/bin"

// Postgres is a test's own PostgreSQL server: a fresh cluster (initdb) in a
// directory of its own, trusting every local connection, that does not
// sync its files to disk. A crash of the server (Kill) still loses nothing
// committed: the machine does not crash with it, so what was written is in
// the kernel's cache, and only a machine's crash needs what fsync buys. A
// commit still waits for its WAL to be written (synchronous_commit stays
// on), since WAL left in the server's memory dies with it.
type Postgres struct {
	// URL is postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable,
	// the server's administrative database, for DATABASE_URL or
	// testenv.Servers.
	URL  string
	Port int
	proc *proc.Process
}

// StartPostgres creates a cluster and starts its server on a free loopback
// port, waiting until it accepts connections. It is stopped, and its
// directory removed, when t ends.
//
// PostgreSQL refuses to run as root: when the test is root, the server
// runs as the postgres user, which owns its directory.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	initdb := binary(t, "initdb", pgBin)
	server := binary(t, "postgres", pgBin)
	cred := serverUser(t)
	dir, err := os.MkdirTemp("", "parley-pg-")
	if err != nil {
		t.Fatalf("localserver: %v", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("localserver: %v", err)
		}
	}
	data := filepath.Join(dir, "data")
	// No sync of the new cluster's files: it lives as long as the test.
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("localserver: initdb: %v\n%s", err, out)
	}
	port := ports.Free(t, 1)[0]
	p := &Postgres{
		URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Port: port,
	}
	p.proc = &proc.Process{
		Name:    fmt.Sprintf("postgres 127.0.0.1:%d", port),
		LogPath: filepath.Join(dir, "postgres.log"),
		Command: func() *exec.Cmd {
			cmd := exec.Command(server, "-D", data, "-p", strconv.Itoa(port), "-k", dir,
				"-c", "listen_addresses=127.0.0.1",
				"-c", "fsync=off", "-c", "full_page_writes=off",
				"-c", "shared_buffers=32MB", "-c", "max_connections=100")
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			return cmd
		},
		// Every process of the server works in its data directory; its
		// backends, each in a session of its own, outlive a killed
		// postmaster for a moment, holding the shared memory a new one
		// needs.
		Others: func() []int { return proc.WorkingIn(data) },
	}
	// A fast shutdown (SIGINT) at the end: it rolls back what runs and
	// does not wait for the clients, which the test has closed or is
	// about to.
	p.proc.Cleanup(t, syscall.SIGINT, dir)
	p.Start(t)
	return p
}

// Restart stops the server with a fast shutdown (SIGINT: open
// transactions are rolled back, every connection is closed) and starts
// it again on its port, as an operator's restart or a minor upgrade does.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	p.proc.Stop(t, syscall.SIGINT)
	p.Start(t)
}

// Kill ends the server's postmaster with SIGKILL, as a crash would, and
// waits until its backends have noticed and exited too. Start brings it
// back through crash recovery.
func (p *Postgres) Kill(t testing.TB) {
	t.Helper()
	p.proc.Stop(t, syscall.SIGKILL)
}

// Start starts the server (again, after Kill) on its port and waits until
// it accepts connections.
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	p.proc.StartReady(t, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.Ping(ctx)
	})
}

// Running reports whether the server's postmaster is alive.
func (p *Postgres) Running() bool { return p.proc.Running() }

// serverUser is the user the server runs as: nil (the test's own) unless
// the test runs as root, then postgres.
func serverUser(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("localserver: PostgreSQL does not run as root, and there is no postgres user to run it as: %v", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		t.Fatalf("localserver: postgres uid %q: %v", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		t.Fatalf("localserver: postgres gid %q: %v", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
