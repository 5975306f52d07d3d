package natsx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bounds of ensuring a stream or a consumer at start: each request waits
// at most requestTimeout, and the whole, retries included, placeWithin. A
// change of replicas moves a stream to other servers and elects a leader
// there, which takes a moment (more while a server restarts); past the
// bound the service fails to start, with the last error.
const (
	placeWithin    = 30 * time.Second
	requestTimeout = 5 * time.Second
)

// errNotPlaced is a stream or consumer not yet where it is going.
var errNotPlaced = errors.New("not placed yet")

// ensureStream creates the stream cfg, or brings an existing one to cfg,
// and then waits until it has a leader on cfg.Replicas servers: right
// after a change of replicas nats-server moves the stream, and until it
// is placed a consumer request may find it missing ("stream not found"),
// or race the moving of the stream's consumers (EnsureDurable).
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var stream jetstream.Stream
	err := settle(ctx, func(ctx context.Context) error {
		var err error
		stream, err = js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err == nil {
		err = settle(ctx, func(ctx context.Context) error {
			p, err := ReadPlacement(ctx, js, Placement{Stream: cfg.Name})
			if err != nil {
				return err
			}
			return p.placedOn(max(cfg.Replicas, 1))
		})
	}
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return stream, nil
}

// placedOn is nil when p has a leader and n servers (current or not: a
// server that is down, or catching up, still holds its place), else
// errNotPlaced saying where p is.
func (p Placement) placedOn(n int) error {
	if p.Leader == "" || len(p.Current)+len(p.Behind) != n {
		return fmt.Errorf("%w: leader %q, servers %q and %q behind, want %d with a leader", errNotPlaced, p.Leader, p.Current, p.Behind, n)
	}
	return nil
}

// settle runs op until it succeeds, an error it returns is not transient,
// or placeWithin has passed; each run is bounded by requestTimeout.
func settle(ctx context.Context, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, placeWithin)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		rctx, rcancel := context.WithTimeout(ctx, requestTimeout)
		err := op(rctx)
		rcancel()
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// JetStream's error codes of a cluster in motion, besides "stream not
// found" (a stream being moved).
const (
	errCodeNoPeers         jetstream.ErrorCode = 10005 // no suitable peers for placement: a server is down
	errCodeUnavailable     jetstream.ErrorCode = 10008 // JetStream system temporarily unavailable
	errCodeNoMetaLeader    jetstream.ErrorCode = 10009 // the cluster cannot handle the request
	errCodeStreamOffline   jetstream.ErrorCode = 10118
	errCodeConsumerOffline jetstream.ErrorCode = 10119
)

// transient tells the errors of a cluster in motion (a stream being
// moved, a leader being elected, a server restarting) from a refusal
// that waiting cannot cure (a setting the server rejects).
func transient(err error) bool {
	if errors.Is(err, errNotPlaced) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || Unavailable(err) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeNoPeers, errCodeUnavailable, errCodeNoMetaLeader, jetstream.JSErrCodeStreamNotFound,
		errCodeStreamOffline, errCodeConsumerOffline:
		return true
	}
	return false
}
