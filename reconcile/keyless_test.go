package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// A heap: rowid only addresses rows inside the fake (it is not captured),
// and the captured columns take few values, so rows repeat.
var heapColumns = []fake.ColumnDef{
	{Name: "rowid", Type: "bigint"},
	{Name: "a", Type: "varchar(3)", Collation: "Latin1_General_CI_AS", Nullable: true},
	{Name: "b", Type: "int", Nullable: true},
	{Name: "c", Type: "decimal(9,2)", Nullable: true},
}

// heapWorld is a keyless capture instance and its target.
type heapWorld struct {
	db    *fake.DB
	dst   bronze
	next  lsn.LSN
	batch int64
	rowid int64
	from  lsn.LSN // a re-snapshot's LSN, which downstream rebuilds from
	// snapRows is how many rows the latest snapshot wrote.
	snapRows int
	// stamp is the latest snapshot's LSN when it is a whole one (its
	// rows' _start_lsn), else zero.
	stamp lsn.LSN
	// emptyChunk is true when the target was seeded by a backfill that
	// read no rows: its stamp is not recorded, and reconcile refuses it.
	emptyChunk bool
}

// rowCount is the number of the source's rows.
func (h *heapWorld) rowCount(t testing.TB) int {
	n := 0
	for _, k := range h.multiset(t) {
		n += k
	}
	return n
}

const heapCI = "dbo_heap"

func (h *heapWorld) row(r *rand.Rand) fake.Row {
	h.rowid++
	var a, b, c any
	if r.IntN(5) > 0 {
		a = []string{"x", "y", "X"}[r.IntN(3)]
	}
	if r.IntN(5) > 0 {
		b = int64(r.IntN(2))
	}
	if r.IntN(3) > 0 {
		c = keyrange.Decimal([]string{"1.50", "-2.00"}[r.IntN(2)])
	}
	return fake.Row{h.rowid, a, b, c}
}

// canonicalRow renders a heap row's captured values as reconcile's
// Report does ("N" for NULL, "v" and the value).
func canonicalRow(row fake.Row) string {
	var out []string
	for _, v := range row[1:] {
		if v == nil {
			out = append(out, "N")
			continue
		}
		out = append(out, fmt.Sprintf("v%v", v))
	}
	return strings.Join(out, "|")
}

// multiset counts the source's rows by their captured values.
func (h *heapWorld) multiset(t testing.TB) map[string]int {
	rows, err := h.db.Rows("dbo", "heap")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, row := range rows {
		m[canonicalRow(row)]++
	}
	return m
}

// change commits a random insert, update or delete.
func (h *heapWorld) change(t testing.TB, r *rand.Rand) {
	rows, err := h.db.Rows("dbo", "heap")
	if err != nil {
		t.Fatal(err)
	}
	tx := h.db.Begin()
	switch op := r.IntN(3); {
	case op == 0 || len(rows) == 0:
		err = tx.Insert("dbo", "heap", h.row(r))
	case op == 1:
		old := rows[r.IntN(len(rows))]
		nr := h.row(r)
		nr[0] = old[0]
		err = tx.Update("dbo", "heap", []any{old[0]}, nr)
	default:
		err = tx.Delete("dbo", "heap", []any{rows[r.IntN(len(rows))][0]})
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func (h *heapWorld) appendChanges(ctx context.Context, batch int64, rr array.RecordReader) error {
	return appendTo(ctx, h.dst, heapCI, batch, rr)
}

// stream appends the source's changes since the last poll.
func (h *heapWorld) stream(t testing.TB) {
	h.batch++
	app := snapshot.AppendFunc(func(ctx context.Context, _ string, b int64, rr array.RecordReader) (int64, error) {
		return 0, h.appendChanges(ctx, b, rr)
	})
	res, err := snapshot.Poll(context.Background(), h.db, app, heapCI, h.next, snapshot.PollOptions{BatchID: h.batch})
	if err != nil {
		t.Fatal(err)
	}
	h.next = res.Next
}

// newHeapWorld loads up to n random rows, changes them, and converges a
// target on them by a whole snapshot (sometimes taken twice, with the
// stream between) or a backfill, and a stream.
func newHeapWorld(t testing.TB, r *rand.Rand, n int, table bool) *heapWorld {
	ctx := context.Background()
	h := &heapWorld{db: fake.New(fake.Options{}), dst: newBronze(t, r, table)}
	var rows []fake.Row
	for range r.IntN(n + 1) {
		rows = append(rows, h.row(r))
	}
	if err := h.db.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: heapColumns, Key: []string{"rowid"}, Keyless: true, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.EnableCDC("dbo", "heap", heapCI, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	for range r.IntN(10) {
		h.change(t, r)
	}
	var err error
	whole := r.IntN(3) > 0
	h.snapRows = h.rowCount(t)
	if whole {
		var res snapshot.Result
		h.next, res, err = snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI, Partitions: 1 + r.IntN(3), MinPartitionRows: -1})
		h.stamp = res.LSN
	} else {
		o := snapshot.BackfillOptions{CaptureInstance: heapCI, ChunkRows: 1 + r.Int64N(30)}
		if h.next, _, err = snapshot.BootstrapBackfill(ctx, h.db, h.dst, o); err != nil {
			t.Fatal(err)
		}
		// Changes between S and the chunk's read: the stream carries
		// them, and the chunk (stamped above them) holds them already.
		for range r.IntN(6) {
			h.change(t, r)
		}
		if r.IntN(2) == 0 {
			h.stream(t)
		}
		h.snapRows = h.rowCount(t)
		h.emptyChunk = h.snapRows == 0
		_, err = snapshot.Backfill(ctx, h.db, h.dst, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	for range r.IntN(20) {
		h.change(t, r)
	}
	h.stream(t)
	if whole && r.IntN(3) == 0 {
		// A second snapshot over the first and its stream: rebuilt from
		// it (Options.From), only the second and the changes after it
		// make the image. Without From, rows of the first that the
		// stream did not delete before the second (which may be empty:
		// no row then marks it) would stay, as they do in a keyed merge.
		// One change at least: two snapshots at one LSN cannot be told
		// apart (TestReconcileKeylessTwinSnapshots).
		for range 1 + r.IntN(10) {
			h.change(t, r)
		}
		var res snapshot.Result
		h.snapRows = h.rowCount(t)
		if h.next, res, err = snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI, Resnapshot: true}); err != nil {
			t.Fatal(err)
		}
		h.from, h.stamp = res.LSN, res.LSN
		for range r.IntN(10) {
			h.change(t, r)
		}
		h.stream(t)
	}
	return h
}

// drift appends change rows to the target only: from a scratch database
// whose LSNs are above every source LSN (inserted copies, deleted and
// updated copies of source rows), from one whose LSNs are below the
// snapshot's, and, when the snapshot's stamp is known, inserts at exactly
// that stamp (both of which the image must skip). It returns the target's
// multiset as the oracle computes it: the source's plus what the high
// changes add and less what they remove.
func (h *heapWorld) drift(t testing.TB, r *rand.Rand) map[string]int {
	ctx := context.Background()
	want := h.multiset(t)
	src, err := h.db.Rows("dbo", "heap")
	if err != nil {
		t.Fatal(err)
	}
	firsts := []lsn.LSN{{0, 0, 0x0f, 0xff, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}
	if !h.stamp.IsZero() {
		firsts = append(firsts, h.stamp)
	}
	for n, first := range firsts {
		high, atStamp := n == 0, n == 2
		scratch := fake.New(fake.Options{FirstLSN: first})
		if err := scratch.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: heapColumns, Key: []string{"rowid"}, Keyless: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := scratch.EnableCDC("dbo", "heap", heapCI, "a", "b", "c"); err != nil {
			t.Fatal(err)
		}
		var copies []fake.Row
		for _, i := range r.Perm(len(src))[:min(len(src), r.IntN(4))] {
			if atStamp {
				break // no load: the first commit must be the stamp's
			}
			copies = append(copies, src[i])
		}
		if len(copies) > 0 {
			if _, err := scratch.Load("dbo", "heap", copies...); err != nil {
				t.Fatal(err)
			}
		}
		tx := scratch.Begin()
		for range r.IntN(3) {
			row := h.row(r)
			if len(src) > 0 && r.IntN(2) == 0 {
				row = append(fake.Row{h.rowid}, src[r.IntN(len(src))][1:]...) // another copy of a source row
			}
			if err := tx.Insert("dbo", "heap", row); err != nil {
				t.Fatal(err)
			}
			if high {
				want[canonicalRow(row)]++
			}
		}
		for _, old := range copies {
			if r.IntN(2) == 0 {
				err = tx.Delete("dbo", "heap", []any{old[0]})
			} else {
				nr := h.row(r)
				nr[0] = old[0]
				err = tx.Update("dbo", "heap", []any{old[0]}, nr)
				if high {
					want[canonicalRow(nr)]++
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if high {
				want[canonicalRow(old)]--
			}
		}
		at, err := tx.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if at.IsZero() {
			continue // nothing was committed
		}
		if atStamp && at != h.stamp {
			t.Fatalf("the scratch commit is at %s, not at the stamp %s", at, h.stamp)
		}
		rr, err := snapshot.Changes(ctx, scratch, heapCI, at, at, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		err = h.appendChanges(ctx, 1<<40+int64(n), rr)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// wantDifferences lists the differences between the source's multiset and
// the target's, one "kind values" line per copy, sorted.
func wantDifferences(source, target map[string]int) []string {
	var out []string
	for row := range mergeKeys(source, target) {
		for n := target[row] - source[row]; n > 0; n-- {
			out = append(out, "extra "+row)
		}
		for n := source[row] - target[row]; n > 0; n-- {
			out = append(out, "missing "+row)
		}
	}
	sort.Strings(out)
	return out
}

func mergeKeys(a, b map[string]int) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// gotDifferences renders a report's differences as wantDifferences does.
func gotDifferences(t testing.TB, rep *reconcile.Report) []string {
	var out []string
	for _, d := range rep.Differences {
		if d.Key != nil || d.Tile != 0 {
			t.Fatalf("a keyless difference has a key or a tile: %v", d)
		}
		switch d.Kind {
		case reconcile.Missing:
			out = append(out, "missing "+strings.Join(d.Source, "|"))
		case reconcile.Extra:
			out = append(out, "extra "+strings.Join(d.Target, "|"))
		default:
			t.Fatalf("a keyless difference of kind %s: %v", d.Kind, d)
		}
	}
	if !slices.IsSortedFunc(rep.Differences, func(a, b reconcile.Difference) int {
		return slices.Compare(append(a.Source, a.Target...), append(b.Source, b.Target...))
	}) {
		t.Fatalf("differences are not in the order of their values: %v", rep.Differences)
	}
	sort.Strings(out)
	return out
}

// recordingEveryRow is a TileReader (which a keyless reconcile does not
// use) that still records its snapshots, as sinks do.
type recordingEveryRow struct{ bronze }

func (e recordingEveryRow) ReadKeyRange(ctx context.Context, _ string, _ []keyrange.Column, _ keyrange.Range) (array.RecordReader, error) {
	return e.ReadAll(ctx)
}

// TestReconcileKeylessMultiset: a capture instance without a unique index
// is compared as a multiset of rows. A target converged by a whole
// snapshot (sometimes a second one over the first and its stream,
// rebuilt from the second) or a backfill (with changes between its LSN
// and its chunk's read; one that read no rows is refused), and a stream of inserts, updates and deletes of rows that
// repeat, reports clean; after drift (copies inserted, deleted or updated
// above every source LSN, and changes at or below the snapshot's stamp
// that the image skips) it reports exactly one Missing or Extra row per copy the
// brute-force oracle finds, ordered by value, read whole or through a
// TileReader.
func TestReconcileKeylessMultiset(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 41))
	ctx := context.Background()
	for c := range *casesFlag {
		h := newHeapWorld(t, r, 60, r.IntN(3) == 0)
		opts := reconcile.Options{CaptureInstance: strings.ToUpper(heapCI), Tiles: r.IntN(8), BatchRows: 1 + r.IntN(20), Parallel: r.IntN(4)}
		if r.IntN(2) == 0 {
			// Rebuilt from the re-snapshot, or not: the newest snapshot
			// wins either way.
			opts.From = h.from
		}
		modes := map[string]reconcile.RowReader{"target": h.dst, "tiles": recordingEveryRow{h.dst}}
		if h.snapRows > 0 {
			// A target that does not record its snapshots has only
			// its rows to find the newest one by.
			modes["rows only"] = wholeOnly{h.dst}
		}
		if h.emptyChunk {
			_, err := reconcile.Run(ctx, h.db, h.dst, opts)
			if err == nil || !strings.Contains(err.Error(), "chunked") || !strings.Contains(err.Error(), "wrote no rows") {
				t.Fatalf("case %d: a backfill that read no rows: %v", c, err)
			}
			h.dst.Close()
			continue
		}
		check := func(stage string, want []string) {
			t.Helper()
			for mode, dst := range modes {
				rep, err := reconcile.Run(ctx, h.db, dst, opts)
				if err != nil {
					t.Fatalf("case %d, %s, %s: %v", c, stage, mode, err)
				}
				got := gotDifferences(t, rep)
				if !slices.Equal(got, want) || rep.Clean() != (len(want) == 0) || !rep.Keyless || len(rep.Tiles) != 1 || rep.Truncated {
					t.Fatalf("case %d, %s, %s: keyless %v, %d tiles, clean %v, differences\n%s\nwant\n%s",
						c, stage, mode, rep.Keyless, len(rep.Tiles), rep.Clean(), strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if n := h.rowCount(t); rep.Tiles[0].SourceRows != int64(n) {
					t.Fatalf("case %d: %d source rows counted, the table has %d", c, rep.Tiles[0].SourceRows, n)
				}
			}
		}
		check("converged", nil)
		target := h.drift(t, r)
		check("drifted", wantDifferences(h.multiset(t), target))
		h.dst.Close()
	}
}

// TestReconcileKeylessReadSeesLaterInsert: a table without a key has no
// latest image to make a snapshot idempotent with its stream, so a row
// inserted after L0 that the snapshot's read still sees is in the target
// twice (from the snapshot and from the stream). Reconcile reports that
// copy as Extra; with a key the same race converges.
func TestReconcileKeylessReadSeesLaterInsert(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	h := &heapWorld{db: fake.New(fake.Options{}), dst: fake.NewMemSink()}
	var rows []fake.Row
	for range 20 {
		rows = append(rows, h.row(r))
	}
	if err := h.db.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: heapColumns, Key: []string{"rowid"}, Keyless: true, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.EnableCDC("dbo", "heap", heapCI, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	inserted := fake.Row{int64(1 << 30), "zz", int64(7), nil}
	fired := false
	h.db.SetPageHook(func(context.Context, fake.Page) error {
		if fired {
			return nil
		}
		fired = true
		tx := h.db.Begin()
		if err := tx.Insert("dbo", "heap", inserted); err != nil {
			return err
		}
		_, err := tx.Commit()
		return err
	})
	var err error
	if h.next, _, err = snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI, ReadOptions: snapshot.ReadOptions{BatchRows: 4}}); err != nil {
		t.Fatal(err)
	}
	h.db.SetPageHook(nil)
	if !fired {
		t.Fatal("the page hook never fired")
	}
	h.stream(t)
	rep, err := reconcile.Run(ctx, h.db, h.dst, reconcile.Options{CaptureInstance: heapCI})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gotDifferences(t, rep), []string{"extra " + canonicalRow(inserted)}; !slices.Equal(got, want) {
		t.Fatalf("differences %v, want %v", got, want)
	}
	if s := rep.Differences[0].String(); !strings.Contains(s, "extra in the target") || !strings.Contains(s, "vzz") {
		t.Fatalf("String() = %q", s)
	}
}

// TestReconcileKeylessOmitsLostColumns: change rows that lose a removed
// row's values (FACTS.md F13: text always in deletes, (max) types in
// update-before rows of updates that leave them alone; F52: NULL in a NOT
// NULL column of a delete) would remove copies that are not there, so
// those columns are left out, named in Report.Omitted, and the rows still
// match on the others: the converged target is clean, and a drifted
// update whose before image's flag came as NULL still removes its copy.
// A computed column, NULL everywhere, stays in even when NOT NULL.
func TestReconcileKeylessOmitsLostColumns(t *testing.T) {
	ctx := context.Background()
	cols := []fake.ColumnDef{
		{Name: "rowid", Type: "bigint"}, {Name: "v", Type: "int", Nullable: true}, {Name: "flag", Type: "bit"},
		{Name: "note", Type: "nvarchar(max)", Nullable: true}, {Name: "doc", Type: "text", Nullable: true},
		{Name: "calc", Type: "int", Computed: true}, // NOT NULL, yet NULL in every change row and read
	}
	db := fake.New(fake.Options{})
	rows := []fake.Row{{int64(1), int64(1), true, "a", "x", int64(9)}, {int64(2), int64(1), true, "a", "x", int64(9)}, {int64(3), int64(2), false, "b", "y", int64(9)}}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: cols, Key: []string{"rowid"}, Keyless: true, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "heap", heapCI, "v", "flag", "note", "doc", "calc"); err != nil {
		t.Fatal(err)
	}
	h := &heapWorld{db: db, dst: fake.NewMemSink()}
	var err error
	if h.next, _, err = snapshot.Bootstrap(ctx, db, h.dst, snapshot.Options{CaptureInstance: heapCI}); err != nil {
		t.Fatal(err)
	}
	// A delete (text lost) and an update of v alone (the before image
	// loses note).
	tx := db.Begin()
	if err := tx.Delete("dbo", "heap", []any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Update("dbo", "heap", []any{int64(3)}, fake.Row{int64(3), int64(5), false, "b", "y", int64(9)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h.stream(t)
	rep, err := reconcile.Run(ctx, db, h.dst, reconcile.Options{CaptureInstance: heapCI})
	if err != nil {
		t.Fatal(err)
	}
	omitted := func(rep *reconcile.Report) string {
		var names []string
		for _, o := range rep.Omitted {
			if o.Reason == "" {
				t.Fatalf("column %s omitted without a reason", o.Name)
			}
			names = append(names, o.Name)
		}
		return strings.Join(names, ",") + " compared " + strings.Join(rep.Columns, ",")
	}
	if got := omitted(rep); !rep.Clean() || got != "note,doc compared v,flag,calc" {
		t.Fatalf("clean %v, %s: %v", rep.Clean(), got, rep.Differences)
	}

	// An update whose before image's NOT NULL flag came as NULL (a peer
	// saw it in deletes): flag is left out too, and the before image still
	// removes its copy.
	scratch := fake.New(fake.Options{FirstLSN: lsn.LSN{0, 0, 0x0f, 0xff, 0, 0, 0, 0, 0, 1}})
	lossy := append([]fake.ColumnDef(nil), cols...)
	lossy[2].Nullable = true
	if err := scratch.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: lossy, Key: []string{"rowid"}, Keyless: true,
		Rows: []fake.Row{{int64(2), int64(1), nil, "a", "x", int64(9)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := scratch.EnableCDC("dbo", "heap", heapCI, "v", "flag", "note", "doc", "calc"); err != nil {
		t.Fatal(err)
	}
	tx = scratch.Begin()
	if err := tx.Update("dbo", "heap", []any{int64(2)}, fake.Row{int64(2), int64(7), nil, "a", "x", int64(9)}); err != nil {
		t.Fatal(err)
	}
	at, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := snapshot.Changes(ctx, scratch, heapCI, at, at, 99)
	if err != nil {
		t.Fatal(err)
	}
	err = h.appendChanges(ctx, 99, rr)
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	rep, err = reconcile.Run(ctx, db, h.dst, reconcile.Options{CaptureInstance: heapCI})
	if err != nil {
		t.Fatal(err)
	}
	if got := omitted(rep); got != "note,doc,flag compared v,calc" {
		t.Fatalf("omitted %s", got)
	}
	if got, want := gotDifferences(t, rep), []string{"extra v7|N", "missing v1|N"}; !slices.Equal(got, want) {
		t.Fatalf("differences %v, want %v", got, want)
	}
}

// TestReconcileKeylessTwinSnapshots: two snapshots at one LSN (nothing
// committed between) write rows no column tells apart. Take refuses such
// a re-snapshot of a table without a key (snapshot.ErrTwinSnapshot), but
// a whole snapshot and a backfill at the same LSN still make them. A
// keyed merge takes either copy; a table without a key holds both, and
// reconcile reports every second copy as Extra, rebuilt from that LSN or
// not; MaxDifferences truncates them.
func TestReconcileKeylessTwinSnapshots(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	h := &heapWorld{db: fake.New(fake.Options{}), dst: fake.NewMemSink()}
	rows := []fake.Row{h.row(r), h.row(r), h.row(r)}
	if err := h.db.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: heapColumns, Key: []string{"rowid"}, Keyless: true, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.EnableCDC("dbo", "heap", heapCI, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	_, first, err := snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI, Resnapshot: true}); !errors.Is(err, snapshot.ErrTwinSnapshot) {
		t.Fatalf("a twin re-snapshot: %v, want ErrTwinSnapshot", err)
	}
	o := snapshot.BackfillOptions{CaptureInstance: heapCI}
	if _, _, err := snapshot.BootstrapBackfill(ctx, h.db, h.dst, o); err != nil {
		t.Fatal(err)
	}
	second, err := snapshot.Backfill(ctx, h.db, h.dst, o)
	if err != nil {
		t.Fatal(err)
	}
	if first.LSN != second.LSN {
		t.Fatalf("the snapshots are at %s and %s", first.LSN, second.LSN)
	}
	var want []string
	for _, row := range rows {
		want = append(want, "extra "+canonicalRow(row))
	}
	sort.Strings(want)
	for _, from := range []lsn.LSN{{}, second.LSN} {
		rep, err := reconcile.Run(ctx, h.db, h.dst, reconcile.Options{CaptureInstance: heapCI, From: from})
		if err != nil {
			t.Fatal(err)
		}
		if got := gotDifferences(t, rep); !slices.Equal(got, want) || rep.Truncated {
			t.Fatalf("from %s: differences %v (truncated %v), want %v", from, got, rep.Truncated, want)
		}
	}
	// MaxDifferences keeps the first copies in order and says there were more.
	rep, err := reconcile.Run(ctx, h.db, h.dst, reconcile.Options{CaptureInstance: heapCI, MaxDifferences: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := gotDifferences(t, rep); !slices.Equal(got, want[:2]) || !rep.Truncated {
		t.Fatalf("MaxDifferences 2: %v (truncated %v), want %v", got, rep.Truncated, want[:2])
	}
}

// TestRunAllKeyless: RunAll verifies keyed and keyless instances side by
// side; the keyless one reports as a multiset and finds its drift.
func TestRunAllKeyless(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	w := newWorld(t, r, shapes()[0], 80, true)
	defer w.dst.Close()
	h := newHeapWorld(t, r, 60, true)
	defer h.dst.Close()
	want := wantDifferences(h.multiset(t), h.drift(t, r))
	res, err := reconcile.RunAll(context.Background(), []reconcile.Instance{
		{Source: w.DB, Target: w.dst, Options: reconcile.Options{CaptureInstance: w.CI, Tiles: 4}},
		{Source: h.db, Target: h.dst, Options: reconcile.Options{CaptureInstance: heapCI}},
	}, reconcile.DatabaseOptions{Instances: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Clean() || res[0].Report.Keyless {
		t.Fatalf("keyed instance: %+v", res[0])
	}
	if res[1].Err != nil || !res[1].Report.Keyless || res[1].Clean() != (len(want) == 0) {
		t.Fatalf("keyless instance: %+v", res[1])
	}
	if got := gotDifferences(t, res[1].Report); !slices.Equal(got, want) {
		t.Fatalf("keyless differences %v, want %v", got, want)
	}
}

// TestReconcileKeylessChunkedStates: a chunked snapshot counts once
// complete (one started over a converged whole snapshot, with nothing
// committed yet, leaves the whole one in force), and one that read no
// rows is refused: the LSN its chunk was read at is not recorded, so
// changes it holds cannot be told from changes after it.
func TestReconcileKeylessChunkedStates(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 12))
	for _, table := range []bool{false, true} {
		h := &heapWorld{db: fake.New(fake.Options{}), dst: newBronze(t, r, table)}
		rows := []fake.Row{h.row(r), h.row(r), h.row(r)}
		if err := h.db.CreateTable(fake.TableDef{Schema: "dbo", Name: "heap", Columns: heapColumns, Key: []string{"rowid"}, Keyless: true, Rows: rows}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.db.EnableCDC("dbo", "heap", heapCI, "a", "b", "c"); err != nil {
			t.Fatal(err)
		}
		var err error
		if h.next, _, err = snapshot.Bootstrap(ctx, h.db, h.dst, snapshot.Options{CaptureInstance: heapCI}); err != nil {
			t.Fatal(err)
		}
		h.change(t, r)
		h.stream(t)
		o := snapshot.BackfillOptions{CaptureInstance: heapCI}
		if _, _, err := snapshot.BootstrapBackfill(ctx, h.db, h.dst, o); err != nil {
			t.Fatal(err)
		}
		rep, err := reconcile.Run(ctx, h.db, h.dst, reconcile.Options{CaptureInstance: heapCI})
		if err != nil || !rep.Clean() {
			t.Fatalf("%T, a chunked snapshot opened over a whole one: %+v, %v", h.dst, rep, err)
		}
		// Empty the table, and finish the backfill: its chunk reads nothing.
		tx := h.db.Begin()
		all, err := h.db.Rows("dbo", "heap")
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range all {
			if err := tx.Delete("dbo", "heap", []any{row[0]}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		h.stream(t)
		if _, err := snapshot.Backfill(ctx, h.db, h.dst, o); err != nil {
			t.Fatal(err)
		}
		if _, err := reconcile.Run(ctx, h.db, h.dst, reconcile.Options{CaptureInstance: heapCI}); err == nil || !strings.Contains(err.Error(), "wrote no rows") {
			t.Fatalf("%T, a chunked snapshot that read no rows: %v", h.dst, err)
		}
		h.dst.Close()
	}
}
