package snapshot

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// defaultReadAhead is the read-ahead depth when the options leave it zero:
// internal/bench measured one partition on two cores reaching the writer's
// speed with it (the source reads the next batch while the Parquet encoder
// works on this one).
const defaultReadAhead = 2

// maxReadAhead bounds the depth a plan may ask for: each batch ahead is
// memory held per partition.
const maxReadAhead = 1024

// readAheadDepth resolves an Options.ReadAhead or Plan.ReadAhead value.
func readAheadDepth(n int) int {
	switch {
	case n == 0:
		return defaultReadAhead
	case n < 0:
		return 0
	}
	return n
}

// checkReadAhead refuses a depth that would hold too many batches.
func checkReadAhead(n int) error {
	if n > maxReadAhead {
		return fmt.Errorf("ReadAhead %d is above %d batches", n, maxReadAhead)
	}
	return nil
}

// readRange opens range r of ci for reading, readAhead batches (a
// ReadAhead value) ahead of the caller, through run's row budgets and
// metrics (nil: none). With read-ahead, its goroutine waits for the
// budgets, so the source is read no faster than they allow.
func readRange(ctx context.Context, src source.Source, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions, readAhead int, run *run) (array.RecordReader, error) {
	depth := readAheadDepth(readAhead)
	if depth == 0 {
		in, err := src.ReadRange(ctx, ci, r, opts)
		if err != nil {
			return nil, err
		}
		return run.wrap(ctx, in), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := src.ReadRange(ctx, ci, r, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	return newReadAhead(run.wrap(ctx, in), depth, cancel), nil
}

// newReadAhead starts reading in, depth batches ahead; cancel cancels the
// read's context. It takes over the caller's reference to in.
func newReadAhead(in array.RecordReader, depth int, cancel context.CancelFunc) *readAheadReader {
	r := &readAheadReader{in: in, schema: in.Schema(), cancel: cancel, ch: make(chan arrow.RecordBatch, depth), stop: make(chan struct{}), done: make(chan struct{})}
	r.refs.Store(1)
	go r.loop()
	return r
}

// readAheadReader is an array.RecordReader fed by a goroutine that calls
// in.Next up to cap(ch)+1 batches ahead of the consumer (cap(ch) in the
// channel, one waiting to be sent).
type readAheadReader struct {
	in     array.RecordReader
	schema *arrow.Schema
	cancel context.CancelFunc // the read's context
	ch     chan arrow.RecordBatch
	stop   chan struct{}
	done   chan struct{} // closed when loop has returned
	refs   atomic.Int64
	cur    arrow.RecordBatch
	err    error // written by loop before it closes ch
	end    bool  // the consumer has seen ch closed, so err is safe to read
}

func (r *readAheadReader) loop() {
	defer close(r.done)
	defer close(r.ch)
	for r.in.Next() {
		rec := r.in.RecordBatch()
		rec.Retain()
		select {
		case r.ch <- rec:
		case <-r.stop:
			rec.Release()
			return
		}
	}
	r.err = r.in.Err()
}

// Retain adds a reference.
func (r *readAheadReader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one stops the goroutine, releases
// the batches read ahead and releases the input. Stopping before the
// input's end cancels the read, so a source blocked in Next returns; an
// input that ran to its end (even if the consumer has not seen it yet) is
// released uncancelled (a SQL Server source then keeps its connection).
func (r *readAheadReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	// Decided before stop is closed, which ends the loop early too.
	ranToEnd := r.end || closed(r.done)
	close(r.stop)
	if !ranToEnd {
		r.cancel() // still reading: stop the source
	}
	<-r.done
	for rec := range r.ch {
		rec.Release()
	}
	r.in.Release()
	r.cancel()
}

// Schema is the input's schema, read once when the reader started (the
// input's Next runs on another goroutine).
func (r *readAheadReader) Schema() *arrow.Schema { return r.schema }

// closed reports whether ch is closed, without waiting.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Next moves to the next batch, waiting for the goroutine if it is behind.
func (r *readAheadReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	rec, ok := <-r.ch
	if !ok {
		r.end = true
		return false
	}
	r.cur = rec
	return true
}

// RecordBatch is the current batch, valid until the next call to Next.
func (r *readAheadReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the current batch.
//
// Deprecated: use RecordBatch.
func (r *readAheadReader) Record() arrow.RecordBatch { return r.cur }

// Err is the input's error, valid once Next has returned false.
func (r *readAheadReader) Err() error {
	if !r.end {
		return nil // still reading: no error yet
	}
	return r.err
}
