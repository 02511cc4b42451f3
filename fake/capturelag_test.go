package fake_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// F92: a CAST truncates and rounds where ALTER COLUMN refuses. Strings
// and bytes longer than the target lose their tail, binary(n) pads;
// decimals round half away from zero to the target scale, and truncate
// toward zero to an integer; datetime2 rounds to the target scale; an
// integer part the target cannot hold is error 8115.
func TestCastTruncatesAndRoundsAsSQLServer(t *testing.T) {
	typ := func(decl string) source.Column {
		c, err := source.ParseType(decl)
		check(t, err)
		c.Name = "c"
		return c
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456700, time.UTC)
	for _, c := range []struct {
		v        any
		from, to string
		want     any
	}{
		{"abcdefghijkl", "nvarchar(40)", "nvarchar(10)", "abcdefghij"},
		{"aäbç", "varchar(40)", "nvarchar(3)", "aäb"},
		{"ab", "nvarchar(40)", "varbinary(2)", []byte{'a', 0}},
		{"Σz", "nvarchar(10)", "varbinary(20)", []byte{0xA3, 0x03, 'z', 0}},
		{[]byte{1, 2, 3}, "varbinary(8)", "binary(2)", []byte{1, 2}},
		{[]byte{1}, "varbinary(8)", "binary(3)", []byte{1, 0, 0}},
		{keyrange.Decimal("1.2345"), "decimal(12,4)", "decimal(10,2)", keyrange.Decimal("1.23")},
		{keyrange.Decimal("1.2350"), "decimal(12,4)", "decimal(10,2)", keyrange.Decimal("1.24")},
		{keyrange.Decimal("-1.2350"), "decimal(12,4)", "decimal(10,2)", keyrange.Decimal("-1.24")},
		{keyrange.Decimal("-10.6496"), "decimal(12,4)", "int", int64(-10)},
		{keyrange.Decimal("10.6496"), "decimal(12,4)", "numeric(18,0)", keyrange.Decimal("11")},
		{ts, "datetime2(7)", "datetime2(3)", ts.Round(time.Millisecond)},
		{int64(7), "bigint", "int", int64(7)},
	} {
		got, err := fake.CastValue(c.v, typ(c.from), typ(c.to))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("CAST(%v %s AS %s) = %v, %v; want %v", c.v, c.from, c.to, got, err, c.want)
		}
	}
	for _, c := range []struct {
		v        any
		from, to string
	}{
		{keyrange.Decimal("123456.78"), "decimal(12,2)", "decimal(6,2)"},
		{int64(1) << 40, "bigint", "int"},
		{keyrange.Decimal("99999999999"), "decimal(12,0)", "int"},
	} {
		if got, err := fake.CastValue(c.v, typ(c.from), typ(c.to)); !errors.Is(err, fake.ErrArithmeticOverflow) {
			t.Errorf("CAST(%v %s AS %s) = %v, %v; want error 8115", c.v, c.from, c.to, got, err)
		}
	}
}

// The fake reads what the caller's description of a capture instance
// names, as SQL Server runs the statement that description makes: a
// description older than a widening reads the values cast to the old
// type, truncated (F92); one that names a column the table dropped
// without marking it Dropped fails as error 207 does (F60, F21).
func TestReadRangeFollowsTheCallersColumns(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{})
	must[lsn.LSN](t)(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "a", Type: "varchar(40)", Nullable: true}))
	tx := db.Begin()
	check(t, tx.Update("dbo", "t", []any{int64(1)}, fake.Row{int64(1), "abcdefghijklmnop", int64(10)}))
	must[lsn.LSN](t)(tx.Commit())
	rows := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))
	if rows[0][1] != "abcdefghij" {
		t.Fatalf("a read through the description of varchar(10): %q, want it truncated to 10 characters", rows[0][1])
	}
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if rows := mustReadAll(t)(db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{})); rows[0][1] != "abcdefghijklmnop" {
		t.Fatalf("a read through the current description: %q", rows[0][1])
	}
	must[lsn.LSN](t)(db.DropColumn("dbo", "t", "b"))
	if _, err := db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{}); !errors.Is(err, fake.ErrInvalidColumn) {
		t.Fatalf("a read naming the dropped column b: %v, want error 207", err)
	}
	now = must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if rows := mustReadAll(t)(db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{})); rows[0][2] != nil {
		t.Fatalf("the dropped column read through a description that says so: %v", rows[0][2])
	}
}

// F62: a captured column takes an ALTER COLUMN's type when the capture
// job reaches the DDL, not at the DDL. Until then the instance reports
// the old type and the table's type as PendingType, change rows logged
// after the DDL are written in the new type once processed, and the DDL
// history shows nothing; then the type, the older change rows and the
// history follow.
func TestAlterColumnReachesTheInstanceWithTheCaptureJob(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{ManualCapture: true})
	db.RunCaptureJob()
	at := must[lsn.LSN](t)(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "b", Type: "bigint", Nullable: true}))
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "z", int64(1) << 40}))
	lag := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if b := column(t, lag, "b"); b.Type != "int" || b.PendingType != "bigint" || !b.CastOnRead {
		t.Fatalf("b before the capture job reached the ALTER: %+v", b)
	}
	if max := must[lsn.LSN](t)(db.MaxLSN(ctx)); !max.Less(at) {
		t.Fatalf("max LSN %s passed the DDL at %s before the capture job ran", max, at)
	}
	db.RunCaptureJob()
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if b := column(t, now, "b"); b.Type != "bigint" || b.PendingType != "" || b.CastOnRead {
		t.Fatalf("b once the capture job passed the ALTER: %+v", b)
	}
	rows := mustReadAll(t)(db.ReadChanges(ctx, now, ci.StartLSN, must[lsn.LSN](t)(db.MaxLSN(ctx))))
	if got := fmt.Sprint(rows[0][2], rows[len(rows)-1][2]); got != "10 1099511627776" {
		t.Fatalf("change rows before and after the retype: %s", got)
	}
	if h := must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t")); len(h) != 1 || h[0].LSN != at {
		t.Fatalf("DDL history: %+v", h)
	}
}

// F62 ("Known issues and errors with CDC", "DDL changes to source
// tables"): a narrowing the table's rows fit succeeds; the change table's
// older rows that do not fit stop the capture job at the DDL with error
// 2628 (8115 for a number) in sys.dm_cdc_errors: the max LSN stays below
// it, its DDL history row is not posted, and every run fails there again,
// until the instance is disabled; then the job goes on.
func TestNarrowingStopsTheCaptureJobUntilTheInstanceIsDisabled(t *testing.T) {
	db, _ := ddlDB(t, fake.Options{ManualCapture: true})
	tx := db.Begin()
	check(t, tx.Update("dbo", "t", []any{int64(1)}, fake.Row{int64(1), "abcdefgh", int64(10)}))
	must[lsn.LSN](t)(tx.Commit())
	tx = db.Begin()
	check(t, tx.Update("dbo", "t", []any{int64(1)}, fake.Row{int64(1), "ab", int64(10)}))
	must[lsn.LSN](t)(tx.Commit())
	db.RunCaptureJob()
	before := must[lsn.LSN](t)(db.MaxLSN(ctx))
	at := must[lsn.LSN](t)(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "a", Type: "varchar(4)", Nullable: true}))
	later := must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(5), "w", nil}))
	for range 2 {
		db.RunCaptureJob()
		if max := must[lsn.LSN](t)(db.MaxLSN(ctx)); max != before {
			t.Fatalf("max LSN %s, want it stopped at %s below the narrowing at %s", max, before, at)
		}
	}
	errs := db.CaptureErrors()
	if len(errs) != 2 || errs[0].Number != 2628 || errs[0].LSN != at || !strings.Contains(errs[0].Message, "abcdefgh") {
		t.Fatalf("sys.dm_cdc_errors: %+v", errs)
	}
	if h := must[[]source.DDL](t)(db.DDLHistory(ctx, "dbo_t")); len(h) != 0 {
		t.Fatalf("the narrowing's DDL history row posted: %+v", h)
	}
	if a := column(t, must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t")), "a"); a.Declared() != "varchar(10)" || a.PendingType != "varchar(4)" {
		t.Fatalf("a while the capture job is stopped: %+v", a)
	}
	check(t, db.DisableCDC("dbo_t"))
	db.RunCaptureJob()
	if max := must[lsn.LSN](t)(db.MaxLSN(ctx)); max != later {
		t.Fatalf("max LSN %s after the instance was disabled, want %s", max, later)
	}
}

// F94 (ALTER TABLE): an index's varchar, nvarchar or varbinary column may
// be made no shorter; no other type change of an index's column, and no
// change of a primary key's column.
func TestIndexColumnsWidenOnly(t *testing.T) {
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "varchar(10)"}, {Name: "code", Type: "varchar(10)", Nullable: true}, {Name: "n", Type: "int", Nullable: true}},
		Indexes: []fake.IndexDef{{Name: "IX_code", Columns: []string{"code"}, Unique: true}, {Name: "IX_n", Columns: []string{"n"}}}}))
	if _, err := db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "code", Type: "varchar(20)", Nullable: true}); err != nil {
		t.Fatalf("widening an index's varchar column: %v", err)
	}
	for _, def := range []fake.ColumnDef{
		{Name: "code", Type: "varchar(5)", Nullable: true},
		{Name: "code", Type: "nvarchar(30)", Nullable: true},
		{Name: "n", Type: "bigint", Nullable: true},
		{Name: "id", Type: "varchar(20)"},
	} {
		if _, err := db.AlterColumn("dbo", "t", def); err == nil || !strings.Contains(err.Error(), "5074") {
			t.Errorf("ALTER COLUMN %s %s: %v, want error 5074", def.Name, def.Type, err)
		}
	}
}

// F93: sp_rename keeps the object and its capture instances, which show
// the new name; a read that names the old name reads the table that has
// it now, none of whose rows it returns when it carries the captured
// table's object id, and fails as error 208 when no table has it.
func TestRenameTableKeepsTheObject(t *testing.T) {
	db, ci := ddlDB(t, fake.Options{})
	if ci.ObjectID == 0 {
		t.Fatal("no object id")
	}
	check(t, db.RenameTable("dbo", "t", "t_old"))
	now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_t"))
	if now.SourceTable != "t_old" || now.ObjectID != ci.ObjectID {
		t.Fatalf("after sp_rename: %s.%s object %d, was %d", now.SourceSchema, now.SourceTable, now.ObjectID, ci.ObjectID)
	}
	if _, err := db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}); !errors.Is(err, fake.ErrInvalidObject) {
		t.Fatalf("a read of the old name, no table having it: %v, want error 208", err)
	}
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "a", Type: "varchar(10)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}},
		Rows:    []fake.Row{{int64(1), "impostor", int64(0)}}}))
	if rows := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{})); len(rows) != 0 {
		t.Fatalf("a guarded read of the old name returned the new table's rows: %v", rows)
	}
	if rows := mustReadAll(t)(db.ReadRange(ctx, now, keyrange.Range{}, source.ReadOptions{})); len(rows) != 2 {
		t.Fatalf("a read of the new name: %v", rows)
	}
}

// F66: create_date orders a table's two instances; F02: with
// NullStartLSN a new instance's start_lsn is NULL until the capture job
// passes it, then its first LSN; cleanup raises every instance's
// start_lsn below the low water mark to it (F20).
func TestCreateDateAndStartLSN(t *testing.T) {
	db, a := ddlDB(t, fake.Options{ManualCapture: true, NullStartLSN: true})
	db.RunCaptureJob()
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "t", "b"))
	b := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "b"))
	if !a.CreateDate.Before(b.CreateDate) || !b.StartLSN.IsZero() {
		t.Fatalf("a created %s, b created %s with start_lsn %s", a.CreateDate, b.CreateDate, b.StartLSN)
	}
	must[lsn.LSN](t)(db.Load("dbo", "t", fake.Row{int64(3), "z", nil}))
	db.RunCaptureJob()
	b = must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "b"))
	if b.StartLSN.IsZero() || !a.StartLSN.Less(b.StartLSN) {
		t.Fatalf("b's start_lsn %s once the capture job passed it (a's %s)", b.StartLSN, a.StartLSN)
	}
	max := must[lsn.LSN](t)(db.MaxLSN(ctx))
	check(t, db.Cleanup("", max))
	for _, name := range []string{"dbo_t", "b"} {
		if ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, name)); ci.StartLSN != max {
			t.Fatalf("%s start_lsn %s after cleanup to %s", name, ci.StartLSN, max)
		}
	}
}
