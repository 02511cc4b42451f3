package parquetprops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/cdcsnap/cdcsnap/sink"
)

// TestForBronze: dictionary encoding for the bronze constants and for
// repeated values, never for unique ones; an ascending key is delta-encoded.
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
	if got := props.EncodingFor("id"); got != parquet.Encodings.DeltaBinaryPacked {
		t.Errorf("id (ascending) encoded %v, want DELTA_BINARY_PACKED", got)
	}
	if props.DataPageSize() != DataPageBytes {
		t.Errorf("data page size %d, want %d", props.DataPageSize(), DataPageBytes)
	}
	if props.MaxRowGroupLength() != 4096 {
		t.Errorf("row group length %d", props.MaxRowGroupLength())
	}
}

// TestEncodingChosenFromTheData: over 1000 random first batches of every
// integer, date and timestamp type (ascending or not, with NULLs, short or
// long), a column gets DELTA_BINARY_PACKED exactly when a brute-force
// oracle finds its first 4096 present values in order and at least 16 of
// them, and it is not dictionary-encoded; other types never get it.
func TestEncodingChosenFromTheData(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 1))
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32,
		arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Date32,
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
		arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.String,
	}
	for trial := range 1000 {
		typ := types[r.IntN(len(types))]
		n := []int{0, 5, 15, 16, 17, 100, 4096, 5000}[r.IntN(8)]
		nullEvery := []int{0, 2, 7}[r.IntN(3)]
		// ascending columns, broken at a random row (or not at all)
		breakAt := -1
		if r.IntN(2) == 0 && n > 0 {
			breakAt = r.IntN(n)
		}
		// the value rises by step (plus 0 or 1) once every run rows: runs
		// of 9-11 put the distinct count around the dictionary's tenth
		step := []int64{0, 1, 3, 1000}[r.IntN(4)]
		run := []int{1, 1, 9, 10, 11}[r.IntN(5)]
		vals := make([]int64, n)
		valid := make([]bool, n)
		v := int64(r.IntN(50))
		for i := range n {
			prev := v
			if i%run == 0 {
				v += step + int64(r.IntN(2))
			}
			vals[i], valid[i] = v, nullEvery == 0 || i%nullEvery != 0
			if i == breakAt {
				vals[i] = prev - 1 - int64(r.IntN(3)) // just under the value before it
			}
		}
		b := array.NewBuilder(memory.DefaultAllocator, typ)
		for i := range n {
			if !valid[i] {
				b.AppendNull()
				continue
			}
			// narrow types wrap: the oracle sees the stored value
			x := vals[i]
			switch bb := b.(type) {
			case *array.Int8Builder:
				bb.Append(int8(x))
				x = int64(int8(x))
			case *array.Int16Builder:
				bb.Append(int16(x))
				x = int64(int16(x))
			case *array.Int32Builder:
				bb.Append(int32(x))
				x = int64(int32(x))
			case *array.Int64Builder:
				bb.Append(x)
			case *array.Date32Builder:
				bb.Append(arrow.Date32(x))
				x = int64(int32(x))
			case *array.TimestampBuilder:
				bb.Append(arrow.Timestamp(x))
			case *array.Float64Builder:
				bb.Append(float64(x))
			case *array.StringBuilder:
				bb.Append(fmt.Sprintf("%012d", x))
			}
			vals[i] = x
		}
		col := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ, Nullable: true}}, nil), []arrow.Array{col}, int64(n))
		col.Release()
		props := ForBronze(rec, 1<<20, "test")

		// the oracle
		integer := typ.ID() != arrow.FLOAT64 && typ.ID() != arrow.STRING
		var present []int64
		for i := range min(n, 4096) {
			if valid[i] {
				present = append(present, vals[i])
			}
		}
		sorted := len(present) >= 16
		for i := 1; i < len(present); i++ {
			if present[i] < present[i-1] {
				sorted = false
			}
		}
		// dictionary: at most a tenth of the first 4096 rows distinct
		// (lowCardinality), never for float64
		distinct := map[int64]bool{}
		for _, x := range present {
			distinct[x] = true
		}
		sampled := min(n, 4096)
		dictionary := typ.ID() != arrow.FLOAT64 && sampled >= 16 && len(distinct) <= sampled/10
		if got := props.DictionaryEnabledFor("c"); got != dictionary {
			t.Fatalf("trial %d: %v, %d rows, NULL every %d, step %d: dictionary %v, want %v",
				trial, typ, n, nullEvery, step, got, dictionary)
		}
		want := integer && sorted && !dictionary
		if got := props.EncodingFor("c") == parquet.Encodings.DeltaBinaryPacked; got != want {
			t.Fatalf("trial %d: %v, %d rows, NULL every %d, break at %d, step %d, dictionary %v: delta %v, want %v",
				trial, typ, n, nullEvery, breakAt, step, props.DictionaryEnabledFor("c"), got, want)
		}
		rec.Release()
	}
}
