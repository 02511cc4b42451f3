package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// streamer is a stream started from a chunked snapshot's S: each poll
// appends the changes from next up to the current max LSN as one batch.
type streamer struct {
	next  lsn.LSN
	batch int64
}

func (s *streamer) poll(t testing.TB, ctx context.Context, w *testworld.World, dst *fake.MemSink) {
	t.Helper()
	to, err := w.DB.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if to.Less(s.next) {
		return
	}
	s.batch++
	rr, err := snapshot.Changes(ctx, w.DB, w.CI, s.next, to, s.batch)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if _, err := dst.AppendChanges(ctx, w.CI, s.batch, rr); err != nil {
		t.Fatal(err)
	}
	if s.next, err = to.Next(); err != nil {
		t.Fatal(err)
	}
}

// checkChunks checks the sink's chunked commits: every chunk of the plan
// committed exactly once, in order, its rows stamped with _snapshot = S,
// _chunk = its number and a _start_lsn at or above S, and FindSnapshot
// (whole snapshots) not seeing it.
func checkChunks(t testing.TB, ctx context.Context, dst *fake.MemSink, ci string, res snapshot.BackfillResult) {
	t.Helper()
	var seen []int
	for _, c := range dst.Commits() {
		if c.Kind == "chunks" && c.Chunked.PlanID == res.PlanID {
			seen = append(seen, c.Chunks...)
		}
	}
	for i, c := range seen {
		if c != i {
			t.Fatalf("chunks committed in the order %v, want each of 0..%d once", seen, res.Chunks-1)
		}
	}
	if len(seen) != res.Committed {
		t.Fatalf("%d chunks in commits, the result says %d", len(seen), res.Committed)
	}
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	s := res.LSN.String()
	for _, r := range rows {
		if r[sink.ColOperation] != int64(0) {
			continue
		}
		ch, ok := r[sink.ColChunk].(int64)
		if r[sink.ColSnapshot] != s || !ok || ch < 0 || ch >= int64(res.Committed) || r[sink.ColStartLSN].(string) < s {
			t.Fatalf("snapshot row %v: want _snapshot %s, a committed _chunk and _start_lsn >= S", r, s)
		}
	}
	if _, err := dst.FindSnapshot(ctx, ci); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("FindSnapshot found %v: a whole-snapshot lookup must ignore chunked snapshots", err)
	}
}

// TestBackfillConverges: with random changes committed during the waves
// (between pages of the chunks' reads) and between waves, and a stream
// polled from S between waves, the chunks plus the change rows merged by
// latest image equal the source table. Until the snapshot completes,
// BootstrapBackfill returns S, never a newer LSN.
func TestBackfillConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 11))
	ctx := context.Background()
	for c := range *casesFlag {
		sh := shapes()[r.IntN(len(shapes()))]
		w := testworld.New(t, r, sh, r.IntN(150))
		stop := w.ChangeBetweenPages(t, rand.New(rand.NewPCG(r.Uint64(), 12)), r.IntN(3))
		dst := fake.NewMemSink()
		opts := snapshot.BackfillOptions{
			CaptureInstance: w.CI, WaveChunks: 1 + r.IntN(4), Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(15)}, MaxWaves: 1 + r.IntN(2),
		}
		if r.IntN(2) == 0 {
			opts.ChunkRows = 1 + r.Int64N(40)
		} else {
			opts.Chunks = 1 + r.IntN(12)
		}
		if r.IntN(4) == 0 {
			opts.Isolation = source.Snapshot
		}
		from, open, err := snapshot.BootstrapBackfill(ctx, w.DB, dst, opts)
		if err != nil {
			t.Fatalf("case %d (%s): %v", c, sh.Name, err)
		}
		if open.Complete || open.Committed != 0 || open.Resumed {
			t.Fatalf("case %d: a new chunked snapshot: %+v", c, open)
		}
		st := &streamer{next: from}
		var res snapshot.BackfillResult
		for wave := 0; ; wave++ {
			for range r.IntN(4) {
				w.Change(t, r)
			}
			if r.IntN(2) == 0 {
				st.poll(t, ctx, w, dst)
			}
			if again, res, err := snapshot.BootstrapBackfill(ctx, w.DB, dst, opts); err != nil || again != from || res.LSN != open.LSN {
				t.Fatalf("case %d wave %d: bootstrap returned %s (%+v, %v), want %s: the S of the open snapshot", c, wave, again, res, err, from)
			}
			res, err = snapshot.Backfill(ctx, w.DB, dst, opts)
			if err != nil {
				t.Fatalf("case %d (%s) wave %d: %v", c, sh.Name, wave, err)
			}
			if res.LSN != open.LSN || res.PlanID != open.PlanID {
				t.Fatalf("case %d: wave %d resumed %+v, want the snapshot opened at %s", c, wave, res, open.LSN)
			}
			if res.Complete {
				break
			}
			if wave > 10000 {
				t.Fatalf("case %d: no progress: %+v", c, res)
			}
		}
		stop()
		for range r.IntN(5) {
			w.Change(t, r)
		}
		st.poll(t, ctx, w, dst)
		checkChunks(t, ctx, dst, w.CI, res)
		want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		if d := want.Diff(sinkImage(t, ctx, w, dst), 5); len(d) > 0 {
			t.Fatalf("case %d (%s, %+v): latest image differs from the source:\n%s", c, sh.Name, opts, strings.Join(d, "\n"))
		}
		// Complete: a rerun reads nothing and returns the same S.
		again, err := snapshot.Backfill(ctx, w.DB, dst, opts)
		if err != nil || !again.Existing || again.LSN != res.LSN {
			t.Fatalf("case %d: rerun after completion: %+v, %v", c, again, err)
		}
		dst.Close()
	}
}

// TestBackfillCrashResume: failures injected while a wave reads, while it
// writes and when it commits, and cancellations, never commit a chunk
// twice; reruns resume at the first uncommitted chunk and converge.
func TestBackfillCrashResume(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 13))
	ctx := context.Background()
	for c := range *casesFlag / 2 {
		sh := shapes()[r.IntN(len(shapes()))]
		w := testworld.New(t, r, sh, 20+r.IntN(150))
		dst := fake.NewMemSink()
		opts := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 1 + r.Int64N(30), WaveChunks: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(10)}}
		from, _, err := snapshot.BootstrapBackfill(ctx, w.DB, dst, opts)
		if err != nil {
			t.Fatal(err)
		}
		st := &streamer{next: from}
		boom := fmt.Errorf("case %d: %w", c, fake.ErrInjected)
		var res snapshot.BackfillResult
		failures := 0
		for attempt := 0; ; attempt++ {
			if attempt > 1000 {
				t.Fatalf("case %d: no progress after %d attempts: %+v", c, attempt, res)
			}
			w.Change(t, r)
			cctx, cancel := context.WithCancel(ctx)
			clear := w.InjectFault(r, dst, boom, cancel)
			res, err = snapshot.Backfill(cctx, w.DB, dst, opts)
			cancel()
			clear()
			if err != nil {
				if !errors.Is(err, fake.ErrInjected) && !errors.Is(err, context.Canceled) {
					t.Fatalf("case %d: %v", c, err)
				}
				failures++
				st.poll(t, ctx, w, dst)
				continue
			}
			if res.Complete {
				break
			}
		}
		st.poll(t, ctx, w, dst)
		found, err := dst.FindChunked(ctx, strings.ToUpper(w.CI))
		if next, _ := found.LSN.Next(); err != nil || !found.Complete || found.PlanID != res.PlanID || next != from {
			t.Fatalf("case %d: FindChunked = %+v, %v", c, found, err)
		}
		checkChunks(t, ctx, dst, w.CI, res)
		want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		if d := want.Diff(sinkImage(t, ctx, w, dst), 5); len(d) > 0 {
			t.Fatalf("case %d (%s, %d failures): latest image differs from the source:\n%s", c, sh.Name, failures, strings.Join(d, "\n"))
		}
		dst.Close()
	}
}

// TestBackfillEvenChunks: on sparse and skewed integer keys (and the other
// shapes), chunks of ChunkRows hold exactly that many rows but the last,
// and Chunks NTILE-equal chunks from an exact row count differ by at most
// one row; planning reads each key at most once plus one per seek and key
// column.
func TestBackfillEvenChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 14))
	ctx := context.Background()
	for c := range *casesFlag / 2 {
		sh := shapes()[r.IntN(len(shapes()))]
		var w *testworld.World
		if c%2 == 0 {
			// Skewed and sparse bigint keys: a dense run, a few far away.
			sh = shapes()[0]
			w = testworld.New(t, r, sh, 0)
			var rows []fake.Row
			for i := range 50 + r.IntN(150) {
				id := int64(i)
				if r.IntN(5) == 0 {
					id = 1<<40 + r.Int64N(1<<50)
				}
				k := w.CollationKey(t, []any{id})
				if w.Keys[k] {
					continue
				}
				w.Keys[k] = true
				rows = append(rows, fake.Row{id, "x", nil, nil})
			}
			if _, err := w.DB.Load("dbo", sh.Name, rows...); err != nil {
				t.Fatal(err)
			}
		} else {
			w = testworld.New(t, r, sh, r.IntN(150))
		}
		n := len(w.Keys)
		opts := snapshot.BackfillOptions{CaptureInstance: w.CI, WaveChunks: 1 + r.IntN(5)}
		if r.IntN(2) == 0 {
			opts.ChunkRows = 1 + r.Int64N(30)
		} else {
			opts.Chunks = 1 + r.IntN(20)
		}
		dst := fake.NewMemSink()
		w.DB.ResetStats()
		res, err := snapshot.Backfill(ctx, w.DB, dst, opts)
		if err != nil || !res.Complete || res.Rows != int64(n) {
			t.Fatalf("case %d (%s, %d rows): %+v, %v", c, sh.Name, n, res, err)
		}
		sizes := make([]int64, res.Chunks)
		rows, err := dst.Rows()
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			sizes[row[sink.ColChunk].(int64)]++
		}
		if opts.ChunkRows > 0 {
			for i, s := range sizes {
				if (i < len(sizes)-1 && s != opts.ChunkRows) || s > opts.ChunkRows {
					t.Fatalf("case %d (%s, %d rows, %d per chunk): chunk sizes %v", c, sh.Name, n, opts.ChunkRows, sizes)
				}
			}
			if want := max(1, (n+int(opts.ChunkRows)-1)/int(opts.ChunkRows)); len(sizes) != want {
				t.Fatalf("case %d: %d chunks of %d for %d rows, want %d", c, len(sizes), opts.ChunkRows, n, want)
			}
		} else {
			lo, hi := slices.Min(sizes), slices.Max(sizes)
			if hi-lo > 1 || (n > 1 && len(sizes) != min(opts.Chunks, n)) {
				t.Fatalf("case %d (%s, %d rows, %d chunks): chunk sizes %v", c, sh.Name, n, opts.Chunks, sizes)
			}
		}
		st, _ := w.DB.Stats("dbo", sh.Name)
		if limit := int64(n) + st.Seeks*int64(len(sh.Key)); st.KeysExamined > limit {
			t.Fatalf("case %d (%s): planning examined %d keys for %d rows and %d seeks", c, sh.Name, st.KeysExamined, n, st.Seeks)
		}
		if st.RowsExamined != int64(n) {
			t.Fatalf("case %d (%s): the chunks examined %d rows for %d", c, sh.Name, st.RowsExamined, n)
		}
		dst.Close()
	}
}

// TestBackfillResnapshot: Resnapshot opens a new chunked snapshot at a
// newer S next to a complete one, and next to an open one; whole
// snapshots and chunked ones never see each other.
func TestBackfillResnapshot(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 40)
	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_Orders", ChunkRows: 10, WaveChunks: 1, MaxWaves: 1}
	first, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || first.Complete || first.Committed != 1 || first.Chunks != 4 {
		t.Fatalf("first wave: %+v, %v", first, err)
	}
	tx := db.Begin()
	_ = tx.Insert("dbo", "orders", fake.Row{int64(1000), "new"})
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	opts.Resnapshot, opts.MaxWaves = true, 0
	second, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || !second.Complete || second.Resumed || second.PlanID == first.PlanID || !first.LSN.Less(second.LSN) || second.Rows != 41 {
		t.Fatalf("resnapshot: %+v, %v (first %+v)", second, err, first)
	}
	if _, err := dst.FindSnapshot(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("FindSnapshot = %v, want ErrNotFound next to chunked snapshots", err)
	}
	whole, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders"})
	if err != nil || whole.Existing {
		t.Fatalf("whole snapshot next to chunked ones: %+v, %v", whole, err)
	}
	opts.Resnapshot = false
	again, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || !again.Existing || again.PlanID != second.PlanID {
		t.Fatalf("rerun: %+v, %v; want the complete second one", again, err)
	}
	if _, err := snapshot.Backfill(ctx, db, dst, snapshot.BackfillOptions{CaptureInstance: "dbo_Orders", ChunkRows: -1}); !errors.Is(err, snapshot.ErrInvalidOptions) {
		t.Fatalf("negative ChunkRows: %v", err)
	}
}
