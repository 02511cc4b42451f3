package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// ordersTable creates dbo.<name> with rows rows (id 1..rows, an item) and
// its capture instance dbo_<name> in db.
func ordersTable(tb testing.TB, db *fake.DB, name string, rows int) string {
	tb.Helper()
	data := make([]fake.Row, rows)
	for i := range data {
		data[i] = fake.Row{int64(i + 1), fmt.Sprintf("item %d", i)}
	}
	ci := "dbo_" + name
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: name, Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}},
		Rows:    data, CaptureInstance: ci}); err != nil {
		tb.Fatal(err)
	}
	return ci
}

// tokenCounter is a snapshot.Limiter that grants every wait and counts the
// tokens taken; safe for concurrent use.
type tokenCounter struct {
	burst int
	mu    sync.Mutex
	taken int64
	waits int
	over  int // waits for more than burst tokens
}

func (c *tokenCounter) WaitN(ctx context.Context, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taken += int64(n)
	c.waits++
	if n > c.burst {
		c.over++
	}
	return ctx.Err()
}

func (c *tokenCounter) Burst() int { return c.burst }

// TestSharedLimiterCountsEveryRow: two snapshots and a backfill sharing one
// limiter take exactly one token per row read, never more than its burst
// at once (batches are five times the burst), with and without read-ahead.
func TestSharedLimiterCountsEveryRow(t *testing.T) {
	ctx := context.Background()
	for _, readAhead := range []int{-1, 0, 3} {
		db := fake.New(fake.Options{})
		a, b, c := ordersTable(t, db, "a", 700), ordersTable(t, db, "b", 333), ordersTable(t, db, "c", 250)
		shared := &tokenCounter{burst: 20}
		var wg sync.WaitGroup
		results := make([]snapshot.Result, 2)
		errs := make([]error, 3)
		for i, ci := range []string{a, b} {
			wg.Go(func() {
				results[i], errs[i] = snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{
					CaptureInstance: ci, Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 100, ReadAhead: readAhead}, RunOptions: snapshot.RunOptions{Limiter: shared}})
			})
		}
		var bf snapshot.BackfillResult
		wg.Go(func() {
			bf, errs[2] = snapshot.Backfill(ctx, db, fake.NewMemSink(), snapshot.BackfillOptions{
				CaptureInstance: c, Chunks: 3, ReadOptions: snapshot.ReadOptions{BatchRows: 100, ReadAhead: readAhead}, RunOptions: snapshot.RunOptions{Limiter: shared}})
		})
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if results[0].Rows != 700 || results[1].Rows != 333 || bf.Rows != 250 {
			t.Fatalf("read ahead %d: rows %d, %d, %d; want 700, 333, 250", readAhead, results[0].Rows, results[1].Rows, bf.Rows)
		}
		if shared.taken != 700+333+250 || shared.over > 0 {
			t.Fatalf("read ahead %d: %d tokens taken in %d waits (%d above the burst), want %d", readAhead, shared.taken, shared.waits, shared.over, 700+333+250)
		}
	}
}

// blockingLimiter grants nothing: every wait lasts until ctx is done. The
// first wait closes waiting.
type blockingLimiter struct {
	once    sync.Once
	waiting chan struct{}
}

func (l *blockingLimiter) WaitN(ctx context.Context, _ int) error {
	l.once.Do(func() { close(l.waiting) })
	<-ctx.Done()
	return ctx.Err()
}

func (l *blockingLimiter) Burst() int { return 10 }

// TestLimiterWaitCancelled: a snapshot waiting for its row budget ends
// when its context is cancelled, with an error wrapping context.Canceled,
// and commits nothing (goleak checks that no reader goroutine is left).
func TestLimiterWaitCancelled(t *testing.T) {
	for _, readAhead := range []int{-1, 2} {
		db := fake.New(fake.Options{})
		ci := ordersTable(t, db, "orders", 100)
		dst := fake.NewMemSink()
		l := &blockingLimiter{waiting: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-l.waiting
			cancel()
		}()
		_, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: ci, Partitions: 2, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{ReadAhead: readAhead}, RunOptions: snapshot.RunOptions{Limiter: l}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read ahead %d: Take returned %v, want context.Canceled", readAhead, err)
		}
		if _, err := dst.FindSnapshot(context.Background(), ci); !errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("read ahead %d: the sink holds a snapshot after a cancelled read (%v)", readAhead, err)
		}
		dst.Close()
	}
}

// TestRowsPerSecond: a per-snapshot limit reads every row (batches larger
// than its burst wait in pieces); a negative one is refused before any
// I/O.
func TestRowsPerSecond(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	ci := ordersTable(t, db, "orders", 3000)
	res, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: ci, Partitions: 2, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 1500}, RunOptions: snapshot.RunOptions{RowsPerSecond: 100_000}})
	if err != nil || res.Rows != 3000 {
		t.Fatalf("Take: %d rows, %v; want 3000", res.Rows, err)
	}
	db.FailNext(fake.OpCaptureInstance, errors.New("the options must be refused before any I/O"))
	defer db.ClearFaults()
	if _, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: ci, RunOptions: snapshot.RunOptions{RowsPerSecond: -1}}); !errors.Is(err, snapshot.ErrInvalidOptions) {
		t.Fatalf("RowsPerSecond -1: %v, want ErrInvalidOptions", err)
	}
	if _, err := snapshot.Backfill(ctx, db, fake.NewMemSink(), snapshot.BackfillOptions{CaptureInstance: ci, RunOptions: snapshot.RunOptions{RowsPerSecond: -1}}); !errors.Is(err, snapshot.ErrInvalidOptions) {
		t.Fatalf("Backfill RowsPerSecond -1: %v, want ErrInvalidOptions", err)
	}
}

// BenchmarkThrottle reads snapshots under a rows-per-second limit for
// about two seconds an iteration and reports the rate achieved
// (rows/s) and its ratio to the limit (rate/limit, which should stay
// within 0.9..1.1): "per-snapshot" is Options.RowsPerSecond on one
// snapshot, "shared" a rate.Limiter shared by two snapshots read at once.
// Run it alone: go test -run '^$' -bench Throttle -benchtime 2x ./snapshot/
func BenchmarkThrottle(b *testing.B) {
	const limit = 50_000
	ctx := context.Background()
	b.Run("per-snapshot", func(b *testing.B) {
		db := fake.New(fake.Options{})
		ci := ordersTable(b, db, "orders", 2*limit)
		var rows int64
		b.ResetTimer()
		for range b.N {
			dst := fake.NewMemSink()
			res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: ci, Partitions: 4, MinPartitionRows: -1, RunOptions: snapshot.RunOptions{RowsPerSecond: limit}})
			if err != nil {
				b.Fatal(err)
			}
			rows += res.Rows
			dst.Close()
		}
		reportRate(b, rows, limit)
	})
	b.Run("shared", func(b *testing.B) {
		db := fake.New(fake.Options{})
		cis := []string{ordersTable(b, db, "a", limit), ordersTable(b, db, "b", limit)}
		l := rate.NewLimiter(limit, limit/10)
		l.AllowN(time.Now(), limit/10) // start empty, as RowsPerSecond's does
		var rows int64
		var mu sync.Mutex
		b.ResetTimer()
		for range b.N {
			var wg sync.WaitGroup
			for _, ci := range cis {
				wg.Go(func() {
					dst := fake.NewMemSink()
					defer dst.Close()
					res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: ci, Partitions: 2, MinPartitionRows: -1, RunOptions: snapshot.RunOptions{Limiter: l}})
					if err != nil {
						b.Error(err)
					}
					mu.Lock()
					rows += res.Rows
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		reportRate(b, rows, limit)
	})
}

func reportRate(b *testing.B, rows int64, limit float64) {
	r := float64(rows) / b.Elapsed().Seconds()
	b.ReportMetric(r, "rows/s")
	b.ReportMetric(r/limit, "rate/limit")
}
