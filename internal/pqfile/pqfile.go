// Package pqfile writes Arrow record batches with flat schemas to one
// Parquet file, choosing the Snappy encoder per writer.
//
// It exists because arrow-go finds a page's codec in a process-wide
// registry (file.NewPageWriter calls compress.GetCodec; arrow-go v18.9.0
// parquet/file/page_writer.go), and its Snappy codec is s2's slower
// "better" encoder (klauspost/compress/snappy.Encode is
// s2.EncodeSnappyBetter, klauspost/compress v1.20.3 snappy/encode.go). The
// only way to change it there is to replace the codec for every writer in
// the program. pqfile assembles a file from arrow-go's exported parts
// instead (the page writer, the column chunk writers, pqarrow's leaf writer
// and the metadata builders), the way pqarrow.FileWriter and file.Writer
// do, and gives each page writer its own Snappy encoder: s2.EncodeSnappy,
// whose output is standard Snappy (s2's README, "Snappy Compatibility").
// BENCHMARKS.md has the figures ("Writing Delta: sink/delta against
// delta-rs"); the gain when it came in is in its history (3cb39ea).
//
// With the encoder set to arrow-go's own codec, a Writer's pages are byte
// for byte what pqarrow.FileWriter writes for the same calls, and its
// footer too up to the order of two lists arrow-go fills from maps; the
// tests hold it to that. Unlike pqarrow.FileWriter it never writes an
// empty row group.
//
// Only what bronze data files need is supported: primitive columns (and
// dictionary arrays of primitives); no nested or extension types, no
// encryption, page indexes or bloom filters. NewWriter rejects the rest.
package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/klauspost/compress/s2"
)

// magic starts and ends every Parquet file (the format's File Format
// section).
var magic = []byte("PAR1")

// Encoder compresses src into one Snappy block. dst has length 0 and
// capacity for s2.MaxEncodedLen(len(src)) bytes; the result may be dst's
// memory.
type Encoder func(dst, src []byte) []byte

// FastSnappy is s2's fast Snappy block encoder, every Writer's default. It
// encodes into dst's capacity (klauspost/compress v1.20.3 s2/encode.go,
// EncodeSnappy checks cap(dst)).
func FastSnappy(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("pqfile: writer is closed")

// Writer writes one Parquet file: row groups are buffered in memory, one
// at a time, and written out when full or flushed. It is not safe for
// concurrent use.
type Writer struct {
	sink     *tellWriter
	schema   *arrow.Schema
	pqSchema *schema.Schema
	props    *parquet.WriterProperties
	meta     *metadata.FileMetaDataBuilder
	snappy   Encoder // nil: arrow-go's registered codec
	leaves   []int   // the first leaf column of each field
	lw       leafWriter

	rg       *rowGroup // nil: none open
	rgCount  int16
	defLevel []int16 // reused definition levels
	closed   bool
	err      error // the first write error; the file is unusable after it
}

// rowGroup is the open, buffered row group.
type rowGroup struct {
	meta    *metadata.RowGroupMetaDataBuilder
	columns []file.ColumnChunkWriter
	rows    int64
}

// NewWriter starts a Parquet file on w for batches of schema s, written
// with props. It writes the file's leading magic bytes.
func NewWriter(s *arrow.Schema, w io.Writer, props *parquet.WriterProperties) (*Writer, error) {
	return NewWriterEncoder(s, w, props, FastSnappy)
}

// NewWriterEncoder is NewWriter with snappy as the Snappy encoder of data
// pages; nil means arrow-go's registered codec, with which the file is
// byte for byte what pqarrow.FileWriter writes.
func NewWriterEncoder(s *arrow.Schema, w io.Writer, props *parquet.WriterProperties, snappy Encoder) (*Writer, error) {
	if props == nil {
		props = parquet.NewWriterProperties()
	}
	if props.FileEncryptionProperties() != nil {
		return nil, errors.New("pqfile: encrypted files are not supported")
	}
	for _, f := range s.Fields() {
		if err := supported(f.Type); err != nil {
			return nil, fmt.Errorf("pqfile: column %q: %w", f.Name, err)
		}
	}
	pqSchema, err := parquetSchema(s, props)
	if err != nil {
		return nil, fmt.Errorf("pqfile: %w", err)
	}
	leaves := make([]int, s.NumFields())
	for i, n := 0, 0; i < s.NumFields(); i++ {
		leaves[i] = n
		n += leafCount(s.Field(i).Type)
	}
	for i := 0; i < pqSchema.NumColumns(); i++ {
		path := pqSchema.Column(i).Path()
		if props.PageIndexEnabledFor(path) {
			return nil, fmt.Errorf("pqfile: column %q: page indexes are not supported", path)
		}
		if props.BloomFilterEnabledFor(path) {
			return nil, fmt.Errorf("pqfile: column %q: bloom filters are not supported", path)
		}
	}
	// The schema's metadata goes to the footer, as pqarrow.NewFileWriter
	// puts it (without the Arrow schema itself, which pqarrow stores only
	// when asked).
	kv := make(metadata.KeyValueMetadata, 0)
	md := s.Metadata()
	for i, k := range md.Keys() {
		if err := kv.Append(k, md.Values()[i]); err != nil {
			return nil, fmt.Errorf("pqfile: schema metadata: %w", err)
		}
	}
	fw := &Writer{
		sink:     &tellWriter{w: w},
		schema:   s,
		pqSchema: pqSchema,
		props:    props,
		meta:     metadata.NewFileMetadataBuilder(pqSchema, props, kv),
		snappy:   snappy,
		leaves:   leaves,
	}
	if _, err := fw.sink.Write(magic); err != nil {
		return nil, fmt.Errorf("pqfile: writing the magic bytes: %w", err)
	}
	return fw, nil
}

// supported accepts the types pqfile writes: primitives, dictionaries of
// them, and structs, lists and maps of those; no extension types.
func supported(t arrow.DataType) error {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		if _, ok := t.ValueType.(arrow.NestedType); ok {
			return fmt.Errorf("dictionary of nested type %s is not supported", t.ValueType)
		}
		return nil
	case arrow.ExtensionType:
		return fmt.Errorf("extension type %s is not supported", t)
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := supported(f.Type); err != nil {
				return err
			}
		}
		return nil
	case *arrow.ListType:
		return supported(t.Elem())
	case *arrow.MapType:
		if err := supported(t.KeyType()); err != nil {
			return err
		}
		return supported(t.ItemType())
	case arrow.NestedType:
		return fmt.Errorf("nested type %s is not supported", t)
	}
	return nil
}

// leafCount is the number of Parquet leaf columns of type t.
func leafCount(t arrow.DataType) int {
	switch t := t.(type) {
	case *arrow.StructType:
		n := 0
		for _, f := range t.Fields() {
			n += leafCount(f.Type)
		}
		return n
	case *arrow.ListType:
		return leafCount(t.Elem())
	case *arrow.MapType:
		return leafCount(t.KeyType()) + leafCount(t.ItemType())
	}
	return 1
}

// Write adds rec's rows to the open row group (opening one if none is),
// starting a new row group whenever the properties' maximum row count is
// reached.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if err := w.usable(); err != nil {
		return err
	}
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("pqfile: record schema %s does not match the writer's %s", rec.Schema(), w.schema)
	}
	maxRows := w.props.MaxRowGroupLength()
	for off, n := int64(0), rec.NumRows(); off < n; {
		// As pqarrow's WriteBuffered: a full row group stays open until a
		// write has rows for the next one.
		if w.rg != nil && w.rg.rows >= maxRows {
			if err := w.closeRowGroup(); err != nil {
				return w.fail(err)
			}
		}
		if w.rg == nil {
			if err := w.openRowGroup(); err != nil {
				return w.fail(err)
			}
		}
		size := min(n-off, maxRows-w.rg.rows)
		if err := w.writeRange(rec, off, size); err != nil {
			return w.fail(err)
		}
		off += size
	}
	return nil
}

func (w *Writer) openRowGroup() error {
	rgMeta := w.meta.AppendRowGroup()
	rg := &rowGroup{meta: rgMeta, columns: make([]file.ColumnChunkWriter, w.pqSchema.NumColumns())}
	for i := range rg.columns {
		colMeta := rgMeta.NextColumnChunk()
		path := colMeta.Descr().Path()
		codec := w.props.CompressionFor(path)
		pager, err := file.NewPageWriter(w.sink, codec, w.props.CompressionLevelFor(path), colMeta, w.rgCount, int16(i), w.props.Allocator(), true, nil, nil)
		if err != nil {
			return fmt.Errorf("pqfile: page writer of column %q: %w", path, err)
		}
		if codec == compress.Codecs.Snappy && w.snappy != nil {
			pager = snappyPager{PageWriter: pager, encode: w.snappy}
		}
		rg.columns[i] = file.NewColumnChunkWriter(colMeta, pager, w.props)
	}
	w.rg = rg
	w.rgCount++
	return nil
}

// writeRange writes rows [off, off+size) of rec to the open row group.
func (w *Writer) writeRange(rec arrow.RecordBatch, off, size int64) error {
	for i, col := range rec.Columns() {
		arr := col
		if off != 0 || size != int64(col.Len()) {
			arr = array.NewSlice(col, off, off+size)
		}
		err := w.writeColumn(i, arr)
		if arr != col {
			arr.Release()
		}
		if err != nil {
			return fmt.Errorf("pqfile: column %q: %w", w.schema.Field(i).Name, err)
		}
	}
	w.rg.rows += size
	return nil
}

// writeColumn gives column i's values to its chunk writers. A flat
// column's definition levels are the ones pqarrow's path builder computes
// for it (arrow-go v18.9.0 parquet/pqarrow/path_builder.go,
// addTerminalInfo and writePath): none for a required column; for an
// optional one, 1 for a value and 0 for a null, and the leaf counts as
// nullable only when it holds nulls. A nested one is shredded (shred).
func (w *Writer) writeColumn(i int, arr arrow.Array) error {
	f := w.schema.Field(i)
	if _, nested := f.Type.(arrow.NestedType); nested {
		leaves, err := shred(f, arr, w.props.Allocator())
		if err != nil {
			return err
		}
		defer func() {
			for j := range leaves {
				leaves[j].release()
			}
		}()
		for j, l := range leaves {
			if err := w.lw.write(w.rg.columns[w.leaves[i]+j], l.values, l.def, l.rep, l.nullable); err != nil {
				return err
			}
		}
		return nil
	}
	cw := w.rg.columns[w.leaves[i]]
	if d, ok := arr.(*array.Dictionary); ok && d.Dictionary().NullN() > 0 {
		// pqarrow refuses these too (path_builder.go, Visit).
		return fmt.Errorf("%w: a dictionary array with a null in its dictionary", arrow.ErrNotImplemented)
	}
	if !f.Nullable {
		return w.lw.write(cw, arr, nil, nil, false)
	}
	n := arr.Len()
	if cap(w.defLevel) < n {
		w.defLevel = make([]int16, n)
	}
	levels := w.defLevel[:n]
	nulls := arr.NullN()
	switch {
	case nulls == 0:
		for j := range levels {
			levels[j] = 1
		}
	case nulls == n:
		clear(levels)
	default:
		for j := range levels {
			levels[j] = 0
			if arr.IsValid(j) {
				levels[j] = 1
			}
		}
	}
	return w.lw.write(cw, arr, levels, nil, nulls > 0)
}

// RowGroupCompressedBytes is the open row group's size so far: its finished
// pages as compressed (arrow-go's ColumnChunkWriter.TotalCompressedBytes),
// not the values still in its encoders, the page headers or a dictionary
// page not yet written.
func (w *Writer) RowGroupCompressedBytes() int64 {
	if w.rg == nil {
		return 0
	}
	var n int64
	for _, c := range w.rg.columns {
		n += c.TotalCompressedBytes()
	}
	return n
}

// BytesWritten is how many bytes of the file have been written to the
// underlying writer.
func (w *Writer) BytesWritten() int64 { return w.sink.n }

// Flush writes out the open row group, if any. The next Write starts a
// new one; a file never gets an empty row group from Flush.
func (w *Writer) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.rg == nil {
		return nil
	}
	if err := w.closeRowGroup(); err != nil {
		return w.fail(err)
	}
	return nil
}

// closeRowGroup writes out the open row group. Every column is closed, as
// arrow-go's row group writer does, even after one fails: closing is what
// frees a column's buffers.
func (w *Writer) closeRowGroup() error {
	rg := w.rg
	w.rg = nil
	var written int64
	var first error
	for i, c := range rg.columns {
		if err := c.Close(); err != nil {
			if first == nil {
				first = fmt.Errorf("pqfile: closing column %q: %w", w.pqSchema.Column(i).Path(), err)
			}
			continue
		}
		written += c.TotalBytesWritten()
	}
	if first != nil {
		return first
	}
	rg.meta.SetNumRows(int(rg.rows))
	if err := rg.meta.Finish(written, w.rgCount-1); err != nil {
		return fmt.Errorf("pqfile: row group metadata: %w", err)
	}
	return nil
}

// Close writes the open row group and the footer. The underlying writer is
// not closed. Close after a failed call returns that call's error and
// writes no footer; it closes the open row group's columns, to free their
// buffers, and ignores what that returns.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		if w.rg != nil {
			_ = w.closeRowGroup()
		}
		return w.err
	}
	if w.rg != nil {
		if err := w.closeRowGroup(); err != nil {
			w.err = err
			return err
		}
	}
	fmd, err := w.meta.Finish()
	if err != nil {
		w.err = fmt.Errorf("pqfile: file metadata: %w", err)
		return w.err
	}
	n, err := fmd.WriteTo(w.sink, nil)
	if err == nil {
		_, err = w.sink.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
	}
	if err == nil {
		_, err = w.sink.Write(magic)
	}
	if err != nil {
		w.err = fmt.Errorf("pqfile: writing the footer: %w", err)
	}
	return w.err
}

func (w *Writer) usable() error {
	if w.closed {
		return ErrClosed
	}
	return w.err
}

// fail records the first error: after a failed write the buffered row
// group is in an unknown state, so the file cannot be finished.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// snappyPager is arrow-go's page writer with another Snappy encoder for
// data pages: the column chunk writer compresses each data page through
// its page writer's Compress (arrow-go v18.9.0 parquet/file/column_writer.go,
// buildDataPageV1/V2). Dictionary pages are compressed inside arrow-go's
// page writer with its registered codec; both are standard Snappy.
type snappyPager struct {
	file.PageWriter
	encode Encoder
}

// Compress encodes src into buf's free space, as arrow-go's own Compress
// does (parquet/file/page_writer.go, serializedPageWriter.Compress). The
// result is consumed before the next call: the column writer copies a page
// it keeps and writes the others at once (column_writer.go, buildDataPageV1
// and V2).
func (p snappyPager) Compress(buf *bytes.Buffer, src []byte) []byte {
	buf.Grow(s2.MaxEncodedLen(len(src)))
	return p.encode(buf.AvailableBuffer(), src)
}

// tellWriter counts the bytes written: arrow-go's page writers record
// offsets from Tell.
type tellWriter struct {
	w io.Writer
	n int64
}

func (t *tellWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// Tell is the position of the next byte.
func (t *tellWriter) Tell() int64 { return t.n }
