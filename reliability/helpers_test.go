package reliability_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
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

func cases(def int) int {
	if *casesFlag > 0 {
		return *casesFlag
	}
	if testing.Short() {
		return max(def/5, 1)
	}
	return def
}

// shapes are the table layouts of the random cases: the standard ones
// but the binary-collation one, with datetime2 values at the microsecond
// a Delta timestamp keeps.
func shapes() []testworld.Shape { return testworld.Shapes(time.Microsecond)[:3] }

// bronze is the bronze schema of w's instance.
func bronze(t testing.TB, w *testworld.World) *arrow.Schema {
	captured, err := source.ArrowSchema(w.Instance(t).Columns)
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
func installHook(t testing.TB, w *testworld.World, r *rand.Rand, rate int, rw *readWatch, extra func(ctx context.Context, p fake.Page) error) {
	hr := rand.New(rand.NewPCG(r.Uint64(), 3))
	var hmu sync.Mutex
	w.DB.SetPageHook(func(ctx context.Context, p fake.Page) error {
		hmu.Lock()
		rw.mu.Lock()
		if rw.first == nil {
			m, err := w.DB.MaxLSN(context.Background())
			if err == nil {
				rw.first = &m
			}
		}
		rw.mu.Unlock()
		rw.pages.Add(1)
		for range hr.IntN(rate + 1) {
			w.Change(t, hr)
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
func checkSnapshotRows(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table, want sink.Snapshot) (*snapshot.Image, error) {
	ci := w.Instance(t)
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
			if inst.IsNull(i) || !sink.SameInstance(inst.Value(i), w.CI) {
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
		return nil, fmt.Errorf("the table holds %d snapshot rows of %s, the snapshot record says %d", rows, w.CI, want.Rows)
	}
	return im, nil
}

// filter returns the rows of rec where keep is true (every run of them:
// a table reader over the runs would stop at the first chunk boundary).
func filter(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(keep, nil)
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(context.Background(), rec, mask, compute.DefaultFilterOptions())
}

// streamAndCompare streams the changes after from.Prev() (from is the
// first LSN the stream reads) up to the current max LSN into the table as
// batch, then checks that the latest image of the table equals the
// source's current rows.
func streamAndCompare(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table, res snapshot.Result, batch int64) error {
	from, err := res.StreamFrom()
	if err != nil {
		return err
	}
	to := w.MaxLSN(t)
	if from.Compare(to) <= 0 {
		rr, err := snapshot.Changes(ctx, w.DB, w.CI, from, to, batch)
		if err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		_, err = tb.AppendChanges(ctx, w.CI, batch, rr)
		rr.Release()
		if err != nil {
			return fmt.Errorf("append changes: %w", err)
		}
	}
	want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
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
func tableImage(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table) (*snapshot.Image, error) {
	return relabelledImage(t, ctx, w, tb, nil)
}

// relabelledImage is tableImage with each record first passed through relabel
// (nil: as read), which returns a record the caller releases.
func relabelledImage(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table, relabel func(arrow.RecordBatch) arrow.RecordBatch) (*snapshot.Image, error) {
	ci := w.Instance(t)
	key, _ := ci.KeyColumns()
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		if relabel != nil {
			rec = relabel(rec)
		} else {
			rec.Retain()
		}
		inst := rec.Column(rec.Schema().FieldIndices(sink.ColCaptureInstance)[0]).(*array.String)
		keep := make([]bool, rec.NumRows())
		for i := range keep {
			keep[i] = inst.IsValid(i) && sink.SameInstance(inst.Value(i), w.CI)
		}
		sub, err := filter(rec, keep)
		rec.Release()
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

// mustFire fails t for each kind tried at least 3 times whose fault never
// fired: a crash point that no longer matches what the code does (a
// renamed object, say) would otherwise pass silently.
func (ty *tally) mustFire(t *testing.T, kinds ...string) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	for _, k := range kinds {
		if ty.tried[k] >= 3 && ty.fired[k] == 0 {
			t.Errorf("crash point %q was tried %d times and its fault never fired", k, ty.tried[k])
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var errBoom = errors.New("reliability: injected fault")
