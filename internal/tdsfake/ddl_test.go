package tdsfake_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// readArrow reads every record of rr into its schema and rows of values.
func readArrow(t *testing.T) func(rr array.RecordReader, err error) (*arrow.Schema, [][]any) {
	return func(rr array.RecordReader, err error) (*arrow.Schema, [][]any) {
		t.Helper()
		return readArrowRows(t, rr, err)
	}
}

func readArrowRows(t *testing.T, rr array.RecordReader, err error) (*arrow.Schema, [][]any) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var rows [][]any
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			row := make([]any, rec.NumCols())
			for j := range row {
				if row[j], err = fake.ArrowValue(rec.Column(j), i); err != nil {
					t.Fatal(err)
				}
			}
			rows = append(rows, row)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return rr.Schema(), rows
}

// TestDDLReadsAgreeOverTheWire: after a drop, a re-add, a retype and with
// an identity key and a rowversion column, source/sqlserver reading the
// fake through TDS describes each capture instance, reads its table and
// its changes, and its DDL history exactly as the fake does in-process,
// which follows the documented rules (FACTS.md F59-F65): Arrow schemas and
// values equal, under both answers of sys.sp_cdc_get_captured_columns for
// identity and rowversion columns; where the login may see the change
// table, its sys.columns types are the captured ones.
func TestDDLReadsAgreeOverTheWire(t *testing.T) {
	ctx := context.Background()
	for _, report := range []bool{false, true} {
		for _, deny := range []bool{false, true} {
			t.Run(fmt.Sprintf("ReportChangeTableTypes=%v,DenyChangeTables=%v", report, deny), func(t *testing.T) {
				db := fake.New(fake.Options{ReportChangeTableTypes: report})
				if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
					Columns: []fake.ColumnDef{{Name: "id", Type: "numeric(18,0)", Identity: true}, {Name: "a", Type: "varchar(10)", Nullable: true},
						{Name: "b", Type: "int", Nullable: true}, {Name: "rv", Type: "rowversion"}, {Name: "x", Type: "xml", Nullable: true}}}); err != nil {
					t.Fatal(err)
				}
				must := func(_ lsn.LSN, err error) {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
				}
				must(db.Load("dbo", "t", fake.Row{nil, "one", int64(1), nil, "<a/>"}, fake.Row{nil, "two", int64(2), nil, nil}))
				must(db.DropColumn("dbo", "t", "x"))
				must(db.DropColumn("dbo", "t", "b"))
				must(db.AddColumn("dbo", "t", fake.ColumnDef{Name: "b", Type: "int", Nullable: true}))
				must(db.Load("dbo", "t", fake.Row{nil, "three", nil, int64(33)}))
				must(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "a", Type: "varchar(30)", Nullable: true}))
				tx := db.Begin()
				if err := tx.Update("dbo", "t", []any{keyrange.Decimal("1")}, fake.Row{nil, "uno", nil, int64(11)}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Delete("dbo", "t", []any{keyrange.Decimal("2")}); err != nil {
					t.Fatal(err)
				}
				must(tx.Commit())
				if _, err := db.EnableCDC("dbo", "t", "dbo_t_v2"); err != nil {
					t.Fatal(err)
				}
				must(db.Load("dbo", "t", fake.Row{nil, "four", nil, int64(44)}))

				src, _, _ := serve(t, db, tdsfake.Options{DenyChangeTables: deny}, sqlserver.Options{AllowChangeFunction: deny})
				for _, name := range []string{"dbo_t", "dbo_t_v2"} {
					want, err := db.CaptureInstance(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					if !deny {
						// sys.columns of the change table gives the types a
						// change read returns: int or bigint for the
						// identity, binary(8) for the rowversion (F64).
						ct, err := db.ChangeTableColumns(ctx, name)
						if err != nil {
							t.Fatal(err)
						}
						for i := range want.Columns {
							c := &want.Columns[i]
							c.Type, c.Length, c.Precision, c.Scale = ct[i].Type, ct[i].Length, ct[i].Precision, ct[i].Scale
						}
					}
					got, err := src.CaptureInstance(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					for i, c := range want.Columns {
						g := got.Columns[i]
						if g.Name != c.Name || g.ID != c.ID || g.Dropped != c.Dropped || g.Declared() != map[bool]string{true: "timestamp", false: c.Declared()}[c.Type == "rowversion"] {
							t.Fatalf("%s column %d: over the wire %+v, the fake %+v", name, i, g, c)
						}
					}
					ws, wr := readArrow(t)(db.ReadRange(ctx, want, keyrange.Range{}, source.ReadOptions{}))
					gs, gr := readArrow(t)(src.ReadRange(ctx, got, keyrange.Range{}, source.ReadOptions{}))
					if !ws.Equal(gs) || !reflect.DeepEqual(wr, gr) {
						t.Fatalf("%s table read:\nwire %s %v\nfake %s %v", name, gs, gr, ws, wr)
					}
					max, err := db.MaxLSN(ctx)
					if err != nil {
						t.Fatal(err)
					}
					ws, wr = readArrow(t)(db.ReadChanges(ctx, want, want.StartLSN, max))
					gs, gr = readArrow(t)(src.ReadChanges(ctx, got, got.StartLSN, max))
					n := len(want.Columns) + 1 // the captured columns and _operation
					if !arrow.NewSchema(ws.Fields()[:n], nil).Equal(arrow.NewSchema(gs.Fields()[:n], nil)) || len(wr) != len(gr) {
						t.Fatalf("%s change read:\nwire %s %d rows\nfake %s %d rows", name, gs, len(gr), ws, len(wr))
					}
					for i := range wr {
						if !reflect.DeepEqual(wr[i][:n], gr[i][:n]) {
							t.Fatalf("%s change row %d: wire %v, fake %v", name, i, gr[i][:n], wr[i][:n])
						}
					}
					wh, err := db.DDLHistory(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					gh, err := src.DDLHistory(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(wh, gh) {
						t.Fatalf("%s DDL history: wire %+v, fake %+v", name, gh, wh)
					}
				}
			})
		}
	}
}

// TestDDLPropertyOverTheWire: the DDL property of package snapshot
// (testworld.RunDDL) with source/sqlserver reading the fake through
// go-mssqldb and TDS, at a smaller count: snapshots read dropped columns as
// typed NULLs and match columns by column_id, identity keys and rowversions
// are cast to one type in both reads, and the DDL history names the
// retypes, all through the statements SQL Server would run.
func TestDDLPropertyOverTheWire(t *testing.T) {
	seed := testworld.Seed(t, 0)
	cases := 30
	if testing.Short() {
		cases = 8
	}
	for c := range cases {
		r := rand.New(rand.NewPCG(seed, uint64(c)))
		testworld.RunDDL(t, r, testworld.DDLOptions{Case: c, Steps: 30, Identity: c%3 == 0,
			Serve: func(db *fake.DB) source.Source {
				deny := r.IntN(4) == 0
				src, _, _ := serve(t, db, tdsfake.Options{PageRows: 1 + r.IntN(10), DenyChangeTables: deny}, sqlserver.Options{AllowChangeFunction: deny})
				return src
			}})
	}
}
