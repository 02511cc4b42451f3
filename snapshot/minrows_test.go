package snapshot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestPartitionsForAgainstBruteForce holds Options.PartitionsFor to its
// definition, counted out: the most partitions, up to Partitions (4 when
// zero), that each get at least MinPartitionRows (10,000 when zero) of
// the table's rows, and one when none do; an unknown row count or a
// negative MinPartitionRows keeps Partitions.
func TestPartitionsForAgainstBruteForce(t *testing.T) {
	rowCounts := []int64{-1}
	for n := int64(0); n <= 130; n++ {
		rowCounts = append(rowCounts, n)
	}
	for k := int64(1); k <= 13; k++ {
		rowCounts = append(rowCounts, k*10_000-1, k*10_000, k*10_000+1)
	}
	for partitions := 0; partitions <= 12; partitions++ {
		for _, least := range []int64{-7, -1, 0, 1, 2, 3, 7, 10, 10_000} {
			for _, rows := range rowCounts {
				o := snapshot.Options{Partitions: partitions, MinPartitionRows: least}
				n, min := partitions, least
				if n == 0 {
					n = 4
				}
				if min == 0 {
					min = snapshot.DefaultMinPartitionRows
				}
				want := n
				if min > 0 && rows >= 0 {
					want = 1
					for k := n; k >= 1; k-- {
						if int64(k)*min <= rows {
							want = k
							break
						}
					}
				}
				if got := o.PartitionsFor(rows); got != want {
					t.Errorf("Partitions %d, MinPartitionRows %d, %d rows: %d partitions, want %d", partitions, least, rows, got, want)
				}
			}
		}
	}
}

// minRowsTable creates dbo.t with n rows keyed as kind says ("int": one
// bigint id 0..n-1, uniform ranges; "composite": (region, id), keyset
// ranges; "split": no unique index, cut on the repeating grp of index
// IX_grp) and its capture instance dbo_t.
func minRowsTable(t testing.TB, kind string, n int) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	def := fake.TableDef{Schema: "dbo", Name: "t", CaptureInstance: "dbo_t", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "region", Type: "varchar(8)"}, {Name: "id", Type: "bigint"}, {Name: "grp", Type: "int"}}}
	switch kind {
	case "composite":
		def.Key = []string{"region", "id"}
	case "split":
		def.Keyless = true
		def.Indexes = []fake.IndexDef{{Name: "IX_grp", Columns: []string{"grp"}}}
	}
	for i := range n {
		def.Rows = append(def.Rows, fake.Row{fmt.Sprintf("r%d", i%5), int64(i), int64(i / 3)})
	}
	if err := db.CreateTable(def); err != nil {
		t.Fatal(err)
	}
	return db
}

func splitColumn(kind string) string {
	if kind == "split" {
		return "grp"
	}
	return ""
}

// TestSmallTableIsOneFile: with the default options a table of two rows
// is read as one partition and written as one data file, whatever
// Partitions asks and however the table is cut; a table of 25,000 rows
// gets two partitions (a partition gets at least 10,000 rows). Before
// Options.MinPartitionRows a 2-row table was two files.
func TestSmallTableIsOneFile(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"int", "composite", "split"} {
		for _, tc := range []struct{ rows, partitions int }{{2, 8}, {25_000, 8}} {
			db := minRowsTable(t, kind, tc.rows)
			table, err := delta.Open(ctx, "mem://", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			opts := snapshot.Options{CaptureInstance: "dbo_t", Partitions: tc.partitions, SplitColumn: splitColumn(kind)}
			plan, err := snapshot.NewPlan(ctx, db, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := snapshot.Take(ctx, db, table, opts)
			if err != nil {
				t.Fatal(err)
			}
			files, err := table.Files(ctx)
			if err != nil {
				t.Fatal(err)
			}
			table.Close()
			want := max(1, tc.rows/10_000)
			if res.Rows != int64(tc.rows) || res.Partitions != want || len(files) != want || len(plan.Ranges) != want {
				t.Errorf("%s key, %d rows, Partitions %d: %d rows in %d partitions and %d files (planned %d ranges); want %d each",
					kind, tc.rows, tc.partitions, res.Rows, res.Partitions, len(files), len(plan.Ranges), want)
			}
			if want == 1 && !strings.Contains(plan.Reason, "too few for two partitions of at least 10000 (Options.MinPartitionRows)") {
				t.Errorf("%s key, %d rows: the plan does not say why it is one range: %q", kind, tc.rows, plan.Reason)
			}
		}
	}
}

// TestSmallTableByKeySpan: a unique integer key holds at most MAX - MIN +
// 1 rows, so a small table whose metadata row count is stale (too high)
// or unavailable still gets one partition.
func TestSmallTableByKeySpan(t *testing.T) {
	ctx := context.Background()
	db := minRowsTable(t, "int", 2)
	if err := db.SetRowCountSkew("dbo", "t", 1_000_000); err != nil {
		t.Fatal(err)
	}
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	if plan.EstimatedRows != 1_000_002 || len(plan.Ranges) != 1 {
		t.Errorf("stale row count: ~%d rows, %d ranges; want 1,000,002 and one range", plan.EstimatedRows, len(plan.Ranges))
	}
	db.FailNext(fake.OpRowCount, fake.ErrInjected)
	plan, err = snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	if plan.EstimatedRows != -1 || len(plan.Ranges) != 1 {
		t.Errorf("no row count: ~%d rows, %d ranges; want -1 and one range", plan.EstimatedRows, len(plan.Ranges))
	}
	// Without a minimum the span cuts what Partitions asks (two keys, two
	// ranges), as before.
	plan, err = snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 8, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranges) != 2 {
		t.Errorf("MinPartitionRows -1: %d ranges, want 2", len(plan.Ranges))
	}
}

// TestMinPartitionRowsEveryRowOnce: for random tables, Partitions and
// MinPartitionRows, a table of N rows is cut into at most
// max(1, ceil(N / MinPartitionRows)) partitions (exactly PartitionsFor(N)
// for a unique key), and the snapshot still holds every row exactly once.
func TestMinPartitionRowsEveryRowOnce(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 86))
	for c := range 60 {
		kind := []string{"int", "composite", "split"}[r.IntN(3)]
		n := r.IntN(400)
		opts := snapshot.Options{CaptureInstance: "dbo_t", Partitions: 1 + r.IntN(16), MinPartitionRows: 1 + r.Int64N(120),
			SplitColumn: splitColumn(kind), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(50)}}
		name := fmt.Sprintf("case %d: %s key, %d rows, Partitions %d, MinPartitionRows %d", c, kind, n, opts.Partitions, opts.MinPartitionRows)
		db := minRowsTable(t, kind, n)
		dst := fake.NewMemSink()
		plan, err := snapshot.NewPlan(ctx, db, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ceil := int((int64(n) + opts.MinPartitionRows - 1) / opts.MinPartitionRows)
		if len(plan.Ranges) > max(1, ceil) || (kind != "split" && len(plan.Ranges) != opts.PartitionsFor(int64(n))) {
			t.Errorf("%s: %d ranges, want %d (at most %d)", name, len(plan.Ranges), opts.PartitionsFor(int64(n)), max(1, ceil))
		}
		res, err := snapshot.Take(ctx, db, dst, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, err := dst.Rows()
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, row := range rows {
			ids = append(ids, row["id"].(int64))
		}
		slices.Sort(ids)
		want := make([]int64, n)
		for i := range want {
			want[i] = int64(i)
		}
		if res.Rows != int64(n) || !slices.Equal(ids, want) {
			t.Errorf("%s: %d rows committed, ids %v; want each of 0..%d once", name, res.Rows, ids, n-1)
		}
		dst.Close()
	}
}
