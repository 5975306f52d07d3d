package errs

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// RetryAfterSeconds is the Retry-After of every 503 service_unavailable: a
// dependency that is down is retried by the services every quarter to half
// second, so a client that waits this long finds it back as soon as it is.
const RetryAfterSeconds = 1

// ServiceUnavailable is 503 service_unavailable with Retry-After: the call
// did nothing and may be repeated shortly.
func ServiceUnavailable(format string, args ...any) *Error {
	return Newf(http.StatusServiceUnavailable, CodeServiceUnavailable, format, args...).
		WithHeader("Retry-After", strconv.Itoa(RetryAfterSeconds))
}

// DependencyDown reports whether err means that PostgreSQL, Redis or NATS
// could not be reached or dropped the connection, or that waiting for one
// ran out of time: the request failed through no fault of the caller's and
// would succeed later. It is the one classification every service shares:
// EchoHandler answers such errors 503 service_unavailable instead of 500,
// so no handler sorts driver errors itself.
func DependencyDown(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgUnavailable(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn):
		// A deadline here is the pool's wait for a connection or a query
		// that a stalled server never answered.
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// A server that goes away mid-conversation: pgconn and go-redis
		// report the closed socket as (unexpected) EOF. Request bodies
		// never get here: their decoders answer 400 themselves.
		return true
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return true
	}
	return natsDown(err)
}

// pgUnavailable tells the SQLSTATEs of a server that cannot serve now
// (connection exceptions, shutting down or starting up, out of connection
// slots) from those of a statement that is wrong.
func pgUnavailable(code string) bool {
	return strings.HasPrefix(code, "08") || // connection_exception
		strings.HasPrefix(code, "57P") || // admin, crash or immediate shutdown; cannot connect now
		code == "53300" // too_many_connections
}

// natsDown: the connection is disconnected, reconnecting (natsx.Connect
// keeps no reconnect buffer, so a publish fails at once), draining or
// closed, or no instance of the callee is subscribed.
func natsDown(err error) bool {
	for _, target := range []error{
		nats.ErrReconnectBufExceeded, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
		nats.ErrConnectionDraining, nats.ErrDisconnected, nats.ErrNoResponders, nats.ErrTimeout,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
