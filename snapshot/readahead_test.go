package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
)

// seqReader yields batches of one int64 column, 0, 1, 2, ... one
// value per batch, until n (then fails with err, if set). When block is
// set, Next waits for ctx after the last batch instead of ending, like a
// source stuck on the network.
type seqReader struct {
	ctx      context.Context
	mem      memory.Allocator
	n        int
	err      error
	block    bool
	nexts    atomic.Int64
	refs     atomic.Int64
	cur      arrow.RecordBatch
	failure  error
	released chan error // receives ctx.Err() at the last Release
}

var seqSchema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

func newSeqReader(ctx context.Context, mem memory.Allocator, n int) *seqReader {
	r := &seqReader{ctx: ctx, mem: mem, n: n, released: make(chan error, 1)}
	r.refs.Store(1)
	return r
}

func (r *seqReader) Schema() *arrow.Schema { return seqSchema }
func (r *seqReader) Retain()               { r.refs.Add(1) }
func (r *seqReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.released <- r.ctx.Err()
}
func (r *seqReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *seqReader) Record() arrow.RecordBatch      { return r.cur }
func (r *seqReader) Err() error                     { return r.failure }

func (r *seqReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	i := int(r.nexts.Add(1)) - 1
	if i >= r.n {
		switch {
		case r.block:
			<-r.ctx.Done()
			r.failure = r.ctx.Err()
		case r.err != nil:
			r.failure = r.err
		}
		return false
	}
	b := array.NewInt64Builder(r.mem)
	defer b.Release()
	b.Append(int64(i))
	col := b.NewArray()
	defer col.Release()
	r.cur = array.NewRecordBatch(seqSchema, []arrow.Array{col}, 1)
	return true
}

// startReadAhead reads n batches (from an allocator that must be empty
// when the test ends) depth batches ahead; setup, if set, configures the
// input before the goroutine starts.
func startReadAhead(t *testing.T, n, depth int, setup func(*seqReader)) (*readAheadReader, *seqReader) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in := newSeqReader(ctx, mem, n)
	if setup != nil {
		setup(in)
	}
	return newReadAhead(in, depth, cancel), in
}

// TestReadAheadDelivers: every batch once, in order, the input's error at
// the end, no memory left and the read's context not cancelled when the
// input is released (SQL Server keeps its connection then).
func TestReadAheadDelivers(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name  string
		n     int
		depth int
		err   error
	}{
		{"empty", 0, 2, nil},
		{"one batch", 1, 2, nil},
		{"many batches, depth 1", 50, 1, nil},
		{"many batches, depth 2", 50, 2, nil},
		{"many batches, deep", 50, 64, nil},
		{"error after 7 batches", 7, 2, errors.New("connection reset")},
		{"error before any batch", 0, 3, errors.New("permission denied")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ra, in := startReadAhead(t, tc.n, tc.depth, func(in *seqReader) { in.err = tc.err })
			var got []int64
			for ra.Next() {
				rec := ra.RecordBatch()
				got = append(got, rec.Column(0).(*array.Int64).Value(0))
			}
			if !errors.Is(ra.Err(), tc.err) || (tc.err == nil) != (ra.Err() == nil) {
				t.Errorf("Err() = %v, want %v", ra.Err(), tc.err)
			}
			if len(got) != tc.n {
				t.Fatalf("got %d batches, want %d", len(got), tc.n)
			}
			for i, v := range got {
				if v != int64(i) {
					t.Fatalf("batch %d holds %d: out of order", i, v)
				}
			}
			ra.Release()
			if err := <-in.released; err != nil {
				t.Errorf("the read's context was %v when the input was released after its end; want it live", err)
			}
			if in.ctx.Err() == nil {
				t.Error("the read's context is still live after Release; want it cancelled")
			}
		})
	}
}

// TestReadAheadBounded: the goroutine stays at most depth batches ahead of
// a consumer that does not read (plus the one it is waiting to hand over).
func TestReadAheadBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, depth := range []int{1, 2, 5} {
		ra, in := startReadAhead(t, 1000, depth, nil)
		want := int64(depth + 1)
		deadline := time.Now().Add(10 * time.Second)
		for in.nexts.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // room to overrun, if it could
		if got := in.nexts.Load(); got != want {
			t.Errorf("depth %d: the input's Next was called %d times with no consumer; want %d", depth, got, want)
		}
		if !ra.Next() || ra.RecordBatch().Column(0).(*array.Int64).Value(0) != 0 {
			t.Fatalf("depth %d: first batch missing", depth)
		}
		ra.Release() // stops early: cancels, drains
		if err := <-in.released; !errors.Is(err, context.Canceled) {
			t.Errorf("depth %d: released early with the read's context %v; want it cancelled", depth, err)
		}
	}
}

// TestReadAheadReleaseUnblocksSource: releasing while the source is blocked
// in Next (a stalled network read) cancels the read and returns, leaving no
// goroutine behind.
func TestReadAheadReleaseUnblocksSource(t *testing.T) {
	defer goleak.VerifyNone(t)
	ra, in := startReadAhead(t, 3, 8, func(in *seqReader) { in.block = true })
	for i := 0; i < 3; i++ {
		if !ra.Next() {
			t.Fatalf("batch %d missing", i)
		}
	}
	released := make(chan struct{})
	go func() {
		ra.Release()
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("Release did not return while the source was blocked in Next")
	}
	if err := <-in.released; !errors.Is(err, context.Canceled) {
		t.Errorf("input released with the read's context %v; want cancelled", err)
	}
}

// TestReadAheadRetain: a retained reader keeps reading after one Release.
func TestReadAheadRetain(t *testing.T) {
	defer goleak.VerifyNone(t)
	ra, in := startReadAhead(t, 4, 2, nil)
	ra.Retain()
	ra.Release()
	n := 0
	for ra.Next() {
		n++
	}
	if n != 4 {
		t.Errorf("read %d batches after Retain+Release, want 4", n)
	}
	ra.Release()
	<-in.released
}

func TestReadAheadDepth(t *testing.T) {
	for in, want := range map[int]int{0: defaultReadAhead, -1: 0, -100: 0, 1: 1, 7: 7} {
		if got := readAheadDepth(in); got != want {
			t.Errorf("readAheadDepth(%d) = %d, want %d", in, got, want)
		}
	}
	if err := checkReadAhead(maxReadAhead); err != nil {
		t.Errorf("checkReadAhead(%d) = %v", maxReadAhead, err)
	}
	if err := checkReadAhead(maxReadAhead + 1); err == nil {
		t.Errorf("checkReadAhead(%d) = nil, want an error", maxReadAhead+1)
	}
}

// TestReadAheadOptions: every depth writes the same rows; a depth above
// the bound is refused in the options and in a plan, with nothing written.
func TestReadAheadOptions(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "int"}}}); err != nil {
		t.Fatal(err)
	}
	const rows = 5000
	var load []fake.Row
	for i := range rows {
		load = append(load, fake.Row{int64(i), int64(i % 97)})
	}
	if _, err := db.Load("dbo", "t", load...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{-1, 0, 1, 3, maxReadAhead} {
		dst := fake.NewMemSink()
		res, err := Take(ctx, db, dst, Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1, ReadOptions: ReadOptions{BatchRows: 64, ReadAhead: depth}})
		if err != nil {
			t.Fatalf("ReadAhead %d: %v", depth, err)
		}
		seen := map[int64]bool{}
		for _, rec := range dst.Records() {
			ids := rec.Column(0).(*array.Int64)
			for i := 0; i < ids.Len(); i++ {
				if seen[ids.Value(i)] {
					t.Fatalf("ReadAhead %d: id %d written twice", depth, ids.Value(i))
				}
				seen[ids.Value(i)] = true
			}
		}
		if res.Rows != rows || len(seen) != rows {
			t.Errorf("ReadAhead %d: %d rows reported, %d distinct written; want %d", depth, res.Rows, len(seen), rows)
		}
		dst.Close()
	}

	dst := fake.NewMemSink()
	defer dst.Close()
	if _, err := Take(ctx, db, dst, Options{CaptureInstance: "dbo_t", ReadOptions: ReadOptions{ReadAhead: maxReadAhead + 1}}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Take with ReadAhead %d: %v, want ErrInvalidOptions", maxReadAhead+1, err)
	}
	if _, err := Backfill(ctx, db, dst, BackfillOptions{CaptureInstance: "dbo_t", ReadOptions: ReadOptions{ReadAhead: maxReadAhead + 1}}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Backfill with ReadAhead %d: %v, want ErrInvalidOptions", maxReadAhead+1, err)
	}
	plan, err := NewPlan(ctx, db, Options{CaptureInstance: "dbo_t", Partitions: 2, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	plan.ReadAhead = 1 << 30 // edited in transit: a channel that size would exhaust memory
	if _, err := Execute(ctx, db, dst, plan, 0, nil); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("Execute of a plan with ReadAhead %d: %v, want ErrInvalidPlan", plan.ReadAhead, err)
	}
	bplan, err := NewBackfillPlan(ctx, db, BackfillOptions{CaptureInstance: "dbo_t", Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	bplan.ReadAhead = 1 << 30
	if _, err := ExecuteChunk(ctx, db, dst, bplan, 0, sink.Wave{Stamp: bplan.LSN}, nil); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("ExecuteChunk of a plan with ReadAhead %d: %v, want ErrInvalidPlan", bplan.ReadAhead, err)
	}
	if len(dst.Commits()) != 0 || dst.Pending() != 0 {
		t.Errorf("refused options or plans wrote something: %d commits, %d pending parts", len(dst.Commits()), dst.Pending())
	}
}

// TestReadAheadEndedUnseen: an input that ran to its end is released with
// its context live even when the consumer stopped before seeing the end
// (a partition that fit in the read-ahead), so a source keeps what it
// keeps until Release.
func TestReadAheadEndedUnseen(t *testing.T) {
	defer goleak.VerifyNone(t)
	ra, in := startReadAhead(t, 2, 4, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !closed(ra.done) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		if !ra.Next() {
			t.Fatalf("batch %d missing", i)
		}
	}
	ra.Release() // without the Next that would have returned false
	if err := <-in.released; err != nil {
		t.Errorf("input that ran to its end released with its context %v; want it live", err)
	}
}

// TestBackfillResumeTakesThisRunsReadOptions: resuming an open chunked
// snapshot reads with this run's ReadAhead and BatchRows, not the stored
// plan's (a rerun after running out of memory lowers them).
func TestBackfillResumeTakesThisRunsReadOptions(t *testing.T) {
	stored := BackfillPlan{PlanHeader: PlanHeader{ID: "p1", CaptureInstance: "dbo_t"}, ReadOptions: ReadOptions{ReadAhead: 1000, BatchRows: 100000}, Ranges: make([]keyrange.Range, 3), WaveChunks: 1}
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := BackfillOptions{CaptureInstance: "dbo_t", ReadOptions: ReadOptions{ReadAhead: -1, BatchRows: 512}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	plan, _, res, err := adopt(context.Background(), sink.Chunked{PlanID: "p1", Chunks: 3, Plan: raw}, opts)
	if err != nil || !res.Resumed {
		t.Fatalf("adopt: resumed %v, %v", res.Resumed, err)
	}
	if plan.ReadAhead != -1 || plan.BatchRows != 512 {
		t.Errorf("resumed plan reads with ReadAhead %d, BatchRows %d; want this run's -1 and 512", plan.ReadAhead, plan.BatchRows)
	}
}
