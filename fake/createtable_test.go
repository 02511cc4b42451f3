package fake_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// dbState is what a test can observe of a DB's table and capture instance.
type dbState struct {
	Table    fake.TableInfo
	Rows     []fake.Row
	NextLSN  lsn.LSN
	MaxLSN   lsn.LSN
	Instance *source.CaptureInstance
	MinLSN   lsn.LSN
	MinOK    bool
	Changes  [][]any // the instance's change rows after one more commit
}

func observe(t *testing.T, db *fake.DB, schema, name, instance string, more fake.Row) dbState {
	t.Helper()
	var s dbState
	s.Table = must[fake.TableInfo](t)(db.Table(schema, name))
	s.Rows = must[[]fake.Row](t)(db.Rows(schema, name))
	s.NextLSN = db.NextLSN()
	s.MaxLSN = must[lsn.LSN](t)(db.MaxLSN(ctx))
	if instance == "" {
		if _, err := db.CaptureInstance(ctx, schema+"_"+name); err == nil {
			t.Fatalf("a capture instance %s_%s exists, none was asked for", schema, name)
		}
		return s
	}
	s.Instance = must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, instance))
	var err error
	if s.MinLSN, s.MinOK, err = db.MinLSN(ctx, instance); err != nil {
		t.Fatal(err)
	}
	must[lsn.LSN](t)(db.Load(schema, name, more))
	s.Changes = mustReadAll(t)(db.ReadChanges(ctx, s.Instance, s.Instance.StartLSN, must[lsn.LSN](t)(db.MaxLSN(ctx))))
	return s
}

// TestCreateTableRowsAndCaptureInstance checks that TableDef.Rows and
// TableDef.CaptureInstance leave a DB exactly as CreateTable, Load and
// EnableCDC called one after the other do.
func TestCreateTableRowsAndCaptureInstance(t *testing.T) {
	orders := []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)", Nullable: true}}
	names := []fake.ColumnDef{
		{Name: "region", Type: "varchar(8)", Collation: "Latin1_General_CI_AS"},
		{Name: "code", Type: "char(4)", Collation: "Latin1_General_CS_AS"},
		{Name: "n", Type: "int", Nullable: true},
	}
	for _, tc := range []struct {
		name     string
		def      fake.TableDef
		more     fake.Row // a row committed after creation, which the instance captures
		wantRows []fake.Row
	}{
		{
			name: "rows and capture instance",
			def: fake.TableDef{Schema: "dbo", Name: "orders", Columns: orders, Key: []string{"id"},
				Rows: []fake.Row{{int64(1), "tea"}, {int64(2), "cake"}}, CaptureInstance: "dbo_orders"},
			more:     fake.Row{int64(3), "scone"},
			wantRows: []fake.Row{{int64(1), "tea"}, {int64(2), "cake"}},
		},
		{
			name: "rows only",
			def: fake.TableDef{Schema: "dbo", Name: "orders", Columns: orders, Key: []string{"id"},
				Rows: []fake.Row{{int64(2), nil}, {int64(1), "tea"}}},
			wantRows: []fake.Row{{int64(1), "tea"}, {int64(2), nil}},
		},
		{
			name: "capture instance only",
			def: fake.TableDef{Schema: "dbo", Name: "orders", Columns: orders, Key: []string{"id"},
				CaptureInstance: "orders_v1"},
			more:     fake.Row{int64(7), "tea"},
			wantRows: []fake.Row{},
		},
		{
			name:     "neither",
			def:      fake.TableDef{Schema: "dbo", Name: "orders", Columns: orders, Key: []string{"id"}, Rows: []fake.Row{}},
			wantRows: []fake.Row{},
		},
		{
			// Rows out of key order, keys that differ only in case under a
			// case-sensitive column, char(n) padded as Load pads it.
			name: "composite key, collations, padding",
			def: fake.TableDef{Schema: "sales", Name: "Names", Columns: names, Key: []string{"region", "code"},
				Rows:            []fake.Row{{"west", "b", nil}, {"East", "a", int64(1)}, {"west", "B", int64(2)}, {"east ", "c", int64(3)}},
				CaptureInstance: "sales_Names"},
			more: fake.Row{"north", "a", nil},
			wantRows: []fake.Row{
				{"East", "a   ", int64(1)}, {"east ", "c   ", int64(3)}, {"west", "B   ", int64(2)}, {"west", "b   ", nil},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := tc.def
			got := fake.New(fake.Options{})
			check(t, got.CreateTable(def))

			// The same table built step by step with the calls that predate
			// TableDef.Rows and TableDef.CaptureInstance.
			want := fake.New(fake.Options{})
			step := def
			step.Rows, step.CaptureInstance = nil, ""
			check(t, want.CreateTable(step))
			if len(def.Rows) > 0 {
				must[lsn.LSN](t)(want.Load(def.Schema, def.Name, def.Rows...))
			}
			if def.CaptureInstance != "" {
				must[*source.CaptureInstance](t)(want.EnableCDC(def.Schema, def.Name, def.CaptureInstance))
			}

			gs := observe(t, got, def.Schema, def.Name, def.CaptureInstance, tc.more)
			ws := observe(t, want, def.Schema, def.Name, def.CaptureInstance, tc.more)
			if !reflect.DeepEqual(gs, ws) {
				t.Fatalf("CreateTable with Rows/CaptureInstance:\n%+v\nCreateTable, Load, EnableCDC:\n%+v", gs, ws)
			}
			if !reflect.DeepEqual(gs.Rows, tc.wantRows) {
				t.Errorf("rows = %q, want %q", gs.Rows, tc.wantRows)
			}
			first := fake.New(fake.Options{}).NextLSN()
			if n := len(def.Rows); n > 0 && gs.NextLSN == first || n == 0 && gs.NextLSN != first {
				t.Errorf("next LSN %s after %d rows: want one commit for rows, none without", gs.NextLSN, n)
			}
			if def.CaptureInstance != "" {
				// The loaded rows predate the instance: only the row
				// committed after creation is in its change table.
				if gs.Instance.StartLSN != gs.NextLSN || len(gs.Changes) != 1 {
					t.Errorf("instance starts at %s (next commit %s), changes %v; want the next commit's LSN and only the later row",
						gs.Instance.StartLSN, gs.NextLSN, gs.Changes)
				}
			}
		})
	}
}

// TestCreateTableRefusesBadRows checks that a TableDef whose Rows or
// CaptureInstance cannot be created is refused with an error naming what is
// wrong, and that nothing is created: no table, no commit, no instance.
func TestCreateTableRefusesBadRows(t *testing.T) {
	cols := []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}}
	ciCols := []fake.ColumnDef{{Name: "name", Type: "varchar(10)", Collation: "Latin1_General_CI_AS"}}
	def := func(rows ...fake.Row) fake.TableDef {
		return fake.TableDef{Schema: "dbo", Name: "orders", Columns: cols, Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_orders"}
	}
	for _, tc := range []struct {
		name  string
		def   fake.TableDef
		fault bool     // a pending FailNext(OpCommit)
		want  []string // substrings of the error
	}{
		{
			name: "too few values",
			def:  def(fake.Row{int64(1), "tea"}, fake.Row{int64(2)}),
			want: []string{"create table dbo.orders: Rows[1]: row has 1 values for 2 columns"},
		},
		{
			name: "too many values",
			def:  def(fake.Row{int64(1), "tea", "extra"}),
			want: []string{"create table dbo.orders: Rows[0]: row has 3 values for 2 columns"},
		},
		{
			name: "wrong Go type",
			def:  def(fake.Row{int64(1), "tea"}, fake.Row{2, "cake"}),
			want: []string{`create table dbo.orders: Rows[1], column "id" (bigint): value 2 (int): want int64`},
		},
		{
			name: "NULL in a NOT NULL column",
			def:  def(fake.Row{int64(1), nil}),
			want: []string{`Rows[0], column "item" (nvarchar(40)): value NULL: the column is NOT NULL`},
		},
		{
			name: "value too long",
			def:  def(fake.Row{int64(1), strings.Repeat("x", 41)}),
			want: []string{`Rows[0], column "item" (nvarchar(40))`, "40"},
		},
		{
			name: "duplicate key",
			def:  def(fake.Row{int64(1), "tea"}, fake.Row{int64(2), "cake"}, fake.Row{int64(1), "scone"}),
			want: []string{"create table dbo.orders: Rows[2]: key (1) violates the primary key: it equals the key (1) of Rows[0] under (id bigint)"},
		},
		{
			name: "earliest duplicate reported",
			def: def(fake.Row{int64(5), "a"}, fake.Row{int64(9), "b"}, fake.Row{int64(9), "c"},
				fake.Row{int64(5), "d"}, fake.Row{int64(9), "e"}),
			want: []string{"Rows[2]: key (9) violates the primary key: it equals the key (9) of Rows[1]"},
		},
		{
			name: "keys equal under the collation",
			def: fake.TableDef{Schema: "dbo", Name: "orders", Columns: ciCols, Key: []string{"name"},
				Rows: []fake.Row{{"a"}, {"b"}, {"A  "}}},
			want: []string{`Rows[2]: key ("A  ") violates the primary key: it equals the key ("a") of Rows[0] under (name varchar(10) COLLATE Latin1_General_CI_AS)`},
		},
		{
			name: "capture instance name taken",
			def: fake.TableDef{Schema: "dbo", Name: "orders", Columns: cols, Key: []string{"id"},
				Rows: []fake.Row{{int64(1), "tea"}}, CaptureInstance: "dbo_taken"},
			want: []string{`create table dbo.orders: CaptureInstance "dbo_taken" exists (on dbo.other)`},
		},
		{
			name: "table exists",
			def: fake.TableDef{Schema: "DBO", Name: "OTHER", Columns: cols, Key: []string{"id"},
				Rows: []fake.Row{{int64(1), "tea"}}, CaptureInstance: "dbo_orders"},
			want: []string{"create table DBO.OTHER: table dbo.other exists"},
		},
		{
			name:  "the load's commit fails",
			def:   def(fake.Row{int64(1), "tea"}),
			fault: true,
			want:  []string{"create table dbo.orders: loading Rows", "injected fault"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fake.New(fake.Options{})
			check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "other", Columns: cols, Key: []string{"id"},
				Rows: []fake.Row{{int64(1), "kept"}}, CaptureInstance: "dbo_taken"}))
			before := observeAll(t, db)
			if tc.fault {
				db.FailNext(fake.OpCommit, fake.ErrInjected)
			}
			err := db.CreateTable(tc.def)
			if err == nil {
				t.Fatal("CreateTable succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.fault && !errors.Is(err, fake.ErrInjected) {
				t.Errorf("error %v does not wrap fake.ErrInjected", err)
			}
			if _, err := db.Table("dbo", "orders"); err == nil {
				t.Error("the refused table exists")
			}
			if _, err := db.CaptureInstance(ctx, "dbo_orders"); err == nil {
				t.Error("the refused table's capture instance exists")
			}
			if after := observeAll(t, db); after != before {
				t.Errorf("a refused CreateTable changed the DB:\nbefore %s\nafter  %s", before, after)
			}
			// Nothing half-made blocks the same table once its definition
			// is fixed.
			fixed := tc.def
			fixed.Schema, fixed.Name, fixed.Rows, fixed.CaptureInstance = "dbo", "orders", nil, "dbo_orders"
			check(t, db.CreateTable(fixed))
		})
	}
}

// observeAll describes the state a refused CreateTable must not change.
func observeAll(t *testing.T, db *fake.DB) string {
	t.Helper()
	ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_taken"))
	return fmt.Sprintf("next %s, max %s, other %v, dbo_taken on %s.%s from %s",
		db.NextLSN(), must[lsn.LSN](t)(db.MaxLSN(ctx)), must[[]fake.Row](t)(db.Rows("dbo", "other")),
		ci.SourceSchema, ci.SourceTable, ci.StartLSN)
}
