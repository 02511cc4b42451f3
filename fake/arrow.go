package fake

import (
	"context"
	"fmt"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// appendFunc appends one Go value (already checked against the column) to
// a builder.
type appendFunc func(b array.Builder, v any) error

// encoder converts a capture instance's rows (its captured columns'
// values, in the types it reports) to Arrow, one appendFunc per column.
type encoder struct {
	fns []appendFunc
}

func newEncoder(cols []source.Column) (*encoder, error) {
	e := &encoder{}
	for _, c := range cols {
		f, err := appender(c)
		if err != nil {
			return nil, err
		}
		e.fns = append(e.fns, f)
	}
	return e, nil
}

// appendRow appends vals, one value per captured column (nil for NULL:
// a computed column, a column the row predates or the table no longer
// has, FACTS.md F13, F60), to the first len(vals) fields of rb.
func (e *encoder) appendRow(rb *array.RecordBuilder, vals []any) error {
	for i, v := range vals {
		b := rb.Field(i)
		if v == nil {
			b.AppendNull()
			continue
		}
		if err := e.fns[i](b, v); err != nil {
			return err
		}
	}
	return nil
}

// appendChangeMeta appends the change metadata columns of ChangeSchema,
// starting at field at.
func (e *encoder) appendChangeMeta(rb *array.RecordBuilder, at int, c *change) {
	rb.Field(at).(*array.Int32Builder).Append(c.op)
	rb.Field(at + 1).(*array.StringBuilder).Append(c.lsn.String())
	rb.Field(at + 2).(*array.StringBuilder).Append(c.seqval.String())
	rb.Field(at + 3).(*array.Int32Builder).Append(c.cmd)
	rb.Field(at + 4).(*array.TimestampBuilder).Append(arrow.Timestamp(c.ts.UnixMicro()))
}

// appender returns the conversion of column c's values to its Arrow type
// (source.Column.ArrowType): decimals exactly from their text, times as µs
// since the epoch in UTC, time of day as "hh:mm:ss.fffffff" with the
// column's scale, uniqueidentifiers in canonical form.
func appender(c source.Column) (appendFunc, error) {
	dt, err := c.ArrowType()
	if err != nil {
		return nil, err
	}
	wrong := func(v any) error {
		return fmt.Errorf("column %q (%s) holds %T", c.Name, c.Declared(), v)
	}
	switch c.Type {
	case "bit":
		return func(b array.Builder, v any) error {
			x, ok := v.(bool)
			if !ok {
				return wrong(v)
			}
			b.(*array.BooleanBuilder).Append(x)
			return nil
		}, nil
	case "tinyint", "smallint", "int", "bigint":
		return func(b array.Builder, v any) error {
			x, ok := v.(int64)
			if !ok {
				return wrong(v)
			}
			switch bb := b.(type) {
			case *array.Int16Builder:
				bb.Append(int16(x))
			case *array.Int32Builder:
				bb.Append(int32(x))
			case *array.Int64Builder:
				bb.Append(x)
			}
			return nil
		}, nil
	case "decimal", "numeric", "money", "smallmoney":
		dec := dt.(*arrow.Decimal128Type)
		return func(b array.Builder, v any) error {
			x, ok := v.(keyrange.Decimal)
			if !ok {
				return wrong(v)
			}
			n, err := decimalDigits(string(x), int(dec.Precision), int(dec.Scale))
			if err != nil {
				return fmt.Errorf("column %q: %w", c.Name, err)
			}
			b.(*array.Decimal128Builder).Append(bigToDecimal128(n))
			return nil
		}, nil
	case "float", "real":
		return func(b array.Builder, v any) error {
			x, ok := v.(float64)
			if !ok {
				return wrong(v)
			}
			switch bb := b.(type) {
			case *array.Float32Builder:
				bb.Append(float32(x))
			case *array.Float64Builder:
				bb.Append(x)
			}
			return nil
		}, nil
	case "date":
		return func(b array.Builder, v any) error {
			x, ok := v.(time.Time)
			if !ok {
				return wrong(v)
			}
			b.(*array.Date32Builder).Append(arrow.Date32FromTime(x))
			return nil
		}, nil
	case "datetime", "smalldatetime", "datetime2", "datetimeoffset":
		return func(b array.Builder, v any) error {
			x, ok := v.(time.Time)
			if !ok {
				return wrong(v)
			}
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(x.UnixMicro()))
			return nil
		}, nil
	case "time":
		scale := c.Scale
		return func(b array.Builder, v any) error {
			x, ok := v.(time.Time)
			if !ok {
				return wrong(v)
			}
			b.(*array.StringBuilder).Append(formatTimeOfDay(x, scale))
			return nil
		}, nil
	case "uniqueidentifier":
		return func(b array.Builder, v any) error {
			x, ok := v.(keyrange.UUID)
			if !ok {
				return wrong(v)
			}
			b.(*array.StringBuilder).Append(x.String())
			return nil
		}, nil
	}
	switch dt.ID() {
	case arrow.STRING:
		return func(b array.Builder, v any) error {
			x, ok := v.(string)
			if !ok {
				return wrong(v)
			}
			b.(*array.StringBuilder).Append(x)
			return nil
		}, nil
	case arrow.BINARY:
		return func(b array.Builder, v any) error {
			x, ok := v.([]byte)
			if !ok {
				return wrong(v)
			}
			b.(*array.BinaryBuilder).Append(x)
			return nil
		}, nil
	}
	return nil, fmt.Errorf("column %q: no conversion of %s to %s", c.Name, c.Declared(), dt)
}

// formatTimeOfDay renders a time(n) value as SQL Server does:
// "hh:mm:ss" and, for n > 0, a point and n fractional digits.
func formatTimeOfDay(t time.Time, scale int) string {
	s := t.Format("15:04:05.000000000")
	if scale == 0 {
		return s[:8]
	}
	return s[:9+scale]
}

func bigToDecimal128(n *big.Int) decimal128.Num {
	if n.IsInt64() {
		return decimal128.FromI64(n.Int64())
	}
	return decimal128.FromBigInt(n)
}

// reader is an array.RecordReader that builds one record batch per Next
// with fill, reusing one RecordBuilder across pages.
type reader struct {
	ctx    context.Context
	schema *arrow.Schema
	rb     *array.RecordBuilder
	fill   func(r *reader) (int, error)
	after  func(rows int) error // called after each non-empty page, may be nil
	refs   atomic.Int64
	cur    arrow.RecordBatch
	err    error
	done   bool
}

func newReader(ctx context.Context, schema *arrow.Schema, fill func(*reader) (int, error)) *reader {
	r := &reader{ctx: ctx, schema: schema, rb: array.NewRecordBuilder(memory.DefaultAllocator, schema), fill: fill}
	r.refs.Store(1)
	return r
}

// Retain adds a reference.
func (r *reader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one frees the current batch and the
// builders.
func (r *reader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.rb != nil {
		r.rb.Release()
		r.rb = nil
	}
	r.done = true
}

// Schema returns the records' schema.
func (r *reader) Schema() *arrow.Schema { return r.schema }

// Next reads the next page; false at the end or on error (see Err).
func (r *reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.err != nil || r.rb == nil {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.fail(fmt.Errorf("fake: read cancelled: %w", err))
		return false
	}
	n, err := r.fill(r)
	if err != nil {
		r.fail(err)
		return false
	}
	if n == 0 {
		r.done = true
		return false
	}
	r.cur = r.rb.NewRecordBatch()
	if r.after != nil {
		if err := r.after(n); err != nil {
			r.cur.Release()
			r.cur = nil
			r.fail(err)
			return false
		}
	}
	return true
}

// fail records err and drops whatever the builders hold.
func (r *reader) fail(err error) {
	r.err = err
	rec := r.rb.NewRecordBatch()
	rec.Release()
}

// RecordBatch returns the current batch, valid until the next Next.
func (r *reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record returns the current batch.
//
// Deprecated: use RecordBatch.
func (r *reader) Record() arrow.RecordBatch { return r.cur }

// Err returns the error that ended the read, if any.
func (r *reader) Err() error { return r.err }
