package reliability_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestEightBootstrapsOneSnapshot races 8 bootstraps of the same instance
// on one table, each through its own Table (as 8 processes would), with
// changes committed between the pages of their reads so that each plans
// its own L0: exactly one snapshot lands, every bootstrap returns its LSN
// (one new, seven Existing), and the stream from there converges. On
// memblob (conditional writes) and on a local folder (link-based
// put-if-absent).
func TestEightBootstrapsOneSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 30))
	ctx := context.Background()
	ty := newTally()
	for c := range cases(24) {
		kind := "memblob"
		if c%2 == 1 {
			kind = "local folder"
		}
		ok := func() bool {
			w := testworld.New(t, r, shapes()[r.IntN(len(shapes()))], r.IntN(200))
			open := tableOpener(t, kind)
			rw := &readWatch{}
			installHook(t, w, r, 1, rw, nil)
			const n = 8
			results := make([]snapshot.Result, n)
			errs := make([]error, n)
			tables := make([]*delta.Table, n)
			for i := range tables {
				tables[i] = open()
				defer tables[i].Close()
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, results[i], errs[i] = snapshot.Bootstrap(ctx, w.DB, tables[i], snapshot.Options{CaptureInstance: w.CI, Partitions: 1 + i%4, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 7}})
				}()
			}
			close(start)
			wg.Wait()
			w.DB.SetPageHook(nil)
			var fresh int
			var l lsn.LSN
			for i := range n {
				if errs[i] != nil {
					t.Errorf("case %d (%s): bootstrap %d: %v", c, kind, i, errs[i])
					return false
				}
				if !results[i].Existing {
					fresh++
				}
			}
			tb := open()
			defer tb.Close()
			snaps := instanceSnapshots(t, ctx, tb, w.CI)
			if len(snaps) != 1 || fresh != 1 {
				t.Errorf("case %d (%s): %d snapshots in the table, %d bootstraps committed; want 1 and 1", c, kind, len(snaps), fresh)
				return false
			}
			l = snaps[0].LSN
			for i := range n {
				if results[i].LSN != l {
					t.Errorf("case %d (%s): bootstrap %d returned LSN %s, the snapshot's is %s", c, kind, i, results[i].LSN, l)
					return false
				}
			}
			if _, err := checkSnapshotRows(t, ctx, w, tb, snaps[0]); err != nil {
				t.Errorf("case %d (%s): %v", c, kind, err)
				return false
			}
			if err := streamAndCompare(t, ctx, w, tb, snapshot.Result{LSN: l}, 1); err != nil {
				t.Errorf("case %d (%s): %v", c, kind, err)
				return false
			}
			return true
		}()
		ty.add("8 bootstraps, one instance, "+kind, true, ok)
		if t.Failed() {
			break
		}
	}
	ty.report(t, "concurrent bootstraps")
}

// tableOpener returns a function that opens one Delta table, as a new
// process would, on a memblob bucket ("memblob") or a local folder ("local
// folder"), checkpointing every 2 commits.
func tableOpener(t *testing.T, kind string) func() *delta.Table {
	opts := delta.Options{CheckpointInterval: 2}
	if kind == "memblob" {
		mem := memblob.OpenBucket(nil)
		t.Cleanup(func() { mem.Close() })
		return func() *delta.Table { return openBucket(t, mem, "mem://race", opts) }
	}
	dir := t.TempDir()
	return func() *delta.Table {
		tb, err := blobstore.Open(context.Background(), dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
}

// TestBootstrapsOfTwoInstancesBothLand races bootstraps of two capture
// instances of one source table (a schema change keeps two at once) into
// one table, four of each: both snapshots land, each instance's rows carry
// its own LSN, and each converges to the source.
func TestBootstrapsOfTwoInstancesBothLand(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 31))
	ctx := context.Background()
	for c := range cases(10) {
		w := testworld.New(t, r, shapes()[r.IntN(len(shapes()))], r.IntN(150))
		ci2 := w.CI + "_v2"
		if _, err := w.DB.EnableCDC("dbo", w.Shape.Name, ci2); err != nil {
			t.Fatal(err)
		}
		w2 := w.With(ci2)
		mem := memblob.OpenBucket(nil)
		rw := &readWatch{}
		installHook(t, w, r, 1, rw, nil)
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]map[lsn.LSN]int{}
		var failed error
		for i := range 8 {
			ww := w
			if i%2 == 1 {
				ww = w2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tb := openBucket(t, mem, "mem://two", delta.Options{})
				defer tb.Close()
				res, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: ww.CI, Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 5}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = err
					return
				}
				if got[ww.CI] == nil {
					got[ww.CI] = map[lsn.LSN]int{}
				}
				got[ww.CI][res.LSN]++
			}()
		}
		wg.Wait()
		w.DB.SetPageHook(nil)
		if failed != nil {
			t.Fatalf("case %d: %v", c, failed)
		}
		tb := openBucket(t, mem, "mem://two", delta.Options{})
		for _, x := range []*testworld.World{w, w2} {
			snaps := instanceSnapshots(t, ctx, tb, x.CI)
			if len(snaps) != 1 || len(got[x.CI]) != 1 || got[x.CI][snaps[0].LSN] != 4 {
				t.Fatalf("case %d: instance %s: table holds %+v, bootstraps returned %v", c, x.CI, snaps, got[x.CI])
			}
			if _, err := checkSnapshotRows(t, ctx, x, tb, snaps[0]); err != nil {
				t.Fatalf("case %d: instance %s: %v", c, x.CI, err)
			}
		}
		for i, x := range []*testworld.World{w, w2} {
			for range r.IntN(5) {
				w.Change(t, r)
			}
			snaps := instanceSnapshots(t, ctx, tb, x.CI)
			if err := streamAndCompare(t, ctx, x, tb, snapshot.Result{LSN: snaps[0].LSN}, int64(1+i)); err != nil {
				t.Fatalf("case %d: instance %s: %v", c, x.CI, err)
			}
		}
		tb.Close()
		mem.Close()
	}
}

// TestConcurrentResumesOneCommit fails a bootstrap part way, then races
// four resumes of its partial snapshot, each through its own Table (as
// four restarted processes would), on memblob and on a local folder:
// exactly one commits, all return the partial snapshot's LSN, its rows are
// the source's as of that LSN, no partial record is left, and the stream
// from LSN + 1 converges.
func TestConcurrentResumesOneCommit(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 31))
	ctx := context.Background()
	ty := newTally()
	for c := range cases(16) {
		kind := "memblob"
		if c%2 == 1 {
			kind = "local folder"
		}
		fired := true
		ok := func() bool {
			w := testworld.New(t, r, shapes()[r.IntN(len(shapes()))], 50+r.IntN(150))
			rows := len(w.Keys)
			open := tableOpener(t, kind)
			opts := snapshot.Options{CaptureInstance: w.CI, Partitions: 4 + r.IntN(5), MinPartitionRows: -1, Parallelism: 1 + r.IntN(2), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(20)}}
			w.DB.FailReadAfter(int64(r.IntN(rows)), errBoom)
			tb0 := open()
			_, err := snapshot.Take(ctx, w.DB, tb0, opts)
			w.DB.ClearFaults()
			p, perr := tb0.FindPartial(ctx, w.CI)
			tb0.Close()
			if err == nil {
				fired = false // the read ended before the fault's row
				return true
			}
			if perr != nil {
				t.Errorf("case %d (%s): the failed Take returned %v and left %+v, %v; want a failure and a partial snapshot", c, kind, err, p.PlanID, perr)
				return false
			}
			const n = 4
			results := make([]snapshot.Result, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					tb := open()
					defer tb.Close()
					results[i], errs[i] = snapshot.Take(ctx, w.DB, tb, opts)
				})
			}
			wg.Wait()
			fresh := 0
			for i := range n {
				if errs[i] != nil || results[i].LSN != p.LSN {
					t.Errorf("case %d (%s): resume %d: %+v, %v; want the partial snapshot's LSN %s", c, kind, i, results[i], errs[i], p.LSN)
					return false
				}
				if !results[i].Existing {
					fresh++
				}
			}
			tb := open()
			defer tb.Close()
			snaps := instanceSnapshots(t, ctx, tb, w.CI)
			if fresh != 1 || len(snaps) != 1 {
				t.Errorf("case %d (%s): %d resumes committed, %d snapshots; want 1 and 1", c, kind, fresh, len(snaps))
				return false
			}
			if _, err := checkSnapshotRows(t, ctx, w, tb, snaps[0]); err != nil {
				t.Errorf("case %d (%s): %v", c, kind, err)
				return false
			}
			if left, err := tb.FindPartial(ctx, w.CI); err == nil {
				t.Errorf("case %d (%s): partial snapshot %s left after the commit", c, kind, left.PlanID)
				return false
			}
			for range r.IntN(6) {
				w.Change(t, r)
			}
			if err := streamAndCompare(t, ctx, w, tb, snapshot.Result{LSN: p.LSN}, 1); err != nil {
				t.Errorf("case %d (%s): %v", c, kind, err)
				return false
			}
			return true
		}()
		ty.add("4 resumes of one partial snapshot, "+kind, fired, ok)
		if t.Failed() {
			break
		}
	}
	ty.report(t, "concurrent resumes")
}
