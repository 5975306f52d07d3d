package comment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const week = 7 * 24 * time.Hour

func TestClaimPrivateReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give Comment
		at   time.Time
		want error
	}{
		{"fresh comment", Comment{CreatedAt: t0}, t0.Add(time.Minute), nil},
		{"exactly at the window's end", Comment{CreatedAt: t0}, t0.Add(week), nil},
		{"just past the window", Comment{CreatedAt: t0}, t0.Add(week + time.Second), ErrPrivateReplyExpired},
		{"eight days old", Comment{CreatedAt: t0}, t0.Add(8 * 24 * time.Hour), ErrPrivateReplyExpired},
		{"already replied", Comment{CreatedAt: t0, PrivateRepliedAt: t0.Add(time.Hour)}, t0.Add(2 * time.Hour), ErrPrivateReplyUsed},
		{"being replied to", Comment{CreatedAt: t0, PrivateReplyClaimedAt: t0.Add(time.Hour)}, t0.Add(time.Hour), ErrPrivateReplyUsed},
		{"used beats expired", Comment{CreatedAt: t0, PrivateRepliedAt: t0.Add(time.Hour)}, t0.Add(30 * 24 * time.Hour), ErrPrivateReplyUsed},
		{"a public reply does not use it", Comment{CreatedAt: t0, PublicRepliedAt: t0.Add(time.Hour), Status: StatusReplied}, t0.Add(2 * time.Hour), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.give
			err := c.ClaimPrivateReply(tt.at, week)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ClaimPrivateReply = %v, want %v", err, tt.want)
			}
			if tt.want == nil && !c.PrivateReplyClaimedAt.Equal(tt.at) {
				t.Fatalf("claim not taken: %+v", c)
			}
			if tt.want != nil && !c.PrivateReplyClaimedAt.Equal(tt.give.PrivateReplyClaimedAt) {
				t.Fatalf("a refused claim changed the comment: %+v", c)
			}
		})
	}
}

func TestReleaseGivesTheClaimBackUnlessSent(t *testing.T) {
	t.Parallel()
	c := Comment{CreatedAt: t0}
	if err := c.ClaimPrivateReply(t0, week); err != nil {
		t.Fatal(err)
	}
	c.ReleasePrivateReply()
	if err := c.ClaimPrivateReply(t0, week); err != nil {
		t.Fatalf("claim after release = %v", err)
	}
	c.RecordPrivateReply(t0, "psid", "m_1", "conv")
	c.ReleasePrivateReply()
	if err := c.ClaimPrivateReply(t0, week); !errors.Is(err, ErrPrivateReplyUsed) {
		t.Fatalf("a sent private reply was released: %v", err)
	}
}

// TestStatus follows the statuses of docs/comments.md "A comment's
// status".
func TestStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []string // "public" or "private", in order
		want  Status
	}{
		{"new comment", nil, StatusReceived},
		{"public reply only", []string{"public"}, StatusReplied},
		{"two public replies", []string{"public", "public"}, StatusReplied},
		{"private reply, no public before", []string{"private"}, StatusDMSent},
		{"public reply earlier, then private", []string{"public", "private"}, StatusBothSent},
		{"private, then public", []string{"private", "public"}, StatusBothSent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Comment{CreatedAt: t0, Status: StatusReceived}
			at := t0
			for _, s := range tt.steps {
				at = at.Add(time.Minute)
				if s == "public" {
					c.RecordPublicReply(at, "reply_"+at.Format("1504"))
				} else {
					c.RecordPrivateReply(at, "psid", "m_1", "conv-1")
				}
			}
			if c.Status != tt.want {
				t.Fatalf("status = %s, want %s", c.Status, tt.want)
			}
		})
	}
	c := Comment{}
	c.RecordPublicReply(t0, "reply_1")
	c.RecordPublicReply(t0.Add(time.Hour), "reply_2")
	if c.PublicReplyID != "reply_2" || !c.PublicRepliedAt.Equal(t0) {
		t.Fatalf("after two public replies: id %s at %s; want the latest id and the first time", c.PublicReplyID, c.PublicRepliedAt)
	}
	c.RecordPrivateReply(t0.Add(2*time.Hour), "psid-1", "m_9", "conv-9")
	if c.PrivateReplyRecipientID != "psid-1" || c.PrivateReplyMessageID != "m_9" || c.PrivateReplyConversationID != "conv-9" {
		t.Fatalf("private reply not recorded: %+v", c)
	}
}

func TestReplyTexts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		validate func() error
		wantErr  string
	}{
		{"private ok", func() error { return ValidatePrivateReply("Hi Ada") }, ""},
		{"private empty", func() error { return ValidatePrivateReply("") }, "text is required"},
		{"private blank", func() error { return ValidatePrivateReply(" \n\t") }, "text is required"},
		{"private at 2000", func() error { return ValidatePrivateReply(strings.Repeat("ё", 2000)) }, ""},
		{"private over 2000", func() error { return ValidatePrivateReply(strings.Repeat("ё", 2001)) }, "at most 2000 characters (got 2001)"},
		{"facebook at 8000", func() error { return ValidatePublicReply(channel.KindMessenger, strings.Repeat("a", 8000)) }, ""},
		{"facebook over 8000", func() error { return ValidatePublicReply(channel.KindMessenger, strings.Repeat("a", 8001)) }, "at most 8000"},
		{"instagram at 2200", func() error { return ValidatePublicReply(channel.KindInstagram, strings.Repeat("a", 2200)) }, ""},
		{"instagram over 2200", func() error { return ValidatePublicReply(channel.KindInstagram, strings.Repeat("a", 2201)) }, "at most 2200"},
		{"public empty", func() error { return ValidatePublicReply(channel.KindInstagram, "") }, "text is required"},
		{"required only", func() error { return RequireText(strings.Repeat("a", 9000)) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var fe *conversation.FieldError
			if !errors.As(err, &fe) || fe.Field != "text" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a text FieldError containing %q", err, tt.wantErr)
			}
		})
	}
}
