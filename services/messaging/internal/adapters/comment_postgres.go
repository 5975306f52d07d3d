package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// CommentStore keeps comments; its transactions also take the inbox's
// receive operations, so a comment, its dedupe claim and its event, or a
// private reply's message and the comment's new status, commit together.
type CommentStore struct {
	db *gorm.DB
	// receipts writes the receipts of keyed comment replies.
	receipts *ReceiptStore
}

var _ comment.Store = (*CommentStore)(nil)

// NewCommentStore returns a store on gdb.
func NewCommentStore(gdb *gorm.DB) *CommentStore { return &CommentStore{db: gdb} }

// WithReceipts returns the store writing comment replies' idempotency
// receipts through r; without it, AddReceipt fails.
func (s *CommentStore) WithReceipts(r *ReceiptStore) *CommentStore {
	c := *s
	c.receipts = r
	return &c
}

type commentRow struct {
	ID                         string     `gorm:"column:id;primaryKey"`
	WorkspaceID                string     `gorm:"column:workspace_id"`
	ChannelID                  string     `gorm:"column:channel_id"`
	Platform                   string     `gorm:"column:platform"`
	ExternalID                 string     `gorm:"column:external_id"`
	PostID                     string     `gorm:"column:post_id"`
	ParentID                   string     `gorm:"column:parent_id"`
	Text                       string     `gorm:"column:text"`
	FromID                     string     `gorm:"column:from_id"`
	FromName                   string     `gorm:"column:from_name"`
	CreatedAt                  time.Time  `gorm:"column:created_at"`
	Status                     string     `gorm:"column:status"`
	PublicReplyID              string     `gorm:"column:public_reply_id"`
	PublicRepliedAt            *time.Time `gorm:"column:public_replied_at"`
	PrivateReplyClaimedAt      *time.Time `gorm:"column:private_reply_claimed_at"`
	PrivateReplyRecipientID    string     `gorm:"column:private_reply_recipient_id"`
	PrivateReplyMessageID      string     `gorm:"column:private_reply_message_id"`
	PrivateReplyConversationID *string    `gorm:"column:private_reply_conversation_id"`
	PrivateRepliedAt           *time.Time `gorm:"column:private_replied_at"`
}

func (commentRow) TableName() string { return "messaging.comments" }

func commentToRow(c comment.Comment) commentRow {
	r := commentRow{
		ID: c.ID, WorkspaceID: c.WorkspaceID, ChannelID: c.ChannelID, Platform: string(c.Platform),
		ExternalID: c.ExternalID, PostID: c.PostID, ParentID: c.ParentID, Text: c.Text,
		FromID: c.FromID, FromName: c.FromName, CreatedAt: c.CreatedAt, Status: string(c.Status),
		PublicReplyID: c.PublicReplyID, PublicRepliedAt: optionalTime(c.PublicRepliedAt),
		PrivateReplyClaimedAt:   optionalTime(c.PrivateReplyClaimedAt),
		PrivateReplyRecipientID: c.PrivateReplyRecipientID, PrivateReplyMessageID: c.PrivateReplyMessageID,
		PrivateRepliedAt: optionalTime(c.PrivateRepliedAt),
	}
	if r.Status == "" {
		r.Status = string(comment.StatusReceived)
	}
	if c.PrivateReplyConversationID != "" {
		id := c.PrivateReplyConversationID
		r.PrivateReplyConversationID = &id
	}
	return r
}

func (r commentRow) toDomain() comment.Comment {
	c := comment.Comment{
		ID: r.ID, WorkspaceID: r.WorkspaceID, ChannelID: r.ChannelID, Platform: channel.Kind(r.Platform),
		ExternalID: r.ExternalID, PostID: r.PostID, ParentID: r.ParentID, Text: r.Text,
		FromID: r.FromID, FromName: r.FromName, CreatedAt: utc(r.CreatedAt), Status: comment.Status(r.Status),
		PublicReplyID: r.PublicReplyID, PublicRepliedAt: timeOrZero(r.PublicRepliedAt),
		PrivateReplyClaimedAt:   timeOrZero(r.PrivateReplyClaimedAt),
		PrivateReplyRecipientID: r.PrivateReplyRecipientID, PrivateReplyMessageID: r.PrivateReplyMessageID,
		PrivateRepliedAt: timeOrZero(r.PrivateRepliedAt),
	}
	if r.PrivateReplyConversationID != nil {
		c.PrivateReplyConversationID = *r.PrivateReplyConversationID
	}
	return c
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return utc(*t)
}

// Receive runs fn in a transaction.
func (s *CommentStore) Receive(ctx context.Context, fn func(comment.Tx) error) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(commentTx{receiveTx: receiveTx{tx: tx}, receipts: s.receipts})
	})
}

// Get returns the workspace's comment with the platform id externalID.
func (s *CommentStore) Get(ctx context.Context, workspaceID, externalID string) (comment.Comment, error) {
	if !validID(workspaceID) || externalID == "" || !db.Storable(externalID) {
		return comment.Comment{}, comment.ErrNotFound
	}
	var rows []commentRow
	err := s.db.WithContext(ctx).Where("workspace_id = ? AND external_id = ?", workspaceID, externalID).
		Order("stored_at DESC").Limit(1).Find(&rows).Error
	if err != nil {
		return comment.Comment{}, fmt.Errorf("load comment %s: %w", externalID, err)
	}
	if len(rows) == 0 {
		return comment.Comment{}, comment.ErrNotFound
	}
	return rows[0].toDomain(), nil
}

// Update locks the comment, applies fn and saves the result.
func (s *CommentStore) Update(ctx context.Context, id string, fn func(*comment.Comment) error) (comment.Comment, error) {
	var out comment.Comment
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		out, err = updateComment(ctx, tx, id, fn)
		return err
	})
	return out, err
}

// CommenterRepliedSince reports a private reply to fromID on the channel
// at or after since.
func (s *CommentStore) CommenterRepliedSince(ctx context.Context, channelID, fromID string, since time.Time) (bool, error) {
	if !validID(channelID) {
		return false, nil
	}
	var n int64
	err := s.db.WithContext(ctx).Model(&commentRow{}).
		Where("channel_id = ? AND from_id = ? AND private_replied_at >= ?", channelID, fromID, since).
		Limit(1).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("check commenter %s: %w", fromID, err)
	}
	return n > 0, nil
}

func updateComment(ctx context.Context, tx *gorm.DB, id string, fn func(*comment.Comment) error) (comment.Comment, error) {
	if !validID(id) {
		return comment.Comment{}, comment.ErrNotFound
	}
	var row commentRow
	err := tx.WithContext(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return comment.Comment{}, comment.ErrNotFound
	}
	if err != nil {
		return comment.Comment{}, fmt.Errorf("lock comment %s: %w", id, err)
	}
	c := row.toDomain()
	if err := fn(&c); err != nil {
		return comment.Comment{}, err
	}
	next := commentToRow(c)
	// Only what answering a comment changes is written back.
	err = tx.WithContext(ctx).Model(&commentRow{}).Where("id = ?", id).Updates(map[string]any{
		"status":                        next.Status,
		"public_reply_id":               next.PublicReplyID,
		"public_replied_at":             next.PublicRepliedAt,
		"private_reply_claimed_at":      next.PrivateReplyClaimedAt,
		"private_reply_recipient_id":    next.PrivateReplyRecipientID,
		"private_reply_message_id":      next.PrivateReplyMessageID,
		"private_reply_conversation_id": next.PrivateReplyConversationID,
		"private_replied_at":            next.PrivateRepliedAt,
	}).Error
	if err != nil {
		return comment.Comment{}, fmt.Errorf("update comment %s: %w", id, err)
	}
	return c, nil
}

// commentTx is one transaction of comment work, with the inbox's receive
// operations.
type commentTx struct {
	receiveTx
	receipts *ReceiptStore
}

var _ comment.Tx = commentTx{}

func (t commentTx) AddComment(ctx context.Context, c comment.Comment) (bool, error) {
	row := commentToRow(c)
	res := t.tx.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return false, fmt.Errorf("insert comment %s: %w", c.ExternalID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (t commentTx) Update(ctx context.Context, id string, fn func(*comment.Comment) error) (comment.Comment, error) {
	return updateComment(ctx, t.tx, id, fn)
}

func (t commentTx) AddReceipt(ctx context.Context, r receipt.Receipt) error {
	return t.receipts.insert(ctx, t.tx, r)
}
