package tdsfake_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The snapshot and stream properties of package snapshot, with the fake
// read by source/sqlserver through go-mssqldb and TDS instead of directly.

func checkImage(t testing.TB, _ context.Context, w *testworld.World, dst *fake.MemSink, what string) {
	t.Helper()
	w.CheckImage(t, dst, lsn.LSN{}, what)
}

// appender appends to a MemSink as snapshot.Poll wants.
func appender(dst *fake.MemSink) snapshot.Appender {
	return snapshot.AppendFunc(func(ctx context.Context, ci string, batch int64, rr array.RecordReader) (int64, error) {
		c, err := dst.AppendChanges(ctx, ci, batch, rr)
		return c.Version, err
	})
}

// streamTo appends the changes from from up to the max LSN through src.
func streamTo(t testing.TB, ctx context.Context, src source.Source, w *testworld.World, dst *fake.MemSink, from lsn.LSN, batch int64) lsn.LSN {
	t.Helper()
	res, err := snapshot.Poll(ctx, src, appender(dst), w.CI, from, snapshot.PollOptions{BatchID: batch})
	if err != nil {
		t.Fatal(err)
	}
	return res.Next
}

// TestBootstrapConvergesOverTheWire: with random changes committed while
// the partitions stream (between the server's pages) and after, the
// snapshot plus the changes from Bootstrap's LSN, all read through the
// wire, merged by latest image, equal the source; under READ COMMITTED and
// SNAPSHOT, with changes read from the change table and through the change
// function.
func TestBootstrapConvergesOverTheWire(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 2))
	ctx := context.Background()
	cases := 40
	if testing.Short() {
		cases = 8
	}
	for c := range cases {
		sh := testworld.Shapes(testworld.Tick)[r.IntN(len(testworld.Shapes(testworld.Tick)))]
		w := testworld.New(t, r, sh, r.IntN(150))
		stop := w.ChangeBetweenPages(t, rand.New(rand.NewPCG(r.Uint64(), 3)), r.IntN(4))
		deny := r.IntN(3) == 0
		src, _, _ := serve(t, w.DB, tdsfake.Options{PageRows: 1 + r.IntN(20), DenyChangeTables: deny}, sqlserver.Options{AllowChangeFunction: deny})
		iso := source.ReadCommitted
		if r.IntN(4) == 0 {
			iso = source.Snapshot
		}
		dst := fake.NewMemSink()
		from, _, err := snapshot.Bootstrap(ctx, src, dst, snapshot.Options{
			CaptureInstance: w.CI, Partitions: 1 + r.IntN(8), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(15), Isolation: iso},
		})
		stop()
		if err != nil {
			t.Fatalf("case %d (%s): %v", c, sh.Name, err)
		}
		for range r.IntN(10) {
			w.Change(t, r)
		}
		streamTo(t, ctx, src, w, dst, from, 1)
		checkImage(t, ctx, w, dst, fmt.Sprintf("case %d (%s, %s, change tables denied %v)", c, sh.Name, iso, deny))
		dst.Close()
	}
}

// TestBackfillCrashResumeOverTheWire: a chunked backfill through the wire,
// failed at random (a read fault in the fake, which the client sees as a
// server error; a sink fault; a cancel mid-stream, which sends ATTENTION)
// and resumed until complete, with changes streamed between attempts,
// converges.
func TestBackfillCrashResumeOverTheWire(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 13))
	ctx := context.Background()
	cases := 15
	if testing.Short() {
		cases = 4
	}
	for c := range cases {
		sh := testworld.Shapes(testworld.Tick)[r.IntN(len(testworld.Shapes(testworld.Tick)))]
		w := testworld.New(t, r, sh, 20+r.IntN(150))
		src, _, _ := serve(t, w.DB, tdsfake.Options{PageRows: 1 + r.IntN(10)}, sqlserver.Options{})
		dst := fake.NewMemSink()
		opts := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 1 + r.Int64N(30), WaveChunks: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(10)}}
		from, _, err := snapshot.BootstrapBackfill(ctx, src, dst, opts)
		if err != nil {
			t.Fatal(err)
		}
		next := from
		batch := int64(0)
		boom := fmt.Errorf("case %d: %w", c, fake.ErrInjected)
		failures := 0
		for attempt := 0; ; attempt++ {
			if attempt > 500 {
				t.Fatalf("case %d: no progress after %d attempts", c, attempt)
			}
			w.Change(t, r)
			cctx, cancel := context.WithCancel(ctx)
			clear := w.InjectFault(r, dst, boom, cancel)
			res, err := snapshot.Backfill(cctx, src, dst, opts)
			cancel()
			clear()
			batch++
			next = streamTo(t, ctx, src, w, dst, next, batch)
			if err != nil {
				failures++
				continue
			}
			if res.Complete {
				break
			}
		}
		batch++
		streamTo(t, ctx, src, w, dst, next, batch)
		checkImage(t, ctx, w, dst, fmt.Sprintf("case %d (%s, %d failures)", c, sh.Name, failures))
		dst.Close()
	}
}

// TestPollAcrossDataLossOverTheWire: retention cleanup passes the stream's
// position between the source's check of the minimum LSN and its change
// read, so SQL Server's change function answers error 313 (an ERROR
// token): the source reports a *source.DataLossError, Poll re-snapshots,
// and the table converges.
func TestPollAcrossDataLossOverTheWire(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 21))
	ctx := context.Background()
	w := testworld.New(t, r, testworld.Shapes(testworld.Tick)[0], 80)
	var armed atomic.Bool
	var cleaned atomic.Int32
	hook := func(ctx context.Context, sql string) {
		if armed.Load() && strings.Contains(sql, "fn_cdc_get_all_changes_") {
			armed.Store(false)
			max, err := w.DB.MaxLSN(ctx)
			if err == nil && w.DB.Cleanup(w.CI, max) == nil {
				cleaned.Add(1)
			}
		}
	}
	src, srv, _ := serve(t, w.DB, tdsfake.Options{DenyChangeTables: true, BeforeServe: hook}, sqlserver.Options{AllowChangeFunction: true})
	dst := fake.NewMemSink()
	defer dst.Close()
	from, _, err := snapshot.Bootstrap(ctx, src, dst, snapshot.Options{CaptureInstance: w.CI, Partitions: 3, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		w.Change(t, r)
	}
	armed.Store(true)
	var loss *source.DataLossError
	_, err = snapshot.Poll(ctx, src, appender(dst), w.CI, from, snapshot.PollOptions{BatchID: 1})
	if !errors.As(err, &loss) || !strings.Contains(err.Error(), "313") || cleaned.Load() != 1 {
		t.Fatalf("poll across a cleanup: %v (cleanups %d), want a *source.DataLossError from error 313", err, cleaned.Load())
	}
	var sawError313 bool
	for _, req := range srv.Requests() {
		sawError313 = sawError313 || strings.Contains(req.SQL, "fn_cdc_get_all_changes_")
	}
	if !sawError313 {
		t.Fatal("no change-function read reached the server")
	}
	res, err := snapshot.Poll(ctx, src, appender(dst), w.CI, from, snapshot.PollOptions{BatchID: 1,
		OnDataLoss: snapshot.ResnapshotOnDataLoss(src, dst, snapshot.Options{CaptureInstance: w.CI, Partitions: 2, MinPartitionRows: -1})})
	if err != nil || res.DataLoss == nil {
		t.Fatalf("poll with a re-snapshot: %+v, %v", res, err)
	}
	for range 10 {
		w.Change(t, r)
	}
	streamTo(t, ctx, src, w, dst, res.Next, 2)
	// The re-snapshot supersedes what came before it: the image of its
	// rows and the changes after it equals the source.
	s, _ := res.Next.Prev()
	w.CheckImage(t, dst, s, "after the re-snapshot")
}
