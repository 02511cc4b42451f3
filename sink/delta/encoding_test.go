package delta

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// TestParquetEncoding: snappy everywhere, dictionary pages on the bronze
// columns with few values and on repetitive captured columns, none on
// unique ones, DELTA_BINARY_PACKED on the ascending integer and timestamp
// columns only, and INT64 timestamps (never INT96).
func TestParquetEncoding(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	if _, err := takeSnapshot(ctx, t, tb, info, 1, 2000); err != nil {
		t.Fatal(err)
	}
	files, _ := tb.files(ctx)
	pf, err := file.OpenParquetFile(filepath.Join(dir, files[0].Path), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rg := pf.MetaData().RowGroup(0)
	want := map[string]bool{
		"id": false, "name": false, "created": false, "ratio": false,
		"qty": true, "tiny": true, // 100 and 200 distinct values in 2000 rows
		"_capture_instance": true, "_operation": true, "_start_lsn": true, "_snapshot": true, "_commit_ts": true,
	}
	for i := 0; i < rg.NumColumns(); i++ {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		name := cc.PathInSchema().String()
		if cc.Compression() != compress.Codecs.Snappy {
			t.Errorf("%s: compression %s", name, cc.Compression())
		}
		if cc.Type() == parquet.Types.Int96 {
			t.Errorf("%s: INT96", name)
		}
		if w, ok := want[name]; ok && cc.HasDictionaryPage() != w {
			t.Errorf("%s: dictionary page %v, want %v", name, cc.HasDictionaryPage(), w)
		}
		// id and created ascend (created with NULLs); the rest do not,
		// or are not integers.
		delta := slices.Contains(cc.Encodings(), parquet.Encodings.DeltaBinaryPacked)
		if want := name == "id" || name == "created"; delta != want {
			t.Errorf("%s: encodings %v, DELTA_BINARY_PACKED wanted %v", name, cc.Encodings(), want)
		}
	}
}

// deltaEncoded returns the columns of the table's data files that hold
// DELTA_BINARY_PACKED pages, so reader tests can show they read some.
func deltaEncoded(t *testing.T, tb *Table, dir string) map[string]bool {
	t.Helper()
	files, err := tb.files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range files {
		pf, err := file.OpenParquetFile(filepath.Join(dir, f.Path), false)
		if err != nil {
			t.Fatal(err)
		}
		for g := range pf.NumRowGroups() {
			rg := pf.MetaData().RowGroup(g)
			for i := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(i)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(cc.Encodings(), parquet.Encodings.DeltaBinaryPacked) {
					out[cc.PathInSchema().String()] = true
				}
			}
		}
		pf.Close()
	}
	return out
}

// TestRefusesForeignSchema: a partitioned table of another schema (a copy of a
// Spark fixture's log) is refused, naming the columns, and nothing is written.
func TestRefusesForeignSchema(t *testing.T) {
	ctx := context.Background()
	src := fixtureTable(t, "spark_partitioned_checkpoint")
	dir := t.TempDir()
	if err := copyDir(filepath.Join(src, "_delta_log"), filepath.Join(dir, "_delta_log")); err != nil {
		t.Fatal(err)
	}
	tb := openLocal(t, dir, Options{})
	if _, err := tb.files(ctx); err != nil {
		t.Fatal(err)
	}
	schema := bronze(t, capturedSchema())
	rr, _ := array.NewRecordReader(schema, nil)
	var se *deltalog.SchemaError
	if _, err := tb.AppendChanges(ctx, "x", 1, rr); !errors.As(err, &se) {
		t.Fatalf("append bronze rows to a foreign partitioned table: %v", err)
	}
	if v, _ := tb.Version(ctx); v != 2 {
		t.Fatalf("version %d after a refused append", v)
	}
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o777); err != nil {
		return err
	}
	es, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
