package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// column kinds the random schemas draw from: every type a bronze data file
// holds (sink/delta's deltaType), plus a dictionary of strings (sink/delta's
// constant columns).
var kinds = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
	arrow.FixedWidthTypes.Date32,
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, &arrow.TimestampType{Unit: arrow.Microsecond},
	&arrow.Decimal128Type{Precision: 18, Scale: 4}, &arrow.Decimal128Type{Precision: 38, Scale: 0},
	&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
}

// scenario is one random file: a schema, its properties and the calls.
type scenario struct {
	schema      *arrow.Schema
	props       func(extra ...parquet.WriterProperty) *parquet.WriterProperties
	batches     []arrow.RecordBatch
	flushBefore []bool // flush the row group before batch i
}

func (sc *scenario) release() {
	for _, b := range sc.batches {
		b.Release()
	}
}

func randomScenario(r *rand.Rand) *scenario {
	nf := 1 + r.IntN(6)
	fields := make([]arrow.Field, nf)
	nullFrac := make([]float64, nf)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: kinds[r.IntN(len(kinds))], Nullable: r.IntN(3) > 0}
		if fields[i].Nullable {
			nullFrac[i] = []float64{0, 0.3, 1}[r.IntN(3)]
		}
	}
	s := arrow.NewSchema(fields, nil)
	codec := []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Snappy, compress.Codecs.Uncompressed, compress.Codecs.Zstd}[r.IntN(4)]
	dictDefault := r.IntN(2) == 0
	pageBytes := int64(256 << r.IntN(9))  // 256 B .. 64 KiB: many pages
	dictLimit := int64(1024 << r.IntN(8)) // small limits make dictionaries fall back
	maxRows := int64(1 + r.IntN(3000))
	batchSize := int64(64 << r.IntN(6))
	// Some integer columns are DELTA_BINARY_PACKED, as parquetprops
	// chooses for ascending ones.
	var encodings []parquet.WriterProperty
	for _, f := range fields {
		switch f.Type.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.TIMESTAMP:
			if r.IntN(2) == 0 {
				encodings = append(encodings, parquet.WithDictionaryFor(f.Name, false),
					parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
			}
		}
	}
	sc := &scenario{schema: s, props: func(extra ...parquet.WriterProperty) *parquet.WriterProperties {
		return parquet.NewWriterProperties(append(append([]parquet.WriterProperty{
			parquet.WithCompression(codec), parquet.WithDictionaryDefault(dictDefault),
			parquet.WithDataPageSize(pageBytes), parquet.WithDictionaryPageSizeLimit(dictLimit),
			parquet.WithMaxRowGroupLength(maxRows), parquet.WithBatchSize(batchSize),
			parquet.WithCreatedBy("pqfile test"),
		}, encodings...), extra...)...)
	}}
	for range 1 + r.IntN(6) {
		// Sizes at and around the row-group length reach its boundaries.
		n := []int{1 + r.IntN(4000), int(maxRows), int(maxRows) - 1, int(maxRows) + 1, 2 * int(maxRows)}[r.IntN(5)]
		sc.batches = append(sc.batches, randomBatch(r, s, nullFrac, max(n, 1)))
		sc.flushBefore = append(sc.flushBefore, r.IntN(4) == 0)
	}
	return sc
}

// randomBatch builds n rows: values repeat often enough for dictionaries
// to pay, strings run to about 800 bytes, and nullFrac[i] of column i is NULL.
func randomBatch(r *rand.Rand, s *arrow.Schema, nullFrac []float64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	card := 1 + r.IntN(2*n)
	for i, f := range s.Fields() {
		fb := b.Field(i)
		for range n {
			if f.Nullable && r.Float64() < nullFrac[i] {
				fb.AppendNull()
				continue
			}
			v := r.IntN(card)
			switch fb := fb.(type) {
			case *array.Int8Builder:
				fb.Append(int8(v))
			case *array.Int16Builder:
				fb.Append(int16(v - card/2))
			case *array.Int32Builder:
				fb.Append(int32(v * 7919))
			case *array.Int64Builder:
				fb.Append(int64(v)*1_000_003 - 5)
			case *array.Float32Builder:
				fb.Append(float32(v) / 3)
			case *array.Float64Builder:
				fb.Append(float64(v) * -1.5)
			case *array.BooleanBuilder:
				fb.Append(v%2 == 0)
			case *array.StringBuilder:
				fb.Append(text(v))
			case *array.LargeStringBuilder:
				fb.Append(text(v))
			case *array.BinaryBuilder:
				fb.Append([]byte(text(v)))
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString(text(v % 5)); err != nil {
					panic(err)
				}
			case *array.Date32Builder:
				fb.Append(arrow.Date32(18000 + v))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(int64(v) * 1_000_017))
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(int64(v)*104729 - 1e9))
			default:
				panic(fmt.Sprintf("no value for %T", fb))
			}
		}
	}
	return b.NewRecordBatch()
}

// text is value v as a string of up to about 800 bytes, some non-ASCII.
func text(v int) string {
	return strings.Repeat(fmt.Sprintf("v%d-é東 ", v), 1+v%97%50)
}

// writePqarrow writes sc with pqarrow.FileWriter: the reference.
func writePqarrow(t *testing.T, sc *scenario) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(sc.schema, &buf, sc.props(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range sc.batches {
		if sc.flushBefore[i] {
			if err := fw.NewBufferedRowGroupChecked(); err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.WriteBuffered(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writePqfile writes sc with a Writer using snappy (nil: arrow-go's codec).
func writePqfile(t *testing.T, sc *scenario, snappy Encoder) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriterEncoder(sc.schema, &buf, sc.props(), snappy)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range sc.batches {
		if sc.flushBefore[i] {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if w.BytesWritten() != int64(buf.Len()) {
			t.Fatalf("BytesWritten %d, the writer got %d", w.BytesWritten(), buf.Len())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSameBytesAsPqarrow: with arrow-go's own Snappy codec, a Writer's file
// is pqarrow.FileWriter's for the same batches and row-group
// flushes (its pages byte for byte, its footer up to the order of two
// lists), over random schemas, nulls, page and dictionary limits, row
// group lengths and codecs. So everything but the encoder (levels, pages,
// dictionaries and their fallback, statistics, row groups, the footer) is
// arrow-go's.
func TestSameBytesAsPqarrow(t *testing.T) {
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := randomScenario(rand.New(rand.NewPCG(seed, 20)))
			defer sc.release()
			want := writePqarrow(t, sc)
			got := writePqfile(t, sc, nil)
			gb, gf := canonical(t, got)
			wb, wf := canonical(t, want)
			if !bytes.Equal(gb, wb) {
				t.Fatalf("schema %s: pqfile wrote %d bytes of pages, pqarrow %d; they differ", sc.schema, len(gb), len(wb))
			}
			if !bytes.Equal(gf, wf) {
				t.Fatalf("schema %s: the footers differ", sc.schema)
			}
		})
	}
}

// TestFastSnappyReadsBack: with the default encoder, the file decodes (with
// arrow-go's Snappy decoder, a different implementation) to the batches
// written, and its metadata is the reference file's except for sizes and
// offsets: same row groups, encodings and statistics.
func TestFastSnappyReadsBack(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := randomScenario(rand.New(rand.NewPCG(seed, 21)))
			defer sc.release()
			got := writePqfile(t, sc, FastSnappy)
			ref := writePqfile(t, sc, nil)
			checkReadsBack(t, got, sc)
			gm, rm := footer(t, got), footer(t, ref)
			if gm.NumRowGroups() != rm.NumRowGroups() || gm.NumRows != rm.NumRows {
				t.Fatalf("row groups %d (%d rows), reference %d (%d rows)", gm.NumRowGroups(), gm.NumRows, rm.NumRowGroups(), rm.NumRows)
			}
			for g := range gm.NumRowGroups() {
				grg, rrg := gm.RowGroup(g), rm.RowGroup(g)
				if grg.NumRows() != rrg.NumRows() {
					t.Fatalf("row group %d: %d rows, reference %d", g, grg.NumRows(), rrg.NumRows())
				}
				for c := range grg.NumColumns() {
					gc, _ := grg.ColumnChunk(c)
					rc, _ := rrg.ColumnChunk(c)
					if gc.Compression() != rc.Compression() || fmt.Sprint(gc.Encodings()) != fmt.Sprint(rc.Encodings()) ||
						gc.NumValues() != rc.NumValues() {
						t.Fatalf("row group %d column %d: %v %v %d values, reference %v %v %d values", g, c,
							gc.Compression(), gc.Encodings(), gc.NumValues(), rc.Compression(), rc.Encodings(), rc.NumValues())
					}
					gs, err1 := gc.StatsSet()
					rs, err2 := rc.StatsSet()
					if err1 != nil || err2 != nil || gs != rs {
						t.Fatalf("row group %d column %d: statistics set %v (%v), reference %v (%v)", g, c, gs, err1, rs, err2)
					}
					if gs {
						gst, _ := gc.Statistics()
						rst, _ := rc.Statistics()
						if gst.NullCount() != rst.NullCount() || string(gst.EncodeMin()) != string(rst.EncodeMin()) || string(gst.EncodeMax()) != string(rst.EncodeMax()) {
							t.Fatalf("row group %d column %d: statistics differ from the reference's", g, c)
						}
					}
				}
			}
		})
	}
}

// canonical splits a file into its pages (the bytes before the footer)
// and its footer re-serialized with each column chunk's encodings and
// encoding statistics sorted: arrow-go lists them in map order, so two
// pqarrow runs of the same input differ there (seen: 8 bytes of 330,444).
func canonical(t *testing.T, b []byte) (pages, foot []byte) {
	t.Helper()
	md := footer(t, b)
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	pages = b[:len(b)-8-n]
	for _, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			m := cc.MetaData
			sort.Slice(m.Encodings, func(i, j int) bool { return m.Encodings[i] < m.Encodings[j] })
			sort.Slice(m.EncodingStats, func(i, j int) bool {
				a, b := m.EncodingStats[i], m.EncodingStats[j]
				return a.PageType < b.PageType || a.PageType == b.PageType && a.Encoding < b.Encoding
			})
		}
	}
	var buf bytes.Buffer
	if _, err := md.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return pages, buf.Bytes()
}

func footer(t *testing.T, b []byte) *metadata.FileMetaData {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	return rdr.MetaData()
}

// checkReadsBack reads b with pqarrow and compares it with sc's batches.
func checkReadsBack(t *testing.T, b []byte, sc *scenario) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	want := array.NewTableFromRecords(sc.schema, sc.batches)
	defer want.Release()
	if tbl.NumRows() != want.NumRows() {
		t.Fatalf("read %d rows, wrote %d", tbl.NumRows(), want.NumRows())
	}
	// Values compare as text: without a stored Arrow schema, large
	// strings read back as strings and dictionaries as their values.
	for c := range int(want.NumCols()) {
		gotCol, wantCol := tbl.Column(c).Data(), want.Column(c).Data()
		for i := range int(want.NumRows()) {
			g, w := valueAt(gotCol, i), valueAt(wantCol, i)
			if g != w {
				t.Fatalf("column %s (%s) row %d reads back as %q, wrote %q", want.Schema().Field(c).Name, want.Schema().Field(c).Type, i, g, w)
			}
		}
	}
}

// valueAt is row i of a chunked column as text ("<null>" for NULL).
func valueAt(c *arrow.Chunked, i int) string {
	for _, ch := range c.Chunks() {
		if i < ch.Len() {
			if ch.IsNull(i) {
				return "<null>"
			}
			return ch.ValueStr(i)
		}
		i -= ch.Len()
	}
	return "<past the end>"
}

// TestFastSnappyIsUsed pins what the default encoder
// changes: the Snappy pages differ from arrow-go's (else the encoder was
// not used) and are still Snappy (the reader above decodes them).
func TestFastSnappyIsUsed(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "note", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	for i := range 20000 {
		b.Append(text(i % 500))
	}
	rec := array.NewRecordBatch(s, []arrow.Array{b.NewArray()}, 20000)
	defer rec.Release()
	sc := &scenario{schema: s, batches: []arrow.RecordBatch{rec}, flushBefore: []bool{false},
		props: func(extra ...parquet.WriterProperty) *parquet.WriterProperties {
			return parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false)}, extra...)...)
		}}
	fast, ref := writePqfile(t, sc, FastSnappy), writePqfile(t, sc, nil)
	if bytes.Equal(fast, ref) {
		t.Fatal("the default encoder wrote arrow-go's bytes: it was not used")
	}
	checkReadsBack(t, fast, sc)
}

// TestNoEmptyRowGroups: a flush with nothing open, or batches of no rows,
// add no row group (pqarrow.FileWriter writes an empty one for a trailing
// NewBufferedRowGroup).
func TestNoEmptyRowGroups(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{1, 2, 3}, nil)
	three := array.NewRecordBatch(s, []arrow.Array{ib.NewArray()}, 3)
	defer three.Release()
	empty := array.NewRecordBatch(s, []arrow.Array{ib.NewArray()}, 0)
	defer empty.Release()
	var buf bytes.Buffer
	w, err := NewWriter(s, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3)))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		w.Flush, func() error { return w.Write(empty) }, func() error { return w.Write(three) }, w.Flush, w.Flush,
		func() error { return w.Write(empty) }, func() error { return w.Write(three) }, // a full group stays open...
		func() error { return w.Write(three) }, // ...until rows come for the next
		w.Flush, w.Close,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	md := footer(t, buf.Bytes())
	if md.NumRowGroups() != 3 || md.NumRows != 9 {
		t.Fatalf("%d row groups, %d rows; want 3 and 9", md.NumRowGroups(), md.NumRows)
	}
	for g := range md.NumRowGroups() {
		if n := md.RowGroup(g).NumRows(); n != 3 {
			t.Errorf("row group %d has %d rows, want 3", g, n)
		}
	}
}

// TestRejects: what pqfile does not write is refused before anything is
// written, naming the column or the feature.
func TestRejects(t *testing.T) {
	nested := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "tags", Type: arrow.LargeListOf(arrow.BinaryTypes.String)}}, nil)
	flatS := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, c := range []struct {
		name  string
		s     *arrow.Schema
		props *parquet.WriterProperties
		want  string
	}{
		{"nested", nested, nil, `column "tags": nested type large_list`},
		{"extension", arrow.NewSchema([]arrow.Field{{Name: "u", Type: extensions.NewUUIDType()}}, nil), nil, `column "u": extension type`},
		{"page index", flatS, parquet.NewWriterProperties(parquet.WithPageIndexEnabled(true)), `column "id": page indexes`},
		{"bloom filter", flatS, parquet.NewWriterProperties(parquet.WithBloomFilterEnabled(true)), `column "id": bloom filters`},
		{"encryption", flatS, parquet.NewWriterProperties(parquet.WithEncryptionProperties(parquet.NewFileEncryptionProperties("0123456789012345"))), "encrypted files"},
	} {
		var buf bytes.Buffer
		_, err := NewWriter(c.s, &buf, c.props)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the refusal", c.name, buf.Len())
		}
	}
}

// failAfter fails every write after n bytes.
type failAfter struct{ n int }

var errDisk = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errDisk
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriteErrors: an error of the underlying writer comes back wrapped
// from the call that hit it and again from Close, Close frees the buffers
// of the row group the failure left open, and a closed writer refuses
// more.
func TestWriteErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	s := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "t", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	rec := randomBatch(r, s, []float64{0.1, 0.1, 0}, 3000)
	defer rec.Release()
	for _, limit := range []int{0, 100, 5000} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		w, err := NewWriter(s, &failAfter{n: limit}, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1000), parquet.WithAllocator(mem)))
		if limit == 0 {
			if !errors.Is(err, errDisk) {
				t.Fatalf("limit 0: NewWriter error %v, want the disk's", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		werr := w.Write(rec)
		cerr := w.Close()
		if !errors.Is(werr, errDisk) && !errors.Is(cerr, errDisk) {
			t.Fatalf("limit %d: Write %v, Close %v; want the disk's error", limit, werr, cerr)
		}
		if werr != nil && !errors.Is(cerr, errDisk) {
			t.Fatalf("limit %d: Close after a failed Write returned %v", limit, cerr)
		}
		if n := mem.CurrentAlloc(); n != 0 {
			t.Errorf("limit %d: %d bytes of the writer's buffers still allocated after Close", limit, n)
		}
		if err := w.Write(rec); !errors.Is(err, ErrClosed) {
			t.Fatalf("Write after Close: %v, want ErrClosed", err)
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(s, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	ob := array.NewStringBuilder(memory.DefaultAllocator)
	ob.Append("x")
	orec := array.NewRecordBatch(other, []arrow.Array{ob.NewArray()}, 1)
	defer orec.Release()
	if err := w.Write(orec); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("Write of another schema: %v", err)
	}
}
