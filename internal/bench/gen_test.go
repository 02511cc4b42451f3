package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// cell returns column c of row i of rec as the Go value Gen.Values uses.
func cell(t *testing.T, col arrow.Array, i int) any {
	t.Helper()
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Decimal128:
		return a.Value(i)
	case *array.Timestamp:
		return a.Value(i)
	}
	t.Fatalf("unexpected column type %s", col.DataType())
	return nil
}

// readAll reads range r from src (g, or a source of g's rows) and returns
// the row numbers (id-1) it produced, checking every value against
// Gen.Values.
func readAll(t *testing.T, src source.Source, g *Gen, r keyrange.Range, batch int) []int64 {
	t.Helper()
	ci, err := g.CaptureInstance(context.Background(), genCI)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := src.ReadRange(context.Background(), ci, r, source.ReadOptions{BatchRows: batch})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	idCol := 0
	if g.companies > 0 {
		idCol = 1
	}
	var got []int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if rec.NumRows() > int64(batch) {
			t.Fatalf("batch of %d rows, want at most %d", rec.NumRows(), batch)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			id := rec.Column(idCol).(*array.Int64).Value(i)
			want := g.Values(id - 1)
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = cell(t, rec.Column(c), i)
			}
			if !reflect.DeepEqual(row, want) {
				t.Fatalf("row id %d = %v, want %v", id, row, want)
			}
			got = append(got, id-1)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRangesCoverEveryRowOnce plans ranges as a snapshot does (uniform for
// bigint, keyset seeks for the composite key) and proves that reading them
// returns every row exactly once, in key order, with the right values: from
// the generator, and from replaySource over the generator's IPC file (whose
// 8,192-row records the larger tables cross).
func TestRangesCoverEveryRowOnce(t *testing.T) {
	for _, tc := range []struct {
		rows, companies int64
		partitions      int
	}{
		{1, 0, 4}, {1000, 0, 1}, {1000, 0, 3}, {1001, 0, 8}, {5, 0, 8},
		{1000, 1, 4}, {1000, 3, 4}, {997, 20, 8}, {40, 20, 3}, {7, 3, 8},
		{20000, 0, 3}, {20000, 7, 5},
	} {
		t.Run(fmt.Sprintf("rows=%d/companies=%d/p=%d", tc.rows, tc.companies, tc.partitions), func(t *testing.T) {
			ctx := context.Background()
			g := NewGen(tc.rows, tc.companies)
			path := t.TempDir() + "/b.arrow"
			if _, err := materialize(ctx, g, path); err != nil {
				t.Fatal(err)
			}
			m, err := mapIPC(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			replay, err := newReplaySource(g, m)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := snapshot.NewPlan(ctx, g, snapshot.Options{CaptureInstance: genCI, Partitions: tc.partitions, MinPartitionRows: -1})
			if err != nil {
				t.Fatal(err)
			}
			if tc.partitions > 1 && tc.rows > 1 && len(plan.Ranges) < 2 {
				t.Fatalf("%s plan has %d ranges", plan.Strategy, len(plan.Ranges))
			}
			for _, src := range []source.Source{g, replay} {
				var all []int64
				for _, r := range plan.Ranges {
					all = append(all, readAll(t, src, g, r, 64)...)
				}
				if int64(len(all)) != tc.rows {
					t.Fatalf("%T: read %d rows, want %d", src, len(all), tc.rows)
				}
				for i, n := range all {
					if n != int64(i) {
						t.Fatalf("%T: row %d read at position %d: rows missing, repeated or out of order", src, n, i)
					}
				}
			}
		})
	}
}

// TestReplaySourceRefusesAnotherTable checks that a replaySource is only
// made over its own generator's IPC file.
func TestReplaySourceRefusesAnotherTable(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/b.arrow"
	if _, err := materialize(ctx, NewGen(100, 0), path); err != nil {
		t.Fatal(err)
	}
	m, err := mapIPC(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if _, err := newReplaySource(NewGen(101, 0), m); err == nil || !strings.Contains(err.Error(), "100 rows") {
		t.Fatalf("101-row generator over a 100-row file: %v", err)
	}
	if _, err := newReplaySource(NewGen(100, 3), m); err == nil || !strings.Contains(err.Error(), `"company"`) {
		t.Fatalf("composite generator over a bigint file: %v", err)
	}
}

// TestKeysAreOrderedAndSeekable checks the composite key arithmetic against
// keyrange's order and SeekKey against counting.
func TestKeysAreOrderedAndSeekable(t *testing.T) {
	ctx := context.Background()
	for _, companies := range []int64{1, 3, 20} {
		g := NewGen(103, companies)
		ci, _ := g.CaptureInstance(ctx, genCI)
		cols, err := ci.KeyColumns()
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i < g.rows; i++ {
			c, err := keyrange.CompareTuples(cols, g.Key(i-1), g.Key(i))
			if err != nil || c >= 0 {
				t.Fatalf("companies %d: key %v not below key %v (%v)", companies, g.Key(i-1), g.Key(i), err)
			}
		}
		seen := map[int64]bool{}
		for i := range g.rows {
			seen[g.company(i)] = true
			from := g.Key(i)
			for _, k := range []int64{0, 1, 5, g.rows} {
				got, ok, err := g.SeekKey(ctx, ci, source.ReadCommitted, from, k)
				if err != nil {
					t.Fatal(err)
				}
				if want := i + k; want >= g.rows {
					if ok {
						t.Fatalf("SeekKey(%v, %d) = %v, want none", from, k, got)
					}
				} else if !ok || !reflect.DeepEqual(got, g.Key(want)) {
					t.Fatalf("SeekKey(%v, %d) = %v %v, want %v", from, k, got, ok, g.Key(want))
				}
			}
		}
		if int64(len(seen)) != companies {
			t.Fatalf("%d companies used, want %d", len(seen), companies)
		}
		// A bound between two companies' keys and a company-only bound.
		if companies > 1 {
			lo, _, err := g.Bounds(keyrange.Range{Lower: keyrange.Tuple{int64(2)}})
			if err != nil || lo != g.companyStart(2) {
				t.Fatalf("Bounds(company 2) = %d %v, want %d", lo, err, g.companyStart(2))
			}
			lo, _, err = g.Bounds(keyrange.Range{Lower: keyrange.Tuple{int64(1), int64(g.rows + 5)}})
			if err != nil || lo != g.companyStart(2) {
				t.Fatalf("Bounds(company 1, beyond) = %d %v, want %d", lo, err, g.companyStart(2))
			}
		}
	}
}

// TestDeterministic proves two readers of the same range produce the same
// values, and that a value depends on the key only (not the batch size).
func TestDeterministic(t *testing.T) {
	g := NewGen(3000, 0)
	r := keyrange.Range{Lower: keyrange.Tuple{int64(100)}, Upper: keyrange.Tuple{int64(2900)}}
	a := readAll(t, g, g, r, 1000)
	b := readAll(t, g, g, r, 7)
	if !reflect.DeepEqual(a, b) || len(a) != 2800 || a[0] != 99 {
		t.Fatalf("reads differ or are wrong: %d and %d rows, first %d", len(a), len(b), a[0])
	}
	// The NULL-heavy columns are mostly NULL, never all NULL.
	nullShipped, nullRemark := 0, 0
	for i := range int64(3000) {
		v := g.Values(i)
		if v[6] == nil {
			nullShipped++
		}
		if v[7] == nil {
			nullRemark++
		}
		if _, ok := v[4].(decimal128.Num); !ok {
			t.Fatalf("amount is %T", v[4])
		}
	}
	if nullShipped < 1800 || nullShipped > 2400 || nullRemark < 2500 || nullRemark == 3000 {
		t.Fatalf("NULLs: shipped %d, remark %d of 3000", nullShipped, nullRemark)
	}
}

// TestSnapshotIntoDelta runs the pipeline end to end at a small size and
// checks the committed row count, and the planning measurement on the fake.
func TestSnapshotIntoDelta(t *testing.T) {
	ctx := context.Background()
	for _, companies := range []int64{0, 20} {
		m, err := runPipeline(ctx, NewGen(20000, companies), 3, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if m.Rows != 20000 || m.OutBytes == 0 {
			t.Fatalf("companies %d: %d rows, %d bytes", companies, m.Rows, m.OutBytes)
		}
	}
}

func TestLimitAndSinkFromIPC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	g := NewGen(30000, 0)
	mat, err := materialize(ctx, g, dir+"/b.arrow")
	if err != nil {
		t.Fatal(err)
	}
	if mat.Rows != 30000 {
		t.Fatalf("materialized %d rows", mat.Rows)
	}
	m, err := mapIPC(dir + "/b.arrow")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	defer func(saved tuning) { tune = saved }(tune)
	for _, writer := range []string{"", "pqarrow"} {
		tune.LimitWriter = writer
		l, err := runLimit(m, 2, dir+"/limit")
		if err != nil || l.Rows != 30000 {
			t.Fatalf("limit %q: %d rows, %v", writer, l.Rows, err)
		}
		if n := parquetRows(t, dir+"/limit"); n != 30000 {
			t.Fatalf("limit %q: its files hold %d rows", writer, n)
		}
	}
	s, err := runSinkFromIPC(ctx, m, 2, dir+"/sink")
	if err != nil || s.Rows != 30000 {
		t.Fatalf("sink from IPC: %d rows, %v", s.Rows, err)
	}
	replay, err := newReplaySource(g, m)
	if err != nil {
		t.Fatal(err)
	}
	// With read-ahead off the stamper reads the source's reader itself,
	// and retains and releases it once more.
	for _, readAhead := range []int{0, -1} {
		tune.ReadAhead = readAhead
		p, err := runPipeline(ctx, replay, 3, dir+"/replay")
		if err != nil || p.Rows != 30000 {
			t.Fatalf("pipeline from IPC, read-ahead %d: %d rows, %v", readAhead, p.Rows, err)
		}
	}
}

func TestPlanningCounts(t *testing.T) {
	pcs, err := measurePlanning(context.Background(), 4000, 3, []int{4})
	if err != nil {
		t.Fatal(err)
	}
	if len(pcs) != 1 || pcs[0].Ranges != 4 || pcs[0].RowsInRanges != 4000 || pcs[0].KeysKeyset == 0 {
		t.Fatalf("planning: %+v", pcs)
	}
}

// parquetRows is the row count in the footers of dir's Parquet files.
func parquetRows(t *testing.T, dir string) int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Parquet files in %s: %v", dir, err)
	}
	var n int64
	for _, p := range paths {
		r, err := file.OpenParquetFile(p, false)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n += r.NumRows()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestLimitExperimentsReachTheFile: each -limit-codec and -limit-encoding
// setting is what the limit's files record, with both writers, and
// "zstd-fastest" is a level other than "zstd"'s (the footer does not
// record a level, so the file sizes must differ).
func TestLimitExperimentsReachTheFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := materialize(context.Background(), NewGen(20000, 0), dir+"/b.arrow"); err != nil {
		t.Fatal(err)
	}
	m, err := mapIPC(dir + "/b.arrow")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	defer func(saved tuning) { tune = saved }(tune)
	for _, writer := range []string{"pqfile", "pqarrow"} {
		sizes := map[string]int64{}
		for _, tn := range []tuning{
			{LimitCodec: "zstd"}, {LimitCodec: "zstd-fastest"}, {LimitCodec: "lz4_raw"},
			{LimitEncoding: "delta-int"}, {},
		} {
			tn.LimitWriter = writer
			if err := tn.apply(); err != nil {
				t.Fatal(err)
			}
			l, err := runLimit(m, 1, dir+"/limit")
			if err != nil {
				t.Fatalf("%v: %v", tn, err)
			}
			sizes[tn.LimitCodec] = l.OutBytes
			wantCodec := compress.Codecs.Snappy
			if c, ok := limitCodecs[tn.LimitCodec]; ok {
				wantCodec = c.codec
			}
			r, err := file.OpenParquetFile(dir+"/limit/part-00000.snappy.parquet", false)
			if err != nil {
				t.Fatal(err)
			}
			rg := r.MetaData().RowGroup(0)
			for i := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(i)
				if err != nil {
					t.Fatal(err)
				}
				name := cc.PathInSchema().String()
				if cc.Compression() != wantCodec {
					t.Errorf("%s %v: column %s compressed with %v", writer, tn, name, cc.Compression())
				}
				delta := slices.Contains(cc.Encodings(), parquet.Encodings.DeltaBinaryPacked)
				// id and created ascend, so parquetprops delta-encodes
				// them; shipped does not, and gets it only from
				// -limit-encoding delta-int; status and _operation are
				// dictionary-encoded and keep it.
				switch name {
				case "id", "created":
					if !delta {
						t.Errorf("%s %v: column %s encodings %v", writer, tn, name, cc.Encodings())
					}
				case "shipped":
					if delta != (tn.LimitEncoding == "delta-int") {
						t.Errorf("%s %v: column %s encodings %v", writer, tn, name, cc.Encodings())
					}
				case "status", "_operation":
					if delta || !slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict) {
						t.Errorf("%s %v: column %s encodings %v", writer, tn, name, cc.Encodings())
					}
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if sizes["zstd"] == sizes["zstd-fastest"] {
			t.Errorf("%s: zstd and zstd-fastest wrote %d bytes each: the level is not passed", writer, sizes["zstd"])
		}
	}
}

// TestTuningRefusesUnknownNames: a misspelt experiment flag is an error
// before anything runs.
func TestTuningRefusesUnknownNames(t *testing.T) {
	defer func(saved tuning) { tune = saved }(tune)
	for _, bad := range []tuning{{LimitCodec: "snapy"}, {LimitWriter: "arrow"}, {LimitPageBytes: -1}, {LimitEncoding: "delta"}} {
		if err := bad.apply(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	for _, good := range []tuning{{LimitWriter: "pqarrow"}, {LimitWriter: "pqfile", LimitCodec: "zstd"}, {LimitCodec: "zstd-fastest", LimitEncoding: "delta-int"}} {
		if err := good.apply(); err != nil || tune != good {
			t.Errorf("%+v: %v, tune %+v", good, err, tune)
		}
	}
}

// TestInParallel: the calls run at once (each waits until all have
// started), every call has returned when inParallel does, and every error
// comes back, not only the first.
func TestInParallel(t *testing.T) {
	errOdd, errFive := errors.New("odd"), errors.New("five")
	done := make([]bool, 7)
	var started sync.WaitGroup
	started.Add(len(done))
	err := inParallel(len(done), func(i int) error {
		started.Done()
		started.Wait() // never returns if the calls run one after another
		done[i] = true
		switch {
		case i == 5:
			return errFive
		case i%2 == 1:
			return errOdd
		}
		return nil
	})
	for i, d := range done {
		if !d {
			t.Errorf("call %d had not run when inParallel returned", i)
		}
	}
	if !errors.Is(err, errOdd) || !errors.Is(err, errFive) {
		t.Errorf("err = %v, want both errors", err)
	}
	if err := inParallel(3, func(int) error { return nil }); err != nil {
		t.Errorf("no failures: err = %v", err)
	}
}

// TestSmokeVerdict: the CI guard fails under the minimum ratio and says so.
func TestSmokeVerdict(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		ok    bool
	}{{0.69, false}, {smokeMinRatio, true}, {1.08, true}, {0, false}} {
		line, ok := smokeVerdict(tc.ratio)
		if ok != tc.ok || !strings.HasPrefix(line, "bench smoke: pipeline from IPC/limit = ") {
			t.Errorf("ratio %.2f: %q, pass %v; want pass %v", tc.ratio, line, ok, tc.ok)
		}
	}
}

// TestResumeReadsTheRest runs -resume's measurement on a small table: the
// failed attempt records some partitions, and the resume reads exactly
// the rows of the others.
func TestResumeReadsTheRest(t *testing.T) {
	r, err := resumeOnce(t.Context(), 50_000, 10, 1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.Recorded < 8 || r.Recorded >= 10 || r.ResumeRead <= 0 || r.ResumeRead > r.Rows/5 {
		t.Fatalf("%+v: want 8 or 9 of 10 partitions recorded at a 90 %% crash with one worker, and the rest read again", r)
	}
}
