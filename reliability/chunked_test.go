package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/faultblob"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

var _ sink.ChunkSink = (*delta.Table)(nil)

const keyPlan = `^_cdcsnap/chunked/`

// chunkedCase is one crash target of a chunked snapshot (Backfill).
type chunkedCase struct {
	name string
	// atOpen: the fault hits BootstrapBackfill (the open), not Backfill.
	atOpen bool
	inject func(r *rand.Rand, c *crashRun, waves int)
}

func chunkedCases() []chunkedCase {
	blobFault := func(f faultblob.Fault, nth func(r *rand.Rand, waves int) int) func(r *rand.Rand, c *crashRun, waves int) {
		return func(r *rand.Rand, c *crashRun, waves int) {
			f := f
			f.Nth = nth(r, waves)
			f.Err = errBoom
			c.fb.Inject(f)
		}
	}
	anyWave := func(r *rand.Rand, waves int) int { return 1 + r.IntN(waves+1) } // a wave's commit, or completion's
	first := func(*rand.Rand, int) int { return 1 }
	return []chunkedCase{
		{name: "chunked: the plan file fails (open)", atOpen: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyPlan, After: -1}, first)},
		{name: "chunked: the open's commit is half-written", atOpen: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyCommit, After: -1}, first)},
		{name: "chunked: the open's answer is lost", atOpen: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyCommit, Mode: faultblob.AckLost}, first)},
		{name: "chunked: mid-wave after N rows", inject: func(r *rand.Rand, c *crashRun, waves int) {
			c.w.DB.FailReadAfter(int64(r.IntN(c.rows+1)), errBoom)
		}},
		{name: "chunked: mid-wave, a data file fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyData, After: -1}, func(r *rand.Rand, _ int) int { return 1 + r.IntN(6) })},
		{name: "chunked: a wave's commit is half-written", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyCommit, After: -1}, anyWave)},
		{name: "chunked: a wave's commit is stored, answer lost", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyCommit, Mode: faultblob.AckLost}, anyWave)},
		{name: "chunked: listing the log fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpList, Key: keyLog}, func(r *rand.Rand, waves int) int { return 1 + r.IntN(2*waves+2) })},
		{name: "chunked: the process stops between waves", inject: func(r *rand.Rand, c *crashRun, waves int) {}},
	}
}

// TestChunkedCrashAtEveryStep crashes a chunked snapshot (Backfill into a
// Delta table on memblob through faultblob, changes committed between the
// pages of every read) at a random step: its open, mid-wave, a wave's
// commit half-written or landed with its answer lost, between waves, its
// completion. A rerun (plain Backfill on a fresh Table, no Resnapshot)
// then completes it. Checks: one chunked snapshot of the instance, the
// one the stream was given (BootstrapBackfill's LSN S never changes, never
// newer); after the crash only whole waves are visible (chunks
// 0..Committed-1); when complete every chunk's rows carry _snapshot S and
// a stamp at or after S, no key appears twice (no duplicate chunk), and
// with the changes from S+1 the latest image equals the source.
func TestChunkedCrashAtEveryStep(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 60))
	all := chunkedCases()
	ty := newTally()
	for c := range cases(10 * len(all)) {
		cc := all[c%len(all)]
		if c >= len(all) {
			cc = all[r.IntN(len(all))]
		}
		fired, ok := chunkedCrashOnce(t, r, cc, c)
		ty.add(cc.name, fired, ok)
		if t.Failed() {
			break
		}
	}
	ty.report(t, "chunked snapshot crash points")
}

func chunkedCrashOnce(t *testing.T, r *rand.Rand, cc chunkedCase, c int) (fired, passed bool) {
	ctx := context.Background()
	sh := shapes()[r.IntN(len(shapes()))]
	rows := 1 + r.IntN(150)
	w := testworld.New(t, r, sh, rows)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("case %d (%s, %s): "+format, append([]any{c, cc.name, sh.Name}, args...)...)
	}
	mem := memblob.OpenBucket(nil)
	defer mem.Close()
	fb := faultblob.New(mem, false)
	bkt := fb.Bucket()
	defer bkt.Close()
	topts := delta.Options{CheckpointInterval: 1 + r.IntN(4)}
	open := func() *delta.Table { return openBucket(t, bkt, "mem://chunked", topts) }
	chunks := 1 + r.IntN(8)
	bopts := snapshot.BackfillOptions{CaptureInstance: w.CI, Chunks: chunks, WaveChunks: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(20)}}
	waves := (chunks + bopts.WaveChunks - 1) / bopts.WaveChunks
	run := &crashRun{w: w, fb: fb, rows: rows}
	rw := &readWatch{}
	installHook(t, w, r, r.IntN(3), rw, nil)
	defer w.DB.SetPageHook(nil)

	tb1 := open()
	if cc.atOpen {
		cc.inject(r, run, waves)
	}
	m0 := w.MaxLSN(t)
	_, res0, err := snapshot.BootstrapBackfill(ctx, w.DB, tb1, bopts)
	fired = err != nil || fb.Fired() > 0
	fb.Clear()
	if err != nil {
		// The open failed: a rerun of the open (a restart) opens it or
		// finds the one that landed.
		tb1.Close()
		tb1 = open()
		if _, res0, err = snapshot.BootstrapBackfill(ctx, w.DB, tb1, bopts); err != nil {
			fail("reopening: %v", err)
			return fired, false
		}
	}
	s := res0.LSN
	if s.Compare(m0) < 0 {
		fail("S %s is older than the max LSN %s before the open", s, m0)
		return fired, false
	}
	if !cc.atOpen {
		cc.inject(r, run, waves)
	}
	opts1 := bopts
	if cc.name == "chunked: the process stops between waves" {
		opts1.MaxWaves = 1 + r.IntN(waves)
	}
	res1, err1 := snapshot.Backfill(ctx, w.DB, tb1, opts1)
	fired = fired || err1 != nil || fb.Fired() > 0 || opts1.MaxWaves > 0
	w.DB.ClearFaults()
	fb.Clear()
	tb1.Close()

	tb2 := open()
	defer tb2.Close()
	st, err := tb2.FindChunked(ctx, w.CI)
	if err != nil {
		fail("after the crash (%v): FindChunked: %v", err1, err)
		return fired, false
	}
	if st.PlanID != res0.PlanID || st.LSN != s {
		fail("after the crash the table's chunked snapshot is %s at %s; the stream was given %s at %s", st.PlanID, st.LSN, res0.PlanID, s)
		return fired, false
	}
	if err := checkChunkRows(t, ctx, w, tb2, st, false); err != nil {
		fail("after the crash (%v, %d of %d chunks committed): %v", err1, st.Committed, st.Chunks, err)
		return fired, false
	}
	if err1 == nil && opts1.MaxWaves == 0 && !res1.Complete {
		fail("Backfill returned no error and an incomplete snapshot: %+v", res1)
		return fired, false
	}

	res2, err := snapshot.Backfill(ctx, w.DB, tb2, bopts)
	if err != nil {
		fail("rerun: %v (first: %v)", err, err1)
		return fired, false
	}
	w.DB.SetPageHook(nil)
	if !res2.Complete || res2.LSN != s || res2.PlanID != res0.PlanID {
		fail("rerun returned %+v; want snapshot %s at %s complete", res2, res0.PlanID, s)
		return fired, false
	}
	all, err := tb2.ChunkedSnapshots(ctx)
	if err != nil {
		fail("%v", err)
		return fired, false
	}
	var mine int
	for _, x := range all {
		if sink.SameInstance(x.CaptureInstance, w.CI) {
			mine++
		}
	}
	if mine != 1 {
		fail("the table holds %d chunked snapshots of the instance", mine)
		return fired, false
	}
	st, _ = tb2.FindChunked(ctx, w.CI)
	if err := checkChunkRows(t, ctx, w, tb2, st, true); err != nil {
		fail("complete: %v", err)
		return fired, false
	}
	for range r.IntN(8) {
		w.Change(t, r)
	}
	if err := streamAndCompare(t, ctx, w, tb2, snapshot.Result{LSN: s}, 1); err != nil {
		fail("after the rerun (first: %v): %v", err1, err)
		return fired, false
	}
	return fired, true
}

// checkChunkRows checks the visible rows of w's instance in a table that
// holds its chunked snapshot st and no change yet: all are snapshot rows
// of S = st.LSN (_snapshot S, _start_lsn >= S), of chunks 0..Committed-1
// only, and no key appears twice. When complete, the keys are the
// source's (compared by the caller through the latest image).
func checkChunkRows(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table, st sink.Chunked, complete bool) error {
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		if st.Committed == 0 {
			return nil // nothing visible yet: fine
		}
		return err
	}
	defer rr.Release()
	ci := w.Instance(t)
	key, _ := ci.KeyColumns()
	im := snapshot.NewImage(ci.Columns, key)
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		inst := col(sink.ColCaptureInstance).(*array.String)
		op := col(sink.ColOperation).(*array.Int32)
		start := col(sink.ColStartLSN).(*array.String)
		snap := col(sink.ColSnapshot).(*array.String)
		chunk := col(sink.ColChunk).(*array.Int32)
		keep := make([]bool, rec.NumRows())
		for i := range keep {
			if inst.IsNull(i) || !sink.SameInstance(inst.Value(i), w.CI) {
				continue
			}
			keep[i] = true
			if op.IsNull(i) || op.Value(i) != 0 || snap.IsNull(i) || snap.Value(i) != st.LSN.String() || chunk.IsNull(i) {
				return fmt.Errorf("row %d: operation %s, _snapshot %s, _chunk %s; want a chunk row of %s", i, op.ValueStr(i), snap.ValueStr(i), chunk.ValueStr(i), st.LSN)
			}
			if ch := chunk.Value(i); int(ch) >= st.Committed || ch < 0 {
				return fmt.Errorf("a row of chunk %d is visible, %d chunks are committed", ch, st.Committed)
			}
			l, err := lsn.Parse(start.Value(i))
			if err != nil || l.Compare(st.LSN) < 0 {
				return fmt.Errorf("chunk row stamped %q, below S %s", start.Value(i), st.LSN)
			}
		}
		sub, err := filter(rec, keep)
		if err != nil {
			return err
		}
		err = im.AddRows(sub)
		sub.Release()
		if err != nil {
			return fmt.Errorf("a key is in two chunks: %w", err)
		}
	}
	if err := rr.Err(); err != nil {
		return err
	}
	if complete && !st.Complete {
		return fmt.Errorf("not complete: %+v", st)
	}
	return nil
}
