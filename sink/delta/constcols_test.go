package delta

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/cdcsnap/cdcsnap/sink"
)

// withColumn returns rec with column name replaced by strings vals (""
// is NULL).
func withColumn(t *testing.T, rec arrow.RecordBatch, name string, vals func(row int) string) arrow.RecordBatch {
	t.Helper()
	defer rec.Release()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for r := 0; r < int(rec.NumRows()); r++ {
		if v := vals(r); v == "" {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
	col := b.NewArray()
	defer col.Release()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	cols[rec.Schema().FieldIndices(name)[0]] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// TestConstantColumns: bronze string columns constant in the first batch
// are written through the dictionary path; batches where their value
// changes, varies row by row, turns NULL or comes back all read back
// exactly, and the Delta and Parquet statistics match the data. (pqarrow
// falls back to plain encoding for a column chunk whose dictionary
// changes: correct, only larger. Snapshot partitions never
// change it; TestParquetEncoding checks their dictionary pages.)
func TestConstantColumns(t *testing.T) {
	ctx := context.Background()
	const l1, l2, l3 = "0x0000002A00000F380003", "0x0000002A00000F400001", "0x0000002A00000E000009"
	for _, rowGroupRows := range []int{50, 1 << 20} {
		t.Run(fmt.Sprint("row groups of ", rowGroupRows), func(t *testing.T) {
			dir := t.TempDir()
			tb := openLocal(t, dir, Options{RowGroupRows: rowGroupRows})
			schema := bronze(t, capturedSchema())
			info := snapshotInfo(t, schema, "dbo_Orders", l1)
			spec := rowSpec{ci: "dbo_Orders", startLSN: l1, commitTS: baseTime, snapshot: l1}
			lsnOf := map[int]func(row int) string{
				0: func(int) string { return l1 },                      // constant: the column is picked
				1: func(int) string { return l2 },                      // another constant
				2: func(r int) string { return []string{l1, l3}[r%2] }, // varies row by row
				3: func(r int) string { return []string{l3, ""}[r%2] }, // and with NULLs
				4: func(int) string { return "" },                      // all NULL
				5: func(int) string { return l1 },                      // constant again
			}
			var recs []arrow.RecordBatch
			want := map[int64]string{}
			for i := 0; i < len(lsnOf); i++ {
				rec := withColumn(t, buildRecord(t, schema, i*70, 70, spec), sink.ColStartLSN, lsnOf[i])
				for r := 0; r < 70; r++ {
					want[int64(i*70+r)] = lsnOf[i](r)
				}
				recs = append(recs, rec)
			}
			consts := newConstColumns(schema, recs[0])
			if consts == nil {
				t.Fatal("no constant columns picked from the first batch")
			}
			var picked []string
			for _, i := range consts.cols {
				picked = append(picked, schema.Field(i).Name)
			}
			consts.release()
			if fmt.Sprint(picked) != fmt.Sprint([]string{sink.ColCaptureInstance, sink.ColStartLSN, sink.ColSnapshot}) {
				t.Errorf("picked %v; want the capture instance, start LSN and snapshot columns (not the NULL _seqval, not captured columns)", picked)
			}

			part, err := tb.WritePartition(ctx, info, 0, reader(t, schema, recs...))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tb.CommitSnapshot(ctx, info, []sink.Part{part}); err != nil {
				t.Fatal(err)
			}
			tbl := readAll(t, tb)
			defer tbl.Release()
			tr := array.NewTableReader(tbl, -1)
			defer tr.Release()
			got := map[int64]string{}
			for tr.Next() {
				rec := tr.RecordBatch()
				ids := rec.Column(0).(*array.Int64)
				lsns := rec.Column(int(rec.Schema().FieldIndices(sink.ColStartLSN)[0])).(*array.String)
				cis := rec.Column(int(rec.Schema().FieldIndices(sink.ColCaptureInstance)[0])).(*array.String)
				for r := 0; r < ids.Len(); r++ {
					if lsns.IsValid(r) {
						got[ids.Value(r)] = lsns.Value(r)
					} else {
						got[ids.Value(r)] = ""
					}
					if cis.Value(r) != "dbo_Orders" {
						t.Fatalf("id %d: capture instance %q", ids.Value(r), cis.Value(r))
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("read %d rows, wrote %d", len(got), len(want))
			}
			for id, w := range want {
				if got[id] != w {
					t.Fatalf("id %d: _start_lsn %q read back, %q written", id, got[id], w)
				}
			}

			files, _ := tb.files(ctx)
			for _, f := range files {
				st, err := f.ParseStats()
				if err != nil {
					t.Fatal(err)
				}
				whole := readFile(t, tb, schema, f)
				checkStats(t, f.Path, whole, st)
				whole.Release()
				checkParquetStats(t, filepath.Join(dir, f.Path), sink.ColStartLSN)
			}
		})
	}
}

// checkParquetStats compares each row group's Parquet min/max/null count
// of column name with the row group's values, read back from the file.
func checkParquetStats(t *testing.T, path, name string) {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	col := pf.MetaData().Schema.ColumnIndexByName(name)
	for g := 0; g < pf.NumRowGroups(); g++ {
		rg := pf.RowGroup(g)
		cc, err := pf.MetaData().RowGroup(g).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := rg.Column(col)
		if err != nil {
			t.Fatal(err)
		}
		n := rg.NumRows()
		vals := make([]parquet.ByteArray, n)
		defs := make([]int16, n)
		_, read, err := cr.(*file.ByteArrayColumnChunkReader).ReadBatch(n, vals, defs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var lo, hi string
		for i := 0; i < read; i++ {
			v := string(vals[i])
			if i == 0 || v < lo {
				lo = v
			}
			if i == 0 || v > hi {
				hi = v
			}
		}
		stats, err := cc.Statistics()
		if err != nil {
			t.Fatal(err)
		}
		bs := stats.(*metadata.ByteArrayStatistics)
		if bs.NullCount() != n-int64(read) {
			t.Errorf("%s row group %d: Parquet null count %d, data %d", path, g, bs.NullCount(), n-int64(read))
		}
		if read == 0 {
			if bs.HasMinMax() {
				t.Errorf("%s row group %d: min/max on an all-NULL column", path, g)
			}
			continue
		}
		if !bs.HasMinMax() || string(bs.Min()) != lo || string(bs.Max()) != hi {
			t.Errorf("%s row group %d: Parquet min %q max %q, data %q %q", path, g, bs.Min(), bs.Max(), lo, hi)
		}
	}
}
