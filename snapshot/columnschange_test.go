package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// The tests in this file hold snapshots to DESIGN.md R15 when the table
// changes while they read (source/sqlserver FACTS.md F60, F62, F92, F93).

func ddlTable(t *testing.T, opts fake.Options, rows int) *fake.DB {
	t.Helper()
	db := fake.New(opts)
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "name", Type: "nvarchar(10)", Nullable: true},
			{Name: "amount", Type: "decimal(10,2)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if _, err := db.Load("dbo", "t", fake.Row{int64(i), "x", keyrange.Decimal("1.25"), int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	db.RunCaptureJob()
	return db
}

func update(t *testing.T, db *fake.DB, row fake.Row) lsn.LSN {
	t.Helper()
	tx := db.Begin()
	if err := tx.Update("dbo", "t", []any{row[0]}, row); err != nil {
		t.Fatal(err)
	}
	at, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// latest returns the bronze table's latest image from its newest snapshot
// at from on, by id.
func latest(t *testing.T, dst *fake.MemSink, from lsn.LSN) map[string]map[string]any {
	t.Helper()
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	return testworld.LatestImage(rows, from.String())
}

// D1: a column widened (nvarchar(10) to nvarchar(40), decimal(10,2) to
// decimal(12,4)) between the opening of a chunked snapshot and its waves.
// Read with the plan's types, a CAST truncates and rounds the widened
// values without an error (F92), and the chunk, stamped after the
// change rows, would keep them in the latest image. The wave stops
// instead with a *ColumnsChangedError naming both ALTERs, commits nothing,
// and a new chunked snapshot reads the values whole.
func TestBackfillStopsWhenACapturedTypeChangesUnderIt(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{}, 20)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_t", ChunkRows: 10, WaveChunks: 1}
	from, _, err := snapshot.BootstrapBackfill(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range []fake.ColumnDef{{Name: "name", Type: "nvarchar(40)", Nullable: true}, {Name: "amount", Type: "decimal(12,4)", Nullable: true}} {
		if _, err := db.AlterColumn("dbo", "t", def); err != nil {
			t.Fatal(err)
		}
	}
	update(t, db, fake.Row{int64(15), "abcdefghijklmnopqrstuvwxyz", keyrange.Decimal("1.2345"), int64(15)})
	commits := len(dst.Commits())
	_, err = snapshot.Backfill(ctx, db, dst, opts)
	var ce *snapshot.ColumnsChangedError
	if !errors.As(err, &ce) || !errors.Is(err, snapshot.ErrColumnsChanged) || !ce.Replan || ce.Pending || len(ce.DDL) != 2 ||
		!strings.Contains(err.Error(), "ALTER COLUMN [name] nvarchar(40)") || !strings.Contains(err.Error(), "Resnapshot") {
		t.Fatalf("backfill after the widening: %v", err)
	}
	if n := len(dst.Commits()); n != commits {
		t.Fatalf("the stopped wave committed: %d commits, were %d", n, commits)
	}
	app := testworld.MemAppender{MemSink: dst}
	opts.Resnapshot = true
	res, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || !res.Complete {
		t.Fatalf("a new chunked snapshot: %+v, %v", res, err)
	}
	if _, err := snapshot.Poll(ctx, db, app, "dbo_t", from, snapshot.PollOptions{BatchID: 1}); err != nil {
		t.Fatal(err)
	}
	row := latest(t, dst, res.LSN)["15"]
	if row["name"] != "abcdefghijklmnopqrstuvwxyz" || fmt.Sprint(row["amount"]) != "1.2345" {
		t.Fatalf("latest image of id 15: name %v, amount %v", row["name"], row["amount"])
	}
}

// D1: while the capture job has not reached an ALTER COLUMN, the
// captured type lags the table's (PendingType, F62): neither a whole nor
// a chunked snapshot reads then, and both read once the job passed it.
func TestSnapshotWaitsForTheCaptureJobToReachAnAlterColumn(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{ManualCapture: true}, 5)
	if _, err := db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "name", Type: "nvarchar(40)", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	update(t, db, fake.Row{int64(3), "abcdefghijklmnopqrstuvwxyz", nil, nil})
	dst := fake.NewMemSink()
	defer dst.Close()
	var ce *snapshot.ColumnsChangedError
	if _, _, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_t"}); !errors.As(err, &ce) || !ce.Pending ||
		!strings.Contains(err.Error(), "nvarchar(40) in the table and nvarchar(10) in the capture instance") {
		t.Fatalf("a whole snapshot while the capture job lags the ALTER: %v", err)
	}
	if _, _, err := snapshot.BootstrapBackfill(ctx, db, dst, snapshot.BackfillOptions{CaptureInstance: "dbo_t"}); !errors.As(err, &ce) || !ce.Pending {
		t.Fatalf("a chunked snapshot while the capture job lags the ALTER: %v", err)
	}
	if len(dst.Commits()) != 0 {
		t.Fatalf("commits: %+v", dst.Commits())
	}
	db.RunCaptureJob()
	_, res, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_t"})
	if err != nil {
		t.Fatal(err)
	}
	if got := latest(t, dst, res.LSN)["3"]["name"]; got != "abcdefghijklmnopqrstuvwxyz" {
		t.Fatalf("name of id 3: %v", got)
	}
}

// D1: a column widened while a whole snapshot reads it (between two
// pages), before the capture job reached the ALTER: the rows read after
// it were cast to the planned type, so the commit is refused (ErrStale:
// the description changed) and a rerun reads the values whole.
func TestWholeSnapshotIsStaleWhenAColumnWidensWhileItReads(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{ManualCapture: true}, 20)
	once := false
	db.SetPageHook(func(context.Context, fake.Page) error {
		if once {
			return nil
		}
		once = true
		if _, err := db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "name", Type: "nvarchar(40)", Nullable: true}); err != nil {
			return err
		}
		update(t, db, fake.Row{int64(19), "abcdefghijklmnopqrstuvwxyz", nil, nil})
		return nil
	})
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_t", ReadOptions: snapshot.ReadOptions{BatchRows: 5}}
	if _, err := snapshot.Take(ctx, db, dst, opts); !errors.Is(err, snapshot.ErrStale) || !strings.Contains(err.Error(), "nvarchar(40)") {
		t.Fatalf("a snapshot that read across the widening: %v", err)
	}
	db.SetPageHook(nil)
	db.RunCaptureJob()
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := latest(t, dst, res.LSN)["19"]["name"]; got != "abcdefghijklmnopqrstuvwxyz" {
		t.Fatalf("name of id 19: %v", got)
	}
}

// D2: a captured column dropped while a chunked snapshot is open. Each
// wave describes the instance again and reads the dropped column as a
// NULL of its type, as CDC writes it from the drop on (F60), instead of
// naming it in a read that fails with error 207 for good.
func TestBackfillReadsAColumnDroppedUnderItAsNull(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{}, 40)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_t", ChunkRows: 10, WaveChunks: 1, MaxWaves: 1}
	from, _, err := snapshot.BootstrapBackfill(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Backfill(ctx, db, dst, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropColumn("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	opts.MaxWaves = 0
	res, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || !res.Complete {
		t.Fatalf("backfill after DROP COLUMN b: %+v, %v", res, err)
	}
	if _, err := snapshot.Poll(ctx, db, testworld.MemAppender{MemSink: dst}, "dbo_t", from, snapshot.PollOptions{BatchID: 1}); err != nil {
		t.Fatal(err)
	}
	image := latest(t, dst, res.LSN)
	if len(image) != 40 || image["5"]["b"] != int64(5) || image["35"]["b"] != nil {
		t.Fatalf("b of a row chunked before the drop: %v; after it: %v (%d keys)", image["5"]["b"], image["35"]["b"], len(image))
	}
}

// D6: a table renamed while a chunked snapshot is open, and another
// table created under its old name: CDC follows the object (F93), and so
// do the waves, which read it by its new name; the impostor's rows never
// reach the bronze table.
func TestBackfillFollowsARenamedTable(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{}, 30)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_t", ChunkRows: 10, WaveChunks: 1}
	if _, _, err := snapshot.BootstrapBackfill(ctx, db, dst, opts); err != nil {
		t.Fatal(err)
	}
	if err := db.RenameTable("dbo", "t", "t_old"); err != nil {
		t.Fatal(err)
	}
	impostor(t, db)
	res, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || !res.Complete {
		t.Fatalf("backfill after sp_rename: %+v, %v", res, err)
	}
	image := latest(t, dst, res.LSN)
	if len(image) != 30 || image["7"]["name"] != "x" {
		t.Fatalf("image after the rename: %d keys, id 7 %v", len(image), image["7"])
	}
}

// impostor creates a table under the old name dbo.t, its rows unlike the
// captured table's.
func impostor(t *testing.T, db *fake.DB) {
	t.Helper()
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "name", Type: "nvarchar(10)", Nullable: true},
			{Name: "amount", Type: "decimal(10,2)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}},
		Rows: []fake.Row{{int64(7), "impostor", nil, nil}, {int64(1000), "impostor", nil, nil}}}); err != nil {
		t.Fatal(err)
	}
}

// D6: a table renamed while a whole snapshot reads it, another created
// under its old name: the reads of the old name return none of the
// impostor's rows (the object guard), the commit is refused naming the
// rename (ErrStale, *TableRenamedError), and a rerun reads the captured
// table by its new name.
func TestWholeSnapshotStopsWhenTheTableIsRenamedWhileItReads(t *testing.T) {
	ctx := context.Background()
	db := ddlTable(t, fake.Options{}, 20)
	once := false
	db.SetPageHook(func(context.Context, fake.Page) error {
		if once {
			return nil
		}
		once = true
		if err := db.RenameTable("dbo", "t", "t_old"); err != nil {
			return err
		}
		impostor(t, db)
		return nil
	})
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, Parallelism: 1}
	_, err := snapshot.Take(ctx, db, dst, opts)
	var re *snapshot.TableRenamedError
	if !errors.Is(err, snapshot.ErrStale) || !errors.As(err, &re) || re.Was != "dbo.t" || re.Now != "dbo.t_old" {
		t.Fatalf("a snapshot that read across sp_rename: %v", err)
	}
	db.SetPageHook(nil)
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	image := latest(t, dst, res.LSN)
	if len(image) != 20 || image["7"]["name"] != "x" {
		t.Fatalf("image: %d keys, id 7 %v", len(image), image["7"])
	}
}
