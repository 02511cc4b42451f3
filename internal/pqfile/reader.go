package pqfile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Reader reads the flat columns of a Parquet file (top-level primitive
// columns: what data files of a Delta table hold) as Arrow record
// batches. Each column is decoded by arrow-go's record reader for its
// Parquet type and its values moved into an Arrow array of the type
// pqarrow gives it, as pqarrow's FileReader does (arrow-go v18.9.0
// parquet/pqarrow/column_readers.go: leafReader, transferColumnData), so
// a batch is what pqarrow's RecordReader returns for the same columns;
// the tests compare the two over random files and every fixture table.
type Reader struct {
	pf     *file.Reader
	fields []fileField
	mem    memory.Allocator
}

// Open reads the footer of the Parquet file r, as file.NewParquetReader
// does, but returns an error where arrow-go panics on a corrupt footer
// (arrow-go v18.9.0 parquet/schema.FromParquet makes a slice of a
// negative child count; FuzzReader found it).
func Open(r parquet.ReaderAtSeeker, opts ...file.ReadOption) (pf *file.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, corrupt(p)
		}
	}()
	return file.NewParquetReader(r, opts...)
}

// ErrCorrupt is the error (under errors.Is) for a file arrow-go's reader
// panicked on.
var ErrCorrupt = errors.New("pqfile: corrupt Parquet file")

func corrupt(p any) error { return fmt.Errorf("%w: %v", ErrCorrupt, p) }

// NewReader reads the schema of pf. Values are allocated from mem (nil:
// Go's allocator).
func NewReader(pf *file.Reader, mem memory.Allocator) (*Reader, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	fields, _, err := fileFields(pf.MetaData().Schema, pf.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("pqfile: %w", err)
	}
	return &Reader{pf: pf, fields: fields, mem: mem}, nil
}

// Schema is the file's top-level columns as Arrow fields, each with its
// Parquet field id in its metadata under FieldIDKey ("-1" for none). A
// column Records cannot read (Flat says why) has the null type here.
func (r *Reader) Schema() *arrow.Schema {
	fields := make([]arrow.Field, len(r.fields))
	for i, f := range r.fields {
		fields[i] = f.field
		if f.why != "" {
			fields[i].Type = arrow.Null
		}
	}
	return arrow.NewSchema(fields, nil)
}

// Flat reports whether field i is a top-level primitive column; why, when
// it is not readable, says why.
func (r *Reader) Flat(i int) (flat bool, why string) {
	return r.fields[i].col >= 0, r.fields[i].why
}

// Records reads fields (indexes into Schema) in batches of batchSize rows
// (at most), crossing row groups; with no fields, batches have rows and
// no columns. The caller releases the reader.
func (r *Reader) Records(fields []int, batchSize int64) (*RecordReader, error) {
	rows := r.pf.NumRows()
	batch := rows
	if batchSize > 0 {
		batch = min(batchSize, int64(bitutil.NextPowerOf2(int(rows))))
	}
	rr := &RecordReader{remaining: rows, batch: batch, refs: 1}
	out := make([]arrow.Field, 0, len(fields))
	for _, i := range fields {
		if i < 0 || i >= len(r.fields) {
			rr.Release()
			return nil, fmt.Errorf("pqfile: no column %d (the file has %d)", i, len(r.fields))
		}
		f := r.fields[i]
		if f.why != "" {
			rr.Release()
			return nil, fmt.Errorf("pqfile: column %q: %s is not supported", f.field.Name, f.why)
		}
		c, err := r.column(f)
		if err != nil {
			rr.Release()
			return nil, fmt.Errorf("pqfile: column %q: %w", f.field.Name, err)
		}
		rr.columns = append(rr.columns, c)
		out = append(out, f.field)
	}
	rr.schema = arrow.NewSchema(out, nil)
	return rr, nil
}

func (r *Reader) column(f fileField) (*column, error) {
	descr := r.pf.MetaData().Schema.Column(f.col)
	info := file.LevelInfo{NullSlotUsage: 1}
	info.Increment(descr.SchemaNode())
	c := &column{
		pf: r.pf, col: f.col, descr: descr, field: f.field, mem: r.mem,
		rr: file.NewRecordReader(descr, info, f.field.Type, r.mem, r.pf.BufferPool()),
	}
	if err := c.nextRowGroup(); err != nil {
		c.rr.Release()
		return nil, err
	}
	return c, nil
}

// RecordReader returns a file's record batches. It implements
// array.RecordReader.
type RecordReader struct {
	schema    *arrow.Schema
	columns   []*column
	remaining int64 // rows not yet returned
	batch     int64
	cur       arrow.RecordBatch
	err       error
	refs      int64
}

func (rr *RecordReader) Schema() *arrow.Schema { return rr.schema }

// Retain adds a reference.
func (rr *RecordReader) Retain() { atomic.AddInt64(&rr.refs, 1) }

// Release drops a reference; the last frees the column readers.
func (rr *RecordReader) Release() {
	if atomic.AddInt64(&rr.refs, -1) != 0 {
		return
	}
	if rr.cur != nil {
		rr.cur.Release()
		rr.cur = nil
	}
	for _, c := range rr.columns {
		c.rr.Release()
	}
	rr.columns = nil
}

// RecordBatch is the current batch, valid until the next call to Next.
func (rr *RecordReader) RecordBatch() arrow.RecordBatch { return rr.cur }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (rr *RecordReader) Record() arrow.RecordBatch { return rr.cur }

// Err is the error that ended reading, nil at the end of the file.
func (rr *RecordReader) Err() error { return rr.err }

// Next reads the next batch: false at the end of the file or on error.
// A panic of arrow-go's decoders on a corrupt page becomes the error.
func (rr *RecordReader) Next() (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			rr.err, ok = corrupt(p), false
		}
	}()
	if rr.cur != nil {
		rr.cur.Release()
		rr.cur = nil
	}
	if rr.err != nil {
		return false
	}
	if len(rr.columns) == 0 {
		n := min(rr.batch, rr.remaining)
		if n <= 0 {
			return false
		}
		rr.remaining -= n
		rr.cur = array.NewRecordBatch(rr.schema, nil, n)
		return true
	}
	cols := make([]arrow.Array, len(rr.columns))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range rr.columns {
		arr, err := c.next(rr.batch)
		if err != nil {
			rr.err = fmt.Errorf("pqfile: column %q: %w", c.field.Name, err)
			return false
		}
		if i == 0 && arr.Len() == 0 {
			arr.Release()
			return false // the end, as the first column says
		}
		if i > 0 && arr.Len() != cols[0].Len() {
			arr.Release()
			rr.err = fmt.Errorf("pqfile: column %q has %d rows where column %q has %d", c.field.Name, arr.Len(), rr.columns[0].field.Name, cols[0].Len())
			return false
		}
		cols[i] = arr
	}
	rr.cur = array.NewRecordBatch(rr.schema, cols, -1)
	rr.remaining -= rr.cur.NumRows()
	return true
}

// column reads one leaf column across the row groups.
type column struct {
	pf    *file.Reader
	col   int
	descr *schema.Column
	field arrow.Field
	mem   memory.Allocator
	rr    file.RecordReader
	rg    int // the next row group
}

// nextRowGroup points the record reader at the next row group's pages
// (none after the last).
func (c *column) nextRowGroup() error {
	var pr file.PageReader
	if c.rg < c.pf.NumRowGroups() {
		var err error
		pr, err = c.pf.RowGroup(c.rg).GetColumnPageReader(c.col)
		if err != nil {
			return err
		}
		c.rg++
	}
	rr, ok := c.rr.(file.RecordReaderWithError)
	if !ok {
		if pr != nil {
			_ = pr.Close()
		}
		return errors.New("record reader cannot switch row groups")
	}
	if err := rr.SetPageReaderWithError(pr); err != nil {
		if pr != nil {
			_ = pr.Close()
		}
		return err
	}
	return nil
}

// next reads up to n records into one array (empty at the end).
func (c *column) next(n int64) (arrow.Array, error) {
	c.rr.Reset()
	if err := c.rr.Reserve(n); err != nil {
		return nil, err
	}
	for n > 0 && c.rr.HasMore() {
		got, err := c.rr.ReadRecords(n)
		if err != nil {
			return nil, err
		}
		n -= got
		if got == 0 {
			if err := c.nextRowGroup(); err != nil {
				return nil, err
			}
		}
	}
	return c.transfer()
}

// transfer moves what the record reader decoded into an Arrow array of
// the field's type, converting from the Parquet type where the two differ
// (pqarrow's transferColumnData, for the types a flat column has).
func (c *column) transfer() (arrow.Array, error) {
	rr, dt := c.rr, c.field.Type
	n := rr.ValuesWritten()
	switch dt.ID() {
	case arrow.NULL:
		return array.NewNull(n), nil
	case arrow.INT32, arrow.INT64, arrow.FLOAT32, arrow.FLOAT64:
		return moveValues(rr, dt), nil
	case arrow.TIMESTAMP:
		if c.descr.PhysicalType() == parquet.Types.Int96 {
			return int96Timestamps(rr, dt)
		}
		return moveValues(rr, dt), nil
	case arrow.BOOL:
		return booleans(rr), nil
	case arrow.INT8, arrow.INT16, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64, arrow.DATE32, arrow.TIME32, arrow.TIME64:
		return integers(rr, dt), nil
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		br, ok := rr.(file.BinaryRecordReader)
		if !ok {
			return nil, fmt.Errorf("%s cannot be read from a %s column", dt, c.descr.PhysicalType())
		}
		if br.ReadDictionary() {
			return c.dictionary(br, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: dt})
		}
		chunks := br.GetBuilderChunks()
		if dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING {
			for i, ch := range chunks {
				chunks[i] = array.MakeFromData(ch.Data())
				ch.Release()
			}
		}
		return c.single(dt, chunks)
	case arrow.DECIMAL128:
		switch c.descr.PhysicalType() {
		case parquet.Types.Int32, parquet.Types.Int64:
			return integerDecimals(rr, dt), nil
		case parquet.Types.ByteArray, parquet.Types.FixedLenByteArray:
			return c.bytesDecimals(rr.(file.BinaryRecordReader), dt)
		}
		return nil, fmt.Errorf("a decimal cannot be read from a %s column", c.descr.PhysicalType())
	case arrow.DICTIONARY:
		br, ok := rr.(file.BinaryRecordReader)
		if !ok {
			return nil, fmt.Errorf("%s cannot be read from a %s column", dt, c.descr.PhysicalType())
		}
		return c.dictionary(br, dt.(*arrow.DictionaryType))
	}
	return nil, fmt.Errorf("%w: reading %s", arrow.ErrNotImplemented, dt)
}

// single joins chunks into one array (arrow-go's binary builders start a
// new chunk past 2 GiB) and releases them.
func (c *column) single(dt arrow.DataType, chunks []arrow.Array) (arrow.Array, error) {
	defer func() {
		for _, ch := range chunks {
			ch.Release()
		}
	}()
	switch len(chunks) {
	case 0:
		return array.MakeArrayOfNull(c.mem, dt, 0), nil
	case 1:
		chunks[0].Retain()
		return chunks[0], nil
	}
	return array.Concatenate(chunks, c.mem)
}

// moveValues hands the decoded values and validity to an array of the
// same width, without copying.
func moveValues(rr file.RecordReader, dt arrow.DataType) arrow.Array {
	valid, vals := rr.ReleaseValidBits(), rr.ReleaseValues()
	data := array.NewData(dt, rr.ValuesWritten(), []*memory.Buffer{valid, vals}, nil, int(rr.NullCount()), 0)
	releaseBuffers(valid, vals)
	defer data.Release()
	return array.MakeFromData(data)
}

func releaseBuffers(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}

func booleans(rr file.RecordReader) arrow.Array {
	n := rr.ValuesWritten()
	valid := rr.ReleaseValidBits()
	var bits *memory.Buffer
	if br, ok := rr.(file.BooleanRecordReader); ok {
		bits = br.ReleaseValueBitmap()
	} else {
		b := make([]byte, bitutil.BytesForBits(int64(n)))
		for i, v := range rr.Values()[:n] {
			if v != 0 {
				bitutil.SetBit(b, i)
			}
		}
		bits = memory.NewBufferBytes(b)
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{valid, bits}, nil, int(rr.NullCount()), 0)
	releaseBuffers(valid, bits)
	defer data.Release()
	return array.MakeFromData(data)
}

// integers converts INT32 or INT64 values to a narrower or unsigned
// integer, a date or a time.
func integers(rr file.RecordReader, dt arrow.DataType) arrow.Array {
	n := rr.ValuesWritten()
	var at func(i int) int64
	if rr.Type() == parquet.Types.Int32 {
		vs := arrow.Int32Traits.CastFromBytes(rr.Values())[:n]
		at = func(i int) int64 { return int64(vs[i]) }
	} else {
		vs := arrow.Int64Traits.CastFromBytes(rr.Values())[:n]
		at = func(i int) int64 { return vs[i] }
	}
	out := make([]byte, n*dt.(arrow.FixedWidthDataType).BitWidth()/8)
	switch dt.ID() {
	case arrow.INT8:
		fill(arrow.Int8Traits.CastFromBytes(out), at)
	case arrow.UINT8:
		fill(arrow.Uint8Traits.CastFromBytes(out), at)
	case arrow.INT16:
		fill(arrow.Int16Traits.CastFromBytes(out), at)
	case arrow.UINT16:
		fill(arrow.Uint16Traits.CastFromBytes(out), at)
	case arrow.UINT32:
		fill(arrow.Uint32Traits.CastFromBytes(out), at)
	case arrow.UINT64:
		fill(arrow.Uint64Traits.CastFromBytes(out), at)
	case arrow.DATE32:
		fill(arrow.Date32Traits.CastFromBytes(out), at)
	case arrow.TIME32:
		fill(arrow.Time32Traits.CastFromBytes(out), at)
	case arrow.TIME64:
		fill(arrow.Time64Traits.CastFromBytes(out), at)
	}
	valid := rr.ReleaseValidBits()
	data := array.NewData(dt, n, []*memory.Buffer{valid, memory.NewBufferBytes(out)}, nil, int(rr.NullCount()), 0)
	releaseBuffers(valid)
	defer data.Release()
	return array.MakeFromData(data)
}

func fill[T ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64](out []T, at func(int) int64) {
	for i := range out {
		out[i] = T(at(i))
	}
}

// int96Timestamps converts Impala's INT96 timestamps (nanoseconds of the
// day, then the Julian day; arrow-go's parquet.Int96 layout) to
// microseconds since the epoch, dropping any nanoseconds below a
// microsecond. A nanosecond count outside the day is an error, as in
// arrow-go's Int96.ToTimestamp; a day outside int64 microseconds (about
// 292,000 years from 1970) is one too.
func int96Timestamps(rr file.RecordReader, dt arrow.DataType) (arrow.Array, error) {
	const (
		julianEpoch   = 2440588 // the Julian day of 1970-01-01
		microsPerDay  = 86_400_000_000
		nanosPerDay   = microsPerDay * 1000
		maxDaysMicros = math.MaxInt64/microsPerDay - 1
	)
	n := rr.ValuesWritten()
	vals := parquet.Int96Traits.CastFromBytes(rr.Values())[:n]
	valid := rr.ReleaseValidBits()
	defer releaseBuffers(valid)
	out := make([]byte, arrow.Int64SizeBytes*n)
	ts := arrow.Int64Traits.CastFromBytes(out)
	for i, v := range vals {
		if valid != nil && !bitutil.BitIsSet(valid.Bytes(), i) {
			continue
		}
		nanos := binary.LittleEndian.Uint64(v[:8])
		days := int64(binary.LittleEndian.Uint32(v[8:])) - julianEpoch
		if nanos >= nanosPerDay || days > maxDaysMicros || days < -maxDaysMicros {
			return nil, fmt.Errorf("parquet INT96 timestamp at index %d: Julian day %d, %d ns of the day is not a timestamp", i, days+julianEpoch, nanos)
		}
		ts[i] = days*microsPerDay + int64(nanos/1000)
	}
	data := array.NewData(dt, n, []*memory.Buffer{valid, memory.NewBufferBytes(out)}, nil, int(rr.NullCount()), 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// integerDecimals reads decimals stored as INT32 or INT64 unscaled values.
// pqarrow keeps the validity bitmap only when there are NULLs.
func integerDecimals(rr file.RecordReader, dt arrow.DataType) arrow.Array {
	n := rr.ValuesWritten()
	out := make([]byte, arrow.Decimal128Traits.BytesRequired(n))
	ds := arrow.Decimal128Traits.CastFromBytes(out)
	if rr.Type() == parquet.Types.Int32 {
		for i, v := range arrow.Int32Traits.CastFromBytes(rr.Values())[:n] {
			ds[i] = decimal128.FromI64(int64(v))
		}
	} else {
		for i, v := range arrow.Int64Traits.CastFromBytes(rr.Values())[:n] {
			ds[i] = decimal128.FromI64(v)
		}
	}
	var valid *memory.Buffer
	if rr.NullCount() > 0 {
		valid = rr.ReleaseValidBits()
		defer releaseBuffers(valid)
	}
	data := array.NewData(dt, n, []*memory.Buffer{valid, memory.NewBufferBytes(out)}, nil, int(rr.NullCount()), 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// bytesDecimals reads decimals stored as big-endian two's complement
// bytes (FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY) of 1 to 16 bytes.
func (c *column) bytesDecimals(br file.BinaryRecordReader, dt arrow.DataType) (arrow.Array, error) {
	chunks := br.GetBuilderChunks()
	out := make([]arrow.Array, 0, len(chunks))
	var err error
	for _, ch := range chunks {
		if err == nil {
			var a arrow.Array
			a, err = decimalsOf(ch.(interface {
				arrow.Array
				Value(int) []byte
			}), dt)
			if err == nil {
				out = append(out, a)
			}
		}
		ch.Release()
	}
	if err != nil {
		for _, a := range out {
			a.Release()
		}
		return nil, err
	}
	return c.single(dt, out)
}

func decimalsOf(in interface {
	arrow.Array
	Value(int) []byte
}, dt arrow.DataType) (arrow.Array, error) {
	n := in.Len()
	out := make([]byte, arrow.Decimal128Traits.BytesRequired(n))
	ds := arrow.Decimal128Traits.CastFromBytes(out)
	nulls := in.NullN()
	for i := range n {
		if nulls > 0 && in.IsNull(i) {
			continue
		}
		b := in.Value(i)
		if len(b) == 0 || len(b) > 16 {
			return nil, fmt.Errorf("a %s value of %d bytes (want 1 to 16)", dt, len(b))
		}
		ds[i] = bigEndianDecimal(b)
	}
	data := array.NewData(dt, n, []*memory.Buffer{in.Data().Buffers()[0], memory.NewBufferBytes(out)}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// bigEndianDecimal sign-extends 1 to 16 big-endian bytes to a decimal128.
func bigEndianDecimal(b []byte) decimal128.Num {
	var full [16]byte
	if b[0]&0x80 != 0 {
		for i := range full {
			full[i] = 0xff
		}
	}
	copy(full[16-len(b):], b)
	hi := int64(uint64(full[0])<<56 | uint64(full[1])<<48 | uint64(full[2])<<40 | uint64(full[3])<<32 |
		uint64(full[4])<<24 | uint64(full[5])<<16 | uint64(full[6])<<8 | uint64(full[7]))
	lo := uint64(full[8])<<56 | uint64(full[9])<<48 | uint64(full[10])<<40 | uint64(full[11])<<32 |
		uint64(full[12])<<24 | uint64(full[13])<<16 | uint64(full[14])<<8 | uint64(full[15])
	return decimal128.New(hi, lo)
}

// dictionary reads a dictionary-encoded string or binary column as a
// dictionary array, its indices cast to the type the writer's Arrow
// schema named.
func (c *column) dictionary(br file.BinaryRecordReader, dt *arrow.DictionaryType) (arrow.Array, error) {
	chunks := br.GetBuilderChunks()
	if dt.IndexType.ID() != arrow.INT32 {
		ctx := compute.WithAllocator(context.Background(), c.mem)
		for i, ch := range chunks {
			d, ok := ch.(*array.Dictionary)
			if !ok {
				releaseAll(chunks)
				return nil, fmt.Errorf("expected a dictionary array, read %T", ch)
			}
			idx, err := compute.CastArray(ctx, d.Indices(), compute.SafeCastOptions(dt.IndexType))
			if err != nil {
				releaseAll(chunks)
				return nil, err
			}
			conv, err := array.NewValidatedDictionaryArray(dt, idx, d.Dictionary())
			idx.Release()
			if err != nil {
				releaseAll(chunks)
				return nil, err
			}
			ch.Release()
			chunks[i] = conv
		}
	}
	return c.single(dt, chunks)
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		a.Release()
	}
}

var _ array.RecordReader = (*RecordReader)(nil)
