// Package replaystream implements the replay ports on JetStream: Source
// reads a workspace's customer events back from the EVENTS stream by time
// (a short-lived consumer starting at the replay's since), and Queue puts
// replay requests on a durable work-queue stream beside it, from which
// every dispatcher instance takes them (ports/events.StartReplay).
//
// The replay stream is named after EVENTS_STREAM with "_REPLAY" appended
// and takes subjects <EVENTS_SUBJECT_PREFIX>_replay.<workspace_id>.<event>,
// which no EVENTS subject matches. A replay request is the stored event,
// unchanged, with Nats-Msg-Id "<replay id>:<event id>", so queueing the
// same event twice for one replay stores it once.
package replaystream

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// HeaderReplayID carries the replay's id on each replay request, for
// operators reading the stream.
const HeaderReplayID = "Parley-Replay-Id"

// fetchBatch is how many events one read of the EVENTS stream asks for.
const fetchBatch = 512

// Stream returns the replay stream that goes with the events stream: its
// name and subject prefix (Subject gives a request's subject).
func Stream(events natsx.EventsStream) natsx.EventsStream {
	return events.Named("replay")
}

// Ensure creates the replay stream or brings it to these settings: a work
// queue (a request is removed once acked), kept no longer than the events
// it replays, with the events stream's duplicate window and replicas.
func Ensure(ctx context.Context, js jetstream.JetStream, s natsx.EventsStream) error {
	_, err := s.EnsureWorkQueue(ctx, js, "Parley replay requests, delivered to webhooks again")
	return err
}

// Source reads the events stream.
type Source struct {
	js     jetstream.JetStream
	stream natsx.EventsStream
}

var _ replay.Source = (*Source)(nil)

// NewSource returns a source over the events stream.
func NewSource(js jetstream.JetStream, events natsx.EventsStream) *Source {
	return &Source{js: js, stream: events}
}

// LastSeq implements replay.Source.
func (s *Source) LastSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, s.stream.Name)
	if err != nil {
		return 0, fmt.Errorf("read stream %s: %w", s.stream.Name, err)
	}
	return st.CachedInfo().State.LastSeq, nil
}

// Events implements replay.Source with an ephemeral, unacknowledged
// consumer filtered to the workspace (and kind), starting at q.Since (or
// at q.From when continuing), removed when the scan ends. The consumer's
// pending count says when the matching events are all read, so the scan
// never waits for events that are not there.
//
// The consumer has one replica whatever EVENTS_REPLICAS says (nats-server
// places an ephemeral consumer on one server): it lives for one scan,
// seconds, and its state is where the scan has read to, which the scan
// holds too. Should its server go, or the stream's replicas change under
// it (which removes it), the scan fails and the replay call answers an
// error, to be made again. Replicating it would have three servers keep,
// for seconds, what the scan already knows.
func (s *Source) Events(ctx context.Context, q replay.Scan) iter.Seq2[replay.Event, error] {
	return func(yield func(replay.Event, error) bool) {
		filter := s.stream.WorkspaceSubjects(q.WorkspaceID)
		if q.Event != "" {
			filter = s.stream.Subject(q.WorkspaceID, q.Event)
		}
		cfg := jetstream.ConsumerConfig{
			Name:              "replay_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
			Description:       "webhook dispatcher: one replay's read of the events",
			FilterSubject:     filter,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			InactiveThreshold: time.Minute, // removed by the server if this process dies
		}
		if q.From > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.From
		} else {
			since := q.Since
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
		}
		cons, err := s.js.CreateOrUpdateConsumer(ctx, s.stream.Name, cfg)
		if err != nil {
			yield(replay.Event{}, fmt.Errorf("read %s: %w", s.stream.Name, err))
			return
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = s.js.DeleteConsumer(dctx, s.stream.Name, cfg.Name)
		}()
		prefix := s.stream.SubjectPrefix + "." + q.WorkspaceID + "."
		remaining := cons.CachedInfo().NumPending
		for remaining > 0 {
			if err := ctx.Err(); err != nil {
				yield(replay.Event{}, err)
				return
			}
			batch, err := cons.FetchNoWait(int(min(remaining, fetchBatch)))
			if err != nil {
				yield(replay.Event{}, fmt.Errorf("read %s: %w", s.stream.Name, err))
				return
			}
			got := 0
			for msg := range batch.Messages() {
				got++
				md, err := msg.Metadata()
				if err != nil {
					yield(replay.Event{}, fmt.Errorf("read %s: %w", s.stream.Name, err))
					return
				}
				if md.Sequence.Stream > q.End || (q.Until != nil && !md.Timestamp.Before(*q.Until)) {
					return
				}
				remaining = md.NumPending
				ev := replay.Event{
					Seq:      md.Sequence.Stream,
					ID:       msg.Headers().Get(jetstream.MsgIDHeader),
					Type:     strings.TrimPrefix(msg.Subject(), prefix),
					StoredAt: md.Timestamp,
					Data:     msg.Data(),
				}
				if ev.ID == "" {
					ev.ID = fmt.Sprintf("seq-%d", ev.Seq)
				}
				if !yield(ev, nil) {
					return
				}
			}
			if err := batch.Error(); err != nil {
				yield(replay.Event{}, fmt.Errorf("read %s: %w", s.stream.Name, err))
				return
			}
			if got == 0 {
				return // gone meanwhile (the stream's age limit)
			}
		}
	}
}

// Queue puts replay requests on the replay stream.
type Queue struct {
	js     jetstream.JetStream
	stream natsx.EventsStream
}

var _ replay.Queue = (*Queue)(nil)

// NewQueue returns a queue on the replay stream s (see Stream).
func NewQueue(js jetstream.JetStream, s natsx.EventsStream) *Queue {
	return &Queue{js: js, stream: s}
}

// Put implements replay.Queue: the requests are published together and
// Put returns once the stream has stored every one.
func (q *Queue) Put(ctx context.Context, replayID, workspaceID string, events []replay.Event) error {
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for _, ev := range events {
		msg := &nats.Msg{Subject: q.stream.Subject(workspaceID, ev.Type), Data: ev.Data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, replayID+":"+ev.ID)
		msg.Header.Set(HeaderReplayID, replayID)
		f, err := q.js.PublishMsgAsync(msg)
		if err != nil {
			return fmt.Errorf("publish to %s: %w", q.stream.Name, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", q.stream.Name, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
