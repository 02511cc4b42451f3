package tdsfake_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// readOnlySource serves db and opens source/sqlserver on it with
// ApplicationIntent=ReadOnly in the DSN, as a user reading a readable
// secondary through an availability group listener does.
func readOnlySource(t *testing.T, db *fake.DB, opts tdsfake.Options) (*sqlserver.Source, *tdsfake.Server, *sql.DB) {
	return readOnlySourceWith(t, db, opts, sqlserver.Options{})
}

// readOnlySourceWith is readOnlySource with the source's options.
func readOnlySourceWith(t *testing.T, db *fake.DB, opts tdsfake.Options, sopts sqlserver.Options) (*sqlserver.Source, *tdsfake.Server, *sql.DB) {
	t.Helper()
	srv, err := tdsfake.Start(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sdb, err := sqlserver.Open(srv.DSN("cdcsnap") + "&ApplicationIntent=ReadOnly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	src, err := sqlserver.New(sdb, sopts)
	if err != nil {
		t.Fatal(err)
	}
	return src, srv, sdb
}

// TestSnapshotConnectionsCarryReadOnlyIntent: a whole snapshot through a
// DSN with ApplicationIntent=ReadOnly opens several connections (planning,
// one per partition read) and every one of them logs in with LOGIN7's
// fReadOnlyIntent, which is what read-only routing sends to a secondary.
func TestSnapshotConnectionsCarryReadOnlyIntent(t *testing.T) {
	db := bigTable(t, 3000)
	src, srv, _ := readOnlySource(t, db, tdsfake.Options{PageRows: 100})
	if _, err := snapshot.Take(context.Background(), src, fake.NewMemSink(), snapshot.Options{CaptureInstance: "dbo_big", Partitions: 4, MinPartitionRows: -1}); err != nil {
		t.Fatal(err)
	}
	conns := map[uint64]bool{}
	for _, r := range srv.Requests() {
		conns[r.ConnID] = true
		if !r.Login.ReadOnlyIntent {
			t.Fatalf("connection %d sent %q without the read-only intent", r.ConnID, r.SQL)
		}
	}
	if len(conns) < 2 {
		t.Fatalf("the snapshot used %d connection(s); the check needs several", len(conns))
	}
}

// TestReadOnAReplicaBehindTheSnapshotIsRefused: with
// ReadOptions.NotBefore set, ReadRange asks sys.fn_cdc_get_max_lsn() on the
// very connection it then reads on; a replica whose max LSN is below
// NotBefore refuses the read with a *source.ReplicaBehindError (its rows
// would predate L0, and the stream after L0 would never bring what
// changed between), a replica that caught up reads every row, and a read
// without NotBefore asks nothing.
func TestReadOnAReplicaBehindTheSnapshotIsRefused(t *testing.T) {
	ctx := context.Background()
	db := bigTable(t, 499)
	tx := db.Begin()
	if err := tx.Insert("dbo", "big", fake.Row{int64(499), "captured"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	l0, err := db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	behind, err := l0.Prev()
	if err != nil {
		t.Fatal(err)
	}
	var lagging atomic.Bool
	src, srv, _ := readOnlySource(t, db, tdsfake.Options{
		ReplicaMaxLSN: func(conn uint64, login tdsserver.Login) (lsn.LSN, bool) {
			return behind, login.ReadOnlyIntent && lagging.Load()
		},
	})
	ci, err := src.CaptureInstance(ctx, "dbo_big")
	if err != nil {
		t.Fatal(err)
	}
	read := func(opts source.ReadOptions) (int, error) {
		rr, err := src.ReadRange(ctx, ci, keyrange.Range{}, opts)
		if err != nil {
			return 0, err
		}
		defer rr.Release()
		n := 0
		for rr.Next() {
			n += int(rr.RecordBatch().NumRows())
		}
		return n, rr.Err()
	}
	lagging.Store(true)
	_, err = read(source.ReadOptions{NotBefore: l0})
	var rb *source.ReplicaBehindError
	if !errors.As(err, &rb) || !errors.Is(err, source.ErrReplicaBehind) || rb.Need != l0 || rb.Have != behind {
		t.Fatalf("read on a replica behind L0: %v, want a ReplicaBehindError needing %s, having %s", err, l0, behind)
	}
	if n, err := read(source.ReadOptions{}); err != nil || n != 500 {
		t.Fatalf("read without NotBefore: %d rows, %v", n, err)
	}
	lagging.Store(false)
	before := len(srv.Requests())
	if n, err := read(source.ReadOptions{NotBefore: l0}); err != nil || n != 500 {
		t.Fatalf("read on a replica that caught up: %d rows, %v; want 500", n, err)
	}
	// The check and the read ran on one connection, the check first.
	var check, rd uint64
	for _, r := range srv.Requests()[before:] {
		switch {
		case r.SQL == mssqlstmt.MaxLSNStatement().SQL:
			check = r.ConnID
		case strings.HasPrefix(r.SQL, "SELECT [id]"):
			if check == 0 {
				t.Fatal("the range was read before the replica was checked")
			}
			rd = r.ConnID
		}
	}
	if check == 0 || check != rd {
		t.Fatalf("max LSN checked on connection %d, range read on %d: want one connection", check, rd)
	}
}

// TestReadChangesAsksOneConnection: ReadChanges takes the minimum and
// maximum LSN, the changes and the end check of the minimum on one
// connection, so behind a listener they come from one replica: the
// maximum the read is held to is its own replica's.
func TestReadChangesAsksOneConnection(t *testing.T) {
	ctx := context.Background()
	db := bigTable(t, 10)
	for i := range 3 {
		tx := db.Begin()
		if err := tx.Insert("dbo", "big", fake.Row{int64(100 + i), "x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	src, srv, sdb := readOnlySource(t, db, tdsfake.Options{})
	// No idle connections: each statement on the pool would take a new
	// one, as a listener could route each to another replica.
	sdb.SetMaxIdleConns(0)
	ci, err := src.CaptureInstance(ctx, "dbo_big")
	if err != nil {
		t.Fatal(err)
	}
	before := len(srv.Requests())
	max, err := db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, max)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rr.Next() {
		n += int(rr.RecordBatch().NumRows())
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Release()
	if n != 3 {
		t.Fatalf("read %d changes, want 3", n)
	}
	conns := map[uint64][]string{}
	for _, r := range srv.Requests()[before:] {
		if r.SQL == mssqlstmt.MinLSNStatement("").SQL || r.SQL == mssqlstmt.MaxLSNStatement().SQL || strings.Contains(r.SQL, " FROM [cdc].") {
			conns[r.ConnID] = append(conns[r.ConnID], clipSQL(r.SQL))
		}
	}
	if len(conns) != 1 {
		t.Fatalf("ReadChanges asked %d connections: %v", len(conns), conns)
	}
	for _, q := range conns {
		if len(q) != 4 {
			t.Fatalf("ReadChanges sent %v on its connection: want min LSN, max LSN, the changes, min LSN", q)
		}
	}
}

func clipSQL(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// TestSnapshotOnALaggingReplicaOverTheWire: snapshot.Take through
// source/sqlserver sets NotBefore on its partition reads to the max LSN
// its plan read: when the reading connections land on a replica behind it
// the snapshot fails with source.ErrReplicaBehind and commits nothing; a
// rerun once the replica caught up snapshots every row at that LSN.
func TestSnapshotOnALaggingReplicaOverTheWire(t *testing.T) {
	ctx := context.Background()
	db := bigTable(t, 300)
	tx := db.Begin()
	if err := tx.Insert("dbo", "big", fake.Row{int64(300), "captured"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	planned, err := db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	behind, err := planned.Prev()
	if err != nil {
		t.Fatal(err)
	}
	var reading, lagging atomic.Bool
	src, _, _ := readOnlySource(t, db, tdsfake.Options{
		// The partition reads are the first statements that set an
		// isolation level (an integer key plans without seeks): from
		// there on, connections reach the lagging replica.
		BeforeServe: func(_ context.Context, sql string) {
			if sql == mssqlstmt.IsolationStatement(source.ReadCommitted).SQL {
				reading.Store(true)
			}
		},
		ReplicaMaxLSN: func(uint64, tdsserver.Login) (lsn.LSN, bool) {
			return behind, reading.Load() && lagging.Load()
		},
	})
	lagging.Store(true)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_big", Partitions: 3, MinPartitionRows: -1}
	var rb *source.ReplicaBehindError
	if _, err := snapshot.Take(ctx, src, dst, opts); !errors.As(err, &rb) || rb.Need != planned {
		t.Fatalf("snapshot on a lagging replica: %v, want a *source.ReplicaBehindError needing %s", err, planned)
	}
	if n := len(dst.Commits()); n != 0 {
		t.Fatalf("%d commits after the refused reads", n)
	}
	lagging.Store(false)
	res, err := snapshot.Take(ctx, src, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if res.LSN != planned || len(rows) != 301 {
		t.Fatalf("rerun: %+v with %d rows in the sink, want 301 rows at %s", res, len(rows), planned)
	}
}

// commitInserts commits n one-row transactions into bigTable's table and
// returns their LSNs.
func commitInserts(t *testing.T, db *fake.DB, n int) []lsn.LSN {
	t.Helper()
	var out []lsn.LSN
	for i := range n {
		tx := db.Begin()
		if err := tx.Insert("dbo", "big", fake.Row{int64(100 + i), "x"}); err != nil {
			t.Fatal(err)
		}
		l, err := tx.Commit()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestPollOnALaggingReplicaReadsWhatItReached: Poll takes its upper bound
// from a replica that is up to date and reads on one whose redo lags, that
// shows only the first of three commits (the review of issue 33, finding
// 1). The read is never cut short silently: the poll reads to the lagging
// replica's max LSN and goes on from there, so the next poll, on a replica
// that caught up, brings the other two.
func TestPollOnALaggingReplicaReadsWhatItReached(t *testing.T) {
	ctx := context.Background()
	db := bigTable(t, 10)
	lsns := commitInserts(t, db, 3)
	var asked atomic.Int64
	var lag atomic.Bool
	lag.Store(true)
	src, _, sdb := readOnlySource(t, db, tdsfake.Options{ReplicaMaxLSN: func(uint64, tdsserver.Login) (lsn.LSN, bool) {
		if asked.Add(1) == 1 || !lag.Load() {
			return lsn.LSN{}, false // Poll's max LSN: a replica that is up to date
		}
		return lsns[0], true // the read's: behind
	}})
	sdb.SetMaxIdleConns(0)
	ci, err := src.CaptureInstance(ctx, "dbo_big")
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	app := snapshot.AppendFunc(func(ctx context.Context, _ string, _ int64, rr array.RecordReader) (int64, error) {
		for rr.Next() {
			rows += rr.RecordBatch().NumRows()
		}
		return 1, rr.Err()
	})
	first, err := snapshot.Poll(ctx, src, app, "dbo_big", ci.StartLSN, snapshot.PollOptions{BatchID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first.To != lsns[0] || rows != 1 {
		t.Fatalf("poll on the lagging replica read to %s, %d rows; want to %s (its max LSN), 1 row", first.To, rows, lsns[0])
	}
	lag.Store(false)
	second, err := snapshot.Poll(ctx, src, app, "dbo_big", first.Next, snapshot.PollOptions{BatchID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 3 || second.To != lsns[2] {
		t.Fatalf("after the replica caught up: %d change rows appended in all, read to %s; want 3, to %s", rows, second.To, lsns[2])
	}
}

// TestResumedChangeReadNeverReadsLess: a change read cut by error 1205
// after its first row resumes on new connections; while they reach a
// replica behind the first read's upper bound the resume is refused and
// retried (never a read to less), and once one has caught up the read
// ends with every row once. A replica that never catches up fails the read
// with a *source.ReplicaBehindError once the retries are spent, having
// handed out no row.
func TestResumedChangeReadNeverReadsLess(t *testing.T) {
	for _, catchUp := range []bool{true, false} {
		ctx := context.Background()
		db := bigTable(t, 10)
		lsns := commitInserts(t, db, 3)
		var first atomic.Uint64
		var faulted atomic.Bool
		var behind atomic.Int64
		src, _, sdb := readOnlySourceWith(t, db, tdsfake.Options{PageRows: 1,
			ReplicaMaxLSN: func(conn uint64, _ tdsserver.Login) (lsn.LSN, bool) {
				first.CompareAndSwap(0, conn)
				if conn == first.Load() || catchUp && behind.Load() >= 2 {
					return lsn.LSN{}, false
				}
				behind.Add(1)
				return lsns[0], true
			},
			Inject: func(req *tdsserver.Request) (tdsserver.Fault, bool) {
				if req.ConnID == first.Load() && strings.Contains(req.SQL, " FROM [cdc].") && faulted.CompareAndSwap(false, true) {
					return tdsserver.TransientFault(1205, 1), true
				}
				return tdsserver.Fault{}, false
			}}, sqlserver.Options{Retry: sqlserver.Retry{Attempts: 4, Initial: time.Millisecond, Max: 2 * time.Millisecond}})
		sdb.SetMaxIdleConns(0)
		ci, err := src.CaptureInstance(ctx, "dbo_big")
		if err != nil {
			t.Fatal(err)
		}
		rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, lsns[2])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rr.Next() {
			n += int(rr.RecordBatch().NumRows())
		}
		err = rr.Err()
		rr.Release()
		switch {
		case !faulted.Load():
			t.Fatal("no fault struck")
		case catchUp && (err != nil || n != 3):
			t.Fatalf("resumed on a replica that caught up: %d rows, %v; want 3", n, err)
		case !catchUp && (!errors.Is(err, source.ErrReplicaBehind) || n != 0):
			t.Fatalf("resumed on a replica that stays behind: %d rows, %v; want none and a *source.ReplicaBehindError", n, err)
		}
		t.Logf("catch up %v: %d refusals of a lagging replica, %d rows, %v", catchUp, behind.Load(), n, err)
	}
}
