package pqfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// readBatch is the batch size sink/delta reads data files with.
const readBatch = 64 << 10

// flatFields are the top-level primitive fields of b's file, by index.
func flatFields(t *testing.T, b []byte) []int {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var out []int
	root := pf.MetaData().Schema.Root()
	for i := range root.NumFields() {
		if n := root.Field(i); n.Type() == schema.Primitive && n.RepetitionType() != parquet.Repetitions.Repeated {
			out = append(out, i)
		}
	}
	return out
}

// readPqarrow reads fields of b with pqarrow's RecordReader, as
// sink/delta did: the reference.
func readPqarrow(b []byte, fields []int) (*arrow.Schema, []arrow.RecordBatch, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: readBatch}, memory.DefaultAllocator)
	if err != nil {
		return nil, nil, err
	}
	cols := []int{}
	for _, i := range fields {
		cols = append(cols, fr.Manifest.Fields[i].ColIndex)
	}
	rr, err := fr.GetRecordReader(ctxBG(), cols, nil)
	if err != nil {
		return nil, nil, err
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, out, err
	}
	sc := rr.Schema()
	for fi, i := range fields {
		if pf.MetaData().Schema.Column(fr.Manifest.Fields[i].ColIndex).PhysicalType() == parquet.Types.Int96 {
			sc, out = int96AsMicros(sc, out, fi)
		}
	}
	return sc, out, nil
}

// int96AsMicros turns column c of recs, an INT96 column pqarrow read as
// nanoseconds, into the microseconds pqfile reads (floored).
func int96AsMicros(sc *arrow.Schema, recs []arrow.RecordBatch, c int) (*arrow.Schema, []arrow.RecordBatch) {
	fs := sc.Fields()
	fs[c].Type = arrow.FixedWidthTypes.Timestamp_us
	md := sc.Metadata()
	sc = arrow.NewSchema(fs, &md)
	for k, rec := range recs {
		ns := rec.Column(c).(*array.Timestamp)
		b := array.NewTimestampBuilder(memory.DefaultAllocator, arrow.FixedWidthTypes.Timestamp_us.(*arrow.TimestampType))
		for i := range ns.Len() {
			if ns.IsNull(i) {
				b.AppendNull()
				continue
			}
			v := int64(ns.Value(i))
			us := v / 1000
			if v%1000 < 0 {
				us--
			}
			b.Append(arrow.Timestamp(us))
		}
		cols := slices.Clone(rec.Columns())
		arr := b.NewArray()
		b.Release()
		cols[c] = arr
		recs[k] = array.NewRecordBatch(sc, cols, rec.NumRows())
		arr.Release()
		rec.Release()
	}
	return sc, recs
}

// readPqfile reads fields of b with Reader.
func readPqfile(b []byte, fields []int) (*arrow.Schema, []arrow.RecordBatch, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	r, err := NewReader(pf, memory.DefaultAllocator)
	if err != nil {
		return nil, nil, err
	}
	rr, err := r.Records(fields, readBatch)
	if err != nil {
		return nil, nil, err
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	return rr.Schema(), out, rr.Err()
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// sameRead checks Reader reads fields of b as pqarrow does: the same
// fields (names, types, nullability, metadata), the same batches, the
// same values and validity; or both fail.
func sameRead(t *testing.T, b []byte, fields []int) {
	t.Helper()
	ws, want, werr := readPqarrow(b, fields)
	defer release(want)
	gs, got, gerr := readPqfile(b, fields)
	defer release(got)
	if werr != nil && gerr == nil && strings.Contains(werr.Error(), "INT96 timestamp is outside the Arrow nanosecond range") {
		return // pqfile reads them: TestReadsSparksEdgeTimestamps
	}
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil {
			t.Fatalf("pqarrow: %v; pqfile: %v", werr, gerr)
		}
		return
	}
	if !ws.Equal(gs) || fmt.Sprint(fieldMetadata(ws)) != fmt.Sprint(fieldMetadata(gs)) || ws.HasMetadata() != gs.HasMetadata() {
		t.Fatalf("schema %s %v, pqarrow's %s %v", gs, fieldMetadata(gs), ws, fieldMetadata(ws))
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches, pqarrow %d", len(got), len(want))
	}
	for i := range want {
		if got[i].NumRows() != want[i].NumRows() {
			t.Fatalf("batch %d: %d rows, pqarrow %d", i, got[i].NumRows(), want[i].NumRows())
		}
		for c := range int(want[i].NumCols()) {
			g, w := got[i].Column(c), want[i].Column(c)
			if !arrow.TypeEqual(g.DataType(), w.DataType()) || g.NullN() != w.NullN() || !array.Equal(g, w) {
				t.Fatalf("batch %d column %s: read %s, pqarrow %s", i, want[i].ColumnName(c), g, w)
			}
		}
	}
}

func fieldMetadata(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Metadata.String())
	}
	return out
}

// TestReadsAsPqarrow: files pqfile writes (every bronze type, NULLs,
// dictionaries, many row groups and pages) read back as pqarrow reads
// them, every column and subsets.
func TestReadsAsPqarrow(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 40))
			sc := randomScenario(r)
			defer sc.release()
			b := writePqfile(t, sc, FastSnappy)
			all := flatFields(t, b)
			sameRead(t, b, all)
			sameRead(t, b, []int{all[r.IntN(len(all))]})
		})
	}
}

// storedKinds are types whose Arrow form a file keeps only in the stored
// Arrow schema (zones, large and dictionary types) or that bronze files
// do not hold.
var storedKinds = []arrow.DataType{
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Float32, arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Time64us,
	arrow.FixedWidthTypes.Time64ns, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"},
	&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, &arrow.TimestampType{Unit: arrow.Microsecond},
	&arrow.FixedSizeBinaryType{ByteWidth: 3}, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeBinary,
	&arrow.Decimal128Type{Precision: 7, Scale: 2}, &arrow.Decimal128Type{Precision: 17, Scale: 0}, &arrow.Decimal128Type{Precision: 30, Scale: 5},
	&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
	&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.Binary},
	arrow.FixedWidthTypes.Date32, arrow.BinaryTypes.String,
}

// randomValue appends a random value (or NULL) to a flat builder.
func randomValue(r *rand.Rand, b array.Builder, nulls float64) {
	if r.Float64() < nulls {
		b.AppendNull()
		return
	}
	v := r.Int64N(1 << 40)
	if r.IntN(2) == 0 {
		v = -v
	}
	switch b := b.(type) {
	case *array.Uint8Builder:
		b.Append(uint8(v))
	case *array.Uint16Builder:
		b.Append(uint16(v))
	case *array.Uint32Builder:
		b.Append(uint32(v))
	case *array.Uint64Builder:
		b.Append(uint64(v))
	case *array.Int8Builder:
		b.Append(int8(v))
	case *array.Float32Builder:
		b.Append(float32(v) / 3)
	case *array.Time32Builder:
		b.Append(arrow.Time32(v % 86_400_000))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v % 86_400_000_000))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(v), byte(v >> 8), byte(v >> 16)})
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprint("large ", v%1000))
	case *array.BinaryBuilder:
		b.Append([]byte(fmt.Sprint(v % 1000)))
	case *array.StringBuilder:
		b.Append(fmt.Sprint("s", v%50))
	case *array.Decimal128Builder:
		p := b.Type().(*arrow.Decimal128Type).Precision
		m := int64(1)
		for range min(p, 18) {
			m *= 10
		}
		b.Append(decimal128.FromI64(v % m))
	case *array.BinaryDictionaryBuilder:
		if err := b.AppendString(fmt.Sprint("d", v%7)); err != nil {
			panic(err)
		}
	case *array.Date32Builder:
		b.Append(arrow.Date32(v % 100_000))
	default:
		panic(fmt.Sprintf("no value for %T", b))
	}
}

// TestReadsStoredSchemaAsPqarrow: files pqarrow writes with the Arrow
// schema stored (as delta-rs and pyarrow do), decimals as integers or
// not, read as pqarrow reads them: zones, large strings and dictionaries
// come back from the stored schema.
func TestReadsStoredSchemaAsPqarrow(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 41))
			fields := make([]arrow.Field, 1+r.IntN(6))
			for i := range fields {
				fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: storedKinds[r.IntN(len(storedKinds))], Nullable: r.IntN(3) > 0}
				if r.IntN(3) == 0 {
					fields[i].Metadata = arrow.NewMetadata([]string{"PARQUET:field_id", "note"}, []string{fmt.Sprint(i + 1), "x"})
				}
			}
			s := arrow.NewSchema(fields, nil)
			if r.IntN(2) == 0 {
				md := arrow.NewMetadata([]string{"origin"}, []string{"test"})
				s = arrow.NewSchema(fields, &md)
			}
			props := parquet.NewWriterProperties(parquet.WithStoreDecimalAsInteger(r.IntN(2) == 0),
				parquet.WithDictionaryDefault(r.IntN(2) == 0), parquet.WithMaxRowGroupLength(int64(50+r.IntN(3000))),
				parquet.WithDataPageSize(int64(512<<r.IntN(6))), parquet.WithCompression(compress.Codecs.Snappy))
			b := writeWithPqarrow(t, r, s, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			all := flatFields(t, b)
			sameRead(t, b, all)
			sameRead(t, b, all[:1+r.IntN(len(all))])
		})
	}
}

// writeWithPqarrow writes random batches of s with pqarrow.
func writeWithPqarrow(t testing.TB, r *rand.Rand, s *arrow.Schema, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(s, &buf, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	nulls := []float64{0, 0.1, 0.5, 1}[r.IntN(4)]
	for range 1 + r.IntN(3) {
		bl := array.NewRecordBuilder(memory.DefaultAllocator, s)
		n := 1 + r.IntN(5000)
		for i := range s.NumFields() {
			for range n {
				randomValue(r, bl.Field(i), nulls)
			}
		}
		rec := bl.NewRecordBatch()
		bl.Release()
		err := fw.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReadsInt96AsMicroseconds: Impala's INT96 timestamps (Spark's
// default) read as microseconds: pqarrow's nanoseconds floored to the
// microsecond where pqarrow can read them, and 0001-01-01 and 9999-12-31,
// which Spark writes and pqarrow cannot read, exactly.
func TestReadsInt96AsMicroseconds(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true}}, nil)
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(700))
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true))
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 42))
		b := writeWithPqarrow(t, r, s, props, aprops)
		if md := footer(t, b); md.Schema.Column(0).PhysicalType() != parquet.Types.Int96 {
			t.Fatalf("wrote %s, want INT96", md.Schema.Column(0).PhysicalType())
		}
		want, err := int96Values(readPqarrow(b, []int{0})) // floored to microseconds
		if err != nil {
			t.Fatal(err)
		}
		got, err := int96Values(readPqfile(b, []int{0}))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: read %d values, pqarrow %d", seed, len(got), len(want))
		}
		ws := deref(want)
		for i, g := range deref(got) {
			if w := ws[i]; g != w {
				t.Fatalf("seed %d value %d: read %v, want pqarrow's nanoseconds floored %v", seed, i, g, w)
			}
		}
	}

	node, err := schema.NewPrimitiveNodeLogical("ts", parquet.Repetitions.Optional, schema.NoLogicalType{}, parquet.Types.Int96, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	int96 := func(julianDay uint32, nanos uint64) parquet.Int96 {
		var v parquet.Int96
		binary.LittleEndian.PutUint64(v[:8], nanos)
		binary.LittleEndian.PutUint32(v[8:], julianDay)
		return v
	}
	// Julian days of 0001-01-01 and 9999-12-31 (proleptic Gregorian).
	year1, year9999 := int96(1721426, 0), int96(5373484, 86_399_999_999_000)
	b := writeLowLevel(t, node, func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int96ColumnChunkWriter).WriteBatch([]parquet.Int96{year1, year9999}, []int16{1, 1}, nil)
		return err
	})
	got, err := int96Values(readPqfile(b, []int{0}))
	if err != nil {
		t.Fatal(err)
	}
	wantTimes := []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)}
	for i, w := range wantTimes {
		if got[i] == nil || *got[i] != w.UnixMicro() {
			t.Errorf("value %d: read %v, want %d (%s)", i, deref(got)[i], w.UnixMicro(), w)
		}
	}

	bad := writeLowLevel(t, node, func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int96ColumnChunkWriter).WriteBatch([]parquet.Int96{int96(2440588, 86_400_000_000_000)}, []int16{1}, nil)
		return err
	})
	if _, _, err := readPqfile(bad, []int{0}); err == nil || !strings.Contains(err.Error(), "INT96") {
		t.Fatalf("a day's worth of nanoseconds read with error %v", err)
	}
}

// TestReadsSparksEdgeTimestamps: the timestamps Spark 4.0.1 wrote as INT96
// at the ends of its range (testdata/delta/spark_edge_timestamps) read as
// Spark wrote them; the statistics in its commit say which.
func TestReadsSparksEdgeTimestamps(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "delta", "spark_edge_timestamps", "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("fixture files %v, %v", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if md := footer(t, b); md.Schema.Column(1).PhysicalType() != parquet.Types.Int96 {
		t.Fatalf("column ts is %s, want INT96", md.Schema.Column(1).PhysicalType())
	}
	got, err := int96Values(readPqfile(b, []int{1}))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
	var sawLo, sawHi bool
	for _, v := range got {
		if v == nil {
			continue
		}
		if *v < lo || *v > hi {
			t.Errorf("read %d, outside Spark's range", *v)
		}
		sawLo, sawHi = sawLo || *v == lo, sawHi || *v == hi
	}
	if !sawLo || !sawHi {
		t.Fatalf("read %v: want both 0001-01-01 (%d) and 9999-12-31 23:59:59.999999 (%d)", deref(got), lo, hi)
	}
}

// int96Values is the one column of recs as int64s (nil for NULL).
func int96Values(_ *arrow.Schema, recs []arrow.RecordBatch, err error) ([]*int64, error) {
	defer release(recs)
	if err != nil {
		return nil, err
	}
	var out []*int64
	for _, r := range recs {
		a, ok := r.Column(0).(*array.Timestamp)
		if !ok {
			return nil, fmt.Errorf("column is %s, want a timestamp", r.Column(0).DataType())
		}
		for i := range a.Len() {
			if a.IsNull(i) {
				out = append(out, nil)
				continue
			}
			v := int64(a.Value(i))
			out = append(out, &v)
		}
	}
	return out, nil
}

func deref(vs []*int64) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if v != nil {
			out[i] = *v
		}
	}
	return out
}

// writeLowLevel writes a file of one column, node, with write.
func writeLowLevel(t *testing.T, node schema.Node, write func(file.ColumnChunkWriter) error) []byte {
	t.Helper()
	return writeColumns(t, schema.FieldList{node}, func(_ int, cw file.ColumnChunkWriter) error { return write(cw) })
}

// writeColumns writes a file of one row group with arrow-go's column
// writers: the top-level fields, each leaf column i by write(i, ...).
func writeColumns(t *testing.T, fields schema.FieldList, write func(i int, cw file.ColumnChunkWriter) error) []byte {
	t.Helper()
	root, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, fields, -1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, root)
	rg, err := w.AppendRowGroupChecked()
	if err != nil {
		t.Fatal(err)
	}
	for i := range schema.NewSchema(root).NumColumns() {
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		if err := write(i, cw); err != nil {
			t.Fatal(err)
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReadsByteArrayDecimals: decimals stored as BYTE_ARRAY (the format
// allows it; pqarrow does not write it) read as pqarrow reads them.
func TestReadsByteArrayDecimals(t *testing.T) {
	node, err := schema.NewPrimitiveNodeLogical("d", parquet.Repetitions.Optional, schema.NewDecimalLogicalType(30, 4), parquet.Types.ByteArray, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	vals := []parquet.ByteArray{{0x01}, {0xff}, {0x80, 0}, {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}
	b := writeLowLevel(t, node, func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(vals, []int16{1, 0, 1, 1, 1, 1}, nil)
		return err
	})
	sameRead(t, b, []int{0})
	_, got, err := readPqfile(b, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer release(got)
	// 1, NULL, -1, -2^15, 2^71-1 and -2^121+1 ten-thousandths.
	if s := fmt.Sprint(got[0].Column(0)); s != "[0.0001 (null) -0.0001 -3.2768 236118324143482260.6847 -2.65845599156983174580761412056e+32]" {
		t.Fatalf("read %s", s)
	}
}

// TestReadsFixtures: every data file of the Delta tables Spark and
// delta-rs wrote (testdata/delta) reads as pqarrow reads it: every flat
// column, then each alone.
func TestReadsFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "delta")
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") || strings.Contains(p, "_delta_log") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		t.Run(strings.TrimPrefix(p, root), func(t *testing.T) {
			all := flatFields(t, b)
			sameRead(t, b, all)
			for _, i := range all {
				sameRead(t, b, []int{i})
			}
		})
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Fatalf("read %d fixture data files; testdata/delta has more", n)
	}
}

func ctxBG() context.Context { return context.Background() }
