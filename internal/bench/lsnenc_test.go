package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cdcsnap/cdcsnap/internal/parquetprops"
	"github.com/cdcsnap/cdcsnap/internal/pqfile"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// A snapshot's LSN columns are constant, so these encodings matter only
// for change rows (sink/delta's AppendChanges), where _start_lsn is the
// transaction's commit LSN and _seqval orders its operations: both rise,
// as canonical strings with long common prefixes. The benchmark writes
// the two columns with each encoding issue 20 asks about.

// changeLSNs returns n change rows' _start_lsn and _seqval: transactions
// of 1-16 rows, each operation's log record a few records after the last
// (VLF 0x2A, block offsets and slots rising).
func changeLSNs(n int, seed uint64) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(seed, 0))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: sink.ColStartLSN, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: sink.ColSeqval, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	start, seq := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.StringBuilder)
	at := func(block uint32, slot uint16) string {
		var l lsn.LSN
		binary.BigEndian.PutUint32(l[0:4], 0x2A)
		binary.BigEndian.PutUint32(l[4:8], block)
		binary.BigEndian.PutUint16(l[8:10], slot)
		return l.String()
	}
	block := uint32(0x1F0)
	for rows := 0; rows < n; {
		ops := min(1+r.IntN(16), n-rows)
		seqs := make([]string, ops)
		for i := range seqs {
			block += uint32(r.IntN(3))
			seqs[i] = at(block, uint16(r.IntN(400)))
		}
		block++
		commit := at(block, uint16(r.IntN(400)))
		for _, s := range seqs {
			start.Append(commit)
			seq.Append(s)
		}
		rows += ops
	}
	return b.NewRecordBatch()
}

// lsnEncodings are the ways to write the LSN columns: dictionary is what
// parquetprops.ForBronze chooses today (parquetprops.AlwaysDictionary).
var lsnEncodings = []struct {
	name  string
	props []parquet.WriterProperty
}{
	{"dictionary", nil},
	{"plain", []parquet.WriterProperty{
		parquet.WithDictionaryFor(sink.ColStartLSN, false), parquet.WithDictionaryFor(sink.ColSeqval, false)}},
	{"delta_byte_array", []parquet.WriterProperty{
		parquet.WithDictionaryFor(sink.ColStartLSN, false), parquet.WithDictionaryFor(sink.ColSeqval, false),
		parquet.WithEncodingFor(sink.ColStartLSN, parquet.Encodings.DeltaByteArray),
		parquet.WithEncodingFor(sink.ColSeqval, parquet.Encodings.DeltaByteArray)}},
}

// writeLSNs writes rec with internal/pqfile in 8,192-row batches, as
// sink/delta receives them, under sink/delta's properties plus extra.
func writeLSNs(rec arrow.RecordBatch, extra []parquet.WriterProperty) ([]byte, error) {
	var buf bytes.Buffer
	props := parquetprops.ForBronze(rec, 1<<20, "cdcsnap bench lsn", extra...)
	w, err := pqfile.NewWriter(rec.Schema(), &buf, props)
	if err != nil {
		return nil, err
	}
	for off := int64(0); off < rec.NumRows(); off += 8192 {
		s := rec.NewSlice(off, min(off+8192, rec.NumRows()))
		err := w.Write(s)
		s.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TestLSNEncodingsReadBack: every encoding the benchmark times writes the
// encoding it names and reads back (through arrow-go's reader) to the
// same values.
func TestLSNEncodingsReadBack(t *testing.T) {
	rec := changeLSNs(50000, 1)
	defer rec.Release()
	want := map[string]parquet.Encoding{
		"dictionary": parquet.Encodings.RLEDict, "plain": parquet.Encodings.Plain,
		"delta_byte_array": parquet.Encodings.DeltaByteArray,
	}
	for _, enc := range lsnEncodings {
		data, err := writeLSNs(rec, enc.props)
		if err != nil {
			t.Fatalf("%s: %v", enc.name, err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for c := range 2 {
			cc, err := pf.MetaData().RowGroup(0).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			// A dictionary page is PLAIN, so PLAIN alone is shown by the
			// absence of a dictionary page.
			dict := enc.name == "dictionary"
			if !slices.Contains(cc.Encodings(), want[enc.name]) || cc.HasDictionaryPage() != dict {
				t.Errorf("%s: column %d encodings %v, dictionary page %v", enc.name, c, cc.Encodings(), cc.HasDictionaryPage())
			}
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for c := range 2 {
			got := array.NewChunkedSlice(tbl.Column(c).Data(), 0, tbl.NumRows())
			var i int64
			for _, chunk := range got.Chunks() {
				s := chunk.(*array.String)
				for k := range s.Len() {
					if w := rec.Column(c).(*array.String).Value(int(i)); s.Value(k) != w {
						t.Fatalf("%s: column %d row %d: %q, want %q", enc.name, c, i, s.Value(k), w)
					}
					i++
				}
			}
			got.Release()
			if i != rec.NumRows() {
				t.Fatalf("%s: column %d read %d rows of %d", enc.name, c, i, rec.NumRows())
			}
		}
		tbl.Release()
	}
}

// BenchmarkLSNEncodings times writing 1 Mi change rows' LSN columns with
// each encoding; bytes/row is the file's size.
func BenchmarkLSNEncodings(b *testing.B) {
	const rows = 1 << 20
	rec := changeLSNs(rows, 1)
	defer rec.Release()
	for _, enc := range lsnEncodings {
		b.Run(enc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				data, err := writeLSNs(rec, enc.props)
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			b.ReportMetric(float64(size)/rows, "bytes/row")
			b.ReportMetric(0, "ns/op")
		})
	}
}
