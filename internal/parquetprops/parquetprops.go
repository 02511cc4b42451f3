// Package parquetprops decides the Parquet writer properties of a bronze
// data file. sink/delta writes with them and internal/bench's "limit" (the
// Parquet writer, internal/pqfile, alone) uses the same, so the two are
// compared like for like.
package parquetprops

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/cdcsnap/cdcsnap/sink"
)

// RowGroupBytes is the compressed size at which a writer closes its
// buffered row group. It bounds each writer's memory: internal/bench
// measured peak RSS 232 MiB (1M rows) and 250 MiB (10M rows) at 8 MiB with
// two writers, against 386 and 638 MiB at 64 MiB, for the same speed.
const RowGroupBytes = 8 << 20

// DataPageBytes is the target size of a data page. arrow-go's default is
// 1 MiB, and at that size its buffer pool costs more than the encoding:
// a page's value buffer grows to the next power of two above the page
// (PooledBufferWriter.Reserve), goes back to a pool shared with the
// per-batch level buffers, and every release zeroes the whole capacity
// (poolBuffer.Release calls memory.Set over Buf(); arrow-go v18.9.0
// parquet/internal/encoding/types.go). With 64 KiB pages that zeroing fell
// from 11-15 % of sink/delta's CPU to under 1 %, and CPU per row by 14-24 %,
// for 1.2 % larger files (BENCHMARKS.md, "Parquet settings, and what
// they cost").
const DataPageBytes = 64 << 10

// ForBronze returns Snappy-compressed properties with data pages of
// DataPageBytes, row groups of at most rowGroupRows rows, and an encoding
// per column chosen from its first batch (rec):
//   - dictionary for the bronze columns with few distinct values and for
//     low-cardinality columns (dictionary-encoding unique columns costs
//     about half the throughput);
//   - DELTA_BINARY_PACKED for integer, date and timestamp columns whose
//     values ascend (a snapshot file's single integer key does, being read
//     in key order; a composite key's integer column does within a group).
//     internal/bench measured sink/delta's files 10 % smaller for the same
//     CPU, and faster scans in DuckDB and pyarrow (BENCHMARKS.md, "Parquet
//     settings, and what they cost"). Spark's vectorized
//     reader reads it from 3.3.0 (SPARK-36879, apache/spark#34471);
//   - PLAIN for the rest.
//
// extra is applied last, so it overrides these choices (sink/delta's
// allocator, internal/bench's experiments).
func ForBronze(rec arrow.RecordBatch, rowGroupRows int, createdBy string, extra ...parquet.WriterProperty) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithDataPageSize(DataPageBytes),
		parquet.WithCreatedBy(createdBy),
	}
	for i, f := range rec.Schema().Fields() {
		switch {
		case AlwaysDictionary(f.Name) || lowCardinality(rec.Column(i)):
			opts = append(opts, parquet.WithDictionaryFor(f.Name, true))
		case ascending(rec.Column(i)):
			opts = append(opts, parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
		}
	}
	return parquet.NewWriterProperties(append(opts, extra...)...)
}

// ascending reports whether the first 4096 values of an integer, date or
// timestamp column (Parquet's INT32 and INT64, the only types
// DELTA_BINARY_PACKED is defined for: the Parquet format's Encodings.md)
// never decrease, ignoring NULLs, with at least 16 present.
func ascending(arr arrow.Array) bool {
	var at func(i int) int64
	switch a := arr.(type) {
	case *array.Int8:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int32:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int64:
		at = a.Value
	case *array.Date32:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Timestamp:
		at = func(i int) int64 { return int64(a.Value(i)) }
	default:
		return false
	}
	present := 0
	var last int64
	for i := range min(arr.Len(), 4096) {
		if arr.IsNull(i) {
			continue
		}
		v := at(i)
		if present > 0 && v < last {
			return false
		}
		last = v
		present++
	}
	return present >= 16
}

// AlwaysDictionary reports the bronze columns with few distinct values
// per file: they are dictionary-encoded whatever their first batch holds.
func AlwaysDictionary(name string) bool {
	switch name {
	case sink.ColCaptureInstance, sink.ColOperation, sink.ColStartLSN, sink.ColSeqval,
		sink.ColSnapshot, sink.ColChunk, sink.ColCommandID, sink.ColBatchID:
		return true
	}
	return false
}

// lowCardinality samples up to 4096 values of a column.
func lowCardinality(arr arrow.Array) bool {
	n := min(arr.Len(), 4096)
	if n < 16 {
		return false
	}
	seen := map[any]struct{}{}
	limit := n / 10
	for i := 0; i < n; i++ {
		if arr.IsNull(i) {
			continue
		}
		var k any
		switch a := arr.(type) {
		case *array.String:
			k = a.Value(i)
		case *array.Int32:
			k = a.Value(i)
		case *array.Int64:
			k = a.Value(i)
		case *array.Int16:
			k = a.Value(i)
		case *array.Int8:
			k = a.Value(i)
		case *array.Date32:
			k = a.Value(i)
		case *array.Timestamp:
			k = a.Value(i)
		case *array.Decimal128:
			k = a.Value(i)
		default:
			return false
		}
		seen[k] = struct{}{}
		if len(seen) > limit {
			return false
		}
	}
	return true
}
