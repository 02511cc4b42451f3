package reliability_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the clock)")
	casesFlag = flag.Int("cases", 0, "cases of each randomized test (0: its default)")
)

func seed(t *testing.T) uint64 {
	s := *seedFlag
	if v := os.Getenv("CDCSNAP_SEED"); s == 0 && v != "" {
		fmt.Sscan(v, &s)
	}
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d or CDCSNAP_SEED=%d)", s, s, s)
	return s
}

func cases(def int) int {
	if *casesFlag > 0 {
		return *casesFlag
	}
	if testing.Short() {
		return max(def/5, 1)
	}
	return def
}

// shape is a random table layout: its columns, key and a row generator.
type shape struct {
	name    string
	columns []fake.ColumnDef
	key     []string
	row     func(r *rand.Rand) fake.Row // a random row; its key may repeat
}

func word(r *rand.Rand, alphabet string, maxLen int) string {
	n := 1 + r.IntN(maxLen)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	s := string(b)
	if r.IntN(4) == 0 {
		s += strings.Repeat(" ", 1+r.IntN(2)) // trailing spaces: equal under padding
	}
	return s
}

func shapes() []shape {
	dec := func(r *rand.Rand) any {
		if r.IntN(5) == 0 {
			return nil
		}
		return keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(20000)-10000, r.IntN(10000)))
	}
	return []shape{
		{
			name: "bigint",
			columns: []fake.ColumnDef{
				{Name: "id", Type: "bigint"}, {Name: "name", Type: "nvarchar(40)", Nullable: true},
				{Name: "amount", Type: "decimal(18,4)", Nullable: true}, {Name: "at", Type: "datetime2(7)", Nullable: true},
			},
			key: []string{"id"},
			row: func(r *rand.Rand) fake.Row {
				var at any
				if r.IntN(3) > 0 {
					at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e12)) * time.Microsecond)
				}
				id := r.Int64N(1000) - 100
				if r.IntN(10) == 0 {
					id = r.Int64N(1 << 40)
				}
				return fake.Row{id, word(r, "abcXYZ", 8), dec(r), at}
			},
		},
		{
			name: "company-id",
			columns: []fake.ColumnDef{
				{Name: "company", Type: "varchar(10)", Collation: "Latin1_General_CI_AS"}, {Name: "id", Type: "int"},
				{Name: "val", Type: "nvarchar(20)", Nullable: true},
			},
			key: []string{"company", "id"},
			row: func(r *rand.Rand) fake.Row {
				companies := []string{"acme", "ACME", "Beta", "gamma", "Gamma ", "delta"}
				return fake.Row{companies[r.IntN(1+r.IntN(len(companies)))], int64(r.IntN(200)), word(r, "xyz", 5)}
			},
		},
		{
			name: "ci-string",
			columns: []fake.ColumnDef{
				{Name: "code", Type: "varchar(12)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "n", Type: "int", Nullable: true},
			},
			key: []string{"code"},
			row: func(r *rand.Rand) fake.Row { return fake.Row{word(r, "nNaAbB", 4), int64(r.IntN(10))} },
		},
	}
}

// world is one random case: a fake database with one captured table.
type world struct {
	db    *fake.DB
	shape shape
	info  fake.TableInfo
	mu    *sync.Mutex     // one change at a time (shared by with)
	keys  map[string]bool // collation keys of live rows
	ci    string
}

func newWorld(t testing.TB, r *rand.Rand, sh shape, rows int) *world {
	t.Helper()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: sh.name, Columns: sh.columns, Key: sh.key}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Table("dbo", sh.name)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{db: db, shape: sh, info: info, mu: &sync.Mutex{}, keys: map[string]bool{}, ci: "dbo_" + strings.ReplaceAll(sh.name, "-", "_")}
	if _, err := db.EnableCDC("dbo", sh.name, w.ci); err != nil {
		t.Fatal(err)
	}
	var batch []fake.Row
	for tries := 0; len(batch) < rows && tries < rows*20; tries++ {
		row := sh.row(r)
		k := w.collationKey(t, w.keyOf(row))
		if w.keys[k] {
			continue
		}
		w.keys[k] = true
		batch = append(batch, row)
	}
	if len(batch) > 0 {
		if _, err := db.Load("dbo", sh.name, batch...); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// with returns w seen through another capture instance of its table.
func (w *world) with(ci string) *world {
	return &world{db: w.db, shape: w.shape, info: w.info, mu: w.mu, keys: w.keys, ci: ci}
}

func (w *world) keyOf(row fake.Row) []any {
	k := make([]any, len(w.info.KeyIndexes))
	for i, j := range w.info.KeyIndexes {
		k[i] = row[j]
	}
	return k
}

func (w *world) collationKey(t testing.TB, key []any) string {
	var b strings.Builder
	for i, c := range w.info.KeyColumns {
		s, err := keyrange.CollationKey(c, key[i])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\x00")
	}
	return b.String()
}

// change commits one random insert, update or delete. Safe to call from
// parallel page hooks.
func (w *world) change(t testing.TB, r *rand.Rand) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, err := w.db.Rows("dbo", w.shape.name)
	if err != nil {
		t.Error(err)
		return
	}
	tx := w.db.Begin()
	switch op := r.IntN(3); {
	case op == 0 || len(rows) == 0:
		row := w.shape.row(r)
		k := w.collationKey(t, w.keyOf(row))
		if w.keys[k] {
			tx.Rollback()
			return
		}
		w.keys[k] = true
		err = tx.Insert("dbo", w.shape.name, row)
	case op == 1:
		old := rows[r.IntN(len(rows))]
		row := w.shape.row(r)
		for _, j := range w.info.KeyIndexes {
			row[j] = old[j]
		}
		err = tx.Update("dbo", w.shape.name, w.keyOf(old), row)
	default:
		old := rows[r.IntN(len(rows))]
		key := w.keyOf(old)
		delete(w.keys, w.collationKey(t, key))
		err = tx.Delete("dbo", w.shape.name, key)
	}
	if err != nil {
		t.Error(err)
		tx.Rollback()
		return
	}
	if _, err := tx.Commit(); err != nil {
		t.Error(err)
	}
}

func (w *world) maxLSN(t testing.TB) lsn.LSN {
	l, err := w.db.MaxLSN(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) instance(t testing.TB) *source.CaptureInstance {
	ci, err := w.db.CaptureInstance(context.Background(), w.ci)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

func (w *world) bronze(t testing.TB) *arrow.Schema {
	captured, err := source.ArrowSchema(w.instance(t).Columns)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.BronzeSchema(captured)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readWatch records, for one Take, the max LSN at its first page (before
// the hook's own changes): the snapshot's LSN must not be newer.
type readWatch struct {
	mu    sync.Mutex
	first *lsn.LSN
	pages atomic.Int64
}

func (rw *readWatch) reset() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.first = nil
	rw.pages.Store(0)
}

func (rw *readWatch) atFirstPage() (lsn.LSN, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.first == nil {
		return lsn.LSN{}, false
	}
	return *rw.first, true
}

// installHook makes rate random changes (at most) after every page, from
// its own random stream, and records the first page's max LSN. extra, when
// not nil, runs after the changes and may fail the read.
func (w *world) installHook(t testing.TB, r *rand.Rand, rate int, rw *readWatch, extra func(ctx context.Context, p fake.Page) error) {
	hr := rand.New(rand.NewPCG(r.Uint64(), 3))
	var hmu sync.Mutex
	w.db.SetPageHook(func(ctx context.Context, p fake.Page) error {
		hmu.Lock()
		rw.mu.Lock()
		if rw.first == nil {
			m, err := w.db.MaxLSN(context.Background())
			if err == nil {
				rw.first = &m
			}
		}
		rw.mu.Unlock()
		rw.pages.Add(1)
		for range hr.IntN(rate + 1) {
			w.change(t, hr)
		}
		hmu.Unlock()
		if extra != nil {
			return extra(ctx, p)
		}
		return nil
	})
}

// emptyReader is a reader of no record in schema.
func emptyReader(t testing.TB, schema *arrow.Schema) array.RecordReader {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rec := b.NewRecordBatch()
	defer rec.Release()
	rr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// instanceSnapshots returns the table's whole snapshots of ci.
func instanceSnapshots(t testing.TB, ctx context.Context, tb *delta.Table, ci string) []sink.Snapshot {
	t.Helper()
	all, err := tb.Snapshots(ctx)
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	var out []sink.Snapshot
	for _, s := range all {
		if sink.SameInstance(s.CaptureInstance, ci) {
			out = append(out, s)
		}
	}
	return out
}

// checkSnapshotRows reads every live row of the table (which holds the
// snapshot of w's instance and nothing else of it yet) and checks: every
// row of the instance is a snapshot row (operation 0) stamped with want's
// LSN in _start_lsn and _snapshot, no key appears twice (no duplicate
// partition or chunk), and their count is the recorded row count. It
// returns the image of those rows.
func checkSnapshotRows(t testing.TB, ctx context.Context, w *world, tb *delta.Table, want sink.Snapshot) (*snapshot.Image, error) {
	ci := w.instance(t)
	key, err := ci.KeyColumns()
	if err != nil {
		return nil, err
	}
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var rows int64
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		inst := col(sink.ColCaptureInstance).(*array.String)
		op := col(sink.ColOperation).(*array.Int32)
		start := col(sink.ColStartLSN).(*array.String)
		snap := col(sink.ColSnapshot).(*array.String)
		keep := make([]bool, rec.NumRows())
		for i := range int(rec.NumRows()) {
			if inst.IsNull(i) || !sink.SameInstance(inst.Value(i), w.ci) {
				continue
			}
			keep[i] = true
			rows++
			switch {
			case op.IsNull(i) || op.Value(i) != sink.OperationSnapshot:
				return nil, fmt.Errorf("row %d of the instance is not a snapshot row before any change was streamed", i)
			case start.IsNull(i) || start.Value(i) != want.LSN.String():
				return nil, fmt.Errorf("snapshot row %d has _start_lsn %q, the snapshot's LSN is %s", i, start.ValueStr(i), want.LSN)
			case snap.IsNull(i) || snap.Value(i) != want.LSN.String():
				return nil, fmt.Errorf("snapshot row %d has _snapshot %q, the snapshot's LSN is %s", i, snap.ValueStr(i), want.LSN)
			}
		}
		sub, err := filter(rec, keep)
		if err != nil {
			return nil, err
		}
		err = im.AddRows(sub) // a key seen twice is an error
		sub.Release()
		if err != nil {
			return nil, fmt.Errorf("snapshot rows: %w", err)
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	if want.Rows >= 0 && rows != want.Rows {
		return nil, fmt.Errorf("the table holds %d snapshot rows of %s, the snapshot record says %d", rows, w.ci, want.Rows)
	}
	return im, nil
}

// filter returns the rows of rec where keep is true.
func filter(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	var slices []arrow.RecordBatch
	defer func() {
		for _, s := range slices {
			s.Release()
		}
	}()
	for i := 0; i < len(keep); {
		if !keep[i] {
			i++
			continue
		}
		j := i
		for j < len(keep) && keep[j] {
			j++
		}
		slices = append(slices, rec.NewSlice(int64(i), int64(j)))
		i = j
	}
	if len(slices) == 0 {
		return rec.NewSlice(0, 0), nil
	}
	tbl := array.NewTableFromRecords(rec.Schema(), slices)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, tbl.NumRows()+1)
	defer tr.Release()
	if !tr.Next() {
		return rec.NewSlice(0, 0), nil
	}
	out := tr.RecordBatch()
	out.Retain()
	return out, nil
}

// streamAndCompare streams the changes after from.Prev() (from is the
// first LSN the stream reads) up to the current max LSN into the table as
// batch, then checks that the latest image of the table equals the
// source's current rows.
func streamAndCompare(t testing.TB, ctx context.Context, w *world, tb *delta.Table, res snapshot.Result, batch int64) error {
	from, err := res.StreamFrom()
	if err != nil {
		return err
	}
	to := w.maxLSN(t)
	if from.Compare(to) <= 0 {
		rr, err := snapshot.Changes(ctx, w.db, w.ci, from, to, batch)
		if err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		_, err = tb.AppendChanges(ctx, w.ci, batch, rr)
		rr.Release()
		if err != nil {
			return fmt.Errorf("append changes: %w", err)
		}
	}
	want, err := snapshot.SourceImage(ctx, w.db, w.instance(t))
	if err != nil {
		return err
	}
	got, err := tableImage(t, ctx, w, tb)
	if err != nil {
		return err
	}
	if d := want.Diff(got, 5); len(d) > 0 {
		return fmt.Errorf("latest image differs from the source:\n%s", strings.Join(d, "\n"))
	}
	return nil
}

// tableImage is the latest image of the table's rows of w's instance.
func tableImage(t testing.TB, ctx context.Context, w *world, tb *delta.Table) (*snapshot.Image, error) {
	ci := w.instance(t)
	key, _ := ci.KeyColumns()
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		inst := rec.Column(rec.Schema().FieldIndices(sink.ColCaptureInstance)[0]).(*array.String)
		keep := make([]bool, rec.NumRows())
		for i := range keep {
			keep[i] = inst.IsValid(i) && sink.SameInstance(inst.Value(i), w.ci)
		}
		sub, err := filter(rec, keep)
		if err != nil {
			return nil, err
		}
		err = im.AddBronze(sub)
		sub.Release()
		if err != nil {
			return nil, err
		}
	}
	return im, rr.Err()
}

// tally counts cases tried and survived by kind, for the README figures.
type tally struct {
	mu     sync.Mutex
	tried  map[string]int
	fired  map[string]int
	passed map[string]int
}

func newTally() *tally {
	return &tally{tried: map[string]int{}, fired: map[string]int{}, passed: map[string]int{}}
}

func (ty *tally) add(kind string, fired, passed bool) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.tried[kind]++
	if fired {
		ty.fired[kind]++
	}
	if passed {
		ty.passed[kind]++
	}
}

func (ty *tally) report(t *testing.T, title string) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	var kinds []string
	for k := range ty.tried {
		kinds = append(kinds, k)
	}
	sortStrings(kinds)
	var b strings.Builder
	tried, passed := 0, 0
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n  %-52s tried %4d  fault fired %4d  survived %4d", k, ty.tried[k], ty.fired[k], ty.passed[k])
		tried += ty.tried[k]
		passed += ty.passed[k]
	}
	t.Logf("%s: %d cases tried, %d survived%s", title, tried, passed, b.String())
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var errBoom = errors.New("reliability: injected fault")
