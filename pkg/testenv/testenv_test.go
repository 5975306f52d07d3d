package testenv

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/testenv/ports"
)

// TestNATS: with NATS(url), the Env, the services it configures and its
// own connections use the servers at url, a list as NATS_URL takes it, and
// its streams are removed from them when the test ends.
func TestNATS(t *testing.T) {
	t.Parallel()
	list := "nats://" + ports.Refused(t) + "," + getenv("NATS_URL", nats.DefaultURL)
	var stream string
	t.Run("env", func(t *testing.T) {
		e := New(t, NATS(list))
		stream = e.Stream.Name
		if e.NATSURL != list || e.Connections().NATSURL != list || !slices.Contains(e.Environ(), "NATS_URL="+list) {
			t.Fatalf("NATS(%q) gave %q, %q, %q", list, e.NATSURL, e.Connections().NATSURL, e.Environ())
		}
		if _, err := e.Stream.Ensure(context.Background(), e.JetStream(t)); err != nil {
			t.Fatal(err)
		}
	})
	js := New(t, NATS(list)).JetStream(t)
	if _, err := js.Stream(context.Background(), stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %s after the test: %v, want it removed", stream, err)
	}
}

// On the shared NATS server an Env leaves the anchor stream, so that the
// server's account never runs out of streams while tests delete theirs
// (anchorStream says why), and no test's cleanup removes it.
func TestAnchorStreamStays(t *testing.T) {
	t.Parallel()
	t.Run("env", func(t *testing.T) {
		e := New(t)
		if _, err := e.Stream.Ensure(context.Background(), e.JetStream(t)); err != nil {
			t.Fatal(err)
		}
	})
	js := New(t).JetStream(t)
	if _, err := js.Stream(context.Background(), anchorStream); err != nil {
		t.Fatalf("the anchor stream after a test's cleanup: %v", err)
	}
}
