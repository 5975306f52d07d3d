package db_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/testenv"
)

// ScanRows runs the query gorm builds, conditions, order and limit with
// their parameters, and hands over the rows it returns, in order.
func TestScanRowsRunsTheQueryGormBuilds(t *testing.T) {
	t.Parallel()
	gdb := testenv.New(t).DB(t, "widgets", os.DirFS("testdata/migrations"))
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := gdb.Create(&Widget{Name: name}).Error; err != nil {
			t.Fatal(err)
		}
	}
	q := gdb.WithContext(context.Background()).Table("widgets.widgets AS w").Select("w.id, w.name").
		Where("w.name <> ?", "c").Order("w.name DESC").Limit(2)
	var got []Widget
	err := db.ScanRows(context.Background(), q, func(rows pgx.Rows) error {
		var w Widget
		if err := rows.Scan(&w.ID, &w.Name); err != nil {
			return err
		}
		got = append(got, w)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(got))
	for i, w := range got {
		names[i] = w.Name
	}
	if !slices.Equal(names, []string{"d", "b"}) || got[0].ID == 0 {
		t.Fatalf("rows = %+v, want d then b with their ids", got)
	}

	// The same query again, on a connection that has it prepared.
	n := 0
	if err := db.ScanRows(context.Background(), q, func(pgx.Rows) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("again: %d rows, %v; want 2", n, err)
	}
	// A failing query and a failing scan are errors.
	bad := gdb.Table("widgets.nothing")
	if err := db.ScanRows(context.Background(), bad, func(pgx.Rows) error { return nil }); err == nil {
		t.Fatal("a query of a missing table succeeded")
	}
}

// AppendUUID writes a uuid as PostgreSQL does.
func TestAppendUUID(t *testing.T) {
	t.Parallel()
	u := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	if got := string(db.AppendUUID([]byte("id="), u)); got != "id=01234567-89ab-cdef-fedc-ba9876543210" {
		t.Fatalf("AppendUUID = %q", got)
	}
}
