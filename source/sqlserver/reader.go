package sqlserver

import (
	"database/sql"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func memoryAllocator() memory.Allocator { return memory.DefaultAllocator }

// rowSource is what rowsReader reads: *sql.Rows, or a fake in tests.
type rowSource interface {
	Columns() ([]string, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

var _ rowSource = (*sql.Rows)(nil)

// rowsReader is an array.RecordReader over a query's rows.
type rowsReader struct {
	refs    atomic.Int64
	d       *rowDecoder
	rows    rowSource
	batch   int
	cur     arrow.RecordBatch
	err     error
	done    bool
	onClose func()
	// atEnd, when set, runs once the rows ran out, their result closed
	// and the connection not yet released (onClose), so it can ask the
	// same connection; an error it returns ends the read as a failure.
	atEnd func() error
	wrap  func(error) error
	// resume, when set, is asked to go on after rows failed with err: it
	// returns the rows to read on with (its own retries done), or the
	// error to fail with. handed is the rows already returned in batches,
	// pending those decoded since; restart says the new rows start again
	// from the first, so the pending rows are dropped (only when handed
	// is 0).
	resume func(err error, handed, pending int64) (rows rowSource, restart bool, fail error)
	// observe, when set, sees each row's driver values once decoded.
	observe func(vals []any)
	handed  int64
	cells   []driverValue
	vals    []any
	ptrs    []any
}

// driverValue is a scan destination that keeps the driver's value as it
// is. database/sql hands an sql.Scanner the driver's value unconverted,
// where a *any destination would copy every []byte (decimal, binary,
// uniqueidentifier) and box the copy: two allocations per value
// (database/sql convertAssignRows). A []byte kept so is the driver's
// memory, which database/sql promises only until the next Scan: the row
// decoder copies it into the Arrow builders before then.
type driverValue struct{ v any }

// Scan implements sql.Scanner.
func (d *driverValue) Scan(src any) error {
	d.v = src
	return nil
}

func newRowsReader(d *rowDecoder, rows rowSource, batch int, onClose func(), wrap func(error) error) *rowsReader {
	r := &rowsReader{d: d, rows: rows, batch: batch, onClose: onClose, wrap: wrap}
	r.refs.Store(1)
	n := len(d.apps)
	if cols, err := rows.Columns(); err == nil {
		n = len(cols)
	}
	r.cells = make([]driverValue, n)
	r.vals = make([]any, n)
	r.ptrs = make([]any, n)
	for i := range r.cells {
		r.ptrs[i] = &r.cells[i]
	}
	return r
}

// Retain adds a reference.
func (r *rowsReader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one closes the rows and releases the
// connection.
func (r *rowsReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.close()
	r.d.Release()
}

func (r *rowsReader) close() {
	if r.rows != nil {
		_ = r.rows.Close()
		r.rows = nil
	}
	if r.onClose != nil {
		r.onClose()
		r.onClose = nil
	}
}

// Schema is the schema of every batch.
func (r *rowsReader) Schema() *arrow.Schema { return r.d.schema }

func (r *rowsReader) fail(err error) {
	if r.wrap != nil {
		err = r.wrap(err)
	}
	r.err = err
	r.done = true
	r.close()
}

// Next reads the next batch; false at the end or on an error (see Err).
func (r *rowsReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done {
		return false
	}
	for r.d.Rows() < r.batch {
		if !r.rows.Next() {
			if err := r.rows.Err(); err != nil {
				if !r.resumed(err) {
					return false
				}
				continue
			}
			r.done = true
			_ = r.rows.Close()
			r.rows = nil
			if r.atEnd != nil {
				if err := r.atEnd(); err != nil {
					r.fail(err)
					return false
				}
			}
			r.close()
			break
		}
		for i := range r.cells {
			r.cells[i].v = nil
		}
		if err := r.rows.Scan(r.ptrs...); err != nil {
			r.fail(err)
			return false
		}
		for i, c := range r.cells {
			r.vals[i] = c.v
		}
		if err := r.d.Append(r.vals); err != nil {
			r.fail(err)
			return false
		}
		if r.observe != nil {
			r.observe(r.vals)
		}
	}
	if r.d.Rows() == 0 {
		return false
	}
	r.handed += int64(r.d.Rows())
	r.cur = r.d.Flush()
	return true
}

// resumed asks resume to go on after err; false means the read failed.
func (r *rowsReader) resumed(err error) bool {
	if r.resume == nil {
		r.fail(err)
		return false
	}
	_ = r.rows.Close()
	r.rows = nil
	rows, restart, ferr := r.resume(err, r.handed, int64(r.d.Rows()))
	if ferr != nil {
		r.fail(ferr)
		return false
	}
	if restart {
		r.d.Flush().Release()
	}
	r.rows = rows
	return true
}

// RecordBatch is the current batch, valid until the next call to Next.
func (r *rowsReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (r *rowsReader) Record() arrow.RecordBatch { return r.cur }

// Err is the error that ended the read, if any.
func (r *rowsReader) Err() error { return r.err }
