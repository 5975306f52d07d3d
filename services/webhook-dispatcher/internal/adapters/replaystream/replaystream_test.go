package replaystream_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/replaystream"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

type fixture struct {
	env    *testenv.Env
	js     jetstream.JetStream
	stream jetstream.Stream
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.New(t)
	js := env.JetStream(t)
	st, err := env.Stream.Ensure(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	if err := replaystream.Ensure(context.Background(), js, replaystream.Stream(env.Stream)); err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, js: js, stream: st}
}

// publish stores one event the way messaging's relay does and returns its
// id.
func (f *fixture) publish(t *testing.T, ws, kind string) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := f.js.Publish(context.Background(), f.env.Stream.Subject(ws, kind), []byte("event "+id), jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) storedAt(t *testing.T, seq uint64) time.Time {
	t.Helper()
	m, err := f.stream.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return m.Time
}

func seqs(t *testing.T, src *replaystream.Source, s replay.Scan) []uint64 {
	t.Helper()
	out := []uint64{}
	for ev, err := range src.Events(context.Background(), s) {
		if err != nil {
			t.Fatalf("Events(%+v): %v", s, err)
		}
		out = append(out, ev.Seq)
	}
	return out
}

// The source reads one workspace's events back by time: from since, before
// until, of one kind, never past the end sequence, and continuing from a
// sequence; it ends at once when nothing matches, and leaves no consumer
// behind.
func TestSourceSelectsByTimeKindAndSequence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ws, other := uuid.NewString(), uuid.NewString()
	ids := []string{
		f.publish(t, ws, "message.received"),  // 1
		f.publish(t, ws, "postback.received"), // 2
		f.publish(t, ws, "message.received"),  // 3
		f.publish(t, other, "message.received"),
		f.publish(t, ws, "comment.received"), // 5
	}
	src := replaystream.NewSource(f.js, f.env.Stream)
	last, err := src.LastSeq(context.Background())
	if err != nil || last != 5 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	t2, t3 := f.storedAt(t, 2), f.storedAt(t, 3)
	scan := func(since time.Time, mutate func(*replay.Scan)) replay.Scan {
		s := replay.Scan{Request: replay.Request{WorkspaceID: ws, Since: since}, End: last}
		if mutate != nil {
			mutate(&s)
		}
		return s
	}
	tests := []struct {
		name string
		give replay.Scan
		want []uint64
	}{
		{"every event of the workspace", scan(f.storedAt(t, 1), nil), []uint64{1, 2, 3, 5}},
		{"since is inclusive", scan(t2, nil), []uint64{2, 3, 5}},
		{"until is exclusive", scan(f.storedAt(t, 1), func(s *replay.Scan) { s.Until = &t3 }), []uint64{1, 2}},
		{"one kind", scan(f.storedAt(t, 1), func(s *replay.Scan) { s.Event = "message.received" }), []uint64{1, 3}},
		{"not past the end sequence", scan(f.storedAt(t, 1), func(s *replay.Scan) { s.End = 3 }), []uint64{1, 2, 3}},
		{"continued from a sequence", scan(f.storedAt(t, 1), func(s *replay.Scan) { s.From = 3 }), []uint64{3, 5}},
		{"nothing since", scan(time.Now().Add(time.Hour), nil), []uint64{}},
		{"another workspace", replay.Scan{Request: replay.Request{WorkspaceID: uuid.NewString(), Since: t2}, End: math.MaxUint64}, []uint64{}},
	}
	for _, tt := range tests {
		start := time.Now()
		if got := seqs(t, src, tt.give); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: took %s; a scan must not wait for events that are not there", tt.name, took)
		}
	}

	// The events come back as stored, with their ids and kinds.
	var got []replay.Event
	for ev, err := range src.Events(context.Background(), scan(t2, func(s *replay.Scan) { s.End = 2 })) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 1 || got[0].ID != ids[1] || got[0].Type != "postback.received" || string(got[0].Data) != "event "+ids[1] || !got[0].StoredAt.Equal(t2) {
		t.Errorf("event = %+v", got)
	}

	// Stopping early also removes the scan's consumer.
	for range src.Events(context.Background(), scan(f.storedAt(t, 1), nil)) {
		break
	}
	wait.For(t, 10*time.Second, "the scan's consumer removed", func() error {
		var names []string
		lister := f.stream.ConsumerNames(context.Background())
		for n := range lister.Name() {
			names = append(names, n)
		}
		if len(names) != 0 {
			return fmt.Errorf("consumers left: %v", names)
		}
		return lister.Err()
	})
}

// Put stores one request per event and replay on the replay stream: the
// event unchanged, under <prefix>_replay.<workspace>.<kind>, carrying the
// replay id; the same event put twice for one replay is stored once.
func TestQueuePutsEachEventOncePerReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ws := uuid.NewString()
	f.publish(t, ws, "comment.received")
	f.publish(t, ws, "message.received")
	src := replaystream.NewSource(f.js, f.env.Stream)
	var evs []replay.Event
	for ev, err := range src.Events(context.Background(), replay.Scan{Request: replay.Request{WorkspaceID: ws, Since: f.storedAt(t, 1)}, End: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	rs := replaystream.Stream(f.env.Stream)
	q := replaystream.NewQueue(f.js, rs)
	first, second := uuid.NewString(), uuid.NewString()
	for _, put := range []struct {
		replay string
		evs    []replay.Event
	}{{first, evs}, {first, evs[:1]}, {second, evs[1:]}} {
		if err := q.Put(context.Background(), put.replay, ws, put.evs); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.js.Stream(context.Background(), rs.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("replay stream holds %d requests, want 3", n)
	}
	want := []struct{ subject, replay, msgID, data string }{
		{rs.Subject(ws, "comment.received"), first, first + ":" + evs[0].ID, string(evs[0].Data)},
		{rs.Subject(ws, "message.received"), first, first + ":" + evs[1].ID, string(evs[1].Data)},
		{rs.Subject(ws, "message.received"), second, second + ":" + evs[1].ID, string(evs[1].Data)},
	}
	for i, w := range want {
		m, err := st.GetMsg(context.Background(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != w.subject || m.Header.Get(replaystream.HeaderReplayID) != w.replay || m.Header.Get(nats.MsgIdHdr) != w.msgID || string(m.Data) != w.data {
			t.Errorf("request %d = %s %v %q, want %+v", i+1, m.Subject, m.Header, m.Data, w)
		}
	}
	if rs.Name != f.env.Stream.Name+"_REPLAY" || rs.SubjectPrefix != f.env.Stream.SubjectPrefix+"_replay" {
		t.Errorf("replay stream %+v", rs)
	}
}
