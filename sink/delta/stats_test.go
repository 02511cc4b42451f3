package delta

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/sink"
)

// TestStatsMatchData writes files rolled small, reads each file's rows
// back and checks numRecords, nullCount, minValues and maxValues against
// them; long strings are truncated and the max stays an upper bound.
func TestStatsMatchData(t *testing.T) {
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{TargetFileSize: 1, RowGroupRows: 50})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	var recs []arrow.RecordBatch
	for i := 0; i < 3; i++ {
		recs = append(recs, buildRecord(t, schema, i*70, 70, rowSpec{ci: "dbo_Orders", startLSN: info.LSN.String(), commitTS: baseTime, snapshot: info.LSN.String()}))
	}
	files := snapshotFiles(t, tb, info, schema, recs)
	if len(files) != 3 {
		t.Fatalf("%d files, want one per record (TargetFileSize 1)", len(files))
	}
	var total int64
	for _, f := range files {
		st, err := f.ParseStats()
		if err != nil {
			t.Fatal(err)
		}
		rec := readFile(t, tb, schema, f)
		n := rec.NumRows()
		checkStats(t, f.Path, rec, st)
		rec.Release()
		if n != st.NumRecords {
			t.Fatalf("%s: numRecords %d, file holds %d", f.Path, st.NumRecords, n)
		}
		total += n
	}
	if total != 210 {
		t.Fatal(total)
	}
}

// checkStats checks one file's stats against its rows (rec: the whole file).
func checkStats(t *testing.T, path string, rec arrow.RecordBatch, st deltalog.FileStats) {
	t.Helper()
	for i, f := range rec.Schema().Fields() {
		col := rec.Column(i)
		if got := st.NullCount[f.Name]; got != int64(col.NullN()) {
			t.Errorf("%s %s: nullCount %d, data %d", path, f.Name, got, col.NullN())
		}
		mn, hasMin := st.MinValues[f.Name]
		mx := st.MaxValues[f.Name]
		switch a := col.(type) {
		case *array.Binary, *array.Boolean:
			if hasMin {
				t.Errorf("%s: %s has min/max stats", path, f.Name)
			}
		case *array.String:
			var lo, hi string
			first := true
			for j := 0; j < a.Len(); j++ {
				if a.IsNull(j) {
					continue
				}
				v := a.Value(j)
				if first || v < lo {
					lo = v
				}
				if first || v > hi {
					hi = v
				}
				first = false
			}
			if first {
				break
			}
			smin, smax := mn.(string), mx.(string)
			if utf8.RuneCountInString(smin) > statsPrefixLen || !strings.HasPrefix(lo, smin) || smin > lo {
				t.Errorf("%s %s: min %q for data min %q", path, f.Name, smin, lo)
			}
			if smax < hi || (smax != hi && !strings.HasPrefix(smax, truncMin(hi))) {
				t.Errorf("%s %s: max %q for data max %q", path, f.Name, smax, hi)
			}
			if len(hi) > 2*statsPrefixLen && smax == hi {
				t.Errorf("%s %s: long max not truncated", path, f.Name)
			}
		default:
			lo, hi, ok := dataMinMax(col)
			if !ok {
				continue
			}
			if js(mn) != js(lo) || js(mx) != js(hi) {
				t.Errorf("%s %s: stats min %v max %v, data min %v max %v", path, f.Name, js(mn), js(mx), js(lo), js(hi))
			}
		}
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

// dataMinMax computes min and max independently of the writer, in the
// JSON form Delta stats use.
func dataMinMax(col arrow.Array) (any, any, bool) {
	var lo, hi float64
	var dlo, dhi decimal128.Num
	first := true
	for j := 0; j < col.Len(); j++ {
		if col.IsNull(j) {
			continue
		}
		var v float64
		switch a := col.(type) {
		case *array.Decimal128:
			d := a.Value(j)
			if first || d.Less(dlo) {
				dlo = d
			}
			if first || d.Greater(dhi) {
				dhi = d
			}
			first = false
			continue
		case *array.Int64:
			v = float64(a.Value(j))
		case *array.Int32:
			v = float64(a.Value(j))
		case *array.Int16:
			v = float64(a.Value(j))
		case *array.Int8:
			v = float64(a.Value(j))
		case *array.Float64:
			v = a.Value(j)
		case *array.Float32:
			v = float64(a.Value(j))
		case *array.Date32:
			v = float64(a.Value(j))
		case *array.Timestamp:
			v = float64(a.Value(j))
		default:
			return nil, nil, false
		}
		if first || v < lo {
			lo = v
		}
		if first || v > hi {
			hi = v
		}
		first = false
	}
	if first {
		return nil, nil, false
	}
	switch a := col.(type) {
	case *array.Decimal128:
		sc := a.DataType().(*arrow.Decimal128Type).Scale
		return json.Number(dlo.ToString(sc)), json.Number(dhi.ToString(sc)), true
	case *array.Date32:
		return arrow.Date32(lo).FormattedString(), arrow.Date32(hi).FormattedString(), true
	case *array.Timestamp:
		return formatTS(int64(lo)), formatTS(int64(hi)), true
	case *array.Float32:
		return float64(float32(lo)), float64(float32(hi)), true
	}
	return json.Number(js(lo)), json.Number(js(hi)), true
}

// TestColStatsBruteForce folds random batches (values in random order,
// nulls, multi-byte strings, empty batches, string and large-string
// arrays) into colStats and compares nullCount, min and max with a scan of
// every value.
func TestColStatsBruteForce(t *testing.T) {
	words := []string{"", "a", "ab", "b", "Z", "naïve", "配送", "zz", "a\u0000", "~"}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		large := seed%2 == 1
		var c colStats
		var all []string
		var nulls int64
		for range rng.IntN(4) + 1 {
			n := rng.IntN(40)
			var sb array.Builder
			if large {
				sb = array.NewLargeStringBuilder(memory.DefaultAllocator)
			} else {
				sb = array.NewStringBuilder(memory.DefaultAllocator)
			}
			for range n {
				if rng.IntN(5) == 0 {
					sb.AppendNull()
					nulls++
					continue
				}
				v := words[rng.IntN(len(words))] + words[rng.IntN(len(words))]
				all = append(all, v)
				switch b := sb.(type) {
				case *array.StringBuilder:
					b.Append(v)
				case *array.LargeStringBuilder:
					b.Append(v)
				}
			}
			arr := sb.NewArray()
			sb.Release()
			c.update(arr)
			arr.Release()
		}
		if c.nulls != nulls {
			t.Fatalf("seed %d: nullCount %d, want %d", seed, c.nulls, nulls)
		}
		typ := arrow.DataType(arrow.BinaryTypes.String)
		if large {
			typ = arrow.BinaryTypes.LargeString
		}
		mn, mx, ok := c.minMax(typ)
		if len(all) == 0 {
			if ok {
				t.Fatalf("seed %d: min/max %q %q of no values", seed, mn, mx)
			}
			continue
		}
		lo, hi := slices.Min(all), slices.Max(all)
		if !ok || mn != truncMin(lo) || mx != truncMax(hi) {
			t.Fatalf("seed %d: min/max %q %q (ok %v), want %q %q", seed, mn, mx, ok, lo, hi)
		}
	}
}

// TestFilesRollWithinARowGroup writes batches far smaller than a row
// group into a small TargetFileSize: a file must close once its written
// bytes plus the open row group's reach the target, not only when a row
// group is flushed.
func TestFilesRollWithinARowGroup(t *testing.T) {
	const target = 16 << 10
	tb := openLocal(t, t.TempDir(), Options{TargetFileSize: target})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	rs := rowSpec{ci: "dbo_Orders", startLSN: info.LSN.String(), commitTS: baseTime, snapshot: info.LSN.String()}
	var recs []arrow.RecordBatch
	for i := 0; i < 40; i++ {
		recs = append(recs, buildRecord(t, schema, i*500, 500, rs))
	}
	files := snapshotFiles(t, tb, info, schema, recs)
	if len(files) < 3 {
		t.Fatalf("%d files of 20,000 rows under a %d-byte target; want them rolled within row groups", len(files), target)
	}
}

// snapshotFiles writes recs as one partition, commits the snapshot and
// returns the table's files.
func snapshotFiles(t *testing.T, tb *Table, info sink.Info, schema *arrow.Schema, recs []arrow.RecordBatch) []deltalog.AddFile {
	t.Helper()
	ctx := context.Background()
	part, err := tb.WritePartition(ctx, info, 0, reader(t, schema, recs...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CommitSnapshot(ctx, info, []sink.Part{part}); err != nil {
		t.Fatal(err)
	}
	files, err := tb.files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
