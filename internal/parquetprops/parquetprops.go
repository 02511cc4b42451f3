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
// for 1.2 % larger files (BENCHMARKS.md, "Pages of 64 KiB").
const DataPageBytes = 64 << 10

// ForBronze returns Snappy-compressed properties with data pages of
// DataPageBytes, row groups of at most rowGroupRows rows, dictionary encoding off by default and on for
// the bronze columns with few distinct values and for columns whose first
// batch (rec) is low-cardinality: dictionary-encoding unique columns costs
// about half the throughput. extra is applied last, so it overrides these
// choices (sink/delta's allocator, internal/bench's codec and page-size
// experiments).
func ForBronze(rec arrow.RecordBatch, rowGroupRows int, createdBy string, extra ...parquet.WriterProperty) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithDataPageSize(DataPageBytes),
		parquet.WithCreatedBy(createdBy),
	}
	for i, f := range rec.Schema().Fields() {
		if AlwaysDictionary(f.Name) || lowCardinality(rec.Column(i)) {
			opts = append(opts, parquet.WithDictionaryFor(f.Name, true))
		}
	}
	return parquet.NewWriterProperties(append(opts, extra...)...)
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
