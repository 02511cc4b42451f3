package parquetprops

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
)

// TestForBronze: dictionary encoding for the bronze constants and for
// repeated values, never for unique ones.
func TestForBronze(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String},
		{Name: sink.ColStartLSN, Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 1000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("r", i%5))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprint("0x", i)) // unique, but a bronze LSN column
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	props := ForBronze(rec, 4096, "test")
	for name, want := range map[string]bool{"id": false, "region": true, sink.ColStartLSN: true} {
		if got := props.DictionaryEnabledFor(name); got != want {
			t.Errorf("dictionary for %s = %v, want %v", name, got, want)
		}
	}
	if props.DataPageSize() != DataPageBytes {
		t.Errorf("data page size %d, want %d", props.DataPageSize(), DataPageBytes)
	}
	if props.MaxRowGroupLength() != 4096 {
		t.Errorf("row group length %d", props.MaxRowGroupLength())
	}
}
