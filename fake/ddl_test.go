package fake_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// The tests in this file each hold the fake to one documented rule of a
// table that changes under a capture instance (FACTS.md F59-F67).

func ddlDB(t *testing.T, opts fake.Options) (*fake.DB, *source.CaptureInstance) {
	t.Helper()
	db := fake.New(opts)
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "a", Type: "varchar(10)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}}}))
	ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(1), "x", int64(10)}, fake.Row{int64(2), "y", int64(20)}))
	return db, ci
}

func column(t *testing.T, ci *source.CaptureInstance, name string) source.Column {
	t.Helper()
	c, ok := ci.Column(name)
	if !ok {
		t.Fatalf("%s captures no column %q: %+v", ci.Name, name, ci.Columns)
	}
	return c
}

// F59, F60: a dropped captured column stays captured, with its id, reads
// NULL in snapshots and in every change row after the drop; the drop
// writes no change row; sys.columns no longer has it.
func TestDropColumnStaysCapturedAndReadsNull(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{})
	before := column(t, ci, "b")
	if before.ID != 3 || before.Dropped {
		t.Fatalf("b before the drop: %+v", before)
	}
	max0 := must[lsn.LSN](t)(db.MaxLSN(ctx))
	at := must[lsn.LSN](t)(db.DropColumn("dbo", "t", "b"))
	if must[lsn.LSN](t)(db.MaxLSN(ctx)) != max0 {
		t.Fatal("a DDL moved the max LSN: it is no commit with changes")
	}
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if b := column(t, now, "b"); b.ID != before.ID || !b.Dropped || b.Type != "int" {
		t.Fatalf("b after the drop: %+v", b)
	}
	info := must[fake.TableInfo](t)(db.Table("dbo", "t"))
	if len(info.Columns) != 2 || info.Columns[1].Name != "a" {
		t.Fatalf("sys.columns after the drop: %+v", info.Columns)
	}
	if got := fmt.Sprint(mustReadAll(t)(db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{}))); got != "[[1 x <nil>] [2 y <nil>]]" {
		t.Fatalf("snapshot after the drop: %s", got)
	}
	if cs := mustReadAll(t)(db.ReadChanges(ctx, now, at, maxLSN(t, db))); len(cs) != 0 {
		t.Fatalf("the drop wrote change rows: %v", cs)
	}
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "z"}))
	rows := mustReadAll(t)(db.ReadChanges(ctx, now, ci.StartLSN, maxLSN(t, db)))
	if got := fmt.Sprint(rows[0][:3], rows[len(rows)-1][:3]); got != "[1 x 10] [3 z <nil>]" {
		t.Fatalf("change rows before and after the drop: %s", got)
	}
}

// F61: a column dropped and added again is another column: the instance
// keeps the old id, reads NULL for the name, and a new instance captures
// the new column.
func TestReaddedColumnIsAnotherColumn(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{})
	must[lsn.LSN](t)(db.DropColumn("dbo", "t", "b"))
	must[lsn.LSN](t)(db.AddColumn("dbo", "t", fake.ColumnDef{Name: "b", Type: "int", Nullable: true}))
	info := must[fake.TableInfo](t)(db.Table("dbo", "t"))
	if b := info.Columns[2]; b.Name != "b" || b.ID != 4 {
		t.Fatalf("the added column: %+v", b)
	}
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "z", int64(30)}))
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if b := column(t, now, "b"); b.ID != 3 || !b.Dropped {
		t.Fatalf("the instance's b after the re-add: %+v", b)
	}
	if got := fmt.Sprint(mustReadAll(t)(db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{}))); got != "[[1 x <nil>] [2 y <nil>] [3 z <nil>]]" {
		t.Fatalf("the old instance reads the new column: %s", got)
	}
	last := mustReadAll(t)(db.ReadChanges(ctx, now, ci.StartLSN, maxLSN(t, db)))
	if v := last[len(last)-1][2]; v != nil {
		t.Fatalf("the old instance's change row carries the new column: %v", v)
	}
	v2 := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "t", "dbo_t_v2"))
	if b := column(t, v2, "b"); b.ID != 4 || b.Dropped {
		t.Fatalf("the new instance's b: %+v", b)
	}
	if got := fmt.Sprint(mustReadAll(t)(db.ReadRange(ctx, v2, keyrange.Range{}, source.ReadOptions{}))); got != "[[1 x <nil>] [2 y <nil>] [3 z 30]]" {
		t.Fatalf("the new instance's snapshot: %s", got)
	}
}

// F62, F65: a type change reaches the captured column and every row of
// the change table; the DDL history records it, with
// required_column_update, once the capture job has passed it.
func TestAlterColumnRetypesCapturedColumnAndChangeTable(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{ManualCapture: true})
	db.RunCaptureJob()
	at := must[lsn.LSN](t)(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "b", Type: "bigint", Nullable: true}))
	if h := must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t")); len(h) != 0 {
		t.Fatalf("DDL history before the capture job reached the DDL: %+v", h)
	}
	db.RunCaptureJob()
	h := must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t"))
	if len(h) != 1 || h[0].LSN != at || !h[0].RequiredColumnUpdate || h[0].Command != "ALTER TABLE [dbo].[t] ALTER COLUMN [b] bigint NULL" || h[0].CaptureInstance != "dbo_t" {
		t.Fatalf("DDL history: %+v", h)
	}
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if b := column(t, now, "b"); b.Type != "bigint" || b.ID != 3 {
		t.Fatalf("captured b after ALTER COLUMN: %+v", b)
	}
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "z", int64(1) << 40}))
	db.RunCaptureJob()
	rr := must[array.RecordReader](t)(db.ReadChanges(ctx, now, ci.StartLSN, maxLSN(t, db)))
	rr.Release()
	if typ := rr.Schema().Field(2).Type; typ.ID() != arrow.INT64 {
		t.Fatalf("change rows of b read as %s after the change table's column became bigint", typ)
	}
	rows := mustReadAll(t)(db.ReadChanges(ctx, now, ci.StartLSN, maxLSN(t, db)))
	if got := fmt.Sprint(rows[0][2], rows[len(rows)-1][2]); got != "10 1099511627776" {
		t.Fatalf("change rows before and after the retype: %s", got)
	}
	// Nullability only: no required_column_update (F63).
	must[lsn.LSN](t)(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "a", Type: "varchar(10)"}))
	db.RunCaptureJob()
	h = must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t"))
	if len(h) != 2 || h[1].RequiredColumnUpdate {
		t.Fatalf("a nullability change in the DDL history: %+v", h)
	}
	if a := column(t, must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t")), "a"); a.Nullable {
		t.Fatalf("a after ALTER ... NOT NULL: %+v", a)
	}
}

// observeDDL describes what a refused DDL must not change.
func observeDDL(t *testing.T, db *fake.DB) string {
	t.Helper()
	ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	changes := must[[]fake.ChangeRow](t)(db.ChangeRows(ctx, ci, ci.StartLSN, lsn.Max))
	ci.KeyIndex = nil // a pointer
	return fmt.Sprintf("next %s\ntable %+v\nrows %v\ninstance %+v\nchanges %v", db.NextLSN(),
		must[fake.TableInfo](t)(db.Table("dbo", "t")), must[[]fake.Row](t)(db.Rows("dbo", "t")), *ci,
		changes)
}

// A DDL SQL Server would refuse changes nothing: the rows, the
// instance, the DDL history.
func TestRefusedDDLChangesNothing(t *testing.T) {
	db, _ := ddlDB(t, fake.Options{})
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "zzz", nil}))
	before := observeDDL(t, db)
	for _, c := range []struct {
		def  fake.ColumnDef
		want string
	}{
		{fake.ColumnDef{Name: "b", Type: "tinyint", Nullable: true}, "out of range"},  // row 4 holds 1000
		{fake.ColumnDef{Name: "a", Type: "varchar(2)", Nullable: true}, "characters"}, // "zzz" does not fit
		{fake.ColumnDef{Name: "b", Type: "int"}, "NULL"},                              // row 3 holds NULL
		{fake.ColumnDef{Name: "id", Type: "bigint"}, "5074"},                          // the key
		{fake.ColumnDef{Name: "nope", Type: "int"}, "no such column"},
	} {
		if c.def.Type == "tinyint" {
			must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(4), nil, int64(1000)}))
			before = observeDDL(t, db)
		}
		if _, err := db.AlterColumn("dbo", "t", c.def); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v, want an error saying %q", c.def, err, c.want)
		}
		if after := observeDDL(t, db); after != before {
			t.Fatalf("%+v failed and changed the database:\n%s\nwas\n%s", c.def, after, before)
		}
	}
	if _, err := db.DropColumn("dbo", "t", "id"); err == nil || !strings.Contains(err.Error(), "5074") {
		t.Fatalf("dropping the key: %v", err)
	}
	if h := must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t")); len(h) != 0 {
		t.Fatalf("refused DDL in the history: %+v", h)
	}
}

// F64: identity columns are int or bigint in the change table, rowversion
// columns binary(8); the values are the source's. A capture instance
// reports either the source's types or the change table's (both modelled),
// and its table read and change read give one schema either way.
func TestIdentityAndRowversionChangeTableTypes(t *testing.T) {
	for _, report := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReportChangeTableTypes=%v", report), func(t *testing.T) {
			db := fake.New(fake.Options{ReportChangeTableTypes: report})
			check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
				Columns: []fake.ColumnDef{{Name: "id", Type: "numeric(18,0)", Identity: true}, {Name: "v", Type: "varchar(5)", Nullable: true}, {Name: "rv", Type: "rowversion"}}}))
			ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
			must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{nil, "a", nil}, fake.Row{nil, "b", nil}))
			tx := db.Begin()
			check(t, tx.Update("dbo", "t", []any{keyrange.Decimal("2")}, fake.Row{nil, "c", nil}))
			must[lsn.LSN](t)(tx.Commit())
			ct := must[[]source.Column](t)(db.ChangeTableColumns(ctx, "dbo_t"))
			if ct[0].Declared() != "bigint" || ct[2].Declared() != "binary(8)" {
				t.Fatalf("change table types: %s, %s", ct[0].Declared(), ct[2].Declared())
			}
			want := map[bool]string{false: "numeric(18,0) rowversion", true: "bigint binary(8)"}[report]
			if got := ci.Columns[0].Declared() + " " + ci.Columns[2].Declared(); got != want {
				t.Fatalf("reported types %s, want %s", got, want)
			}
			rows := must[[]fake.ChangeRow](t)(db.ChangeRows(ctx, ci, ci.StartLSN, lsn.Max))
			if len(rows) != 4 || rows[0].Values[0] != int64(1) || rows[3].Values[0] != int64(2) {
				t.Fatalf("change table rows: %+v", rows)
			}
			rv := [][]byte{rows[0].Values[2].([]byte), rows[1].Values[2].([]byte), rows[3].Values[2].([]byte)}
			if len(rv[0]) != 8 || bytes.Compare(rv[0], rv[1]) >= 0 || bytes.Compare(rv[1], rv[2]) >= 0 {
				t.Fatalf("rowversions %x: want 8 bytes, increasing with every insert and update", rv)
			}
			if !bytes.Equal(rows[2].Values[2].([]byte), rv[1]) {
				t.Fatalf("the update's before image has rowversion %x, the row had %x", rows[2].Values[2], rv[1])
			}
			tr := must[array.RecordReader](t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))
			cr := must[array.RecordReader](t)(db.ReadChanges(ctx, ci, ci.StartLSN, maxLSN(t, db)))
			defer tr.Release()
			defer cr.Release()
			for i := range 3 {
				if a, b := tr.Schema().Field(i).Type, cr.Schema().Field(i).Type; !arrow.TypeEqual(a, b) {
					t.Fatalf("column %d: the table read gives %s, the change read %s", i, a, b)
				}
			}
			got := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))
			if !bytes.Equal(got[1][2].([]byte), rv[2]) || fmt.Sprint(got[0][0]) == "<nil>" {
				t.Fatalf("snapshot rows %v", got)
			}
		})
	}
}

// F66, F67: a second instance starts at the next LSN with its own
// columns; reading the first below its start and the second from it reads
// every change once; a disabled instance is gone for every read.
func TestSecondInstanceAndDisable(t *testing.T) {
	db, v1 := ddlDB(t, fake.Options{})
	must[lsn.LSN](t)(db.AddColumn("dbo", "t", fake.ColumnDef{Name: "c", Type: "int", Nullable: true}))
	next := db.NextLSN()
	v2 := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "t", "dbo_t_v2"))
	if v2.StartLSN != next || len(v2.Columns) != 4 || len(v1.Columns) != 3 {
		t.Fatalf("v2 starts at %s (want %s) with %d columns", v2.StartLSN, next, len(v2.Columns))
	}
	for i := range 3 {
		must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(10 + i), "n", nil, int64(i)}))
	}
	all := mustReadAll(t)(db.ReadChanges(ctx, v1, v1.StartLSN, maxLSN(t, db)))
	prev, _ := v2.StartLSN.Prev()
	older := mustReadAll(t)(db.ReadChanges(ctx, v1, v1.StartLSN, prev))
	newer := mustReadAll(t)(db.ReadChanges(ctx, v2, v2.StartLSN, maxLSN(t, db)))
	if len(older)+len(newer) != len(all) || len(newer) != 3 || newer[2][3] != int64(2) {
		t.Fatalf("v1 below S %d rows, v2 from S %d rows, v1 in all %d", len(older), len(newer), len(all))
	}
	check(t, db.DisableCDC("dbo_t"))
	var ae *source.AccessError
	if _, _, err := db.MinLSN(ctx, "dbo_t"); !errors.As(err, &ae) {
		t.Fatalf("min LSN of a disabled instance: %v", err)
	}
	if _, err := db.ReadChanges(ctx, v1, v1.StartLSN, maxLSN(t, db)); !errors.As(err, &ae) {
		t.Fatalf("changes of a disabled instance: %v", err)
	}
	if _, err := db.DDLHistory(ctx, "dbo_t"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("DDL history of a disabled instance: %v", err)
	}
	if names := db.CaptureInstanceNames(); len(names) != 1 || names[0] != "dbo_t_v2" {
		t.Fatalf("instances after the disable: %v", names)
	}
}

// A statement added before a DDL and committed after it follows the
// table's columns by id: a dropped column's value goes, an added column
// is NULL.
func TestStatementAcrossADDL(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{})
	tx := db.Begin()
	check(t, tx.Insert("dbo", "t", fake.Row{int64(5), "w", int64(50)}))
	must[lsn.LSN](t)(db.DropColumn("dbo", "t", "a"))
	must[lsn.LSN](t)(db.AddColumn("dbo", "t", fake.ColumnDef{Name: "a", Type: "int", Nullable: true}))
	must[lsn.LSN](t)(tx.Commit())
	row, ok, err := db.Get("dbo", "t", []any{int64(5)})
	if err != nil || !ok || fmt.Sprint(row) != "[5 50 <nil>]" {
		t.Fatalf("row %v, %v, %v", row, ok, err)
	}
	rows := mustReadAll(t)(db.ReadChanges(ctx, ci, ci.StartLSN, maxLSN(t, db)))
	if got := fmt.Sprint(rows[len(rows)-1][:3]); got != "[5 <nil> 50]" {
		t.Fatalf("the change row: %s", got)
	}
}
