package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStatsFlush is how long PostgreSQL's backends may hold their counts
// before the statistics views show them: a backend reports them at the
// end of a transaction at most once a second, and one gone idle within
// that second reports them 10 s later (PGSTAT_MIN_INTERVAL and
// PGSTAT_IDLE_INTERVAL in PostgreSQL's pgstat.c).
const pgStatsFlush = 10*time.Second + 500*time.Millisecond

// pgStats is what PostgreSQL has counted so far of the work a run makes:
// the write-ahead log's position (the whole server's, whoever writes),
// the transactions committed in the suite's database, the statements
// executed there when pg_stat_statements is loaded (-1 when it is not),
// and the rows each table of that database has had inserted, updated
// (of them HOT, without a new index entry) and deleted.
type pgStats struct {
	walLSN     string
	commits    int64
	statements int64
	own        int64 // statements of the benchmark's own pool (queryCounter)
	tables     map[string]tableStats
}

// tableStats are one table's pg_stat_user_tables counters.
type tableStats struct{ ins, upd, hot, del int64 }

// queryCounter counts the statements the benchmark's own pool sends, so
// that the transactions per message leave out the benchmark's sampling
// and checking (each of its statements is a transaction of its own).
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// pgStats reads the counters, after waiting for the backends to report
// theirs (pgStatsFlush). The last counters read stand for the current
// ones when no message has been sent since and less than a second has
// passed (one line's end and the next one's start): then nothing can
// have happened in between.
func (pb *pipelineBench) pgStats() (pgStats, error) {
	if pb.pgLast.tables != nil && pb.pgLastSeq == pb.seq.Load() && time.Since(pb.pgLastAt) < time.Second {
		return pb.pgLast, nil
	}
	time.Sleep(pgStatsFlush)
	st, err := pb.readPGStats()
	if err == nil {
		pb.pgLast, pb.pgLastAt, pb.pgLastSeq = st, time.Now(), pb.seq.Load()
	}
	return st, err
}

func (pb *pipelineBench) readPGStats() (pgStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := pgStats{statements: -1, own: pb.queries.n.Load(), tables: map[string]tableStats{}}
	if err := pb.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, xact_commit
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&st.walLSN, &st.commits); err != nil {
		return st, fmt.Errorf("read pg_stat_database: %w", err)
	}
	if pb.statements {
		if err := pb.pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&st.statements); err != nil {
			return st, fmt.Errorf("read pg_stat_statements: %w", err)
		}
	}
	rows, err := pb.pool.Query(ctx, `SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
		FROM pg_stat_user_tables`)
	if err != nil {
		return st, fmt.Errorf("read pg_stat_user_tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t tableStats
		if err := rows.Scan(&name, &t.ins, &t.upd, &t.hot, &t.del); err != nil {
			return st, err
		}
		st.tables[name] = t
	}
	return st, rows.Err()
}

// hasStatements says whether pg_stat_statements answers in the suite's
// database (its library loaded and the extension created); the
// benchmark does not need it.
func (pb *pipelineBench) hasStatements() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int64
	return pb.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_statements LIMIT 1`).Scan(&n) == nil
}

// reportPG reports, per message, what PostgreSQL counted between before
// and now: wal-bytes (the whole server's WAL, so anyone else's writes
// meanwhile count too), xact (transactions committed in the suite's
// database, the benchmark's own statements left out), statements (only
// with pg_stat_statements), rows inserted, updated and deleted over all
// tables, and hot-upd-% (the share of the updates that were HOT). It
// prints the same per table, for the tables the run wrote to.
func (pb *pipelineBench) reportPG(b *testing.B, before pgStats, messages int) {
	after, err := pb.pgStats()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wal float64
	if err := pb.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)`, after.walLSN, before.walLSN).Scan(&wal); err != nil {
		b.Fatalf("WAL bytes: %v", err)
	}
	per := func(d float64) float64 { return d / float64(messages) }
	own := after.own - before.own
	b.ReportMetric(per(wal), "wal-bytes/msg")
	b.ReportMetric(per(float64(after.commits-before.commits-own)), "xact/msg")
	if before.statements >= 0 && after.statements >= 0 {
		b.ReportMetric(per(float64(after.statements-before.statements-own)), "statements/msg")
	}

	type row struct {
		name string
		tableStats
	}
	var changed []row
	var all tableStats
	for name, a := range after.tables {
		p := before.tables[name]
		d := tableStats{ins: a.ins - p.ins, upd: a.upd - p.upd, hot: a.hot - p.hot, del: a.del - p.del}
		if d == (tableStats{}) {
			continue
		}
		changed = append(changed, row{name, d})
		all.ins, all.upd, all.hot, all.del = all.ins+d.ins, all.upd+d.upd, all.hot+d.hot, all.del+d.del
	}
	b.ReportMetric(per(float64(all.ins)), "rows-ins/msg")
	b.ReportMetric(per(float64(all.upd)), "rows-upd/msg")
	b.ReportMetric(per(float64(all.del)), "rows-del/msg")
	b.ReportMetric(hotShare(all), "hot-upd-%")
	// Printed, not logged: a benchmark's log is cut at ten lines.
	slices.SortFunc(changed, func(x, y row) int { return cmp.Compare(x.name, y.name) })
	for _, t := range changed {
		fmt.Printf("pg %s %-36s ins/msg %6.3f  upd/msg %6.3f  hot-upd %5.1f %%  del/msg %6.3f\n",
			b.Name(), t.name, per(float64(t.ins)), per(float64(t.upd)), hotShare(t.tableStats), per(float64(t.del)))
	}
}

// hotShare is the percentage of t's updates that were HOT, 0 without
// updates.
func hotShare(t tableStats) float64 {
	if t.upd == 0 {
		return 0
	}
	return 100 * float64(t.hot) / float64(t.upd)
}
