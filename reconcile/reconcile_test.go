package reconcile_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	seedFlag  = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the clock)")
	casesFlag = flag.Int("cases", 200, "cases of the randomized tests")
)

// shape is a random table layout with wider key spaces than the standard
// ones (testworld.Shapes), so that the drift finds keys the source lacks.
// caseKey is the key column whose case the cased drift flips (-1: none),
// ci whether its collation ignores case.
type shape struct {
	testworld.Shape
	caseKey int
	ci      bool
}

func shapes() []shape {
	return []shape{
		{
			Shape: testworld.Shape{
				Name: "bigint",
				Columns: []fake.ColumnDef{
					{Name: "id", Type: "bigint"}, {Name: "name", Type: "nvarchar(40)", Nullable: true},
					{Name: "amount", Type: "decimal(18,4)", Nullable: true}, {Name: "at", Type: "datetime2(7)", Nullable: true},
				},
				Key: []string{"id"},
				Row: func(r *rand.Rand) fake.Row {
					id := r.Int64N(2000) - 100
					if r.IntN(10) == 0 {
						id = r.Int64N(1 << 40)
					}
					var amount, at any
					if r.IntN(4) > 0 {
						amount = keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(2000)-1000, r.IntN(10000)))
					}
					if r.IntN(3) > 0 {
						at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e12)) * time.Microsecond)
					}
					return fake.Row{id, testworld.Word(r, "abcXYZ", 8), amount, at}
				},
			},
			caseKey: -1,
		},
		{
			Shape: testworld.Shape{
				Name: "company-id",
				Columns: []fake.ColumnDef{
					{Name: "company", Type: "varchar(10)", Collation: "Latin1_General_CI_AS"}, {Name: "id", Type: "int"},
					{Name: "val", Type: "nvarchar(20)", Nullable: true},
				},
				Key: []string{"company", "id"},
				Row: func(r *rand.Rand) fake.Row {
					companies := []string{"acme", "Beta", "gamma", "delta ", "Eps"}
					return fake.Row{companies[r.IntN(len(companies))], int64(r.IntN(300)), testworld.Word(r, "xyz", 5)}
				},
			},
			caseKey: 0, ci: true,
		},
		{
			Shape: testworld.Shape{
				Name: "ci-string",
				Columns: []fake.ColumnDef{
					{Name: "code", Type: "varchar(12)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "n", Type: "int", Nullable: true},
				},
				Key: []string{"code"},
				Row: func(r *rand.Rand) fake.Row { return fake.Row{testworld.Word(r, "nNaAbBc", 6), int64(r.IntN(10))} },
			},
			caseKey: 0, ci: true,
		},
		{
			Shape: testworld.Shape{
				Name: "bin2-3col",
				Columns: []fake.ColumnDef{
					{Name: "k", Type: "nvarchar(8)", Collation: "Latin1_General_BIN2"}, {Name: "d", Type: "date"},
					{Name: "s", Type: "smallint"}, {Name: "flag", Type: "bit", Nullable: true},
				},
				Key: []string{"k", "d", "s"},
				Row: func(r *rand.Rand) fake.Row {
					d := time.Date(2026, 1, 1+r.IntN(3), 0, 0, 0, 0, time.UTC)
					return fake.Row{testworld.Word(r, "aAbc", 3), d, int64(r.IntN(6)), r.IntN(2) == 0}
				},
			},
			caseKey: 0,
		},
	}
}

// bronze is a target: a memory sink, or a Delta table in a memory bucket
// (written in small files, so that tiles prune some).
type bronze interface {
	sink.ChunkSink
	reconcile.RowReader
	Close() error
}

// world is a random case (testworld.World) with a target converged on it
// by a snapshot and a stream, the stream's position, and the shape's
// drift parameters.
type world struct {
	*testworld.World
	sh    shape
	dst   bronze
	next  lsn.LSN
	batch int64
}

// appendChanges appends a change batch to the target.
func (w *world) appendChanges(ctx context.Context, batch int64, rr array.RecordReader) error {
	return appendTo(ctx, w.dst, w.CI, batch, rr)
}

// appendTo appends a change batch of ci to dst.
func appendTo(ctx context.Context, dst bronze, ci string, batch int64, rr array.RecordReader) error {
	switch d := dst.(type) {
	case *fake.MemSink:
		_, err := d.AppendChanges(ctx, ci, batch, rr)
		return err
	case *delta.Table:
		_, err := d.AppendChanges(ctx, ci, batch, rr)
		return err
	}
	return fmt.Errorf("no AppendChanges on %T", dst)
}

// newBronze returns a memory sink or, when table, a new Delta table in a
// memory bucket with files of a random small size.
func newBronze(t testing.TB, r *rand.Rand, table bool) bronze {
	if !table {
		return fake.NewMemSink()
	}
	tb, err := delta.Open(context.Background(), "mem://", delta.Options{TargetFileSize: 1 + r.Int64N(4<<10), RowGroupRows: 1 + r.IntN(64)})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// wholeOnly hides a target's TileReader: Run then reads it whole.
type wholeOnly struct{ reconcile.RowReader }

// everyRow makes any target a TileReader that returns every row for
// every tile: the largest superset the contract allows.
type everyRow struct{ reconcile.RowReader }

func (e everyRow) ReadKeyRange(ctx context.Context, _ string, _ []keyrange.Column, _ keyrange.Range) (array.RecordReader, error) {
	return e.ReadAll(ctx)
}

// modes returns the target as Run sees it in each mode: whole, and tile
// by tile (the Delta table's own pruning, or every row for every tile).
func (w *world) modes() map[string]reconcile.RowReader {
	m := map[string]reconcile.RowReader{"whole": wholeOnly{w.dst}, "tiles-every-row": everyRow{w.dst}}
	if tr, ok := w.dst.(reconcile.TileReader); ok {
		m["tiles-pruned"] = tr.(reconcile.RowReader)
	}
	return m
}

// rows returns the source's rows by collation key.
func (w *world) rows(t testing.TB) map[string]fake.Row {
	rows, err := w.DB.Rows("dbo", w.Shape.Name)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]fake.Row{}
	for _, r := range rows {
		m[w.CollationKey(t, w.KeyOf(r))] = r
	}
	return m
}

// newWorld loads up to n random rows of sh and converges the sink on them
// by a whole or a chunked snapshot.
func newWorld(t testing.TB, r *rand.Rand, sh shape, n int, table bool) *world {
	ctx := context.Background()
	w := &world{World: testworld.New(t, r, sh.Shape, n), sh: sh}
	w.dst = newBronze(t, r, table)
	var err error
	if r.IntN(2) == 0 {
		w.next, _, err = snapshot.Bootstrap(ctx, w.DB, w.dst, snapshot.Options{CaptureInstance: w.CI, Partitions: 1 + r.IntN(4), MinPartitionRows: -1})
	} else {
		o := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 1 + r.Int64N(30)}
		if w.next, _, err = snapshot.BootstrapBackfill(ctx, w.DB, w.dst, o); err == nil {
			_, err = snapshot.Backfill(ctx, w.DB, w.dst, o)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// stream appends the source's changes since the last poll.
func (w *world) stream(t testing.TB) {
	ctx := context.Background()
	w.batch++
	app := snapshot.AppendFunc(func(ctx context.Context, ci string, b int64, rr array.RecordReader) (int64, error) {
		return 0, w.appendChanges(ctx, b, rr)
	})
	res, err := snapshot.Poll(ctx, w.DB, app, w.CI, w.next, snapshot.PollOptions{BatchID: w.batch})
	if err != nil {
		t.Fatal(err)
	}
	w.next = res.Next
}

// drift writes change rows into the target only, with LSNs above every
// source LSN so they win the merge: they come from a scratch database
// holding copies of the rows they touch. It returns the differences the
// target then has, by collation key: the brute-force oracle.
func (w *world) drift(t testing.TB, r *rand.Rand) map[string]reconcile.Kind {
	ctx := context.Background()
	src := w.rows(t)
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	want := map[string]reconcile.Kind{}
	var stmts []func(tx *fake.Tx) error
	var copies []fake.Row
	take := func() (string, fake.Row, bool) {
		if len(keys) == 0 {
			return "", nil, false
		}
		k := keys[0]
		keys = keys[1:]
		return k, src[k], true
	}
	// A lost row.
	if k, row, ok := take(); ok && r.IntN(4) > 0 {
		copies = append(copies, row)
		stmts = append(stmts, func(tx *fake.Tx) error { return tx.Delete("dbo", w.Shape.Name, w.KeyOf(row)) })
		want[k] = reconcile.Missing
	}
	// An extra row.
	if r.IntN(4) > 0 {
		for range 50 {
			row := w.Shape.Row(r)
			k := w.CollationKey(t, w.KeyOf(row))
			if _, ok := src[k]; ok || want[k] != 0 {
				continue
			}
			stmts = append(stmts, func(tx *fake.Tx) error { return tx.Insert("dbo", w.Shape.Name, row) })
			want[k] = reconcile.Extra
			break
		}
	}
	// A changed value.
	if k, row, ok := take(); ok && r.IntN(4) > 0 {
		for range 50 {
			nr := w.Shape.Row(r)
			for _, j := range w.Info.KeyIndexes {
				nr[j] = row[j]
			}
			if fmt.Sprint(nr) == fmt.Sprint(row) {
				continue
			}
			copies = append(copies, row)
			stmts = append(stmts, func(tx *fake.Tx) error { return tx.Update("dbo", w.Shape.Name, w.KeyOf(row), nr) })
			want[k] = reconcile.Different
			break
		}
	}
	// A string key spelled in another case.
	if k, row, ok := take(); ok && w.sh.caseKey >= 0 && r.IntN(4) > 0 {
		j := w.Info.KeyIndexes[w.sh.caseKey]
		s := row[j].(string)
		flipped := strings.Map(func(c rune) rune {
			if c >= 'a' && c <= 'z' {
				return c - 32
			}
			if c >= 'A' && c <= 'Z' {
				return c + 32
			}
			return c
		}, s)
		nr := append(fake.Row(nil), row...)
		nr[j] = flipped
		nk := w.CollationKey(t, w.KeyOf(nr))
		_, clash := src[nk]
		if flipped != s && (w.sh.ci || (!clash && want[nk] == 0)) {
			copies = append(copies, row)
			stmts = append(stmts, func(tx *fake.Tx) error { return tx.Update("dbo", w.Shape.Name, w.KeyOf(row), nr) })
			if w.sh.ci {
				want[k] = reconcile.Different
			} else {
				want[k], want[nk] = reconcile.Missing, reconcile.Extra
			}
		}
	}
	if len(stmts) == 0 {
		return want
	}
	scratch := fake.New(fake.Options{FirstLSN: lsn.LSN{0, 0, 0x0f, 0xff, 0, 0, 0, 0, 0, 1}})
	if err := scratch.CreateTable(fake.TableDef{Schema: "dbo", Name: w.Shape.Name, Columns: w.Shape.Columns, Key: w.Shape.Key}); err != nil {
		t.Fatal(err)
	}
	if _, err := scratch.EnableCDC("dbo", w.Shape.Name, w.CI); err != nil {
		t.Fatal(err)
	}
	if len(copies) > 0 {
		if _, err := scratch.Load("dbo", w.Shape.Name, copies...); err != nil {
			t.Fatal(err)
		}
	}
	tx := scratch.Begin()
	for _, s := range stmts {
		if err := s(tx); err != nil {
			t.Fatal(err)
		}
	}
	at, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := snapshot.Changes(ctx, scratch, w.CI, at, at, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if err := w.appendChanges(ctx, 1<<40, rr); err != nil {
		t.Fatal(err)
	}
	return want
}

// check runs reconcile in every mode (modes) with the same options and
// compares each report with the oracle; every mode's report must be the
// same.
func (w *world) check(t testing.TB, r *rand.Rand, c int, want map[string]reconcile.Kind) {
	t.Helper()
	opts := reconcile.Options{CaptureInstance: strings.ToUpper(w.CI), Tiles: 1 + r.IntN(10), BatchRows: 1 + r.IntN(20), Parallel: r.IntN(4)}
	var first *reconcile.Report
	for mode, dst := range w.modes() {
		rep, err := reconcile.Run(context.Background(), w.DB, dst, opts)
		if err != nil {
			t.Fatalf("case %d (%s, %s): %v", c, w.Shape.Name, mode, err)
		}
		w.checkReport(t, c, mode, rep, want)
		if first == nil {
			first = rep
		} else if !reflect.DeepEqual(first, rep) {
			t.Fatalf("case %d (%s): the %s report differs from another mode's:\n%+v\n%+v", c, w.Shape.Name, mode, rep, first)
		}
	}
}

// checkReport compares one report with the oracle.
func (w *world) checkReport(t testing.TB, c int, mode string, rep *reconcile.Report, want map[string]reconcile.Kind) {
	t.Helper()
	got := map[string]reconcile.Kind{}
	differing := map[int]bool{}
	for _, tl := range rep.DifferingTiles() {
		differing[tl.Range.Index] = true
	}
	withDiff := map[int]bool{}
	for _, d := range rep.Differences {
		k := w.CollationKey(t, d.Key)
		if got[k] != 0 {
			t.Fatalf("case %d: key %q reported twice", c, k)
		}
		got[k] = d.Kind
		withDiff[d.Tile] = true
		if !differing[d.Tile] {
			t.Fatalf("case %d: %s is in a tile that matched", c, d)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(withDiff) != len(differing) {
		var lines []string
		for _, d := range rep.Differences {
			lines = append(lines, d.String())
		}
		t.Fatalf("case %d (%s, %s, %d tiles): found %v, want %v; differing tiles %v:\n%s", c, w.Shape.Name, mode, len(rep.Tiles), got, want, differing, strings.Join(lines, "\n"))
	}
	if rep.Clean() != (len(want) == 0) || rep.SourceChanged {
		t.Fatalf("case %d: Clean() = %v with %d differences (source changed %v)", c, rep.Clean(), len(want), rep.SourceChanged)
	}
	var n int64
	for _, tl := range rep.Tiles {
		n += tl.SourceRows
	}
	if n != int64(len(w.rows(t))) {
		t.Fatalf("case %d: tiles count %d source rows, the table has %d", c, n, len(w.rows(t)))
	}
}

// TestReconcileFindsDriftExactly: a target (a memory sink or a Delta
// table) converged by snapshot (whole or chunked) and stream reports
// clean; after injected drift (a lost row, an extra row, a changed value,
// a string key in another case) it reports exactly those keys, in the
// tiles that differ and no others. Every case runs with the target read
// whole, read tile by tile through the Delta table's file pruning, and
// read tile by tile with every row offered for every tile: the reports
// are equal.
func TestReconcileFindsDriftExactly(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 31))
	for c := range *casesFlag {
		sh := shapes()[r.IntN(len(shapes()))]
		w := newWorld(t, r, sh, r.IntN(200), r.IntN(3) == 0)
		for range r.IntN(30) {
			w.Change(t, r)
		}
		w.stream(t)
		w.check(t, r, c, nil)
		want := w.drift(t, r)
		w.check(t, r, c, want)
		w.dst.Close()
	}
}

func TestReconcileOptions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	w := newWorld(t, r, shapes()[0], 50, false)
	defer w.dst.Close()
	ctx := context.Background()
	if _, err := reconcile.Run(ctx, w.DB, w.dst, reconcile.Options{}); !errors.Is(err, reconcile.ErrInvalidOptions) {
		t.Fatalf("no capture instance: %v", err)
	}
	if _, err := reconcile.Run(ctx, w.DB, w.dst, reconcile.Options{CaptureInstance: "dbo_missing"}); err == nil || !strings.Contains(err.Error(), "dbo_bigint") {
		t.Fatalf("unknown capture instance: %v", err)
	}
	// Rebuilt only from above every row, the target is empty: every key is
	// missing, and MaxDifferences truncates.
	rep, err := reconcile.Run(ctx, w.DB, w.dst, reconcile.Options{CaptureInstance: w.CI, From: lsn.Max, MaxDifferences: 3})
	if err != nil || rep.Clean() || len(rep.Differences) != 3 || !rep.Truncated || rep.Differences[0].Kind != reconcile.Missing {
		t.Fatalf("empty target: %+v, %v", rep, err)
	}
	tx := w.DB.Begin()
	rows := w.rows(t)
	for _, row := range rows {
		_ = tx.Delete("dbo", "bigint", w.KeyOf(row))
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	w.stream(t)
	rep, err = reconcile.Run(ctx, w.DB, w.dst, reconcile.Options{CaptureInstance: w.CI})
	if err != nil || !rep.Clean() {
		t.Fatalf("converged empty table: %+v, %v", rep, err)
	}
}
