package adapters

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

const chatDoc = `{"name": "C", "triggers": ["chat"], "nodes": [{"id": "s", "type": "start", "next": "e"}, {"id": "e", "type": "end"}]}`

// TestChatFlowOfAChannel: a channel's chat flow is set, replaced and
// cleared in its workspace only; it answers only while its flow is
// active with the chat trigger, and again once republished with it.
// ChatStore.Hold reads the same with its lock, for a conversation's first
// turn (its row created) and the next ones.
func TestChatFlowOfAChannel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	gdb := env.DB(t, Schema, migrations.FS)
	flows, chats, held := NewFlowStore(gdb), NewChatFlowStore(gdb), NewChatStore(gdb)
	ws, other, channel := uuid.NewString(), uuid.NewString(), uuid.NewString()
	// Each workspace's conversation, locked again at each check.
	convs := map[string]string{ws: uuid.NewString(), other: uuid.NewString()}
	holdSees := func(ws, conv, channel, flowID string, version int) {
		t.Helper()
		if err := held.Hold(ctx, ws, conv, channel, func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
			if c.ChatFlowID != flowID || c.ChatFlowVersion != version {
				t.Errorf("Hold(%s, channel %q) chat flow %q v%d, want %q v%d", ws, channel, c.ChatFlowID, c.ChatFlowVersion, flowID, version)
			}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(ws, flowID, doc string) string {
		t.Helper()
		f, err := flows.Publish(ctx, publicationOf(t, ws, flowID, doc, time.Now().UTC()))
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	first, second := publish(ws, "", chatDoc), publish(ws, "", chatDoc)
	want := func(ws, flowID string) {
		t.Helper()
		got, version, err := chats.ChatFlow(ctx, ws, channel)
		if err != nil || got != flowID {
			t.Fatalf("ChatFlow(%s) = %q, %v; want %q", ws, got, err, flowID)
		}
		// The version is the flow's published one, the one that runs.
		wantVersion := 0
		if flowID != "" {
			f, err := flows.Get(ctx, ws, flowID)
			if err != nil {
				t.Fatal(err)
			}
			wantVersion = f.PublishedVersion
		}
		if version != wantVersion {
			t.Fatalf("ChatFlow(%s) version %d, want %d", ws, version, wantVersion)
		}
		holdSees(ws, convs[ws], channel, flowID, wantVersion)
		holdSees(ws, uuid.NewString(), channel, flowID, wantVersion)
		// Given no channel, Hold reads no chat flow.
		holdSees(ws, convs[ws], "", "", 0)
	}

	want(ws, "")
	if err := chats.SetChatFlow(ctx, ws, channel, first, time.Now()); err != nil {
		t.Fatal(err)
	}
	want(ws, first)
	want(other, "")
	if err := chats.SetChatFlow(ctx, ws, channel, second, time.Now()); err != nil {
		t.Fatal(err)
	}
	want(ws, second)

	// Another workspace can neither take the channel nor clear it.
	theirs := publish(other, "", chatDoc)
	if err := chats.SetChatFlow(ctx, other, channel, theirs, time.Now()); !errors.Is(err, catalog.ErrChannelOfAnotherWorkspace) {
		t.Fatalf("set from another workspace = %v", err)
	}
	if err := chats.ClearChatFlow(ctx, other, channel); err != nil {
		t.Fatal(err)
	}
	want(ws, second)

	// Republished without the chat trigger, the flow answers no more;
	// with it again, it does; deactivated, it does not.
	publish(ws, second, testDoc)
	want(ws, "")
	publish(ws, second, chatDoc)
	want(ws, second)
	if _, err := flows.Deactivate(ctx, ws, second, time.Now()); err != nil {
		t.Fatal(err)
	}
	want(ws, "")

	if err := chats.ClearChatFlow(ctx, ws, channel); err != nil {
		t.Fatal(err)
	}
	want(ws, "")
	// Cleared, the channel is free for any workspace.
	if err := chats.SetChatFlow(ctx, other, channel, theirs, time.Now()); err != nil {
		t.Fatal(err)
	}
	want(other, theirs)
	if got, _, err := chats.ChatFlow(ctx, "nope", "nope"); err != nil || got != "" {
		t.Fatalf("ChatFlow of no ids = %q, %v", got, err)
	}
}
