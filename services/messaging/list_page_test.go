package main

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// pageStore is a conversation store over its own database holding one
// workspace's conversations on two channels, shaped as the inbox sees them:
// names and pictures, some tagged, assigned, handed over, unanswered or
// with a suggestion waiting, and tie groups of last_message_at.
type pageStore struct {
	db    *gorm.DB
	store *adapters.ConversationStore
	ws    string
	chans [2]string
}

func newPageStore(tb testing.TB, conversations int) pageStore {
	tb.Helper()
	env := testenv.New(tb, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(tb, adapters.Schema, migrations.FS)
	s := pageStore{db: gdb, store: adapters.NewConversationStore(gdb), ws: uuid.NewString(), chans: [2]string{uuid.NewString(), uuid.NewString()}}
	for i, kind := range []string{"telegram", "messenger"} {
		if err := gdb.Exec(`INSERT INTO messaging.channels (id, workspace_id, kind, secret) VALUES (?, ?, ?, 's')`, s.chans[i], s.ws, kind).Error; err != nil {
			tb.Fatal(err)
		}
	}
	// Row i: channel i%2; every third second shared by three rows (a tie
	// group); every fifth without a customer message time; tags, assignee,
	// hand-over, unanswered mark and suggestion on their own strides.
	err := gdb.Exec(`
		WITH k AS (
			INSERT INTO messaging.contacts (id, workspace_id, channel_id, sender_id, name, profile_pic)
			SELECT gen_random_uuid(), ?::uuid, (ARRAY[?::uuid, ?::uuid])[i % 2 + 1], 'sender-' || (100000000 + i),
				'Customer Number ' || i, CASE WHEN i % 4 = 0 THEN '' ELSE 'https://cdn.example.com/profile/' || md5(i::text) || '.jpg' END
			FROM generate_series(1, ?) AS i
			RETURNING id, channel_id, sender_id
		), v AS (
			INSERT INTO messaging.conversations (id, workspace_id, channel_id, contact_id, platform, reply_to, last_message_at,
				last_customer_message_at, handed_over, handover_reason, unanswered, tags, assignee)
			SELECT gen_random_uuid(), ?::uuid, k.channel_id, k.id, CASE WHEN k.channel_id = ?::uuid THEN 'telegram' ELSE 'messenger' END,
				'chat-' || i, ?::timestamptz + (i / 3) * interval '1 second',
				CASE WHEN i % 5 = 0 THEN NULL ELSE ?::timestamptz + (i / 3) * interval '1 second' END,
				i % 7 = 0, CASE WHEN i % 7 = 0 THEN 'customer asked for a human' ELSE '' END,
				CASE WHEN i % 3 = 0 THEN 'customer' ELSE '' END,
				CASE WHEN i % 6 = 0 THEN '["vip", "billing"]'::jsonb ELSE '[]'::jsonb END,
				CASE WHEN i % 4 = 1 THEN 'Agent@Example.com' ELSE '' END
			FROM k, LATERAL (SELECT substr(k.sender_id, 8)::int - 100000000 AS i) AS n
			RETURNING id, workspace_id, last_message_at
		)
		INSERT INTO messaging.suggestions (conversation_id, workspace_id, run_id, messages, created_at)
		SELECT id, workspace_id, 'run', '[]', last_message_at FROM v WHERE extract(epoch FROM last_message_at)::bigint % 4 = 0`,
		s.ws, s.chans[0], s.chans[1], conversations, s.ws, s.chans[0], t0, t0).Error
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestListConversationsPageMatchesFilters: every filter of the list, alone
// and together, keeps exactly the conversations that have what it names,
// newest first, each as Get reads it; before, at and limit page them as
// paging.Paginate expects.
func TestListConversationsPageMatchesFilters(t *testing.T) {
	t.Parallel()
	s := newPageStore(t, 40)
	ctx := context.Background()
	list := func(q conversation.ConversationQuery) []conversation.Conversation {
		t.Helper()
		q.WorkspaceID = s.ws
		if q.Limit == 0 {
			q.Limit = 1000
		}
		got, err := s.store.ListConversations(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := list(conversation.ConversationQuery{})
	if len(all) != 40 {
		t.Fatalf("%d conversations, want 40", len(all))
	}
	for i, c := range all {
		if i > 0 && (c.LastMessageAt.After(all[i-1].LastMessageAt) || c.LastMessageAt.Equal(all[i-1].LastMessageAt) && c.ID > all[i-1].ID) {
			t.Fatalf("not newest first at %d", i)
		}
		// Read as every other read of a conversation reads it.
		want, err := s.store.Get(ctx, s.ws, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("listed %+v\nGet     %+v", c, want)
		}
	}
	var waiting []string
	if err := s.db.Raw(`SELECT conversation_id::text FROM messaging.suggestions`).Scan(&waiting).Error; err != nil {
		t.Fatal(err)
	}
	if len(waiting) == 0 {
		t.Fatal("no suggestion waits")
	}

	for shape := range 1 << 6 {
		on := func(bit int) bool { return shape&(1<<bit) != 0 }
		q := conversation.ConversationQuery{}
		if on(0) {
			q.Platform = channel.KindTelegram
		}
		if on(1) {
			q.Inbox.ChannelID = strings.ToUpper(s.chans[0])
		}
		q.Inbox.Unanswered, q.Inbox.HandedOver, q.Inbox.SuggestionWaiting = on(2), on(3), on(4)
		if on(5) {
			q.Inbox.Assignee = "agent@EXAMPLE.com"
		}
		var want []conversation.Conversation
		for _, c := range all {
			if (on(0) && c.Platform != channel.KindTelegram) || (on(1) && c.ChannelID != s.chans[0]) ||
				(on(2) && c.Chat.Unanswered == "") || (on(3) && !c.Chat.HandedOver) ||
				(on(4) && !slices.Contains(waiting, c.ID)) || (on(5) && c.Chat.Assignee != "Agent@Example.com") {
				continue
			}
			want = append(want, c)
		}
		if got := list(q); !reflect.DeepEqual(ids(got), ids(want)) {
			t.Fatalf("filters %06b: %v, want %v", shape, ids(got), ids(want))
		}
	}
	if got := list(conversation.ConversationQuery{Inbox: conversation.InboxFilter{ChannelID: "not-a-uuid"}}); len(got) != 0 {
		t.Fatalf("a channel that is no uuid: %d conversations", len(got))
	}
	if got := list(conversation.ConversationQuery{Platform: channel.KindWebchat}); len(got) != 0 {
		t.Fatalf("webchat: %d conversations", len(got))
	}

	// Paging: limit, before (strictly older) and at (the whole tie group,
	// whatever the limit).
	if got := list(conversation.ConversationQuery{Limit: 5}); !reflect.DeepEqual(ids(got), ids(all[:5])) {
		t.Fatalf("limit 5: %v", ids(got))
	}
	mid := all[10].LastMessageAt
	var older, group []conversation.Conversation
	for _, c := range all {
		if c.LastMessageAt.Before(mid) {
			older = append(older, c)
		}
		if c.LastMessageAt.Equal(mid) {
			group = append(group, c)
		}
	}
	if got := list(conversation.ConversationQuery{Before: &mid}); !reflect.DeepEqual(ids(got), ids(older)) {
		t.Fatalf("before %s: %v, want %v", mid, ids(got), ids(older))
	}
	if got := list(conversation.ConversationQuery{Before: &mid, Limit: 2}); !reflect.DeepEqual(ids(got), ids(older[:2])) {
		t.Fatalf("before %s, limit 2: %v", mid, ids(got))
	}
	if got := list(conversation.ConversationQuery{At: &mid, Limit: 1}); len(group) < 2 || !reflect.DeepEqual(ids(got), ids(group)) {
		t.Fatalf("at %s: %v, want the group %v", mid, ids(got), ids(group))
	}
}

func ids(cs []conversation.Conversation) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// BenchmarkListConversationsPage reads the first page of the API's
// default size (50 conversations, and the one after that tells whether
// more follow) from real PostgreSQL, as GET /v1/conversations does: what
// the store costs a page beside the query itself.
func BenchmarkListConversationsPage(b *testing.B) {
	s := newPageStore(b, 200)
	ctx := context.Background()
	q := conversation.ConversationQuery{WorkspaceID: s.ws, Limit: 51}
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		page, err := s.store.ListConversations(ctx, q)
		if err != nil || len(page) != 51 {
			b.Fatalf("%d conversations, %v", len(page), err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system: a
// benchmark's ns/op also counts the wait for PostgreSQL, which shares the
// machine's cores, while cpu-ns/op is what the service itself spends.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
