package delta

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
)

// benchRecords prebuilds rows bronze rows (8 columns: id, name, amount,
// created + 4 metadata columns in the snapshot's shape) in batches of 64Ki.
func benchRecords(b *testing.B, rows int) (*arrow.Schema, []arrow.RecordBatch) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "created", Type: tsUTC, Nullable: true},
		{Name: sink.ColCaptureInstance, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: sink.ColOperation, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: sink.ColStartLSN, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: sink.ColCommitTS, Type: tsUTC, Nullable: true},
	}, nil)
	var recs []arrow.RecordBatch
	const batch = 64 << 10
	for from := 0; from < rows; from += batch {
		n := min(batch, rows-from)
		bl := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := 0; i < n; i++ {
			id := int64(from + i)
			bl.Field(0).(*array.Int64Builder).Append(id)
			bl.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer %d", id))
			bl.Field(2).(*array.Decimal128Builder).Append(decimalOf(id))
			bl.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime.UnixMicro() + id*1000))
			bl.Field(4).(*array.StringBuilder).Append("dbo_Orders")
			bl.Field(5).(*array.Int32Builder).Append(0)
			bl.Field(6).(*array.StringBuilder).Append("0x0000002A00000F380003")
			bl.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime.UnixMicro()))
		}
		recs = append(recs, bl.NewRecordBatch())
		bl.Release()
	}
	return schema, recs
}

// BenchmarkWrite1M writes 1M prebuilt bronze rows to a local table in two
// parallel partitions and commits them; it reports rows/s.
func BenchmarkWrite1M(b *testing.B) {
	const rows = 1 << 20
	schema, recs := benchRecords(b, rows)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			ctx := context.Background()
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tb, err := Open(ctx, b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				info := sink.Info{CaptureInstance: "dbo_Orders", LSN: mustLSN(b, "0x0000002A00000F380003"), CommitTS: baseTime, Schema: schema, PlanID: "bench"}
				b.StartTimer()
				start := time.Now()
				parts := make([]sink.Part, writers)
				errs := make([]error, writers)
				var wg sync.WaitGroup
				for w := 0; w < writers; w++ {
					var mine []arrow.RecordBatch
					for j := w; j < len(recs); j += writers {
						recs[j].Retain()
						mine = append(mine, recs[j])
					}
					rr, _ := array.NewRecordReader(schema, mine)
					for _, r := range mine {
						r.Release()
					}
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						defer rr.Release()
						parts[w], errs[w] = tb.WritePartition(ctx, info, w, rr)
					}(w)
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				if _, err := tb.CommitSnapshot(ctx, info, parts); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				b.StopTimer()
				tb.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/elapsed.Seconds(), "rows/s")
		})
	}
}

func decimalOf(id int64) decimal128.Num { return decimal128.FromI64(id*10000 + 1234) }

// BenchmarkConstantColumns writes 1M prebuilt snapshot rows in one
// partition with and without the constant-column path (constColumns);
// -count interleaves the two.
func BenchmarkConstantColumns(b *testing.B) {
	schema, recs := benchRecords(b, 1<<20)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, constant := range []bool{false, true} {
		b.Run(fmt.Sprintf("constant=%v", constant), func(b *testing.B) {
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tb, err := Open(ctx, b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				rr, err := array.NewRecordReader(schema, recs)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, _, err := tb.writeRecords(ctx, schema, 0, rr, constant); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				rr.Release()
				tb.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(1<<20), "ns/row")
		})
	}
}

// BenchmarkReadAll1M reads back a 1M-row bronze table (written once, in
// two partitions) with ReadAll; it reports rows/s.
func BenchmarkReadAll1M(b *testing.B) {
	const rows = 1 << 20
	schema, recs := benchRecords(b, rows)
	ctx := context.Background()
	tb, err := Open(ctx, b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	info := sink.Info{CaptureInstance: "dbo_Orders", LSN: mustLSN(b, "0x0000002A00000F380003"), CommitTS: baseTime, Schema: schema, PlanID: "bench"}
	var parts []sink.Part
	for w := range 2 {
		rr, err := array.NewRecordReader(schema, recs[w*len(recs)/2:(w+1)*len(recs)/2])
		if err != nil {
			b.Fatal(err)
		}
		p, err := tb.WritePartition(ctx, info, w, rr)
		rr.Release()
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, p)
	}
	for _, r := range recs {
		r.Release()
	}
	if _, err := tb.CommitSnapshot(ctx, info, parts); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		rr, err := tb.ReadAll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rr.Next() {
			n += int(rr.RecordBatch().NumRows())
		}
		err = rr.Err()
		rr.Release()
		if err != nil || n != rows {
			b.Fatalf("read %d rows (%v), want %d", n, err, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
