package catalog

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// ErrConversationBusy is a conversation another instance is answering
// right now.
var ErrConversationBusy = errors.New("conversation busy")

// ChatConversation is what the chat runs keep of a conversation they
// answer.
type ChatConversation struct {
	WorkspaceID    string
	ConversationID string
	// AnsweredSeq is the seq of the last chat turn answered, 0 before the
	// first.
	AnsweredSeq int64
	// Mode is the channel's mode of the turn answered last (auto or
	// suggest).
	Mode string
	// Waiting is the run waiting in the conversation, at a question or a
	// delay node; nil when none waits.
	Waiting *run.Run
	// WaitingSince is when Waiting began to wait.
	WaitingSince time.Time
	// MovedAt is when a turn was last answered or a run woken in the
	// conversation; zero before its first answer. A turn whose
	// predecessor is missing waits ChatGapWait from it too: turns held
	// back behind a delay come back together once the run goes on.
	MovedAt time.Time
	// WakeTries counts the wakes of Waiting, waiting at a delay node,
	// that failed for now; WakeRetryAt is when it is tried again (zero
	// while none failed). A change of Waiting clears them.
	WakeTries   int
	WakeRetryAt time.Time
	// ChatFlowID and ChatFlowVersion are the chat flow of the channel
	// Hold was given, as ChatFlowStore.ChatFlow reads it, read with the
	// lock: "" and 0 when the assistant answers, or when Hold was given
	// no channel.
	ChatFlowID      string
	ChatFlowVersion int
}

// ChatRun is the run an answer started (New) or continued, with the node
// runs the call added.
type ChatRun struct {
	Run      *run.Run
	New      bool
	NodeRuns []run.NodeRun
}

// Wakeup names a chat run whose delay is over.
type Wakeup struct {
	WorkspaceID    string
	ConversationID string
	RunID          string
}

// ChatStore keeps the conversations the chat runs answer.
type ChatStore interface {
	// Hold takes the conversation for the time of fn, so that no other
	// instance answers it at once (ErrConversationBusy when one does). fn
	// decides and changes c; it returns the run it started or continued,
	// nil when none ran. c and the run are stored together when fn returns
	// no error; on an error nothing is stored and Hold returns it as is.
	// channelID, when not "", names the channel whose chat flow c carries
	// (ChatFlowID), read in the same round trip as the lock.
	Hold(ctx context.Context, workspaceID, conversationID, channelID string, fn func(c *ChatConversation) (*ChatRun, error)) error
	// DueWakes returns at most limit chat runs waiting at a delay node
	// whose wake time, and the time of the retry of a wake that failed
	// (WakeRetryAt), are at or before now, earliest first by the later of
	// the two: a wake tried again comes after the wakes due before it.
	DueWakes(ctx context.Context, now time.Time, limit int) ([]Wakeup, error)
}
