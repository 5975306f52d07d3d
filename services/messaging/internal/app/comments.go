package app

import (
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
)

// CommentDeps are what the comment use cases need.
type CommentDeps struct {
	Store comment.Store
	// Replier answers comments on Messenger and Instagram (the Graph API).
	Replier comment.Replier
	// DailyCap is the page's private replies of the day, shared with the
	// other private-reply producers (pkg/dailycap).
	DailyCap comment.DailyCap
	// Commenters keeps one private reply per commenter per window.
	Commenters comment.CommenterClaims
	// PrivateReplyWindow is how long after a comment a private reply may be
	// sent, and how long a commenter waits for the next one
	// (PRIVATE_REPLY_WINDOW, 168h).
	PrivateReplyWindow time.Duration
	// PrivateReplyDailyCap is a page's private replies per day
	// (PRIVATE_REPLY_DAILY_CAP, 200).
	PrivateReplyDailyCap int
}

// Defaults (docs/limits-and-errors.md "Sending and comments").
const (
	defaultPrivateReplyWindow   = 7 * 24 * time.Hour
	defaultPrivateReplyDailyCap = 200
)

func (d CommentDeps) window() time.Duration {
	if d.PrivateReplyWindow <= 0 {
		return defaultPrivateReplyWindow
	}
	return d.PrivateReplyWindow
}

func (d CommentDeps) dailyCap() int {
	if d.PrivateReplyDailyCap <= 0 {
		return defaultPrivateReplyDailyCap
	}
	return d.PrivateReplyDailyCap
}

// dedupeKeyComment names a comment delivery in the ingress receipts.
func dedupeKeyComment(commentID string) string { return "meta:comment:" + commentID }
