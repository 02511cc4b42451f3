package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/time/rate"
)

// Limiter is a budget of rows per second that several snapshots can share
// (Options.Limiter): every row read from the source takes one token.
// *rate.Limiter of golang.org/x/time/rate satisfies it.
type Limiter interface {
	// WaitN blocks until n tokens are available or ctx is done. It is only
	// asked for n <= Burst() tokens at once (n = 1 when Burst is below 1).
	WaitN(ctx context.Context, n int) error
	// Burst is the most tokens one WaitN may take.
	Burst() int
}

// rowsLimiter returns the limiter of Options.RowsPerSecond (nil for no
// limit). It starts with an empty bucket, so the rate holds from the first
// row (a new rate.Limiter starts full, NewLimiter setting its tokens to
// the burst in golang.org/x/time v0.16.0 rate/rate.go); the burst, a
// tenth of a second's rows, is the piece a batch waits for at a time (see
// waitRows) and what a pause in the read may save up.
func rowsLimiter(rowsPerSecond int, now time.Time) *rate.Limiter {
	if rowsPerSecond <= 0 {
		return nil
	}
	burst := max(1, rowsPerSecond/10)
	l := rate.NewLimiter(rate.Limit(rowsPerSecond), burst)
	l.AllowN(now, burst)
	return l
}

// waitRows takes n tokens from l, in pieces no larger than its burst: a
// rate.Limiter refuses a WaitN above its burst instead of waiting longer
// (rate/rate.go, Limiter.wait: "exceeds limiter's burst", unless the
// limit is Inf).
// It returns the first error (ctx done, or the limiter's refusal).
func waitRows(ctx context.Context, l Limiter, n int) error {
	for n > 0 {
		k := min(n, max(1, l.Burst()))
		if err := l.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// run is what one Take or Backfill call adds to reading its ranges: row
// budgets (this snapshot's, then a shared one) and metrics. A nil *run
// adds nothing: Execute and ExecuteChunk, called alone, use none.
type run struct {
	limiters []Limiter
	metrics  *metrics
}

// newRun builds a call's run from its options; rowsPerSecond and shared as
// in Options, metrics nil for none.
func newRun(rowsPerSecond int, shared Limiter, m *metrics) *run {
	r := &run{metrics: m}
	if l := rowsLimiter(rowsPerSecond, time.Now()); l != nil {
		r.limiters = append(r.limiters, l)
	}
	if shared != nil {
		r.limiters = append(r.limiters, shared)
	}
	return r
}

// wrap returns in read through r's budgets and metrics (in itself when r
// adds nothing). ctx is the read's: cancelling it ends a wait.
func (r *run) wrap(ctx context.Context, in array.RecordReader) array.RecordReader {
	if r == nil || (len(r.limiters) == 0 && r.metrics == nil) {
		return in
	}
	return &meteredReader{RecordReader: in, ctx: ctx, run: r}
}

// meteredReader counts the rows (and Arrow bytes) of each batch its input
// yields and waits for them in every budget before handing the batch on.
// Next and Err are called from one goroutine at a time, as any reader's.
type meteredReader struct {
	array.RecordReader
	ctx context.Context
	run *run
	err error
}

// Next reads the next batch and waits for its rows; a failed wait ends
// the read with that error.
func (m *meteredReader) Next() bool {
	if m.err != nil || !m.RecordReader.Next() {
		return false
	}
	rec := m.RecordReader.RecordBatch()
	n := int(rec.NumRows())
	if mt := m.run.metrics; mt != nil {
		mt.read(m.ctx, int64(n), recordSize(rec))
	}
	start := time.Now()
	for _, l := range m.run.limiters {
		if err := waitRows(m.ctx, l, n); err != nil {
			m.err = fmt.Errorf("waiting for the rows-per-second limit: %w", err)
			return false
		}
	}
	if mt := m.run.metrics; mt != nil && len(m.run.limiters) > 0 {
		mt.throttled(m.ctx, time.Since(start))
	}
	return true
}

// Err is the failed wait's error, else the input's.
func (m *meteredReader) Err() error {
	if m.err != nil {
		return m.err
	}
	return m.RecordReader.Err()
}

// recordSize is the bytes of the buffers rec's columns hold (children and
// dictionaries too), as arrow/util.TotalRecordSize counts them but without
// its map (a buffer shared by two columns counts twice) and without
// importing that package, which pulls in protobuf.
func recordSize(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataSize(c.Data())
	}
	return n
}

func dataSize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		n += dataSize(dict)
	}
	return n
}
