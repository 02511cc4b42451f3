package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// openFDs counts the process's open file descriptors (Linux).
func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(es)
}

// TestSourceFaultsLeakNothing fails the source mid-read (a connection
// error after N rows, an error from a page, a canceled context, a
// deadline) while partitions are read in parallel into a local folder
// table: the Take returns the fault, commits nothing (the table's version
// and snapshots are unchanged), and once the table is closed no goroutine
// and no open file is left.
func TestSourceFaultsLeakNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 40))
	ctx := context.Background()
	ignore := goleak.IgnoreCurrent()
	// Warm up (a whole Take into a folder table) so that what the runtime
	// opens once (epoll, random) is in the baseline.
	{
		w := testworld.New(t, r, shapes()[0], 50)
		tb, err := blobstore.Open(ctx, t.TempDir(), delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI}); err != nil {
			t.Fatal(err)
		}
		tb.Close()
	}
	runtime.GC()
	baseFDs := openFDs(t)
	kinds := []string{"connection error after N rows", "error from a page", "context canceled mid-read", "deadline mid-read"}
	ty := newTally()
	for c := range cases(24) {
		kind := kinds[c%len(kinds)]
		w := testworld.New(t, r, shapes()[r.IntN(len(shapes()))], 50+r.IntN(200))
		dir := t.TempDir()
		tb, err := blobstore.Open(ctx, dir, delta.Options{TargetFileSize: 2048})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.AppendChanges(ctx, "dbo_other", 1, emptyReader(t, bronze(t, w))); err != nil {
			t.Fatal(err)
		}
		v0, _ := tb.Version(ctx)
		tctx, cancel := context.WithCancel(ctx)
		var want error
		var pages atomic.Int64
		k := int64(1 + r.IntN(8))
		switch kind {
		case "connection error after N rows":
			w.DB.FailReadAfter(int64(r.IntN(50)), errBoom)
			want = errBoom
		case "error from a page":
			w.DB.SetPageHook(func(context.Context, fake.Page) error {
				if pages.Add(1) == k {
					return errBoom
				}
				return nil
			})
			want = errBoom
		case "context canceled mid-read":
			w.DB.SetPageHook(func(context.Context, fake.Page) error {
				if pages.Add(1) == k {
					cancel()
				}
				return nil
			})
			want = context.Canceled
		case "deadline mid-read":
			cancel()
			tctx, cancel = context.WithTimeout(ctx, time.Hour)
			w.DB.SetPageHook(func(ctx context.Context, _ fake.Page) error {
				if pages.Add(1) == k {
					// Block until the deadline passes.
					c2, c2cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
					defer c2cancel()
					<-c2.Done()
					return context.DeadlineExceeded
				}
				return nil
			})
			want = context.DeadlineExceeded
		}
		_, err = snapshot.Take(tctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI, Partitions: 4, MinPartitionRows: -1, Parallelism: 4, ReadOptions: snapshot.ReadOptions{BatchRows: 5}})
		cancel()
		w.DB.SetPageHook(nil)
		w.DB.ClearFaults()
		ok := errors.Is(err, want)
		if !ok {
			t.Errorf("case %d (%s): Take returned %v, want %v", c, kind, err, want)
		}
		if v, _ := tb.Version(ctx); v != v0 {
			t.Errorf("case %d (%s): the table went from version %d to %d", c, kind, v0, v)
			ok = false
		}
		if s := instanceSnapshots(t, ctx, tb, w.CI); len(s) != 0 {
			t.Errorf("case %d (%s): a failed Take left a snapshot: %+v", c, kind, s)
			ok = false
		}
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("case %d (%s): goroutines leaked: %v", c, kind, err)
			ok = false
		}
		runtime.GC()
		fds := openFDs(t)
		if fds > baseFDs {
			t.Errorf("case %d (%s): %d open files, %d before", c, kind, fds, baseFDs)
			ok = false
		}
		ty.add(fmt.Sprint("source fault: ", kind), true, ok)
		if t.Failed() {
			break
		}
	}
	ty.report(t, "source faults (no goroutine, no open file left)")
}
