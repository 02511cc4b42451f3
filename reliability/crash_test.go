package reliability_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/faultblob"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// Key patterns of the objects of a Delta table.
const (
	keyData       = `^part-.*\.parquet$`
	keyCommit     = `^_delta_log/\d{20}\.json$`
	keyCheckpoint = `^_delta_log/\d{20}\.checkpoint.*\.parquet$`
	keyLastCP     = `^_delta_log/_last_checkpoint$`
	keyLog        = `^_delta_log/`
	keyPlanRecord = `^_cdcsnap/partial/[0-9a-f]+/plan\.json$`
	keyPartRecord = `^_cdcsnap/partial/[0-9a-f]+/part-\d+\.\d+\.json$`
)

// crashCase is one target of a crash: what to inject before the first
// Take, and whether that Take may have committed although it failed (the
// fault came after the commit was durable).
type crashCase struct {
	name string
	// needsHistory: the fault needs a table that exists before the
	// snapshot (a commit to read, a checkpoint after the snapshot's).
	needsHistory bool
	// mayCommit: the first Take may have committed (durably) even if it
	// returned an error.
	mayCommit bool
	inject    func(r *rand.Rand, c *crashRun)
}

// crashRun is the state of one case.
type crashRun struct {
	w      *testworld.World
	fb     *faultblob.Bucket
	cancel context.CancelFunc
	// pageFault, when set, runs after each page of the first Take.
	pageFault func(ctx context.Context, p fake.Page) error
	rows      int
}

func crashCases() []crashCase {
	atPage := func(r *rand.Rand, c *crashRun, do func() error) {
		k := int64(1 + r.IntN(6))
		var n atomic.Int64
		c.pageFault = func(ctx context.Context, p fake.Page) error {
			if n.Add(1) == k {
				return do()
			}
			return nil
		}
	}
	src := func(op fake.Op) func(r *rand.Rand, c *crashRun) {
		return func(r *rand.Rand, c *crashRun) { c.w.DB.FailNext(op, errBoom) }
	}
	blobFault := func(f faultblob.Fault, maxNth int) func(r *rand.Rand, c *crashRun) {
		return func(r *rand.Rand, c *crashRun) {
			f := f
			f.Nth = 1 + r.IntN(maxNth)
			f.Err = errBoom
			c.fb.Inject(f)
		}
	}
	return []crashCase{
		// In the source.
		{name: "source: resolving the capture instance", inject: src(fake.OpCaptureInstance)},
		{name: "source: recording L0 (max LSN)", inject: src(fake.OpMaxLSN)},
		{name: "source: commit time of L0", inject: src(fake.OpLSNTime)},
		{name: "source: planning (key bounds)", inject: src(fake.OpIntKeyBounds)},
		{name: "source: planning (keyset seek)", inject: src(fake.OpSeekKey)},
		{name: "source: planning (row count; not fatal)", inject: src(fake.OpRowCount)},
		{name: "source: after planning (opening a range)", inject: src(fake.OpReadRange)},
		{name: "source: mid-partition after N rows", inject: func(r *rand.Rand, c *crashRun) {
			c.w.DB.FailReadAfter(int64(r.IntN(c.rows+1)), errBoom)
		}},
		{name: "source: connection error at page k", inject: func(r *rand.Rand, c *crashRun) {
			atPage(r, c, func() error { return errBoom })
		}},
		{name: "source: context canceled at page k", inject: func(r *rand.Rand, c *crashRun) {
			atPage(r, c, func() error { c.cancel(); return nil })
		}},
		// In the bucket.
		{name: "bucket: data file half-written, aborted", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyData, After: -1}, 4)},
		{name: "bucket: data file half-written, torn", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyData, After: -1, Mode: faultblob.Torn}, 4)},
		{name: "bucket: data file close fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyData}, 4)},
		{name: "bucket: listing the log fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpList, Key: keyLog}, 4)},
		{name: "bucket: recording the plan fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyPlanRecord}, 1)},
		{name: "bucket: plan recorded, answer lost", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyPlanRecord, Mode: faultblob.AckLost}, 1)},
		{name: "bucket: recording partition k fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyPartRecord, After: -1}, 4)},
		{name: "bucket: partition k recorded, answer lost", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyPartRecord, Mode: faultblob.AckLost}, 4)},
		{name: "bucket: reading a commit fails", needsHistory: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpOpenRead, Key: keyCommit}, 2)},
		{name: "bucket: commit file half-written", inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyCommit, After: -1}, 1)},
		{name: "bucket: commit file close fails", inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyCommit}, 1)},
		{name: "bucket: commit stored, answer lost", mayCommit: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyCommit, Mode: faultblob.AckLost}, 1)},
		{name: "after the commit: checkpoint write fails", needsHistory: true, mayCommit: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpWrite, Key: keyCheckpoint, After: -1}, 1)},
		{name: "after the commit: _last_checkpoint fails", needsHistory: true, mayCommit: true, inject: blobFault(faultblob.Fault{Op: faultblob.OpClose, Key: keyLastCP}, 1)},
		{name: "after the commit: the caller crashes", mayCommit: true, inject: func(r *rand.Rand, c *crashRun) {}},
	}
}

// TestCrashAtEveryStep crashes a whole snapshot into a Delta table (on
// memblob through faultblob) at a random step, with random changes
// committed between the pages of the read, and then reruns a plain Take
// on a fresh Table (a new process: no cache). It checks, for every case:
// the failed Take committed nothing (or, for faults after the commit, its
// commit is durable); the rerun returns the table's one snapshot of the
// instance (the same one when the first had committed); the snapshot's
// LSN is never newer than the read (at most the max LSN when its first
// page was read, at least the max LSN when the Take began); every
// snapshot row carries that LSN, no key twice, as many rows as recorded;
// and after streaming the changes from LSN+1 the latest image equals the
// source.
func TestCrashAtEveryStep(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 10))
	all := crashCases()
	ty := newTally()
	n := cases(10 * len(all))
	for c := range n {
		cc := all[c%len(all)]
		if c >= len(all) {
			cc = all[r.IntN(len(all))]
		}
		fired, ok := crashOnce(t, r, cc, c)
		ty.add(cc.name, fired, ok)
		if t.Failed() {
			break
		}
	}
	ty.report(t, "whole snapshot crash points")
	// Objects matched by name pattern: a rename must not turn them into
	// cases that never fire. (Others fire or not with the random shape.)
	ty.mustFire(t, "bucket: recording the plan fails", "bucket: plan recorded, answer lost",
		"bucket: recording partition k fails", "bucket: partition k recorded, answer lost",
		"bucket: commit file half-written", "bucket: commit stored, answer lost")
}

func crashOnce(t *testing.T, r *rand.Rand, cc crashCase, c int) (fired, passed bool) {
	ctx := context.Background()
	sh := shapes()[r.IntN(len(shapes()))]
	rows := r.IntN(150)
	w := testworld.New(t, r, sh, rows)
	fail := func(format string, args ...any) {
		t.Helper()
		args = append([]any{c, cc.name, sh.Name}, args...)
		t.Errorf("case %d (%s, %s): "+format, args...)
	}

	mem := memblob.OpenBucket(nil)
	defer mem.Close()
	fb := faultblob.New(mem, false)
	bkt := fb.Bucket()
	defer bkt.Close()
	topts := delta.Options{CheckpointInterval: 1 + r.IntN(3)}
	if r.IntN(2) == 0 {
		topts.TargetFileSize = 2048 // several files per partition
	}
	open := func() *delta.Table { return openBucket(t, bkt, "mem://crash", topts) }
	if cc.needsHistory || r.IntN(3) == 0 {
		// Another instance's (empty) change batch first: the snapshot's
		// commit is not the table's first, and can be checkpointed.
		tb := open()
		if _, err := tb.AppendChanges(ctx, "dbo_other", 1, emptyReader(t, bronze(t, w))); err != nil {
			t.Fatal(err)
		}
		tb.Close()
		topts.CheckpointInterval = 1
	}

	rate := r.IntN(3)
	rw := &readWatch{}
	ctx1, cancel := context.WithCancel(ctx)
	defer cancel()
	m0 := w.MaxLSN(t)
	run := &crashRun{w: w, fb: fb, cancel: cancel, rows: rows}
	cc.inject(r, run)
	installHook(t, w, r, rate, rw, func(ctx context.Context, p fake.Page) error {
		if run.pageFault != nil {
			return run.pageFault(ctx, p)
		}
		return nil
	})
	opts := snapshot.Options{CaptureInstance: w.CI, Partitions: 1 + r.IntN(6), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(25)}}
	tb1 := open()
	res1, err1 := snapshot.Take(ctx1, w.DB, tb1, opts)
	first, read := rw.atFirstPage()
	fired = err1 != nil || fb.Fired() > 0 || cc.name == "after the commit: the caller crashes"
	w.DB.SetPageHook(nil)
	w.DB.ClearFaults()
	fb.Clear()
	tb1.Close()

	tb2 := open()
	defer tb2.Close()
	before := instanceSnapshots(t, ctx, tb2, w.CI)
	partial, perr := tb2.FindPartial(ctx, w.CI)
	resumable := perr == nil && len(before) == 0
	switch {
	case len(before) > 1:
		fail("the first Take left %d snapshots", len(before))
		return fired, false
	case err1 != nil && len(before) == 1 && !cc.mayCommit:
		fail("the first Take failed (%v) but committed a snapshot", err1)
		return fired, false
	case err1 == nil && (len(before) != 1 || before[0].LSN != res1.LSN || before[0].Version != res1.Version):
		fail("the first Take returned %+v but the table holds %+v", res1, before)
		return fired, false
	case err1 == nil:
		if res1.LSN.Compare(m0) < 0 || (read && res1.LSN.Compare(first) > 0) {
			fail("snapshot LSN %s outside [%s, %s] (max LSN at the start and at the first page)", res1.LSN, m0, first)
			return fired, false
		}
	}
	if err1 != nil && errors.Is(err1, context.Canceled) && run.pageFault == nil {
		fail("unexpected cancellation: %v", err1)
	}

	// The rerun, with changes between its pages too.
	rw.reset()
	installHook(t, w, r, rate, rw, nil)
	m1 := w.MaxLSN(t)
	res2, err := snapshot.Take(ctx, w.DB, tb2, opts)
	first2, read2 := rw.atFirstPage()
	w.DB.SetPageHook(nil)
	if err != nil {
		fail("rerun: %v (first Take: %v)", err, err1)
		return fired, false
	}
	after := instanceSnapshots(t, ctx, tb2, w.CI)
	if len(after) != 1 || after[0].LSN != res2.LSN || after[0].Version != res2.Version {
		fail("rerun returned %+v, the table holds %+v", res2, after)
		return fired, false
	}
	if len(before) == 1 {
		if !res2.Existing || res2.LSN != before[0].LSN {
			fail("rerun after a durable commit returned %+v, want the existing snapshot %+v", res2, before[0])
			return fired, false
		}
	} else if resumable {
		// The rerun resumes the first Take's plan: its LSN, the partitions
		// it recorded, and the first Take's bounds on the LSN.
		if res2.Existing || !res2.Resumed || res2.LSN != partial.LSN || res2.PartitionsResumed != len(partial.Parts) {
			fail("rerun returned %+v; want the partial snapshot at %s resumed with its %d recorded partitions", res2, partial.LSN, len(partial.Parts))
			return fired, false
		}
		if res2.LSN.Compare(m0) < 0 || (read && res2.LSN.Compare(first) > 0) {
			fail("resumed snapshot LSN %s outside [%s, %s] (max LSN at the first Take's start and first page)", res2.LSN, m0, first)
			return fired, false
		}
	} else if res2.Existing || res2.Resumed || res2.LSN.Compare(m1) < 0 || (read2 && res2.LSN.Compare(first2) > 0) {
		fail("rerun returned %+v; want a new snapshot with LSN in [%s, %s]", res2, m1, first2)
		return fired, false
	}
	if p, err := tb2.FindPartial(ctx, w.CI); !errors.Is(err, sink.ErrNotFound) {
		fail("after the rerun's commit a partial snapshot is still recorded: %+v, %v", p.PlanID, err)
		return fired, false
	}
	if _, err := checkSnapshotRows(t, ctx, w, tb2, after[0]); err != nil {
		fail("%v", err)
		return fired, false
	}
	for range r.IntN(8) {
		w.Change(t, r)
	}
	if err := streamAndCompare(t, ctx, w, tb2, res2, 1); err != nil {
		fail("after the rerun (first Take: %v): %v", err1, err)
		return fired, false
	}
	// A third Take (another restart) still finds the same snapshot.
	tb3 := open()
	defer tb3.Close()
	res3, err := snapshot.Take(ctx, w.DB, tb3, opts)
	if err != nil || !res3.Existing || res3.LSN != res2.LSN {
		fail("third Take: %+v, %v; want the existing snapshot at %s", res3, err, res2.LSN)
		return fired, false
	}
	return fired, true
}

// TestTornCommitIsRefused: on a store whose writes are not atomic (no
// gocloud.dev store: they all are, and local tables link a synced
// temporary file), a commit file cut anywhere must never be read as a
// smaller snapshot: the table is refused with *delta.CorruptLogError, or
// the cut left whole lines and the snapshot record must still match its
// rows. Every line boundary (and the bytes around it) is tried, and
// random offsets.
func TestTornCommitIsRefused(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 11))
	w := testworld.New(t, r, shapes()[0], 60)
	mem := memblob.OpenBucket(nil)
	defer mem.Close()
	tb := openBucket(t, mem, "mem://torn", delta.Options{CheckpointInterval: -1, TargetFileSize: 1024})
	opts := snapshot.Options{CaptureInstance: w.CI, Partitions: 3, MinPartitionRows: -1}
	if _, err := snapshot.Take(ctx, w.DB, tb, opts); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	commit, err := mem.ReadAll(ctx, "_delta_log/00000000000000000000.json")
	if err != nil {
		t.Fatal(err)
	}
	// Every line boundary and the bytes around it, and random offsets.
	cuts := map[int]bool{}
	for i, b := range commit {
		if b == '\n' {
			for _, c := range []int{i - 1, i, i + 1, i + 2} {
				if c > 0 && c < len(commit) {
					cuts[c] = true
				}
			}
		}
	}
	for range 40 {
		cuts[1+r.IntN(len(commit)-1)] = true
	}
	var silent []int
	for cut := 1; cut < len(commit); cut++ {
		if !cuts[cut] {
			continue
		}
		m := memblob.OpenBucket(nil)
		copyBucket(t, ctx, mem, m)
		if err := m.WriteAll(ctx, "_delta_log/00000000000000000000.json", commit[:cut], nil); err != nil {
			t.Fatal(err)
		}
		tt := openBucket(t, m, "mem://torn", delta.Options{CheckpointInterval: -1})
		snaps, err := tt.Snapshots(ctx)
		var corrupt *delta.CorruptLogError
		switch {
		case errors.As(err, &corrupt):
		case err != nil:
			t.Errorf("cut at %d: %v, want a *CorruptLogError", cut, err)
		case len(snaps) == 0:
			// No snapshot record survived the cut: a rerun takes one.
		default:
			if _, err := checkSnapshotRows(t, ctx, w, tt, snaps[0]); err != nil {
				silent = append(silent, cut)
			}
		}
		tt.Close()
		m.Close()
	}
	if len(silent) > 0 {
		t.Errorf("a commit cut at a line boundary after the snapshot's txn is read as a snapshot with fewer rows "+
			"than its record says (cuts at %v of %d bytes); replay must refuse it with a *CorruptLogError", silent, len(commit))
	}
}

func copyBucket(t *testing.T, ctx context.Context, from, to *blob.Bucket) {
	it := from.List(nil)
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := from.ReadAll(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := to.WriteAll(ctx, o.Key, b, nil); err != nil {
			t.Fatal(err)
		}
	}
}
