package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/pqfile"
	"github.com/cdcsnap/cdcsnap/sink"
)

// ReadAll reads the live files of the latest version back into Arrow, one
// file after another in path order, in the table's schema (Schema's
// ArrowSchema): columns a file lacks (written before they were added)
// read as NULL. Partitioned tables are not supported. Release the reader
// when done.
func (t *Table) ReadAll(ctx context.Context) (array.RecordReader, error) {
	s, as, err := t.readable(ctx)
	if err != nil {
		return nil, err
	}
	return t.newReader(ctx, s, s.SortedFiles(), as)
}

// readable returns the table's current state and its Arrow schema, or an
// error when the table does not exist.
func (t *Table) readable(ctx context.Context) (*deltalog.State, *arrow.Schema, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, nil, err
	}
	if s.Version < 0 {
		return nil, nil, fmt.Errorf("delta: table %s does not exist", t.url)
	}
	as, err := s.Schema.ArrowSchema()
	if err != nil {
		return nil, nil, err
	}
	return s, as, nil
}

// newReader reads files of s in schema (the table's columns, or some).
func (t *Table) newReader(ctx context.Context, s *deltalog.State, files []deltalog.AddFile, schema *arrow.Schema) (*tableReader, error) {
	cm, err := s.Mapping()
	if err != nil {
		return nil, err
	}
	parts, err := partitionColumns(s)
	if err != nil {
		return nil, &deltalog.UnsupportedProtocolError{Table: t.url, Feature: "partitionColumns: " + err.Error()}
	}
	return &tableReader{ctx: ctx, t: t, files: files, schema: schema, refs: 1, cm: cm, parts: parts}, nil
}

type tableReader struct {
	ctx    context.Context
	t      *Table
	files  []deltalog.AddFile
	schema *arrow.Schema
	next   int
	pf     *file.Reader
	rr     *pqfile.RecordReader
	rec    arrow.RecordBatch
	err    error
	refs   int64
	// filter, when set, selects the rows of each (adapted) record to keep.
	filter func(rec arrow.RecordBatch) (*array.Boolean, error)
	// project reads only the file's top-level primitive columns named
	// in schema, and refuses a file that has none of them.
	project bool
	// cm finds the schema's columns in the files (column mapping).
	cm deltalog.ColumnMapping
	// parts are the table's partition columns, read from each file's
	// partition values.
	parts []partitionColumn
	// deleted holds the open file's deleted row indexes (its deletion
	// vector), nil when it has none; pos is the file's next row index.
	deleted *roaring64.Bitmap
	pos     uint64
}

func (r *tableReader) Retain() { atomic.AddInt64(&r.refs, 1) }

func (r *tableReader) Release() {
	if atomic.AddInt64(&r.refs, -1) == 0 {
		r.closeFile()
		if r.rec != nil {
			r.rec.Release()
			r.rec = nil
		}
	}
}

func (r *tableReader) Schema() *arrow.Schema { return r.schema }

func (r *tableReader) RecordBatch() arrow.RecordBatch { return r.rec }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (r *tableReader) Record() arrow.RecordBatch { return r.rec }

func (r *tableReader) Err() error { return r.err }

func (r *tableReader) closeFile() {
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
	if r.pf != nil {
		_ = r.pf.Close()
		r.pf = nil
	}
}

func (r *tableReader) Next() bool {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	for r.err == nil {
		if r.rr == nil {
			if r.next >= len(r.files) {
				return false
			}
			if err := r.open(r.files[r.next]); err != nil {
				r.err = err
				return false
			}
			r.next++
		}
		if r.rr.Next() {
			raw := r.rr.RecordBatch()
			rec, err := r.adapt(raw)
			if err == nil && r.deleted != nil {
				rec, err = r.dropDeleted(rec)
			}
			r.pos += uint64(raw.NumRows())
			if err == nil && r.filter != nil {
				rec, err = r.applyFilter(rec)
			}
			if err != nil {
				r.err = fmt.Errorf("delta: reading %s: %w", r.files[r.next-1].Path, err)
				return false
			}
			if rec.NumRows() == 0 && (r.filter != nil || r.deleted != nil) {
				rec.Release()
				continue
			}
			r.rec = rec
			return true
		}
		if err := r.rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("delta: reading %s: %w", r.files[r.next-1].Path, err)
		}
		r.closeFile()
	}
	return false
}

func (r *tableReader) open(a deltalog.AddFile) error {
	r.deleted, r.pos = nil, 0
	if a.DeletionVector != nil {
		bm, err := a.DeletionVector.Load(r.ctx, r.t.store, r.t.url)
		if err != nil {
			return fmt.Errorf("delta: deletion vector of %s: %w", a.Path, err)
		}
		r.deleted = bm
	}
	ra, err := newStoreReaderAt(r.ctx, r.t.store, a.Key())
	if err != nil {
		return fmt.Errorf("delta: opening %s: %w", a.Path, err)
	}
	pf, err := pqfile.Open(ra)
	if err != nil {
		return fmt.Errorf("delta: opening %s: %w", a.Path, err)
	}
	fr, err := pqfile.NewReader(pf, memory.DefaultAllocator)
	if err != nil {
		_ = pf.Close()
		return fmt.Errorf("delta: opening %s: %w", a.Path, err)
	}
	// The file's columns adapt uses: those the schema's columns map to.
	fs := fr.Schema()
	var fields []int
	for _, f := range r.schema.Fields() {
		i := r.cm.FileIndex(fs, f.Name)
		if i < 0 || slices.Contains(fields, i) {
			continue
		}
		if flat, _ := fr.Flat(i); flat || !r.project {
			fields = append(fields, i)
		}
	}
	if r.project && len(fields) == 0 {
		_ = pf.Close()
		return fmt.Errorf("delta: opening %s: it has none of the columns %v", a.Path, r.schema.Fields())
	}
	slices.Sort(fields)
	rr, err := fr.Records(fields, 64<<10)
	if err != nil {
		_ = pf.Close()
		return fmt.Errorf("delta: opening %s: %w", a.Path, err)
	}
	r.pf, r.rr = pf, rr
	return nil
}

// adapt puts a file's record into the table schema: columns by name,
// missing ones NULL, other physical types cast.
func (r *tableReader) adapt(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, r.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range r.schema.Fields() {
		j := r.cm.FileIndex(rec.Schema(), f.Name)
		if pc := r.partition(f.Name); pc != nil {
			v, ok := r.files[r.next-1].PartitionValues[pc.key]
			c, err := pc.column(v, ok, n)
			if err != nil {
				return nil, err
			}
			cols[i] = c
			continue
		}
		if j < 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
			continue
		}
		c := rec.Column(j)
		if arrow.TypeEqual(c.DataType(), f.Type) {
			c.Retain()
			cols[i] = c
			continue
		}
		cc, err := compute.CastArray(r.ctx, c, compute.UnsafeCastOptions(f.Type))
		if err != nil {
			return nil, fmt.Errorf("column %s: %s to %s: %w", f.Name, c.DataType(), f.Type, err)
		}
		cols[i] = cc
	}
	return array.NewRecordBatch(r.schema, cols, int64(n)), nil
}

// partition returns the partition column named name, or nil.
func (r *tableReader) partition(name string) *partitionColumn {
	for i := range r.parts {
		if r.parts[i].name == name {
			return &r.parts[i]
		}
	}
	return nil
}

// dropDeleted removes from rec (rows pos.. of the open file) the rows its
// deletion vector deletes, and releases rec.
func (r *tableReader) dropDeleted(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range uint64(rec.NumRows()) {
		b.Append(!r.deleted.Contains(r.pos + i))
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(r.ctx, rec, mask, compute.DefaultFilterOptions())
}

func (r *tableReader) applyFilter(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	mask, err := r.filter(rec)
	if err != nil {
		return nil, err
	}
	defer mask.Release()
	return compute.FilterRecordBatch(r.ctx, rec, mask, compute.DefaultFilterOptions())
}

// ReadSnapshotRows reads back the rows of the snapshot FindSnapshot
// returns for captureInstance: the live rows with _operation 0, the
// instance's name (ignoring case) in _capture_instance, the snapshot's LSN
// in coalesce(_snapshot, _start_lsn) and _chunk NULL. Files whose
// statistics rule the LSN out are skipped. It implements
// sinktest.RowReader; the caller releases the reader.
func (t *Table) ReadSnapshotRows(ctx context.Context, captureInstance string) (array.RecordReader, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	sn, ok, err := t.newestSnapshot(ctx, s, captureInstance)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("delta: table %s, capture instance %q: %w", t.url, captureInstance, sink.ErrNotFound)
	}
	as, err := s.Schema.ArrowSchema()
	if err != nil {
		return nil, err
	}
	for _, c := range []string{sink.ColCaptureInstance, sink.ColOperation, sink.ColStartLSN} {
		if len(as.FieldIndices(c)) != 1 {
			return nil, &deltalog.SchemaError{Column: c, Reason: "a bronze table needs this column to find a snapshot's rows"}
		}
	}
	want := sn.LSN.String()
	cm, err := s.Mapping()
	if err != nil {
		return nil, err
	}
	var files []deltalog.AddFile
	for _, f := range s.SortedFiles() {
		if st, err := f.ParseStats(); err == nil && !mayHold(cm.DisplayStats(st), want) {
			continue
		}
		files = append(files, f)
	}
	col := func(rec arrow.RecordBatch, name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	filter := func(rec arrow.RecordBatch) (*array.Boolean, error) {
		ci, _ := col(rec, sink.ColCaptureInstance).(*array.String)
		op, _ := col(rec, sink.ColOperation).(*array.Int32)
		start, _ := col(rec, sink.ColStartLSN).(*array.String)
		snapCol, _ := col(rec, sink.ColSnapshot).(*array.String)
		chunk := col(rec, sink.ColChunk)
		if ci == nil || op == nil || start == nil {
			return nil, fmt.Errorf("bronze columns of unexpected types")
		}
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer b.Release()
		for i := 0; i < int(rec.NumRows()); i++ {
			l := ""
			if snapCol != nil && snapCol.IsValid(i) {
				l = snapCol.Value(i)
			} else if start.IsValid(i) {
				l = start.Value(i)
			}
			b.Append(op.IsValid(i) && op.Value(i) == sink.OperationSnapshot && ci.IsValid(i) &&
				sink.SameInstance(ci.Value(i), captureInstance) && strings.EqualFold(l, want) && (chunk == nil || chunk.IsNull(i)))
		}
		return b.NewBooleanArray(), nil
	}
	r, err := t.newReader(ctx, s, files, as)
	if err != nil {
		return nil, err
	}
	r.filter = filter
	return r, nil
}

// mayHold reports whether a file's stats allow a snapshot row of LSN l.
func mayHold(st deltalog.FileStats, l string) bool {
	if n, ok := st.NullCount[sink.ColOperation]; ok && n == st.NumRecords {
		return false
	}
	col := sink.ColSnapshot
	if _, ok := st.NullCount[col]; !ok {
		return true
	}
	if st.NullCount[col] == st.NumRecords {
		col = sink.ColStartLSN // change rows only, or rows from before _snapshot
	}
	mn, ok1 := st.MinValues[col].(string)
	mx, ok2 := st.MaxValues[col].(string)
	if st.NullCount[col] > 0 && col == sink.ColSnapshot {
		return true // coalesce with _start_lsn: cannot rule out
	}
	if !ok1 || !ok2 {
		return true
	}
	return mn <= l && l <= mx
}

// storeReaderAt reads an object by ranges, for the Parquet reader.
type storeReaderAt struct {
	ctx  context.Context
	s    deltalog.Store
	key  string
	size int64
	pos  int64
}

func newStoreReaderAt(ctx context.Context, s deltalog.Store, key string) (*storeReaderAt, error) {
	size, err := s.Size(ctx, key)
	if err != nil {
		return nil, err
	}
	return &storeReaderAt{ctx: ctx, s: s, key: key, size: size}, nil
}

func (r *storeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if off+n > r.size {
		n = r.size - off
	}
	rr, err := r.s.NewRangeReader(r.ctx, r.key, off, n)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	got, err := io.ReadFull(rr, p[:n])
	if err == nil && got < len(p) {
		err = io.EOF
	}
	return got, err
}

func (r *storeReaderAt) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		r.pos = offset
	case io.SeekCurrent:
		r.pos += offset
	case io.SeekEnd:
		r.pos = r.size + offset
	}
	if r.pos < 0 {
		return 0, errors.New("delta: negative seek")
	}
	return r.pos, nil
}

func (r *storeReaderAt) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	return n, err
}
