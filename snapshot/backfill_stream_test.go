package snapshot_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

func memAppender(dst *fake.MemSink) snapshot.Appender {
	return snapshot.AppendFunc(func(ctx context.Context, ci string, batch int64, rr array.RecordReader) (int64, error) {
		c, err := dst.AppendChanges(ctx, ci, batch, rr)
		return c.Version, err
	})
}

// imageFrom merges the sink's rows whose _start_lsn is at or above from:
// how downstream rebuilds after a re-snapshot at from.
func imageFrom(t testing.TB, _ context.Context, w *testworld.World, dst *fake.MemSink, from lsn.LSN) *snapshot.Image {
	t.Helper()
	return w.SinkImage(t, dst, from)
}

// TestPollDataLossResnapshot: a stream polled from a snapshot, with
// retention cleanup purging changes it has not read, reports
// *source.DataLossError (the requested LSN and the min LSN) without
// OnDataLoss, and with it re-snapshots (whole or chunked) and continues; the
// rows at or above the newest snapshot's LSN then merge to the source.
func TestPollDataLossResnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 21))
	ctx := context.Background()
	for c := range *casesFlag / 3 {
		sh := shapes()[r.IntN(len(shapes()))]
		w := testworld.New(t, r, sh, r.IntN(80))
		dst := fake.NewMemSink()
		app := memAppender(dst)
		chunked := r.IntN(2) == 0
		bopts := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 1 + r.Int64N(20), WaveChunks: 1 + r.IntN(3)}
		var next lsn.LSN
		var err error
		if chunked {
			next, _, err = snapshot.BootstrapBackfill(ctx, w.DB, dst, bopts)
		} else {
			next, _, err = snapshot.Bootstrap(ctx, w.DB, dst, snapshot.Options{CaptureInstance: w.CI})
		}
		if err != nil {
			t.Fatal(err)
		}
		newest := next
		batch := int64(0)
		lost := false
		for round := range 8 + r.IntN(8) {
			for range r.IntN(5) {
				w.Change(t, r)
			}
			if chunked && r.IntN(2) == 0 {
				o := bopts
				o.MaxWaves = 1
				if _, err := snapshot.Backfill(ctx, w.DB, dst, o); err != nil {
					t.Fatal(err)
				}
			}
			if !lost && round > 2 && r.IntN(3) == 0 {
				// Retention purges everything up to the max LSN: the
				// stream's next LSN is below the new minimum.
				w.Change(t, r)
				m, _ := w.DB.MaxLSN(ctx)
				if err := w.DB.Cleanup("", m); err != nil {
					t.Fatal(err)
				}
				_, err := snapshot.Poll(ctx, w.DB, app, w.CI, next, snapshot.PollOptions{BatchID: batch + 1})
				var dl *source.DataLossError
				switch {
				case m.Less(next): // nothing committed since the last poll: nothing lost
					if err != nil {
						t.Fatalf("case %d: poll after a cleanup below it: %v", c, err)
					}
				case !errors.As(err, &dl) || !errors.Is(err, source.ErrDataLoss) || dl.Requested != next || dl.MinLSN != m:
					t.Fatalf("case %d: poll after cleanup: %v, want a DataLossError for %s with min LSN %s", c, err, next, m)
				default:
					lost = true
				}
				for range r.IntN(3) {
					w.Change(t, r) // changes the re-snapshot must see
				}
			}
			opts := snapshot.PollOptions{BatchID: batch + 1, OnDataLoss: snapshot.ResnapshotOnDataLoss(w.DB, dst, snapshot.Options{CaptureInstance: w.CI})}
			if chunked {
				opts.OnDataLoss = snapshot.BackfillOnDataLoss(w.DB, dst, bopts)
			}
			res, err := snapshot.Poll(ctx, w.DB, app, w.CI, next, opts)
			if err != nil {
				t.Fatalf("case %d round %d: %v", c, round, err)
			}
			if res.DataLoss != nil {
				newest = res.Next
			}
			if res.Appended {
				batch++
			}
			next = res.Next
		}
		if chunked {
			if res, err := snapshot.Backfill(ctx, w.DB, dst, bopts); err != nil || !res.Complete {
				t.Fatalf("case %d: %+v, %v", c, res, err)
			}
		}
		if _, err := snapshot.Poll(ctx, w.DB, app, w.CI, next, snapshot.PollOptions{BatchID: batch + 1}); err != nil {
			t.Fatal(err)
		}
		want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := newest.Prev()
		if d := want.Diff(imageFrom(t, ctx, w, dst, s), 5); len(d) > 0 {
			t.Fatalf("case %d (%s, chunked %v, data loss %v): rebuilt image differs from the source:\n%s", c, sh.Name, chunked, lost, strings.Join(d, "\n"))
		}
		dst.Close()
	}
}

// TestPollQuiet: a poll with nothing new appends nothing and keeps its LSN;
// a batch appended twice is appended once.
func TestPollQuiet(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{}, 3)
	dst := fake.NewMemSink()
	defer dst.Close()
	from, _, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := snapshot.Poll(ctx, db, memAppender(dst), "dbo_Orders", from, snapshot.PollOptions{BatchID: 1})
	if err != nil || res.Appended || res.Next != from {
		t.Fatalf("quiet poll: %+v, %v", res, err)
	}
	tx := db.Begin()
	_ = tx.Update("dbo", "orders", []any{int64(1)}, fake.Row{int64(1), "changed"})
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err = snapshot.Poll(ctx, db, memAppender(dst), "dbo_Orders", from, snapshot.PollOptions{BatchID: 1})
		if err != nil || !res.Appended || res.Rows != 2 {
			t.Fatalf("poll: %+v, %v; want the update's two rows", res, err)
		}
	}
	n := 0
	for _, c := range dst.Commits() {
		if c.Kind == "changes" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d change commits, want 1", n)
	}
}
