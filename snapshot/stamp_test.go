package snapshot

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

func capturedBatches(t testing.TB, mem memory.Allocator, sizes ...int) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	schema, err := source.ArrowSchema([]source.Column{{Name: "id", Type: "bigint"}, {Name: "name", Type: "nvarchar", Length: 40, Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out []arrow.RecordBatch
	next := int64(0)
	for _, n := range sizes {
		b := array.NewRecordBuilder(mem, schema)
		for range n {
			b.Field(0).(*array.Int64Builder).Append(next)
			if next%3 == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append("n")
			}
			next++
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return schema, out
}

func TestStamperSnapshotRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	captured, recs := capturedBatches(t, mem, 3, 2000, 0, 5)
	rr, err := array.NewRecordReader(captured, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	bronze, err := sink.BronzeSchema(captured)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 10, 1, 12, 0, 0, 123456789, time.UTC)
	var seen []int64
	s, err := newStamper(rr, bronze, stamp{captureInstance: "dbo_Orders", lsn: "0x0000002A00000F380003", commitTS: ts}, func(n int64) { seen = append(seen, n) })
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	total := 0
	for s.Next() {
		rec := s.RecordBatch()
		if !rec.Schema().Equal(bronze) {
			t.Fatalf("schema %s, want %s", rec.Schema(), bronze)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for r := 0; r < int(rec.NumRows()); r++ {
			if got := col("id").(*array.Int64).Value(r); got != int64(total+r) {
				t.Fatalf("row %d: id %d", total+r, got)
			}
			if got := col(sink.ColCaptureInstance).(*array.String).Value(r); got != "dbo_Orders" {
				t.Fatalf("_capture_instance %q", got)
			}
			if got := col(sink.ColOperation).(*array.Int32).Value(r); got != 0 {
				t.Fatalf("_operation %d", got)
			}
			for _, name := range []string{sink.ColStartLSN, sink.ColSnapshot} {
				if got := col(name).(*array.String).Value(r); got != "0x0000002A00000F380003" {
					t.Fatalf("%s %q", name, got)
				}
			}
			if got := col(sink.ColCommitTS).(*array.Timestamp).Value(r); int64(got) != ts.UnixMicro() {
				t.Fatalf("_commit_ts %d, want %d", got, ts.UnixMicro())
			}
			for _, name := range []string{sink.ColSeqval, sink.ColCommandID, sink.ColBatchID, sink.ColChunk} {
				if !col(name).IsNull(r) {
					t.Fatalf("%s is not NULL on a whole snapshot row", name)
				}
			}
		}
		total += int(rec.NumRows())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if total != 2008 {
		t.Fatalf("%d rows, want 2008", total)
	}
	if want := []int64{3, 2003, 2003, 2008}; len(seen) != len(want) || seen[3] != want[3] || seen[1] != want[1] {
		t.Fatalf("progress %v, want %v", seen, want)
	}
}

func TestStamperRefusesMissingColumn(t *testing.T) {
	captured, recs := capturedBatches(t, memory.DefaultAllocator, 1)
	rr, _ := array.NewRecordReader(captured, recs)
	defer rr.Release()
	other, _ := source.ArrowSchema([]source.Column{{Name: "ID", Type: "int"}})
	bronze, _ := sink.BronzeSchema(other)
	if _, err := newStamper(rr, bronze, stamp{}, nil); err == nil {
		t.Fatal("a reader without the captured column was accepted")
	}
}

// BenchmarkStamp measures stamping alone: allocations are per batch (the
// record and its column slices), never per row, so allocs/op must not grow
// with the batch size.
func BenchmarkStamp(b *testing.B) {
	for _, rows := range []int{1024, 16384} {
		b.Run("rows="+strconv.Itoa(rows), func(b *testing.B) {
			captured, recs := capturedBatches(b, memory.DefaultAllocator, rows)
			bronze, _ := sink.BronzeSchema(captured)
			rec := recs[0]
			b.ReportAllocs()
			b.ResetTimer()
			rr := &repeatReader{schema: captured, rec: rec, n: b.N}
			s, err := newStamper(rr, bronze, stamp{captureInstance: "ci", lsn: "0x0000002A00000F380003"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			for s.Next() {
			}
			s.Release()
			b.ReportMetric(float64(rows), "rows/op")
		})
	}
}

// repeatReader returns the same batch n times.
type repeatReader struct {
	schema *arrow.Schema
	rec    arrow.RecordBatch
	n      int
}

func (r *repeatReader) Retain()                        {}
func (r *repeatReader) Release()                       {}
func (r *repeatReader) Schema() *arrow.Schema          { return r.schema }
func (r *repeatReader) Next() bool                     { r.n--; return r.n >= 0 }
func (r *repeatReader) RecordBatch() arrow.RecordBatch { return r.rec }
func (r *repeatReader) Record() arrow.RecordBatch      { return r.rec }
func (r *repeatReader) Err() error                     { return nil }
