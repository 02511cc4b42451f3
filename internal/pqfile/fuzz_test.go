package pqfile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// fuzzSeeds are small files of every kind the readers meet: flat files
// pqfile writes, nested ones, and one with a stored Arrow schema.
func fuzzSeeds(f *testing.F) {
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 70))
		sc := randomScenario(r)
		for i, b := range sc.batches {
			sc.batches[i] = b.NewSlice(0, min(b.NumRows(), 20))
			b.Release()
		}
		f.Add(writeFuzzSeed(f, sc))
		sc.release()
		nsc := randomNestedScenarioOf(r, jsonLeaves)
		f.Add(writeFuzzSeed(f, nsc))
		nsc.release()
	}
	s := arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Asia/Tokyo"}, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.LargeString}}, nil)
	f.Add(writeWithPqarrow(f, rand.New(rand.NewPCG(1, 71)), s, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())))
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
}

func writeFuzzSeed(f *testing.F, sc *scenario) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(sc.schema, &buf, sc.props())
	if err != nil {
		f.Fatal(err)
	}
	for _, rec := range sc.batches {
		if err := w.Write(rec); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzReader: any bytes as a Parquet file either fail to open or read
// their flat columns to the end (or to an error), never panic; every
// batch has its schema's columns, each of the batch's length.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		pf, err := Open(bytes.NewReader(b))
		if err != nil {
			return
		}
		defer pf.Close()
		r, err := NewReader(pf, memory.DefaultAllocator)
		if err != nil {
			return
		}
		var fields []int
		for i := range r.Schema().NumFields() {
			if flat, why := r.Flat(i); flat && why == "" {
				fields = append(fields, i)
			}
		}
		rr, err := r.Records(fields, 7)
		if err != nil {
			return
		}
		defer rr.Release()
		for rr.Next() {
			rec := rr.RecordBatch()
			if int(rec.NumCols()) != len(fields) {
				t.Fatalf("%d columns, asked for %d", rec.NumCols(), len(fields))
			}
			for _, c := range rec.Columns() {
				if int64(c.Len()) != rec.NumRows() {
					t.Fatalf("a column of %d rows in a batch of %d", c.Len(), rec.NumRows())
				}
			}
		}
	})
}

// FuzzJSONColumns: any bytes as a Parquet file either fail to open or
// their top-level columns rebuild to valid JSON values (or an error),
// never panic, one per row.
func FuzzJSONColumns(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		pf, err := Open(bytes.NewReader(b))
		if err != nil {
			return
		}
		defer pf.Close()
		root := pf.MetaData().Schema.Root()
		var names []string
		for i := range root.NumFields() {
			names = append(names, root.Field(i).Name())
		}
		cols, err := JSONColumns(pf, names, []string{"f1"})
		if err != nil {
			return
		}
		for i, c := range cols {
			if c != nil && int64(len(c)) != pf.NumRows() {
				t.Fatalf("column %s: %d values for %d rows", names[i], len(c), pf.NumRows())
			}
			for _, v := range c {
				if v != nil && !json.Valid(v) {
					t.Fatalf("column %s: invalid JSON %q", names[i], v)
				}
			}
		}
	})
}

// FuzzStoredArrowSchema: any footer value under ARROW:schema decodes to a
// schema or fails, never panics; the schema a writer stored decodes to
// itself.
func FuzzStoredArrowSchema(f *testing.F) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}}, nil)
	stored := storedSchemaValue(f, s)
	f.Add(stored)
	f.Add(stored[:len(stored)-2]) // unpadded
	f.Add("")
	f.Add("/////w==")
	f.Fuzz(func(t *testing.T, v string) {
		kv := metadata.NewKeyValueMetadata()
		if err := kv.Append(arrowSchemaKey, v); err != nil {
			// Append takes UTF-8 only; a footer that is not reaches
			// storedArrowSchema through FuzzReader's whole files.
			return
		}
		got, err := storedArrowSchema(kv)
		if err == nil && v == stored && !got.Equal(s) {
			t.Fatalf("decoded %s, stored %s", got, s)
		}
	})
}

// storedSchemaValue is the footer value pqarrow stores for s.
func storedSchemaValue(f *testing.F, s *arrow.Schema) string {
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(s, &buf, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		f.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		f.Fatal(err)
	}
	defer pf.Close()
	v := pf.MetaData().KeyValueMetadata().FindValue(arrowSchemaKey)
	if v == nil {
		f.Fatal("pqarrow stored no Arrow schema")
	}
	if _, err := base64.StdEncoding.DecodeString(*v); err != nil {
		f.Fatal(err)
	}
	return *v
}

// TestStoredSchemaVectorsFit: a stored Arrow schema whose fields vector
// claims more entries than its bytes hold is an error; arrow-go's ipc
// reader made a slice of that length and the process ran out of memory
// (testdata/fuzz/FuzzStoredArrowSchema/5f190ebeacee607b).
func TestStoredSchemaVectorsFit(t *testing.T) {
	v := "/////00AAAAQAAAA000KAA000002AAQACgAAABAAAAA0000000000000BAAcAAAABAAAAA0000BkAAAAFAAAABAAFAAQAAAADwAIAABAAQAAAAEAAAABgAAAAAAAAKJAAAAAAAAAAIAAwACgAEAAgAAAAIAAAAAAACAAMAAABVVEMAAgAAAHRzAAAQABQAEAAPAA4ACAAAAAQAEAAAABAAAAAYAAAAAAACARwAAAAAAAAACAAMAAgABwAIAAAAAAAAAUAAAAACAAAAaWQAAP//"
	kv := metadata.NewKeyValueMetadata()
	if err := kv.Append(arrowSchemaKey, v); err != nil {
		t.Fatal(err)
	}
	if _, err := storedArrowSchema(kv); !errors.Is(err, errSchemaMessage) {
		t.Fatalf("storedArrowSchema = %v, want errSchemaMessage", err)
	}
}
