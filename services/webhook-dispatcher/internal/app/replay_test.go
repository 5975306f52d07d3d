package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/replaystream"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// A replay with more events than one call may queue is continued by
// further calls under the same replay id, and never reaches past the
// stream's last sequence when it started: every selected event is queued
// exactly once.
func TestStartReplayContinuesAcrossCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	js := env.JetStream(t)
	if _, err := env.Stream.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	rs := replaystream.Stream(env.Stream)
	if err := replaystream.Ensure(ctx, js, rs); err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Deps{
		Policy:     app.Policy{AllowPrivateTargets: true, PauseAfter: 20, AttemptTimeout: time.Second},
		Webhooks:   adapters.NewWebhookStore(gdb),
		Deliveries: adapters.NewDeliveryStore(gdb),
		Observer:   observe.New(env.Logger(t), prometheus.NewRegistry()),
	})
	replays := app.NewReplays(app.ReplaysDeps{
		App:        a,
		Limits:     app.ReplayLimits{MaxPerCall: 2, Budget: time.Minute},
		Source:     replaystream.NewSource(js, env.Stream),
		Queue:      replaystream.NewQueue(js, rs),
		Deliveries: adapters.NewReplayStore(gdb),
	})
	ws := uuid.NewString()
	if _, err := a.SaveWebhook(ctx, ws, "http://127.0.0.1:9/hook"); err != nil {
		t.Fatal(err)
	}
	publish := func() string {
		id := uuid.NewString()
		if _, err := js.Publish(ctx, env.Stream.Subject(ws, "message.received"), []byte(id), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	want := map[string]bool{}
	for range 5 {
		want[publish()] = true
	}
	st, err := js.Stream(ctx, env.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}

	req := replay.Request{WorkspaceID: ws, Since: first.Time}
	out, err := replays.StartReplay(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := out.ID
	calls := []int{out.Queued}
	publish() // after the replay started: not part of it
	for out.Next != nil {
		if out.Next.ReplayID != id || out.Next.End != 5 {
			t.Fatalf("cursor %+v", out.Next)
		}
		if out, err = replays.StartReplay(ctx, req, out.Next); err != nil {
			t.Fatal(err)
		}
		if out.ID != id {
			t.Fatalf("continued under id %s, want %s", out.ID, id)
		}
		calls = append(calls, out.Queued)
	}
	if fmt.Sprint(calls) != "[2 2 1]" {
		t.Errorf("calls queued %v, want [2 2 1]", calls)
	}

	rst, err := js.Stream(ctx, rs.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := rst.CachedInfo().State.Msgs; n != 5 {
		t.Fatalf("replay stream holds %d requests, want 5", n)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		m, err := rst.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(replaystream.HeaderReplayID) != id || m.Header.Get(nats.MsgIdHdr) != id+":"+string(m.Data) || !want[string(m.Data)] {
			t.Errorf("request %d: %v %q", seq, m.Header, m.Data)
		}
		delete(want, string(m.Data))
	}
}
