package pqfile

import (
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/parquetprops"
)

// BenchmarkWrite writes 1M bronze-shaped rows (an ascending key, text, a
// decimal, a timestamp, three low-cardinality columns, one NULL in ten in
// the text) with the properties sink/delta chooses; it reports rows/s.
func BenchmarkWrite(b *testing.B) {
	const rows, batch = 1 << 20, 64 << 10
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "created", Type: ts, Nullable: true},
		{Name: "_capture_instance", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_operation", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	var recs []arrow.RecordBatch
	for from := 0; from < rows; from += batch {
		bl := array.NewRecordBuilder(memory.DefaultAllocator, s)
		for i := from; i < from+batch; i++ {
			bl.Field(0).(*array.Int64Builder).Append(int64(i))
			if i%10 == 3 {
				bl.Field(1).AppendNull()
			} else {
				bl.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer %d", i))
			}
			bl.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i)*10000 + 1234))
			bl.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1000))
			bl.Field(4).(*array.StringBuilder).Append("dbo_Orders")
			bl.Field(5).(*array.Int32Builder).Append(int32(i % 3))
			bl.Field(6).(*array.BooleanBuilder).Append(i%5 == 0)
		}
		recs = append(recs, bl.NewRecordBatch())
		bl.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	props := parquetprops.ForBronze(recs[0], 1<<20, "bench")
	b.ResetTimer()
	for range b.N {
		w, err := NewWriter(s, io.Discard, props)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
