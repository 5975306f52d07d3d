package db

import (
	"time"

	"gorm.io/gorm"
)

// NewestFirst is the query side of paging.Paginate: rows ordered by the
// timestamp column, then the id column, newest first. With at, it selects
// every row stamped exactly at (a whole tie group, unlimited); otherwise
// before, when set, keeps strictly older rows and limit sizes the page.
func NewestFirst(column, idColumn string, before, at *time.Time, limit int) func(*gorm.DB) *gorm.DB {
	return func(tx *gorm.DB) *gorm.DB {
		switch {
		case at != nil:
			tx = tx.Where(column+" = ?", *at)
		case before != nil:
			tx = tx.Where(column+" < ?", *before)
		}
		if at == nil {
			tx = tx.Limit(limit)
		}
		return tx.Order(column + " DESC, " + idColumn + " DESC")
	}
}
