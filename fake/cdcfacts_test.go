package fake_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// lobDB has every kind of column CDC writes NULL for in some change rows
// (FACTS.md F13): text, ntext, image, the (max) types, xml, and a computed
// column; each NOT NULL in the table.
func lobDB(t *testing.T) (*fake.DB, *source.CaptureInstance) {
	t.Helper()
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "docs",
		Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"},
			{Name: "t", Type: "text"}, {Name: "nt", Type: "ntext"}, {Name: "img", Type: "image"},
			{Name: "vm", Type: "varchar(max)"}, {Name: "nm", Type: "nvarchar(max)"}, {Name: "bm", Type: "varbinary(max)"},
			{Name: "x", Type: "xml"}, {Name: "total", Type: "int", Computed: true}, {Name: "n", Type: "int"},
		},
		Key:             []string{"id"},
		CaptureInstance: "dbo_docs",
	}))
	return db, must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_docs"))
}

func docRow(id int64, s string, n int64) fake.Row {
	return fake.Row{id, s, s, []byte(s), s, s, []byte(s), "<a>" + s + "</a>", n * 2, n}
}

// TestChangeRowsCarryCDCsNulls: a computed column is NULL in every change
// row and in the snapshot's read; text, ntext and image are NULL in deletes
// and update-before images; the (max) types and xml are NULL in an
// update-before image when the update left them alone, and hold their
// value when it changed them or in a delete. The schema says such columns
// are nullable though the table's are not.
func TestChangeRowsCarryCDCsNulls(t *testing.T) {
	db, ci := lobDB(t)
	schema := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_docs"))
	for _, c := range schema.Columns {
		if c.Name == "total" && !c.Computed {
			t.Fatal("CaptureInstance does not mark the computed column")
		}
	}
	first := must[lsn.LSN](t)(db.Load("dbo", "docs", docRow(1, "a", 1), docRow(2, "b", 2)))
	tx := db.Begin()
	check(t, tx.Update("dbo", "docs", []any{int64(1)}, fake.Row{int64(1), "a", "a", []byte("a"), "a", "a2", []byte("a"), "<a>a</a>", int64(20), int64(10)}))
	check(t, tx.Delete("dbo", "docs", []any{int64(2)}))
	must[lsn.LSN](t)(tx.Commit())

	rr := must[array.RecordReader](t)(db.ReadChanges(ctx, ci, first, maxLSN(t, db)))
	wantSchema, err := source.ChangeSchema(ci.Columns)
	check(t, err)
	if !rr.Schema().Equal(wantSchema) {
		t.Fatalf("schema %v, want %v", rr.Schema(), wantSchema)
	}
	for _, f := range rr.Schema().Fields()[1:9] {
		if !f.Nullable {
			t.Errorf("change schema: %s is not nullable", f.Name)
		}
	}
	rr.Release()
	rows := mustReadAll(t)(db.ReadChanges(ctx, ci, first, maxLSN(t, db)))
	// columns: id t nt img vm nm bm x total n | _operation ...
	type want struct {
		id, op int64
		null   []string
	}
	names := []string{"id", "t", "nt", "img", "vm", "nm", "bm", "x", "total", "n"}
	for i, w := range []want{
		{1, 2, []string{"total"}},
		{2, 2, []string{"total"}},
		{1, 3, []string{"t", "nt", "img", "vm", "bm", "x", "total"}}, // nm changed: kept
		{1, 4, []string{"total"}},
		{2, 1, []string{"t", "nt", "img", "total"}},
	} {
		r := rows[i]
		if r[0].(int64) != w.id || r[10].(int64) != w.op {
			t.Fatalf("row %d: id %v op %v, want %d %d", i, r[0], r[10], w.id, w.op)
		}
		for j, name := range names {
			isNull := r[j] == nil
			wantNull := false
			for _, n := range w.null {
				wantNull = wantNull || n == name
			}
			if isNull != wantNull {
				t.Errorf("row %d (id %d, operation %d): %s is %v, want NULL %v", i, w.id, w.op, name, r[j], wantNull)
			}
		}
	}
	// The snapshot's read follows the stream for the computed column.
	read := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))
	if len(read) != 1 || read[0][8] != nil || read[0][9].(int64) != 10 {
		t.Fatalf("ReadRange: %v, want one row with total NULL and n 10", read)
	}
}

// TestDeniedChangesAreAnErrorNotNothing: a login that may no longer read
// a capture instance's changes (or an instance dropped since it was
// described) gets a *source.AccessError from MinLSN and ReadChanges, as
// SQL Server's 0x00… minimum LSN means (FACTS.md F07), never an empty
// read; the instance is no longer listed (F01).
func TestDeniedChangesAreAnErrorNotNothing(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	l := must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), nil, nil}))
	check(t, db.DenyChanges("dbo_orders"))
	var ae *source.AccessError
	if _, _, err := db.MinLSN(ctx, ci.Name); !errors.As(err, &ae) || !errors.Is(err, source.ErrNotFound) {
		t.Errorf("MinLSN of a denied instance: %v, want a *source.AccessError", err)
	}
	if _, err := db.ReadChanges(ctx, ci, l, maxLSN(t, db)); !errors.As(err, &ae) {
		t.Errorf("ReadChanges of a denied instance: %v, want a *source.AccessError", err)
	}
	var nf *source.NotFoundError
	if _, err := db.CaptureInstance(ctx, ci.Name); !errors.As(err, &nf) {
		t.Errorf("CaptureInstance of a denied instance: %v, want a *source.NotFoundError", err)
	}
	check(t, db.GrantChanges("dbo_orders"))
	if rows := readChanges(t, db, ci, l, maxLSN(t, db)); len(rows) != 1 {
		t.Errorf("after GrantChanges: %d change rows, want 1", len(rows))
	}
	check(t, db.DisableCDC("dbo_orders"))
	if _, err := db.ReadChanges(ctx, ci, l, maxLSN(t, db)); !errors.As(err, &ae) {
		t.Errorf("ReadChanges of a dropped instance: %v, want a *source.AccessError", err)
	}
}

// TestCleanupDuringAChangeReadIsDataLoss: cleanup that raises the minimum
// LSN above from while a change read runs may delete rows the read has not
// reached: the read ends with a *source.DataLossError.
func TestCleanupDuringAChangeReadIsDataLoss(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	var ls []lsn.LSN
	for i := range 3 {
		ls = append(ls, must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(i), nil, nil})))
	}
	rr := must[array.RecordReader](t)(db.ReadChanges(ctx, ci, ls[0], maxLSN(t, db)))
	defer rr.Release()
	if !rr.Next() {
		t.Fatalf("no first batch: %v", rr.Err())
	}
	check(t, db.Cleanup("dbo_orders", ls[2]))
	for rr.Next() {
	}
	var dl *source.DataLossError
	if !errors.As(rr.Err(), &dl) || dl.MinLSN != ls[2] {
		t.Fatalf("read across a cleanup: %v, want a *source.DataLossError at %s", rr.Err(), ls[2])
	}
}

// TestListCaptureInstances: the fake lists what
// sys.sp_cdc_help_change_data_capture lists (FACTS.md F01): every instance
// the login may read, in creation order, with the name, source table,
// start LSN and key that CaptureInstance describes; an instance after
// DenyChanges is left out until GrantChanges. It honours ctx and FailNext
// as the other metadata calls do.
func TestListCaptureInstances(t *testing.T) {
	var _ database.Lister = (*fake.DB)(nil)
	db := ordersDB(t, fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "sales", Name: "heap", Columns: []fake.ColumnDef{{Name: "v", Type: "int"}}, Key: []string{"v"}, Keyless: true, CaptureInstance: "sales_heap"}))
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_orders_v2", "id", "customer"))
	names := func() []string {
		t.Helper()
		cis, err := db.ListCaptureInstances(ctx)
		check(t, err)
		var out []string
		for _, ci := range cis {
			full := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, ci.Name))
			if ci.SourceSchema != full.SourceSchema || ci.SourceTable != full.SourceTable || ci.StartLSN != full.StartLSN ||
				!slices.Equal(ci.Key, full.Key) || len(ci.Columns) != 0 {
				t.Fatalf("listed %+v, described %+v", ci, full)
			}
			out = append(out, ci.Name+" "+strings.Join(ci.Key, ","))
		}
		return out
	}
	if got, want := names(), []string{"sales_heap ", "dbo_orders id", "dbo_orders_v2 id"}; !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	check(t, db.DenyChanges("dbo_orders"))
	if got, want := names(), []string{"sales_heap ", "dbo_orders_v2 id"}; !slices.Equal(got, want) {
		t.Fatalf("after DenyChanges: %q, want %q", got, want)
	}
	check(t, db.GrantChanges("dbo_orders"))
	if got := names(); len(got) != 3 {
		t.Fatalf("after GrantChanges: %q", got)
	}
	db.FailNext(fake.OpListInstances, fake.ErrInjected)
	if _, err := db.ListCaptureInstances(ctx); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("with a fault: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.ListCaptureInstances(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

// F06, F08: a row the capture job writes to cdc.lsn_time_mapping to mark
// its progress (tran_id 0x00) moves the max LSN without a commit and
// without change rows; its time is what LSNTime answers (NULL here), and a
// change read up to it reads the commits below it.
func TestProgressRowMovesTheMaxLSN(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_orders"))
	c1 := must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), "a", nil}))
	p := must[lsn.LSN](t)(db.MapProgress(time.Time{}))
	if !c1.Less(p) || maxLSN(t, db) != p {
		t.Fatalf("progress row at %s after commit %s: max LSN %s, want the progress row's", p, c1, maxLSN(t, db))
	}
	if ts := must[time.Time](t)(db.LSNTime(ctx, p)); !ts.IsZero() {
		t.Errorf("LSNTime of a progress row with a NULL time: %s", ts)
	}
	if rows := readChanges(t, db, ci, ci.StartLSN, p); len(rows) != 1 {
		t.Errorf("changes up to the progress row: %d, want the commit's 1", len(rows))
	}
	m := must[[]fake.MappedCommit](t)(db.Mapping(ctx))
	if len(m) != 2 || m[0].Progress || !m[1].Progress || m[1].LSN != p {
		t.Errorf("mapping %+v: want the commit, then the progress row", m)
	}
}
