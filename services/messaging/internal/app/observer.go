package app

// Observer is told what the use cases did that operators watch: each
// method is one thing that happened, and internal/adapters/observe counts
// it (Prometheus) or logs it (zap). A nil Observer in Deps is a no-op one.
type Observer interface {
	// Ingress is one platform delivery, by platform and outcome (the
	// Ingress* outcomes).
	Ingress(platform, outcome string)
	// Send is one outcome of a send's or a comment reply's platform call
	// (the Send* outcomes); a send delivering several messages counts one
	// SendSent a message.
	Send(platform, outcome string)

	// ButtonNotAnswered: the platform did not take the answer to a tapped
	// button; the tap is stored all the same.
	ButtonNotAnswered(channelID, platform, tapID string, err error)
	// SentNotStored: the customer has what a send delivered (the
	// platform's externalIDs), but our copy could not be stored.
	SentNotStored(conversationID, platform string, externalIDs []string, err error)
	// ReceiptNotRendered and ReceiptNotStored: a keyed send went without
	// its idempotency receipt; the key's Redis answer still holds it.
	ReceiptNotRendered(workspaceID string, err error)
	ReceiptNotStored(workspaceID string, err error)
	// PublicReplyNotRecorded: a public reply is posted (replyID) but the
	// comment could not be updated.
	PublicReplyNotRecorded(commentID, replyID string, err error)
	// PrivateReplyClaimNotReleased: a refused private reply left a claim
	// behind, which refuses the next attempt until it runs out.
	PrivateReplyClaimNotReleased(commentID string, err error)
	// PrivateReplyNotStored: the commenter has the DM (externalID, sent to
	// recipientID) but it could not be stored.
	PrivateReplyNotStored(commentID, recipientID, externalID string, err error)
	// SuggestionNotPutBack: an operator's send of a suggestion stopped
	// before its end, and what was not sent could not wait again.
	SuggestionNotPutBack(conversationID string, err error)

	// OutboxPublished is events the relay published.
	OutboxPublished(events int)
	// OutboxPassFailed is a publish or sweep of the relay that stopped on
	// an error (NATS or the database); OutboxFailing is the first of a run
	// of them, and OutboxRecovered the pass that ends it.
	OutboxPassFailed()
	OutboxFailing(err error)
	OutboxRecovered()
	// OutboxBacklog is the events written and not yet published, as last
	// counted.
	OutboxBacklog(events int64)
	// TablePruned is rows deleted past their retention from a table the
	// relay's periodic job prunes (PruneTask); TablePruneFailed a pruning
	// pass that failed (retried on the next).
	TablePruned(table string, rows int64)
	TablePruneFailed(table string, err error)
}

// Ingress outcomes.
const (
	IngressStored       = "stored"
	IngressDuplicate    = "duplicate"
	IngressIgnored      = "ignored"
	IngressUnauthorized = "unauthorized"
	IngressNotFound     = "channel_not_found"
	IngressInvalid      = "invalid"
	IngressError        = "error"
)

// Send outcomes.
const (
	SendSent          = "sent"
	SendRefused       = "platform_error"
	SendOutsideWindow = "outside_window"
	SendInvalid       = "invalid"
	SendUnsupported   = "unsupported"
	// SendHandedOver is an AI send or draft refused: the conversation is
	// handed over to operators.
	SendHandedOver = "handed_over"
	// SendChannelExternal is an AI send refused: the channel is in
	// ai_mode external.
	SendChannelExternal = "ai_mode_external"
	SendError           = "error"
)

// nopObserver is the Observer of Deps that name none.
type nopObserver struct{}

var _ Observer = nopObserver{}

func (nopObserver) Ingress(string, string)                              {}
func (nopObserver) Send(string, string)                                 {}
func (nopObserver) ButtonNotAnswered(string, string, string, error)     {}
func (nopObserver) SentNotStored(string, string, []string, error)       {}
func (nopObserver) ReceiptNotRendered(string, error)                    {}
func (nopObserver) ReceiptNotStored(string, error)                      {}
func (nopObserver) PublicReplyNotRecorded(string, string, error)        {}
func (nopObserver) PrivateReplyClaimNotReleased(string, error)          {}
func (nopObserver) PrivateReplyNotStored(string, string, string, error) {}
func (nopObserver) SuggestionNotPutBack(string, error)                  {}
func (nopObserver) OutboxPublished(int)                                 {}
func (nopObserver) OutboxPassFailed()                                   {}
func (nopObserver) OutboxFailing(error)                                 {}
func (nopObserver) OutboxRecovered()                                    {}
func (nopObserver) OutboxBacklog(int64)                                 {}
func (nopObserver) TablePruned(string, int64)                           {}
func (nopObserver) TablePruneFailed(string, error)                      {}

// observerOr is o, or the no-op Observer when o is nil.
func observerOr(o Observer) Observer {
	if o == nil {
		return nopObserver{}
	}
	return o
}
