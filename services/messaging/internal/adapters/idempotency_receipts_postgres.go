package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// ReceiptStore keeps messaging.idempotency_receipts, the answers of sends
// made with an Idempotency-Key. The stores of what a send stores write its
// receipt in their own transaction (ConversationStore.AddSent, the comment
// transaction's AddReceipt) through insert; this store is the durable side
// of the keys Redis holds (it is the idempotency.Backstop) and prunes
// receipts whose keys are free again.
type ReceiptStore struct {
	db *gorm.DB
	// ttl is IDEMPOTENCY_TTL: an older receipt no longer answers its key.
	ttl time.Duration
}

var _ idempotency.Backstop = (*ReceiptStore)(nil)

// NewReceiptStore returns a store on gdb whose receipts answer their keys
// for ttl (IDEMPOTENCY_TTL).
func NewReceiptStore(gdb *gorm.DB, ttl time.Duration) *ReceiptStore {
	return &ReceiptStore{db: gdb, ttl: ttl}
}

// errNoReceiptStore is a receipt to write through a store that was given
// none: a wiring mistake, never a client's.
var errNoReceiptStore = errors.New("no idempotency receipt store configured")

// insertReceiptSQL stores a receipt made of the row source, whose
// columns are workspace_id, key_hash, fingerprint, status, body and ref
// (receiptArgs, then created_at), and which may name further tables to
// store it only along with their rows. The age in seconds after which a
// receipt has expired is the parameter after the source's, on
// PostgreSQL's clock like created_at. A key's earlier receipt is replaced
// only when it expired (its key was free again): a live one stays, since
// it answered the key first.
func insertReceiptSQL(source string) string {
	return `INSERT INTO messaging.idempotency_receipts AS r
	(workspace_id, key_hash, fingerprint, status, body, ref, created_at)
` + source + `
ON CONFLICT (workspace_id, key_hash) DO UPDATE
	SET fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body,
		ref = excluded.ref, created_at = excluded.created_at
	WHERE r.created_at < now() - make_interval(secs => ?)`
}

// insertOneReceiptSQL stores one receipt alone.
var insertOneReceiptSQL = insertReceiptSQL(`VALUES (?, ?, ?, ?, ?, ?, now())`)

// receiptArgs are the parameters of r's row in insertReceiptSQL.
func receiptArgs(r receipt.Receipt) []any {
	return []any{r.WorkspaceID, r.KeyHash, r.Fingerprint, r.Status, r.Body, r.Ref}
}

// insert writes r in the transaction tx.
func (s *ReceiptStore) insert(ctx context.Context, tx *gorm.DB, r receipt.Receipt) error {
	if s == nil {
		return errNoReceiptStore
	}
	err := tx.WithContext(ctx).Exec(insertOneReceiptSQL, append(receiptArgs(r), s.ttl.Seconds())...).Error
	if err != nil {
		return fmt.Errorf("insert idempotency receipt: %w", err)
	}
	return nil
}

// Find implements idempotency.Backstop: the workspace's receipt of
// keyHash that has not expired.
func (s *ReceiptStore) Find(ctx context.Context, workspaceID, keyHash string) (idempotency.Record, bool, error) {
	if !validID(workspaceID) {
		return idempotency.Record{}, false, nil
	}
	var rows []struct {
		Fingerprint string
		Status      int
		Body        []byte
		Ref         string
	}
	err := s.db.WithContext(ctx).Raw(`SELECT fingerprint, status, body, ref FROM messaging.idempotency_receipts
		WHERE workspace_id = ? AND key_hash = ? AND created_at >= now() - make_interval(secs => ?)`,
		workspaceID, keyHash, s.ttl.Seconds()).Scan(&rows).Error
	if err != nil {
		return idempotency.Record{}, false, fmt.Errorf("find idempotency receipt: %w", err)
	}
	if len(rows) == 0 {
		return idempotency.Record{}, false, nil
	}
	r := rows[0]
	return idempotency.Record{
		Fingerprint: r.Fingerprint,
		Response:    idempotency.Response{Status: r.Status, Body: r.Body, Ref: r.Ref, TooLarge: r.Body == nil},
	}, true, nil
}

// Prune deletes the receipts written before cutoff (by the created_at
// index) and returns how many.
func (s *ReceiptStore) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM messaging.idempotency_receipts WHERE created_at < ?`, cutoff)
	if res.Error != nil {
		return 0, fmt.Errorf("prune idempotency receipts: %w", res.Error)
	}
	return res.RowsAffected, nil
}
