package snapshot_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	seedFlag  = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the clock)")
	casesFlag = flag.Int("cases", 300, "cases of the randomized tests")
)

// shapes are the table layouts of the random cases, at datetime2(7)'s
// full precision.
func shapes() []testworld.Shape { return testworld.Shapes(testworld.Tick) }

// stream appends the changes after res.LSN up to the current max LSN, as a
// stream started from Bootstrap's LSN would, in one batch.
func stream(t testing.TB, ctx context.Context, w *testworld.World, dst *fake.MemSink, from lsn.LSN, batch int64) {
	to, err := w.DB.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := snapshot.Changes(ctx, w.DB, w.CI, from, to, batch)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if _, err := dst.AppendChanges(ctx, w.CI, batch, rr); err != nil {
		t.Fatal(err)
	}
}

func sinkImage(t testing.TB, _ context.Context, w *testworld.World, dst *fake.MemSink) *snapshot.Image {
	t.Helper()
	return w.SinkImage(t, dst, lsn.LSN{})
}

// TestTakeEveryRowOnce: on a quiet table, the snapshot holds every row
// exactly once, each range reads exactly its rows, and keyset planning
// examines at most one key per row plus one per seek.
func TestTakeEveryRowOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 1))
	ctx := context.Background()
	for c := range *casesFlag {
		sh := shapes()[r.IntN(len(shapes()))]
		rows := r.IntN(120)
		if r.IntN(10) == 0 {
			rows = r.IntN(3)
		}
		w := testworld.New(t, r, sh, rows)
		if r.IntN(3) == 0 {
			if err := w.DB.SetRowCountSkew("dbo", sh.Name, int64(r.IntN(41)-20)); err != nil {
				t.Fatal(err)
			}
		}
		parts := 1 + r.IntN(12)
		dst := fake.NewMemSink()
		w.DB.ResetStats()
		res, err := snapshot.Take(ctx, w.DB, dst, snapshot.Options{CaptureInstance: w.CI, Partitions: parts, MinPartitionRows: -1, Parallelism: 1 + r.IntN(4), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(20)}})
		if err != nil {
			t.Fatalf("case %d (%s, %d rows, %d partitions): %v", c, sh.Name, len(w.Keys), parts, err)
		}
		src, err := w.DB.Rows("dbo", sh.Name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != int64(len(src)) {
			t.Fatalf("case %d (%s, %d partitions): snapshot has %d rows, source %d", c, sh.Name, parts, res.Rows, len(src))
		}
		want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		got := sinkImage(t, ctx, w, dst)
		if d := want.Diff(got, 5); len(d) > 0 || got.Len() != len(src) {
			t.Fatalf("case %d (%s, %d partitions): snapshot differs from the source:\n%s", c, sh.Name, parts, strings.Join(d, "\n"))
		}
		st, _ := w.DB.Stats("dbo", sh.Name)
		// SourceImage read the table once more, whole: rows examined by
		// the snapshot are the rest.
		if examined := st.RowsExamined - int64(len(src)); examined != int64(len(src)) {
			t.Fatalf("case %d (%s, %d partitions): the ranges examined %d rows for %d", c, sh.Name, parts, examined, len(src))
		}
		// Each seek reads its range's keys, the next bound, and the first key
		// of each later piece its merge opens (at most one per key column
		// after the first): never a whole-key pass.
		if limit := int64(len(src)) + st.Seeks*int64(len(sh.Key)); st.KeysExamined > limit {
			t.Fatalf("case %d (%s): keyset planning examined %d keys for %d rows and %d seeks (limit %d)", c, sh.Name, st.KeysExamined, len(src), st.Seeks, limit)
		}
		dst.Close()
	}
}

// TestBootstrapConverges: with random changes committed while the
// partitions read (between their pages) and after, the snapshot plus the
// stream's changes from Bootstrap's LSN, merged by latest image, equal the
// source table.
func TestBootstrapConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 2))
	ctx := context.Background()
	for c := range *casesFlag {
		sh := shapes()[r.IntN(len(shapes()))]
		w := testworld.New(t, r, sh, r.IntN(150))
		stop := w.ChangeBetweenPages(t, rand.New(rand.NewPCG(r.Uint64(), 3)), r.IntN(4))
		dst := fake.NewMemSink()
		iso := source.ReadCommitted
		if r.IntN(4) == 0 {
			iso = source.Snapshot
		}
		from, res, err := snapshot.Bootstrap(ctx, w.DB, dst, snapshot.Options{
			CaptureInstance: w.CI, Partitions: 1 + r.IntN(10), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(15), Isolation: iso},
		})
		stop()
		if err != nil {
			t.Fatalf("case %d (%s): %v", c, sh.Name, err)
		}
		if next, _ := res.LSN.Next(); next != from {
			t.Fatalf("case %d: stream starts at %s, want the LSN after %s", c, from, res.LSN)
		}
		for range r.IntN(10) {
			w.Change(t, r)
		}
		stream(t, ctx, w, dst, from, 1)
		want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		if d := want.Diff(sinkImage(t, ctx, w, dst), 5); len(d) > 0 {
			t.Fatalf("case %d (%s, %s): latest image differs from the source:\n%s", c, sh.Name, iso, strings.Join(d, "\n"))
		}
		dst.Close()
	}
}

func ordersDB(t *testing.T, opts fake.Options, rows int) *fake.DB {
	t.Helper()
	db := fake.New(opts)
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{
		{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true},
	}, Key: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	if rows > 0 {
		var batch []fake.Row
		for i := range rows {
			batch = append(batch, fake.Row{int64(i), fmt.Sprint("n", i)})
		}
		if _, err := db.Load("dbo", "orders", batch...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.EnableCDC("dbo", "orders", "dbo_Orders"); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestQuietDatabaseStartsBeforeStartLSN(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{ManualCapture: true}, 10)
	ci, err := db.CaptureInstance(ctx, "dbo_Orders")
	if err != nil {
		t.Fatal(err)
	}
	maxLSN, _ := db.MaxLSN(ctx)
	if ci.StartLSN.Compare(maxLSN) <= 0 {
		t.Fatalf("setup: start_lsn %s is not above max_lsn %s", ci.StartLSN, maxLSN)
	}
	if _, ok, _ := db.MinLSN(ctx, "dbo_Orders"); ok {
		t.Fatal("setup: min LSN is not NULL on a new instance")
	}
	dst := fake.NewMemSink()
	defer dst.Close()
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ci.StartLSN.Prev()
	if res.LSN != want {
		t.Fatalf("L0 = %s, want start_lsn - 1 = %s", res.LSN, want)
	}
	// No captured commit maps to a time yet: _commit_ts is NULL, not year 1.
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if !res.CommitTS.IsZero() || len(rows) != 10 || rows[0][sink.ColCommitTS] != nil {
		t.Fatalf("commit time %v, first row %v: want no commit time and NULL _commit_ts", res.CommitTS, rows[0])
	}
	// A change committed now gets an LSN at or above start_lsn: the stream
	// from res.LSN+1 carries it.
	tx := db.Begin()
	_ = tx.Insert("dbo", "orders", fake.Row{int64(100), "late"})
	l, _ := tx.Commit()
	if l.Compare(res.LSN) <= 0 {
		t.Fatalf("a later commit got %s, not above L0 %s", l, res.LSN)
	}
}

func TestCaptureInstanceNames(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 3)
	dst := fake.NewMemSink()
	defer dst.Close()
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "DBO_ORDERS"})
	if err != nil {
		t.Fatalf("a case-mismatched name was not resolved: %v", err)
	}
	// The column keeps the name as the options gave it; a rerun spelled
	// differently finds the snapshot and reads nothing.
	db.ResetStats()
	again, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_orders"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Existing || again.LSN != res.LSN {
		t.Fatalf("rerun returned %+v, want the existing snapshot at %s", again, res.LSN)
	}
	if st, _ := db.Stats("dbo", "orders"); st.RowsExamined != 0 || st.RangeReads != 0 {
		t.Fatalf("rerun read the table: %+v", st)
	}
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][sink.ColCaptureInstance] != "DBO_ORDERS" {
		t.Fatalf("rows %v: want 3 with _capture_instance DBO_ORDERS", rows)
	}

	_, err = snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_missing"})
	var nf *source.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), "dbo_Orders") {
		t.Fatalf("missing instance: %v, want a NotFoundError naming dbo_Orders", err)
	}
}

func TestAmbiguousCaptureInstance(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 3)
	if _, err := db.EnableCDC("dbo", "orders", "DBO_ORDERS"); err != nil {
		t.Fatal(err)
	}
	_, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: "Dbo_Orders"})
	var amb *source.AmbiguousError
	if !errors.As(err, &amb) || !strings.Contains(err.Error(), "dbo_Orders") || !strings.Contains(err.Error(), "DBO_ORDERS") {
		t.Fatalf("got %v, want an AmbiguousError naming both", err)
	}
	// The exact name still resolves.
	if _, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: "DBO_ORDERS"}); err != nil {
		t.Fatalf("exact name: %v", err)
	}
}

func TestResnapshot(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 5)
	dst := fake.NewMemSink()
	defer dst.Close()
	first, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders"})
	if err != nil {
		t.Fatal(err)
	}
	// At the same LSN a keyed table is taken again (the latest-image merge
	// takes either copy; TestResnapshotTwinRefused has the keyless case).
	twin, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Resnapshot: true})
	if err != nil || twin.Existing || twin.LSN != first.LSN {
		t.Fatalf("a keyed re-snapshot at the same LSN: %+v, %v", twin, err)
	}
	tx := db.Begin()
	_ = tx.Insert("dbo", "orders", fake.Row{int64(99), "new"})
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	second, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Resnapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.Existing || second.LSN.Compare(first.LSN) <= 0 || second.Rows != 6 {
		t.Fatalf("resnapshot %+v after %+v: want a new snapshot of 6 rows at a newer LSN", second, first)
	}
	found, err := dst.FindSnapshot(ctx, "DBO_orders")
	if err != nil || found.LSN != second.LSN {
		t.Fatalf("FindSnapshot after resnapshot: %+v, %v; want %s", found, err, second.LSN)
	}
}

// TestResnapshotTwinRefused: a re-snapshot of a table without a unique
// key at the LSN of the snapshot it replaces is refused, writing nothing,
// with or without a recorded plan (each split or not); once a change
// moves the max LSN it is taken. (TestResnapshot: a keyed table's
// re-snapshot at the same LSN is taken.)
func TestResnapshotTwinRefused(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []snapshot.Options{{}, {ResumeWithin: -1}, {SplitColumn: "grp", Partitions: 3, MinPartitionRows: -1}} {
		opts.CaptureInstance = "dbo_h"
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "h", Key: []string{"id"}, Keyless: true,
			Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "grp", Type: "int"}},
			Indexes: []fake.IndexDef{{Name: "ix_grp", Columns: []string{"grp"}}},
			Rows:    []fake.Row{{int64(1), int64(1)}, {int64(2), int64(2)}, {int64(3), int64(3)}}, CaptureInstance: "dbo_h"}); err != nil {
			t.Fatal(err)
		}
		dst := fake.NewMemSink()
		first, err := snapshot.Take(ctx, db, dst, opts)
		if err != nil {
			t.Fatal(err)
		}
		twin := opts
		twin.Resnapshot = true
		commits := len(dst.Commits())
		if _, err := snapshot.Take(ctx, db, dst, twin); !errors.Is(err, snapshot.ErrTwinSnapshot) || !strings.Contains(err.Error(), first.LSN.String()) {
			t.Fatalf("%+v: a twin re-snapshot: %v, want ErrTwinSnapshot naming %s", opts, err, first.LSN)
		}
		if len(dst.Commits()) != commits || dst.Pending() != 0 {
			t.Fatalf("%+v: the refused re-snapshot wrote: %d commits, %d pending parts", opts, len(dst.Commits())-commits, dst.Pending())
		}
		tx := db.Begin()
		_ = tx.Insert("dbo", "h", fake.Row{int64(4), int64(4)})
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if second, err := snapshot.Take(ctx, db, dst, twin); err != nil || second.Rows != 4 || second.LSN.Compare(first.LSN) <= 0 {
			t.Fatalf("%+v: a re-snapshot after a change: %+v, %v", opts, second, err)
		}
		dst.Close()
	}
}

func TestEmptyAndOneRowTables(t *testing.T) {
	ctx := context.Background()
	for _, rows := range []int{0, 1} {
		db := ordersDB(t, fake.Options{}, rows)
		dst := fake.NewMemSink()
		res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 8, MinPartitionRows: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != int64(rows) || res.Partitions != 1 {
			t.Fatalf("%d rows: got %d rows in %d partitions, want %d in 1", rows, res.Rows, res.Partitions, rows)
		}
		if _, err := dst.FindSnapshot(ctx, "dbo_Orders"); err != nil {
			t.Fatalf("%d rows: snapshot not found: %v", rows, err)
		}
		dst.Close()
	}
}

// TestFailureCommitsNothing: a read that fails mid-partition, and a commit
// that fails, leave no snapshot; a rerun recovers with every row once.
func TestFailureCommitsNothing(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 500)
	dst := fake.NewMemSink()
	defer dst.Close()
	boom := errors.New("connection reset")
	db.FailReadAfter(230, boom)
	_, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 4, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read failure", err)
	}
	if _, err := dst.FindSnapshot(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("after a failed read FindSnapshot = %v, want ErrNotFound", err)
	}
	if len(dst.Commits()) != 0 {
		t.Fatalf("a failed snapshot committed %d times", len(dst.Commits()))
	}
	db.ClearFaults()
	dst.FailNextCommit(boom)
	if _, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 4, MinPartitionRows: -1}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the commit failure", err)
	}
	if len(dst.Commits()) != 0 {
		t.Fatal("a failed commit is visible")
	}
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 4, MinPartitionRows: -1})
	if err != nil || res.Rows != 500 || res.Existing {
		t.Fatalf("rerun: %+v, %v; want a new snapshot of 500 rows", res, err)
	}
}

func TestCanceledContextCommitsNothing(t *testing.T) {
	db := ordersDB(t, fake.Options{}, 300)
	dst := fake.NewMemSink()
	defer dst.Close()
	ctx, cancel := context.WithCancel(context.Background())
	db.SetPageHook(func(context.Context, fake.Page) error { cancel(); return nil })
	_, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 10}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if len(dst.Commits()) != 0 {
		t.Fatal("a canceled snapshot committed")
	}
}

// TestInvalidOptions: Options.Validate refuses what Take refuses before
// any I/O (with ErrInvalidOptions), and accepts the zero value of every
// field but CaptureInstance.
func TestInvalidOptions(t *testing.T) {
	db := ordersDB(t, fake.Options{}, 1)
	for _, o := range []snapshot.Options{
		{},
		{CaptureInstance: "dbo_Orders", Partitions: -1, MinPartitionRows: -1},
		{CaptureInstance: "dbo_Orders", Parallelism: -1},
		{CaptureInstance: "dbo_Orders", ReadOptions: snapshot.ReadOptions{BatchRows: -1}},
		{CaptureInstance: "dbo_Orders", ReadOptions: snapshot.ReadOptions{Isolation: 7}},
		{CaptureInstance: "dbo_Orders", ReadOptions: snapshot.ReadOptions{ReadAhead: 1 << 20}},
		{CaptureInstance: "dbo_Orders", RunOptions: snapshot.RunOptions{RowsPerSecond: -1}},
	} {
		if err := o.Validate(); !errors.Is(err, snapshot.ErrInvalidOptions) {
			t.Errorf("Validate %+v: got %v, want ErrInvalidOptions", o, err)
		}
		dst := fake.NewMemSink()
		db.FailNext(fake.OpCaptureInstance, fake.ErrInjected) // any source call would fail with it
		if _, err := snapshot.Take(context.Background(), db, dst, o); !errors.Is(err, snapshot.ErrInvalidOptions) || errors.Is(err, fake.ErrInjected) {
			t.Errorf("options %+v: got %v, want ErrInvalidOptions", o, err)
		}
		db.ClearFaults()
		dst.Close()
	}
	for _, o := range []snapshot.Options{{CaptureInstance: "dbo_Orders"}, {CaptureInstance: "x", ReadOptions: snapshot.ReadOptions{ReadAhead: -1, Isolation: source.Snapshot}, SplitColumn: "nope"}} {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate %+v: %v", o, err)
		}
	}
}

// TestChangesDataLoss: changes asked for below the minimum LSN after
// retention cleanup are ErrDataLoss, never an empty result.
func TestChangesDataLoss(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 3)
	var last lsn.LSN
	for i := range 5 {
		tx := db.Begin()
		_ = tx.Update("dbo", "orders", []any{int64(1)}, fake.Row{int64(1), fmt.Sprint("v", i)})
		last, _ = tx.Commit()
	}
	ci, _ := db.CaptureInstance(ctx, "dbo_Orders")
	if err := db.Cleanup("dbo_Orders", last); err != nil {
		t.Fatal(err)
	}
	_, err := snapshot.Changes(ctx, db, "dbo_Orders", ci.StartLSN, last, 1)
	var dl *source.DataLossError
	if !errors.As(err, &dl) || !errors.Is(err, source.ErrDataLoss) || dl.MinLSN.Compare(ci.StartLSN) <= 0 {
		t.Fatalf("got %v, want a DataLossError with the raised min LSN", err)
	}
	rr, err := snapshot.Changes(ctx, db, "dbo_Orders", last, last, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	n := 0
	for rr.Next() {
		n += int(rr.RecordBatch().NumRows())
	}
	if n != 2 { // the last update's before and after images
		t.Fatalf("%d change rows at the min LSN, want 2", n)
	}
	_ = array.RecordReader(rr)
}

// nonclusteredKey is a source whose capture instance's unique index is
// nonclustered, as source/sqlserver describes one (FACTS.md F36).
type nonclusteredKey struct{ *fake.DB }

func (s nonclusteredKey) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	ci, err := s.DB.CaptureInstance(ctx, name)
	if err == nil {
		ci.KeyIndex = &source.Index{Name: "UX_orders_id", Clustered: false}
	}
	return ci, err
}

// TestPlansSayTheKeyIndexIsNonclustered: a plan over a nonclustered key
// index carries a warning naming it, as does a chunked one; a clustered
// one carries none.
func TestPlansSayTheKeyIndexIsNonclustered(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 100)
	plan, err := snapshot.NewPlan(ctx, nonclusteredKey{db}, snapshot.Options{CaptureInstance: "dbo_orders", Partitions: 4, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "UX_orders_id is nonclustered") {
		t.Errorf("plan warnings %q", plan.Warnings)
	}
	bp, err := snapshot.NewBackfillPlan(ctx, nonclusteredKey{db}, snapshot.BackfillOptions{CaptureInstance: "dbo_orders", Chunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(bp.Warnings) != 1 || !strings.Contains(bp.Warnings[0], "nonclustered") {
		t.Errorf("backfill plan warnings %q", bp.Warnings)
	}
	plan, err = snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_orders", Partitions: 4, MinPartitionRows: -1})
	if err != nil || len(plan.Warnings) != 0 {
		t.Errorf("clustered: %v, warnings %q", err, plan.Warnings)
	}
}
