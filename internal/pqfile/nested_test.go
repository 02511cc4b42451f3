package pqfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// leafKinds are the leaf types of random nested columns: what Delta
// checkpoints hold (strings, longs, ints, booleans) and more.
var leafKinds = []arrow.DataType{
	arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.Binary, arrow.FixedWidthTypes.Date32,
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, &arrow.Decimal128Type{Precision: 12, Scale: 2},
}

// randomTypeOf is a random type nested up to depth levels: structs,
// lists and maps (with string or int keys) of leaves.
func randomTypeOf(r *rand.Rand, depth int, leaves []arrow.DataType) arrow.DataType {
	if depth == 0 || r.IntN(3) == 0 {
		return leaves[r.IntN(len(leaves))]
	}
	switch r.IntN(3) {
	case 0:
		fields := make([]arrow.Field, 1+r.IntN(3))
		for i := range fields {
			fields[i] = arrow.Field{Name: fmt.Sprintf("f%d", i), Type: randomTypeOf(r, depth-1, leaves), Nullable: r.IntN(4) > 0}
		}
		return arrow.StructOf(fields...)
	case 1:
		return arrow.ListOfField(arrow.Field{Name: "element", Type: randomTypeOf(r, depth-1, leaves), Nullable: r.IntN(4) > 0})
	default:
		key := []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32}[r.IntN(2)]
		m := arrow.MapOf(key, randomTypeOf(r, depth-1, leaves))
		if r.IntN(3) == 0 {
			m = arrow.MapOfWithMetadata(key, arrow.Metadata{}, m.ItemType(), arrow.Metadata{})
			m.SetItemNullable(false)
		}
		return m
	}
}

// appendRandom appends one random value of t to b: NULL with
// probability nulls when nullable, empty lists and maps often.
func appendRandom(r *rand.Rand, b array.Builder, t arrow.DataType, nullable bool, nulls float64) {
	if nullable && r.Float64() < nulls {
		b.AppendNull() // a struct's appends a NULL to each of its fields
		return
	}
	v := r.IntN(50)
	switch b := b.(type) {
	case *array.StructBuilder:
		b.Append(true)
		for i, f := range t.(*arrow.StructType).Fields() {
			appendRandom(r, b.FieldBuilder(i), f.Type, f.Nullable, nulls)
		}
	case *array.ListBuilder:
		b.Append(true)
		et := t.(*arrow.ListType).ElemField()
		for range []int{0, 0, 1, 2, 3, 7}[r.IntN(6)] {
			appendRandom(r, b.ValueBuilder(), et.Type, et.Nullable, nulls)
		}
	case *array.MapBuilder:
		b.Append(true)
		mt := t.(*arrow.MapType)
		for k := range []int{0, 0, 1, 2, 4}[r.IntN(5)] {
			switch kb := b.KeyBuilder().(type) {
			case *array.StringBuilder:
				kb.Append(fmt.Sprintf("k%d", k))
			case *array.Int32Builder:
				kb.Append(int32(k * 3))
			}
			appendRandom(r, b.ItemBuilder(), mt.ItemType(), mt.ItemField().Nullable, nulls)
		}
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("s%d-é", v))
	case *array.BinaryBuilder:
		b.Append([]byte{byte(v), 0, byte(v * 7)})
	case *array.Int64Builder:
		b.Append(int64(v)*1_000_000_007 - 3)
	case *array.Int32Builder:
		b.Append(int32(v) - 20)
	case *array.Int16Builder:
		b.Append(int16(v * 100))
	case *array.BooleanBuilder:
		b.Append(v%2 == 0)
	case *array.Float64Builder:
		b.Append(float64(v) / 7)
	case *array.Date32Builder:
		b.Append(arrow.Date32(19000 + v))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(int64(v) * 86_400_000_001))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(int64(v)*12345 - 99999))
	default:
		panic(fmt.Sprintf("no value for %T", b))
	}
}

func randomNestedScenario(r *rand.Rand) *scenario { return randomNestedScenarioOf(r, leafKinds) }

func randomNestedScenarioOf(r *rand.Rand, leaves []arrow.DataType) *scenario {
	fields := make([]arrow.Field, 1+r.IntN(4))
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: randomTypeOf(r, 3, leaves), Nullable: r.IntN(4) > 0}
	}
	s := arrow.NewSchema(fields, nil)
	codec := []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Uncompressed, compress.Codecs.Zstd}[r.IntN(3)]
	dictDefault := r.IntN(2) == 0
	pageBytes := int64(64 << r.IntN(8))
	maxRows := int64(1 + r.IntN(400))
	batchSize := int64(8 << r.IntN(6))
	sc := &scenario{schema: s, props: func(extra ...parquet.WriterProperty) *parquet.WriterProperties {
		return parquet.NewWriterProperties(append([]parquet.WriterProperty{
			parquet.WithCompression(codec), parquet.WithDictionaryDefault(dictDefault),
			parquet.WithDataPageSize(pageBytes), parquet.WithMaxRowGroupLength(maxRows), parquet.WithBatchSize(batchSize),
			parquet.WithCreatedBy("pqfile test"),
		}, extra...)...)
	}}
	nulls := []float64{0, 0.2, 0.6}[r.IntN(3)]
	for range 1 + r.IntN(4) {
		n := []int{1, 1 + r.IntN(300), int(maxRows), int(maxRows) + 1}[r.IntN(4)]
		sc.batches = append(sc.batches, randomNestedBatch(r, s, n, nulls))
		sc.flushBefore = append(sc.flushBefore, r.IntN(4) == 0)
	}
	return sc
}

// TestNestedSameBytesAsPqarrow: for random columns of structs, lists and
// maps nested up to three deep, with NULLs at every level and empty lists
// and maps, a Writer's file is
// pqarrow.FileWriter's (pages byte for byte, footer up to the order of
// two lists).
func TestNestedSameBytesAsPqarrow(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := randomNestedScenario(rand.New(rand.NewPCG(seed, 35)))
			defer sc.release()
			sameBytes(t, sc, writePqarrow(t, sc), writePqfile(t, sc, nil))
		})
	}
}

// TestWriteTableSameBytes: one batch in one row group, as
// internal/deltalog writes a checkpoint, is what pqarrow.WriteTable
// writes for it (pqarrow's unbuffered row group against pqfile's
// buffered one).
func TestWriteTableSameBytes(t *testing.T) {
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := randomNestedScenario(rand.New(rand.NewPCG(seed, 36)))
			defer sc.release()
			rec := sc.batches[0]
			props := sc.props(parquet.WithMaxRowGroupLength(max(rec.NumRows(), 1)))
			var want bytes.Buffer
			tbl := array.NewTableFromRecords(sc.schema, []arrow.RecordBatch{rec})
			defer tbl.Release()
			if err := pqarrow.WriteTable(tbl, &want, max(rec.NumRows(), 1), props, pqarrow.DefaultWriterProps()); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			w, err := NewWriterEncoder(sc.schema, &got, props, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if rec.NumRows() == 0 {
				// pqarrow writes an empty row group; pqfile writes none.
				if md := footer(t, got.Bytes()); md.NumRowGroups() != 0 {
					t.Fatalf("%d row groups for no rows", md.NumRowGroups())
				}
				return
			}
			sameBytes(t, sc, want.Bytes(), got.Bytes())
		})
	}
}

func sameBytes(t *testing.T, sc *scenario, want, got []byte) {
	t.Helper()
	gb, gf := canonical(t, got)
	wb, wf := canonical(t, want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("schema %s: pqfile wrote %d bytes of pages, pqarrow %d; they differ", sc.schema, len(gb), len(wb))
	}
	if !bytes.Equal(gf, wf) {
		t.Fatalf("schema %s: the footers differ", sc.schema)
	}
}

// TestNullListWithValues: a NULL list entry may still span values (Arrow
// allows it); they are not written, the values around them are.
func TestNullListWithValues(t *testing.T) {
	vb := array.NewInt64Builder(memory.DefaultAllocator)
	vb.AppendValues([]int64{1, 2, 3, 4, 5, 6}, nil)
	vals := vb.NewArray()
	defer vals.Release()
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 2, 4, 4, 6}))
	valid := memory.NewBufferBytes([]byte{0b1101}) // entry 1 is NULL over values 3 and 4
	lt := arrow.ListOf(arrow.PrimitiveTypes.Int64)
	data := array.NewData(lt, 4, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{vals.Data()}, 1, 0)
	defer data.Release()
	list := array.MakeFromData(data)
	defer list.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "l", Type: lt, Nullable: true}}, nil)
	rec := array.NewRecordBatch(s, []arrow.Array{list}, 4)
	defer rec.Release()
	sc := &scenario{schema: s, batches: []arrow.RecordBatch{rec}, flushBefore: []bool{false},
		props: func(extra ...parquet.WriterProperty) *parquet.WriterProperties {
			return parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, extra...)...)
		}}
	got := writePqfile(t, sc, nil)
	sameBytes(t, sc, writePqarrow(t, sc), got)
	cc, err := footer(t, got).RowGroup(0).ColumnChunk(0)
	if err != nil || cc.NumValues() != 6 { // [1 2] NULL [] [5 6]: 2+1+1+2 levels
		t.Fatalf("%d levels written (%v), want 6", cc.NumValues(), err)
	}
	tbl, err := pqarrow.ReadTable(t.Context(), bytes.NewReader(got), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if s := fmt.Sprint(tbl.Column(0).Data().Chunk(0)); s != "[[1 2] (null) [] [5 6]]" {
		t.Fatalf("read back %s", s)
	}
}

// randomNestedBatch is n random rows of s, NULL with probability nulls at
// every nullable level.
func randomNestedBatch(r *rand.Rand, s *arrow.Schema, n int, nulls float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i, f := range s.Fields() {
		for range n {
			appendRandom(r, b.Field(i), f.Type, f.Nullable, nulls)
		}
	}
	return b.NewRecordBatch()
}
