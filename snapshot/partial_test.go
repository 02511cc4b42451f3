package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

var errCrash = errors.New("crash")

// failFirstTake arms one fault that stops a Take part way: a read that
// fails after some rows, a cancel after some pages, a failed write, or a
// failed commit (every partition recorded by then).
func failFirstTake(r *rand.Rand, w *testworld.World, dst *fake.MemSink, rows int, cancel context.CancelFunc) {
	switch r.IntN(4) {
	case 0:
		w.DB.FailReadAfter(int64(r.IntN(rows+1)), errCrash)
	case 1:
		var n sync.Mutex
		pages := r.IntN(8)
		w.DB.SetPageHook(func(context.Context, fake.Page) error {
			n.Lock()
			defer n.Unlock()
			if pages--; pages < 0 {
				cancel()
			}
			return nil
		})
	case 2:
		dst.FailWriteAfter(r.IntN(3), errCrash)
	default:
		dst.FailNextCommit(errCrash)
	}
}

// TestResumeReadsOnlyWhatIsMissing fails a Take at a random point, with
// changes committed between the pages of both reads, and reruns it. The
// rerun must resume the recorded plan: its LSN, the partitions recorded
// before the failure never read again (the source returns exactly the
// rows of the others), one commit with every key once, no partial record
// left, and after streaming from its LSN + 1 the latest image equals the
// source.
func TestResumeReadsOnlyWhatIsMissing(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 40))
	ctx := context.Background()
	var resumedSome, resumedAll, resumedNone int
	for c := range *casesFlag {
		sh := shapes()[r.IntN(len(shapes()))]
		rows := r.IntN(150)
		w := testworld.New(t, r, sh, rows)
		dst := fake.NewMemSink()
		opts := snapshot.Options{CaptureInstance: w.CI, Partitions: 1 + r.IntN(8), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(20)}}

		ctx1, cancel := context.WithCancel(ctx)
		failFirstTake(r, w, dst, rows, cancel)
		_, err1 := snapshot.Take(ctx1, w.DB, dst, opts)
		cancel()
		w.DB.SetPageHook(nil)
		w.DB.ClearFaults()
		dst.FailNextCommit(nil)
		dst.FailWriteAfter(1<<30, nil)
		if err1 == nil {
			dst.Close()
			continue // the fault did not fire
		}
		if len(dst.Commits()) != 0 {
			t.Fatalf("case %d: the failed Take committed", c)
		}
		partial, perr := dst.FindPartial(ctx, w.CI)
		if perr != nil {
			t.Fatalf("case %d: after a failure past planning (%v) no partial snapshot is recorded: %v", c, err1, perr)
		}

		for range r.IntN(5) {
			w.Change(t, r)
		}
		stop := w.ChangeBetweenPages(t, rand.New(rand.NewPCG(r.Uint64(), 41)), r.IntN(3))
		w.DB.ResetStats()
		var first *snapshot.Progress
		opts.Progress = func(p snapshot.Progress) {
			if first == nil {
				first = &p
			}
		}
		res, err := snapshot.Take(ctx, w.DB, dst, opts)
		opts.Progress = nil
		stop()
		if err != nil {
			t.Fatalf("case %d: rerun after %v: %v", c, err1, err)
		}
		st, err := w.DB.Stats("dbo", sh.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !res.Resumed || res.LSN != partial.LSN || res.PartitionsResumed != len(partial.Parts):
			t.Fatalf("case %d: rerun %+v; want the partial snapshot at %s resumed with %d partitions", c, res, partial.LSN, len(partial.Parts))
		case st.RangeReads != int64(res.Partitions-res.PartitionsResumed):
			t.Fatalf("case %d: the rerun read %d ranges; %d of %d were left", c, st.RangeReads, res.Partitions-res.PartitionsResumed, res.Partitions)
		case st.RowsReturned != res.Rows-res.RowsResumed:
			t.Fatalf("case %d: the rerun read %d rows; the partitions it had to read hold %d", c, st.RowsReturned, res.Rows-res.RowsResumed)
		}
		if res.PartitionsResumed > 0 && (first == nil || first.PartitionsResumed != res.PartitionsResumed || first.RowsResumed != res.RowsResumed || first.PartitionsDone < res.PartitionsResumed) {
			t.Fatalf("case %d: the rerun's first progress report %+v does not show the %d partitions (%d rows) it resumed", c, first, res.PartitionsResumed, res.RowsResumed)
		}
		switch res.PartitionsResumed {
		case 0:
			resumedNone++
		case res.Partitions:
			resumedAll++
		default:
			resumedSome++
		}
		if n := len(dst.Commits()); n != 1 {
			t.Fatalf("case %d: %d commits, want 1", c, n)
		}
		if _, err := dst.FindPartial(ctx, w.CI); !errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("case %d: the committed plan is still recorded as partial (%v)", c, err)
		}
		checkSnapshotKeysOnce(t, w, dst, res.LSN)
		for range r.IntN(6) {
			w.Change(t, r)
		}
		from, _ := res.StreamFrom()
		stream(t, ctx, w, dst, from, 1)
		w.CheckImage(t, dst, lsn.LSN{}, "after the resumed snapshot and its stream")
		dst.Close()
	}
	t.Logf("resumed with some partitions written: %d, all: %d, none: %d", resumedSome, resumedAll, resumedNone)
	if *casesFlag >= 100 && (resumedSome == 0 || resumedAll == 0) {
		t.Errorf("the cases never resumed a partly written (%d) or a fully written (%d) snapshot", resumedSome, resumedAll)
	}
}

// checkSnapshotKeysOnce fails t unless dst's snapshot rows carry l and
// hold each key of the source's table at most once.
func checkSnapshotKeysOnce(t *testing.T, w *testworld.World, dst *fake.MemSink, l lsn.LSN) {
	t.Helper()
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, row := range rows {
		if row[sink.ColOperation] != int64(sink.OperationSnapshot) {
			continue
		}
		if row[sink.ColStartLSN] != l.String() {
			t.Fatalf("a snapshot row carries _start_lsn %v, the snapshot's LSN is %s", row[sink.ColStartLSN], l)
		}
		key := make([]any, len(w.Shape.Key))
		for i, k := range w.Shape.Key {
			key[i] = row[k]
		}
		ck := w.CollationKey(t, key)
		if seen[ck] {
			t.Fatalf("key %v is in the snapshot twice", key)
		}
		seen[ck] = true
	}
}

// partialAfterFailure builds the orders table, fails a Take after some of
// its partitions are recorded, and returns the partial snapshot.
func partialAfterFailure(t *testing.T, db *fake.DB, dst *fake.MemSink, opts snapshot.Options) sink.Partial {
	t.Helper()
	return partialAfterRows(t, db, dst, opts, 300)
}

// partialAfterRows fails a Take after it read rows rows and returns the
// partial snapshot it left.
func partialAfterRows(t *testing.T, db *fake.DB, dst *fake.MemSink, opts snapshot.Options, rows int64) sink.Partial {
	t.Helper()
	ctx := context.Background()
	db.FailReadAfter(rows, errCrash)
	if _, err := snapshot.Take(ctx, db, dst, opts); !errors.Is(err, errCrash) {
		t.Fatalf("first Take: %v, want the injected failure", err)
	}
	db.ClearFaults()
	p, err := dst.FindPartial(ctx, opts.CaptureInstance)
	if err != nil || len(p.Parts) == 0 {
		t.Fatalf("after the failure: %+v, %v; want a partial snapshot with parts", p, err)
	}
	return p
}

func commitOrders(t *testing.T, db *fake.DB, n int) {
	t.Helper()
	have, err := db.Rows("dbo", "orders")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		tx := db.Begin()
		if err := tx.Insert("dbo", "orders", fake.Row{int64(10000 + len(have) + i), "late"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartialAbandoned: each reason a partial snapshot may not be resumed
// makes the rerun drop it (logging why), take a new snapshot at a newer
// LSN, and commit none of the old parts' rows.
func TestPartialAbandoned(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		before func(t *testing.T, db *fake.DB, p sink.Partial, opts *snapshot.Options)
		reason string
	}{
		{"cleanup past its LSN + 1", func(t *testing.T, db *fake.DB, p sink.Partial, opts *snapshot.Options) {
			commitOrders(t, db, 3)
			max, _ := db.MaxLSN(ctx)
			if err := db.Cleanup("dbo_Orders", max); err != nil {
				t.Fatal(err)
			}
		}, "minimum LSN"},
		{"capture instance recreated", func(t *testing.T, db *fake.DB, p sink.Partial, opts *snapshot.Options) {
			if err := db.DisableCDC("dbo_Orders"); err != nil {
				t.Fatal(err)
			}
			commitOrders(t, db, 1)
			if _, err := db.EnableCDC("dbo", "orders", "dbo_Orders"); err != nil {
				t.Fatal(err)
			}
			commitOrders(t, db, 1)
		}, "recreated"},
		{"older than ResumeWithin", func(t *testing.T, db *fake.DB, p sink.Partial, opts *snapshot.Options) {
			commitOrders(t, db, 1)
		}, "longer than ResumeWithin (144h0m0s)"},
		{"DiscardPartial", func(t *testing.T, db *fake.DB, p sink.Partial, opts *snapshot.Options) {
			commitOrders(t, db, 1)
			opts.DiscardPartial = true
		}, "DiscardPartial"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := ordersDB(t, fake.Options{}, 1000)
			dst := fake.NewMemSink()
			defer dst.Close()
			opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}}
			if tc.name == "older than ResumeWithin" {
				dst.SetClock(func() time.Time { return time.Now().Add(-7 * 24 * time.Hour) })
			}
			p := partialAfterFailure(t, db, dst, opts)
			dst.SetClock(nil)
			tc.before(t, db, p, &opts)
			var logs bytes.Buffer
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			res, err := snapshot.Take(ctx, db, dst, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Resumed || res.LSN.Compare(p.LSN) <= 0 {
				t.Fatalf("rerun %+v: want a new snapshot newer than the abandoned one at %s", res, p.LSN)
			}
			if !strings.Contains(logs.String(), "abandoning a partial snapshot") || !strings.Contains(logs.String(), tc.reason) {
				t.Fatalf("the log does not say the partial snapshot was abandoned because of %q:\n%s", tc.reason, logs.String())
			}
			rows, err := dst.Rows()
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				if row[sink.ColStartLSN] != res.LSN.String() {
					t.Fatalf("a committed row carries %v, not the new snapshot's LSN %s: the abandoned parts were committed", row[sink.ColStartLSN], res.LSN)
				}
			}
			if int(res.Rows) != len(rows) || len(rows) < 1000 {
				t.Fatalf("committed %d rows, result says %d", len(rows), res.Rows)
			}
			if _, err := dst.FindPartial(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
				t.Fatalf("a partial snapshot is still recorded: %v", err)
			}
		})
	}
}

// TestStaleAtCommit: cleanup that passes the plan's LSN + 1 while the
// partitions are read makes Take refuse to commit (ErrStale), drop its
// records, and a rerun take a new snapshot.
func TestStaleAtCommit(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 400)
	dst := fake.NewMemSink()
	defer dst.Close()
	var once sync.Once
	var hookErr error
	db.SetPageHook(func(context.Context, fake.Page) error {
		once.Do(func() { // on a reading goroutine: no t.Fatal here
			for i := range 2 {
				tx := db.Begin()
				if hookErr = tx.Insert("dbo", "orders", fake.Row{int64(5000 + i), "late"}); hookErr != nil {
					return
				}
				if _, hookErr = tx.Commit(); hookErr != nil {
					return
				}
			}
			max, _ := db.MaxLSN(ctx)
			hookErr = db.Cleanup("dbo_Orders", max)
		})
		return nil
	})
	_, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 40}})
	db.SetPageHook(nil)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if !errors.Is(err, snapshot.ErrStale) || !strings.Contains(err.Error(), "minimum LSN") {
		t.Fatalf("Take: %v; want ErrStale naming the minimum LSN", err)
	}
	if len(dst.Commits()) != 0 {
		t.Fatal("a stale snapshot was committed")
	}
	if _, err := dst.FindPartial(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("the stale plan is still recorded: %v", err)
	}
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 3, MinPartitionRows: -1})
	if err != nil || res.Resumed || res.Rows != 402 {
		t.Fatalf("rerun: %+v, %v; want a new snapshot of 402 rows", res, err)
	}
}

// TestLostPartsAreReadAgain: parts whose data the sink lost (VACUUM of
// uncommitted files) are read again; the plan is still resumed.
func TestLostPartsAreReadAgain(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}}
	p := partialAfterFailure(t, db, dst, opts)
	dst.VacuumUncommitted()
	found, err := dst.FindPartial(ctx, "dbo_Orders")
	if err != nil || len(found.Parts) != 0 || len(found.Lost) != len(p.Parts) {
		t.Fatalf("after the vacuum: %+v, %v; want every recorded part lost", found, err)
	}
	db.ResetStats()
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil || !res.Resumed || res.LSN != p.LSN || res.PartitionsResumed != 0 || res.Rows != 1000 {
		t.Fatalf("rerun: %+v, %v; want the plan at %s resumed, every partition read", res, err, p.LSN)
	}
	if st, _ := db.Stats("dbo", "orders"); st.RowsReturned != 1000 {
		t.Fatalf("the rerun read %d rows, want 1000", st.RowsReturned)
	}
}

// TestNoRecordsWhenResumeIsOff: a negative ResumeWithin records nothing,
// and a rerun starts over.
func TestNoRecordsWhenResumeIsOff(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}, ResumeWithin: -1}
	db.FailReadAfter(300, errCrash)
	if _, err := snapshot.Take(ctx, db, dst, opts); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	db.ClearFaults()
	if _, err := dst.FindPartial(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("ResumeWithin < 0 recorded a partial snapshot: %v", err)
	}
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil || res.Resumed || res.Rows != 1000 {
		t.Fatalf("rerun: %+v, %v", res, err)
	}
}

// TestConcurrentResumesCommitOnce: processes resuming one partial
// snapshot at once commit it once; each returns its LSN.
func TestConcurrentResumesCommitOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 42))
	ctx := context.Background()
	for c := range 30 {
		db := ordersDB(t, fake.Options{}, 1000)
		dst := fake.NewMemSink()
		opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 2 + r.IntN(8), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(60)}}
		db.FailReadAfter(int64(r.IntN(1000)), errCrash)
		if _, err := snapshot.Take(ctx, db, dst, opts); err == nil {
			t.Fatal("the fault did not fire")
		}
		db.ClearFaults()
		p, err := dst.FindPartial(ctx, "dbo_Orders")
		if err != nil {
			t.Fatal(err)
		}
		n := 2 + r.IntN(4)
		results := make([]snapshot.Result, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], errs[i] = snapshot.Take(ctx, db, dst, opts) })
		}
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("case %d: resumer %d: %v", c, i, errs[i])
			}
			if results[i].LSN != p.LSN {
				t.Fatalf("case %d: resumer %d returned %s, the partial snapshot's LSN is %s", c, i, results[i].LSN, p.LSN)
			}
			if !results[i].Existing {
				fresh++
			}
		}
		if fresh != 1 || len(dst.Commits()) != 1 {
			t.Fatalf("case %d: %d resumers committed, %d commits; want 1 and 1", c, fresh, len(dst.Commits()))
		}
		rows, err := dst.Rows()
		if err != nil || len(rows) != 1000 {
			t.Fatalf("case %d: %d rows committed (%v), want 1000", c, len(rows), err)
		}
		dst.Close()
	}
}

// TestPrepareForFanOut: a coordinator restarted after some workers
// finished resumes through Prepare: Todo is what is left, Done what was
// recorded, and Commit of both lands the whole table once.
func TestPrepareForFanOut(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 6, MinPartitionRows: -1}
	prep, err := snapshot.Prepare(ctx, db, dst, opts)
	if err != nil || prep.Existing != nil || prep.Resumed || len(prep.Todo) != 6 || !prep.Plan.Recorded {
		t.Fatalf("Prepare: %+v, %v", prep, err)
	}
	for _, i := range []int{1, 4} { // two workers finish, then the coordinator dies
		if _, err := snapshot.Execute(ctx, db, dst, prep.Plan, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	again, err := snapshot.Prepare(ctx, db, dst, opts)
	if err != nil || !again.Resumed || again.Plan.ID != prep.Plan.ID || len(again.Done) != 2 || !slices.Equal(again.Todo, []int{0, 2, 3, 5}) {
		t.Fatalf("Prepare after the restart: %+v, %v; want plan %s with 1 and 4 done", again, err, prep.Plan.ID)
	}
	parts := append([]sink.Part(nil), again.Done...)
	for _, i := range again.Todo {
		part, err := snapshot.Execute(ctx, db, dst, again.Plan, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
	}
	// A retried worker of partition 4 writes again; its part is the one
	// recorded first, so its own files are never committed.
	dup, err := snapshot.Execute(ctx, db, dst, again.Plan, 4, nil)
	if err != nil || string(dup.Data) != string(again.Done[1].Data) {
		t.Fatalf("retried worker: %+v, %v; want the recorded part %+v", dup, err, again.Done[1])
	}
	res, err := snapshot.CommitUsable(ctx, db, dst, again.Plan, parts, nil)
	if err != nil || res.Rows != 1000 {
		t.Fatalf("Commit: %+v, %v", res, err)
	}
	if third, err := snapshot.Prepare(ctx, db, dst, opts); err != nil || third.Existing == nil || third.Existing.LSN != prep.Plan.LSN {
		t.Fatalf("Prepare after the commit: %+v, %v; want the existing snapshot", third, err)
	}
}

// TestPartialResnapshotSurvivesPlainRerun: a plain rerun (no Resnapshot)
// while a resnapshot is partial returns the existing snapshot and keeps
// the resnapshot's records; the next resnapshot resumes it.
func TestPartialResnapshotSurvivesPlainRerun(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}}
	first, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	commitOrders(t, db, 3)
	re := opts
	re.Resnapshot = true
	p := partialAfterRows(t, db, dst, re, 1001) // ids 0..999 are partition 0, the 3 late ones the last
	if p.Replaces != first.LSN {
		t.Fatalf("the partial resnapshot replaces %s, want %s", p.Replaces, first.LSN)
	}
	plain, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil || !plain.Existing || plain.LSN != first.LSN {
		t.Fatalf("plain rerun: %+v, %v; want the existing snapshot", plain, err)
	}
	if kept, err := dst.FindPartial(ctx, "dbo_Orders"); err != nil || kept.PlanID != p.PlanID {
		t.Fatalf("the plain rerun dropped the partial resnapshot: %+v, %v", kept, err)
	}
	res, err := snapshot.Take(ctx, db, dst, re)
	if err != nil || !res.Resumed || res.LSN != p.LSN || res.PartitionsResumed != len(p.Parts) {
		t.Fatalf("resnapshot rerun: %+v, %v; want the partial one at %s resumed", res, err, p.LSN)
	}
}

// TestExpiredPlanRefused: a recorded plan past its Expires is stale at
// commit, and Prepare abandons a partial snapshot older than ResumeWithin.
func TestExpiredPlanRefused(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 100)
	dst := fake.NewMemSink()
	defer dst.Close()
	prep, err := snapshot.Prepare(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", ResumeWithin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(prep.Plan.Expires); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("Expires in %s, want an hour", d)
	}
	if err := prep.Plan.CheckUsable(ctx, db); err != nil {
		t.Fatal(err)
	}
	prep.Plan.Expires = time.Now().Add(-time.Second)
	if err := prep.Plan.CheckUsable(ctx, db); !errors.Is(err, snapshot.ErrStale) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("CheckUsable of an expired plan: %v; want ErrStale saying it expired", err)
	}
}

// TestResumeAfterCleanupBelowItsLSN: retention cleanup raises the capture
// instance's start_lsn (FACTS.md F20); while it stays at or below the
// partial snapshot's LSN + 1 the stream can still start there, and the
// rerun resumes rather than starting over.
func TestResumeAfterCleanupBelowItsLSN(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}}
	commitOrders(t, db, 3) // captured changes: the snapshot's LSN is past start_lsn
	was, err := db.CaptureInstance(ctx, "dbo_Orders")
	if err != nil {
		t.Fatal(err)
	}
	p := partialAfterRows(t, db, dst, opts, 1001) // ids 0..999 are partition 0, the 3 late ones the last
	commitOrders(t, db, 3)
	if err := db.Cleanup("dbo_Orders", p.LSN); err != nil {
		t.Fatal(err)
	}
	if now, _ := db.CaptureInstance(ctx, "dbo_Orders"); now.StartLSN == was.StartLSN {
		t.Fatalf("cleanup to %s left start_lsn at %s", p.LSN, now.StartLSN)
	}
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil || !res.Resumed || res.LSN != p.LSN {
		t.Fatalf("rerun after cleanup to the snapshot's LSN: %+v, %v; want the partial snapshot at %s resumed", res, err, p.LSN)
	}
}

// retyped is a source whose capture instance's column "note" has another
// type: ALTER COLUMN on a captured column alters the change table's column
// in place, the same instance and start_lsn (sys.sp_cdc_get_ddl_history,
// required_column_update). The fake has no ALTER COLUMN.
type retyped struct{ *fake.DB }

func (s retyped) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	ci, err := s.DB.CaptureInstance(ctx, name)
	if err == nil {
		for i := range ci.Columns {
			if ci.Columns[i].Name == "note" {
				ci.Columns[i].Length = 200
			}
		}
	}
	return ci, err
}

// TestPartialAbandonedWhenAColumnChanges: a captured column whose type
// changed under the same capture instance (same start_lsn) makes the
// partial snapshot unusable: the rerun abandons it, naming the column.
func TestPartialAbandonedWhenAColumnChanges(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 1000)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 5, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 50}}
	p := partialAfterFailure(t, db, dst, opts)
	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	res, err := snapshot.Take(ctx, retyped{db}, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed || res.PartitionsResumed != 0 || !strings.Contains(logs.String(), `the captured column \"note\" changed`) {
		t.Fatalf("rerun after a type change: %+v (partial at %s); want a new snapshot, the log naming the column:\n%s", res, p.LSN, logs.String())
	}
}
