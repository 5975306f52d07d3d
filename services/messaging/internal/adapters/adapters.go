// Package adapters implements the domain's ports on PostgreSQL (gorm) and
// JetStream. Row structs and their converters live here, so tables can
// change without touching the rules. Platform clients live in subpackages
// (telegram/).
package adapters

import (
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// Schema is the PostgreSQL schema of the service's tables.
const Schema = "messaging"

// validID keeps strings that cannot be ids away from uuid columns, where
// PostgreSQL would reject them with an error instead of finding nothing.
func validID(ids ...string) bool {
	for _, id := range ids {
		if !channel.IsID(id) {
			return false
		}
	}
	return true
}

// utc normalizes times read back from PostgreSQL, which come in the
// connection's zone.
func utc(t time.Time) time.Time { return t.UTC() }

// validIDs keeps the ids of ids that are UUIDs: a lookup of many
// conversations skips the others, which no row can have.
func validIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if validID(id) {
			out = append(out, id)
		}
	}
	return out
}
