package tdsfake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// A captured column of an alias type (sysname) dropped from the table:
// sys.columns of the table no longer names its base type, that of the
// change table does (source/sqlserver FACTS.md F60, F85), so the instance
// still describes, the column Dropped in its base type, and a snapshot
// reads it as NULL.
func TestDroppedAliasColumnStillDescribes(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "n", Type: "nvarchar(128)", Alias: "sysname", Nullable: true}, {Name: "b", Type: "int", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(1), "x", int64(1)}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	src, _, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	if _, err := db.DropColumn("dbo", "t", "n"); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	ci, err := src.CaptureInstance(ctx, "dbo_t")
	if err != nil {
		t.Fatalf("describing the instance after DROP COLUMN n (sysname): %v", err)
	}
	n, ok := ci.Column("n")
	if !ok || !n.Dropped || n.Declared() != "nvarchar(128)" {
		t.Fatalf("column n after the drop: %+v", n)
	}
	dst := fake.NewMemSink()
	defer dst.Close()
	if _, _, err := snapshot.Bootstrap(ctx, src, dst, snapshot.Options{CaptureInstance: "dbo_t"}); err != nil {
		t.Fatal(err)
	}
	rows, err := dst.Rows()
	if err != nil || len(rows) != 1 || rows[0]["n"] != nil || rows[0]["b"] != int64(1) {
		t.Fatalf("bronze rows: %v, %v", rows, err)
	}
}

// A chunked snapshot open over the wire while columns change: a captured
// column dropped reads as NULL in the later waves (tdsserver would refuse
// a SELECT naming it, as SQL Server does with error 207), and a widened
// one stops the wave with *snapshot.ColumnsChangedError, where a read cast
// to the planned width would truncate (FACTS.md F92) and tdsserver refuses
// the longer value.
func TestBackfillOverTheWireAcrossDDL(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "name", Type: "nvarchar(10)", Nullable: true},
			{Name: "amount", Type: "decimal(10,2)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := db.Load("dbo", "t", fake.Row{int64(i), "x", keyrange.Decimal("1.25"), int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	db.RunCaptureJob()
	src, _, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_t", ChunkRows: 10, WaveChunks: 1, MaxWaves: 1}
	if _, _, err := snapshot.BootstrapBackfill(ctx, src, dst, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Backfill(ctx, src, dst, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropColumn("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	if _, err := snapshot.Backfill(ctx, src, dst, opts); err != nil {
		t.Fatalf("a wave after DROP COLUMN b: %v", err)
	}
	if _, err := db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "name", Type: "nvarchar(40)", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	if err := tx.Update("dbo", "t", []any{int64(35)}, fake.Row{int64(35), "abcdefghijklmnopqrstuvwxyz", keyrange.Decimal("1.25")}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	commits := len(dst.Commits())
	opts.MaxWaves = 0
	_, err := snapshot.Backfill(ctx, src, dst, opts)
	var ce *snapshot.ColumnsChangedError
	if !errors.As(err, &ce) || !ce.Replan || len(ce.DDL) != 1 {
		t.Fatalf("a wave after ALTER COLUMN name nvarchar(40): %v", err)
	}
	if n := len(dst.Commits()); n != commits {
		t.Fatalf("the stopped wave committed: %d commits, were %d", n, commits)
	}
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if id, _ := r["id"].(int64); id >= 10 && id < 20 && r["b"] != nil || id < 10 && r["b"] != id {
			t.Fatalf("row %d: b = %v (dropped before the second wave: NULL from it on)", id, r["b"])
		}
	}
}
