// Package receipt is the durable answer to a send made with an
// Idempotency-Key: stored in the same transaction as what the send stored,
// so that a send that reached the customer is never repeated, even when
// Redis, which holds the keys, lost one.
package receipt

// Receipt is the answer one keyed send got.
type Receipt struct {
	WorkspaceID string
	// KeyHash stands for the key, which is not stored.
	KeyHash string
	// Fingerprint is the request's (method, path, raw body).
	Fingerprint string
	Status      int
	// Body is the JSON answer; nil when it was too large to replay.
	Body []byte
	// Ref names what the send produced: the stored message's id, or the
	// comment's platform id for a comment reply.
	Ref string
}
