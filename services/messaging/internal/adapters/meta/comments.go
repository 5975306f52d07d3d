package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Fields of subscribed changes that carry comments.
const (
	FieldFeed     = "feed"     // Facebook page: posts, comments, reactions
	FieldComments = "comments" // Instagram: comments on the account's media
)

// feedValue is a Facebook page "feed" change. Only item "comment" with verb
// "add" is a new comment; edits, removals, hides, reactions and posts come
// through the same field.
type feedValue struct {
	Item        string          `json:"item"`
	Verb        string          `json:"verb"`
	CommentID   string          `json:"comment_id"`
	PostID      string          `json:"post_id"`
	ParentID    string          `json:"parent_id"`
	Message     string          `json:"message"`
	From        *feedFrom       `json:"from"`
	CreatedTime json.RawMessage `json:"created_time"`
}

type feedFrom struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// instagramComment is an Instagram "comments" change: a new comment on the
// account's media. It carries no time; the entry's time is the comment's.
type instagramComment struct {
	ID       string `json:"id"`
	Text     string `json:"text"`
	ParentID string `json:"parent_id"`
	From     *struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"from"`
	Media *struct {
		ID string `json:"id"`
	} `json:"media"`
}

// ErrMalformedChange is a change that is not an object with a string
// field, or a comment change whose value lacks what a comment needs (its
// id) or says a time that is not one.
var ErrMalformedChange = errors.New("malformed comment change")

// ParseCommentChange reads a new comment out of a change: Facebook's feed
// (item comment, verb add) or Instagram's comments. It returns nil for
// changes that are not a new comment (other fields, items and verbs), and
// an error wrapping ErrMalformedChange for a comment it cannot read. The
// comment's time is Meta's, its created_time or else the entry's;
// receivedAt, its arrival, stands in when Meta gives none that is positive
// (docs/channels.md "Messenger and Instagram"), as for a message.
func ParseCommentChange(entry Entry, change Change, receivedAt time.Time) (*comment.Inbound, error) {
	switch change.Field {
	case FieldFeed:
		var v feedValue
		if err := json.Unmarshal(change.Value, &v); err != nil {
			return nil, fmt.Errorf("%w: feed value: %v", ErrMalformedChange, err)
		}
		if v.Item != "comment" || v.Verb != "add" {
			return nil, nil
		}
		if v.CommentID == "" {
			return nil, fmt.Errorf("%w: feed comment without comment_id", ErrMalformedChange)
		}
		at, err := feedTime(v.CreatedTime, entry.Time, receivedAt)
		if err != nil {
			return nil, err
		}
		in := &comment.Inbound{ExternalID: v.CommentID, PostID: v.PostID, Text: v.Message, CreatedAt: at}
		if v.ParentID != "" && v.ParentID != v.PostID {
			// A reply to a comment; on a top-level comment Meta sets
			// parent_id to the post.
			in.ParentID = v.ParentID
		}
		if v.From != nil {
			in.FromID, in.FromName = v.From.ID, v.From.Name
		}
		return in, nil
	case FieldComments:
		var v instagramComment
		if err := json.Unmarshal(change.Value, &v); err != nil {
			return nil, fmt.Errorf("%w: comments value: %v", ErrMalformedChange, err)
		}
		if v.ID == "" {
			return nil, fmt.Errorf("%w: instagram comment without id", ErrMalformedChange)
		}
		in := &comment.Inbound{ExternalID: v.ID, ParentID: v.ParentID, Text: v.Text, CreatedAt: entryTime(entry.Time, receivedAt)}
		if v.Media != nil {
			in.PostID = v.Media.ID
		}
		if v.From != nil {
			in.FromID, in.FromName = v.From.ID, v.From.Username
		}
		return in, nil
	}
	return nil, nil
}

// feedTime reads created_time: Unix seconds in feed webhooks, an ISO 8601
// string ("2026-11-22T10:00:00+0000") in Graph reads. Without one, or with
// one not positive, the entry's time stands in, or receivedAt (entryTime).
// Only a created_time that is no time at all ("soon", an object) is
// malformed.
func feedTime(raw json.RawMessage, entry int64, receivedAt time.Time) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return entryTime(entry, receivedAt), nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		if secs, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return positiveTime(unixTime(secs), entry, receivedAt), nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		for _, layout := range []string{"2006-01-02T15:04:05-0700", time.RFC3339} {
			if t, err := time.Parse(layout, s); err == nil {
				return positiveTime(t.UTC(), entry, receivedAt), nil
			}
		}
		if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
			return positiveTime(unixTime(secs), entry, receivedAt), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: created_time %s is not a time", ErrMalformedChange, raw)
}

// positiveTime is t when it is after the Unix epoch, else the entry's time
// or receivedAt (entryTime).
func positiveTime(t time.Time, entry int64, receivedAt time.Time) time.Time {
	if t.Unix() > 0 {
		return t
	}
	return entryTime(entry, receivedAt)
}

// entryTime is the entry's time, or receivedAt when Meta gave none that is
// positive.
func entryTime(entry int64, receivedAt time.Time) time.Time {
	if entry > 0 {
		return unixTime(entry)
	}
	return receivedAt.UTC()
}

// unixTime reads a Meta time: seconds in change entries, milliseconds in
// messaging entries. Any value past 10^12 is taken as milliseconds (as
// seconds it would be some 30,000 years away).
func unixTime(v int64) time.Time {
	if v > 1e12 {
		return time.UnixMilli(v).UTC()
	}
	return time.Unix(v, 0).UTC()
}

// Comments answers comments through the Graph API: public replies under
// the comment, private replies to the commenter's inbox.
type Comments struct {
	graph *Graph
}

var _ comment.Replier = (*Comments)(nil)

// NewComments answers comments through g.
func NewComments(g *Graph) *Comments { return &Comments{graph: g} }

type graphMessage struct {
	Text string `json:"text"`
}

type privateReplyRequest struct {
	Recipient struct {
		CommentID string `json:"comment_id"`
	} `json:"recipient"`
	Message graphMessage `json:"message"`
}

// ReplyPublic posts text under the comment: POST /{comment_id}/comments on
// Facebook, POST /{comment_id}/replies on Instagram, each answering {id}.
func (c *Comments) ReplyPublic(ctx context.Context, ch channel.Channel, commentID, text string) (string, error) {
	edge := "/comments"
	if ch.Kind == channel.KindInstagram {
		edge = "/replies"
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := c.graph.Call(ctx, ch.Kind, ch.Token, "/"+url.PathEscape(commentID)+edge, map[string]string{"message": text}, &out); err != nil {
		return "", err
	}
	if strings.TrimSpace(out.ID) == "" {
		return "", refused(ch.Kind, 0, "the Graph API's answer to a comment reply has no id")
	}
	return out.ID, nil
}

// ReplyPrivate sends text to the commenter: POST /me/messages with
// recipient.comment_id, answering {recipient_id, message_id}. Meta's own
// window refusal (code 10, subcode 2018278) means the comment is too old
// for a private reply.
func (c *Comments) ReplyPrivate(ctx context.Context, ch channel.Channel, commentID, text string) (comment.PrivateSent, error) {
	var req privateReplyRequest
	req.Recipient.CommentID = commentID
	req.Message.Text = text
	var out struct {
		RecipientID string `json:"recipient_id"`
		MessageID   string `json:"message_id"`
	}
	err := c.graph.Call(ctx, ch.Kind, ch.Token, "/me/messages", req, &out)
	if errors.Is(err, conversation.ErrOutsideWindow) {
		return comment.PrivateSent{}, comment.ErrPrivateReplyExpired
	}
	if err != nil {
		return comment.PrivateSent{}, err
	}
	if out.RecipientID == "" || out.MessageID == "" {
		return comment.PrivateSent{}, refused(ch.Kind, 0, "the Graph API's answer to a private reply lacks recipient_id or message_id")
	}
	return comment.PrivateSent{RecipientID: out.RecipientID, MessageID: out.MessageID}, nil
}
