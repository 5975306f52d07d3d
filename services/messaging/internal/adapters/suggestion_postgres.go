package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// SuggestionStore keeps messaging.suggestions, each conversation's waiting
// suggestion, and writes a draft's idempotency receipt with it.
type SuggestionStore struct {
	db       *gorm.DB
	receipts *ReceiptStore
}

var _ conversation.Suggestions = (*SuggestionStore)(nil)

// NewSuggestionStore returns a store on gdb writing drafts' receipts
// through receipts.
func NewSuggestionStore(gdb *gorm.DB, receipts *ReceiptStore) *SuggestionStore {
	return &SuggestionStore{db: gdb, receipts: receipts}
}

// suggestionRow is a suggestion as stored. Its messages are the domain's
// conversation.Outbound as encoding/json writes them (field names as in
// the domain): a suggestion lives minutes to hours, and a rename of those
// fields would have to convert the few that wait.
type suggestionRow struct {
	ConversationID string    `gorm:"column:conversation_id"`
	WorkspaceID    string    `gorm:"column:workspace_id"`
	RunID          string    `gorm:"column:run_id"`
	Messages       string    `gorm:"column:messages"`
	CreatedAt      time.Time `gorm:"column:created_at"`
}

func suggestionToRow(s conversation.Suggestion) (suggestionRow, error) {
	msgs, err := json.Marshal(s.Messages)
	if err != nil {
		return suggestionRow{}, fmt.Errorf("encode suggestion: %w", err)
	}
	return suggestionRow{ConversationID: s.ConversationID, WorkspaceID: s.WorkspaceID, RunID: s.RunID, Messages: string(msgs), CreatedAt: s.CreatedAt}, nil
}

func (r suggestionRow) toDomain() (conversation.Suggestion, error) {
	var msgs []conversation.Outbound
	if err := json.Unmarshal([]byte(r.Messages), &msgs); err != nil {
		return conversation.Suggestion{}, fmt.Errorf("decode suggestion of conversation %s: %w", r.ConversationID, err)
	}
	return conversation.Suggestion{ConversationID: r.ConversationID, WorkspaceID: r.WorkspaceID, RunID: r.RunID, Messages: msgs, CreatedAt: utc(r.CreatedAt)}, nil
}

const suggestionColumns = `conversation_id, workspace_id, run_id, messages, created_at`

// one is the suggestion query returns, ErrNoSuggestion when none.
func (s *SuggestionStore) one(tx *gorm.DB, query string, args ...any) (conversation.Suggestion, error) {
	var rows []suggestionRow
	if err := tx.Raw(query, args...).Scan(&rows).Error; err != nil {
		return conversation.Suggestion{}, fmt.Errorf("suggestion: %w", err)
	}
	if len(rows) == 0 {
		return conversation.Suggestion{}, conversation.ErrNoSuggestion
	}
	return rows[0].toDomain()
}

// Get returns the conversation's waiting suggestion.
func (s *SuggestionStore) Get(ctx context.Context, conversationID string) (conversation.Suggestion, error) {
	if !validID(conversationID) {
		return conversation.Suggestion{}, conversation.ErrNoSuggestion
	}
	return s.one(s.db.WithContext(ctx), `SELECT `+suggestionColumns+` FROM messaging.suggestions WHERE conversation_id = ?`, conversationID)
}

// Draft replaces the conversation's waiting suggestion with sg, and
// stores the draft's receipt, in one transaction.
func (s *SuggestionStore) Draft(ctx context.Context, sg conversation.Suggestion, rec *receipt.Receipt) error {
	row, err := suggestionToRow(sg)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Exec(`INSERT INTO messaging.suggestions (`+suggestionColumns+`) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (conversation_id) DO UPDATE SET
				workspace_id = excluded.workspace_id, run_id = excluded.run_id,
				messages = excluded.messages, created_at = excluded.created_at`,
			row.ConversationID, row.WorkspaceID, row.RunID, row.Messages, row.CreatedAt).Error
		if err != nil {
			return fmt.Errorf("store suggestion: %w", err)
		}
		if rec != nil {
			return s.receipts.insert(ctx, tx, *rec)
		}
		return nil
	})
}

// Take deletes the conversation's waiting suggestion (the one seen names,
// when given) and returns it: of two operators sending it at once, one
// gets it.
func (s *SuggestionStore) Take(ctx context.Context, conversationID string, seen *conversation.SuggestionMark) (conversation.Suggestion, error) {
	if !validID(conversationID) {
		return conversation.Suggestion{}, conversation.ErrNoSuggestion
	}
	db := s.db.WithContext(ctx)
	if seen == nil {
		return s.one(db, `DELETE FROM messaging.suggestions WHERE conversation_id = ? RETURNING `+suggestionColumns, conversationID)
	}
	sg, err := s.one(db, `DELETE FROM messaging.suggestions WHERE conversation_id = ? AND run_id = ? AND created_at = ? RETURNING `+suggestionColumns,
		conversationID, seen.RunID, seen.CreatedAt)
	if errors.Is(err, conversation.ErrNoSuggestion) {
		return conversation.Suggestion{}, s.notSeen(ctx, conversationID)
	}
	return sg, err
}

// notSeen is why a draft named was not found: none waits
// (ErrNoSuggestion), or another does (ErrSuggestionReplaced).
func (s *SuggestionStore) notSeen(ctx context.Context, conversationID string) error {
	_, err := s.Get(ctx, conversationID)
	if err == nil {
		return conversation.ErrSuggestionReplaced
	}
	return err
}

// PutBack stores sg again unless another suggestion waits by now.
func (s *SuggestionStore) PutBack(ctx context.Context, sg conversation.Suggestion) error {
	row, err := suggestionToRow(sg)
	if err != nil {
		return err
	}
	err = s.db.WithContext(ctx).Exec(`INSERT INTO messaging.suggestions (`+suggestionColumns+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (conversation_id) DO NOTHING`,
		row.ConversationID, row.WorkspaceID, row.RunID, row.Messages, row.CreatedAt).Error
	if err != nil {
		return fmt.Errorf("put back suggestion: %w", err)
	}
	return nil
}

// Discard deletes the conversation's waiting suggestion (the one seen
// names, when given).
func (s *SuggestionStore) Discard(ctx context.Context, conversationID string, seen *conversation.SuggestionMark) error {
	if !validID(conversationID) {
		return nil
	}
	db := s.db.WithContext(ctx)
	if seen == nil {
		if err := db.Exec(`DELETE FROM messaging.suggestions WHERE conversation_id = ?`, conversationID).Error; err != nil {
			return fmt.Errorf("discard suggestion: %w", err)
		}
		return nil
	}
	res := db.Exec(`DELETE FROM messaging.suggestions WHERE conversation_id = ? AND run_id = ? AND created_at = ?`, conversationID, seen.RunID, seen.CreatedAt)
	if res.Error != nil {
		return fmt.Errorf("discard suggestion: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return s.notSeenToDiscard(ctx, conversationID)
	}
	return nil
}

// notSeenToDiscard is notSeen for a discard, to which none waiting is no
// error: the draft is gone already.
func (s *SuggestionStore) notSeenToDiscard(ctx context.Context, conversationID string) error {
	if err := s.notSeen(ctx, conversationID); !errors.Is(err, conversation.ErrNoSuggestion) {
		return err
	}
	return nil
}

// Waiting says which of the conversations have a waiting suggestion.
func (s *SuggestionStore) Waiting(ctx context.Context, conversationIDs []string) (map[string]bool, error) {
	out := map[string]bool{}
	ids := validIDs(conversationIDs)
	if len(ids) == 0 {
		return out, nil
	}
	var waiting []string
	if err := s.db.WithContext(ctx).Raw(`SELECT conversation_id FROM messaging.suggestions WHERE conversation_id IN ?`, ids).Scan(&waiting).Error; err != nil {
		return nil, fmt.Errorf("waiting suggestions: %w", err)
	}
	for _, id := range waiting {
		out[id] = true
	}
	return out, nil
}
