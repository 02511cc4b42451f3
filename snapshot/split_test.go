package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// splitTable creates dbo.t with n random rows whose grp (int) and name
// (nvarchar, case-insensitive, with trailing spaces) repeat a few values
// and hold NULLs, indexed (not uniquely) by IX_grp and IX_name, and its
// capture instance dbo_t. id identifies rows; keyless makes the table one
// whose capture instance has no unique index (a heap unless IX_grp is
// clustered).
func splitTable(t testing.TB, r *rand.Rand, n int, keyless, clusteredGrp bool) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	groups := 1 + r.IntN(6)
	names := []string{"a", "A", "a ", "b", "B  ", "c", "zz"}[:1+r.IntN(7)]
	rows := make([]fake.Row, n)
	for i := range rows {
		var grp, name any
		if r.IntN(5) > 0 {
			grp = int64(r.IntN(groups) - 2)
		}
		if r.IntN(5) > 0 {
			name = names[r.IntN(len(names))]
		}
		rows[i] = fake.Row{int64(i), grp, name, fmt.Sprint("v", r.IntN(1000))}
	}
	err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"},
		Columns: []fake.ColumnDef{
			{Name: "id", Type: "bigint"},
			{Name: "grp", Type: "int", Nullable: true},
			{Name: "name", Type: "nvarchar(10)", Nullable: true},
			{Name: "val", Type: "nvarchar(10)"},
		},
		Keyless:         keyless,
		KeyNonclustered: clusteredGrp,
		Indexes: []fake.IndexDef{
			{Name: "IX_grp", Columns: []string{"grp"}, Clustered: clusteredGrp},
			{Name: "IX_name", Columns: []string{"name", "val"}},
		},
		Rows: rows, CaptureInstance: "dbo_t"})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// checkEveryRowOnce fails t unless dst's committed rows are the source
// table's rows, each exactly once (the oracle: db.Rows, by id).
func checkEveryRowOnce(t *testing.T, what string, db *fake.DB, dst *fake.MemSink) {
	t.Helper()
	want, err := db.Rows("dbo", "t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	byID := map[int64]fake.Row{}
	for _, row := range want {
		byID[row[0].(int64)] = row
	}
	for _, g := range got {
		id := g["id"].(int64)
		seen[id]++
		w, ok := byID[id]
		if !ok || seen[id] > 1 {
			t.Fatalf("%s: row id %d read %d times (in the source: %v)", what, id, seen[id], ok)
		}
		if fmt.Sprint(g["grp"], g["name"], g["val"]) != fmt.Sprint(w[1], w[2], w[3]) {
			t.Fatalf("%s: row id %d is %v, the source has %v", what, id, g, w)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%s: %d of the source's %d rows read", what, len(seen), len(want))
	}
}

// TestSplitColumnEveryRowOnce: a snapshot split on a column whose values
// repeat (and include NULLs) reads every row exactly once, at 1..8
// partitions, with and without a unique key, also when the first attempt
// fails part way and a rerun resumes it. The plan records the split column
// and survives JSON.
func TestSplitColumnEveryRowOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 18))
	ctx := context.Background()
	for c := range max(1, *casesFlag/2) {
		n := r.IntN(150)
		keyless := r.IntN(2) == 0
		db := splitTable(t, r, n, keyless, r.IntN(2) == 0)
		split := []string{"grp", "name"}[r.IntN(2)]
		opts := snapshot.Options{CaptureInstance: "dbo_t", SplitColumn: split, Partitions: 1 + r.IntN(8), MinPartitionRows: -1,
			Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(20), ReadAhead: r.IntN(3) - 1}}
		what := fmt.Sprintf("case %d (%d rows, keyless %v, split on %s, %d partitions)", c, n, keyless, split, opts.Partitions)

		plan, err := snapshot.NewPlan(ctx, db, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		raw, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		var back snapshot.Plan
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if back.SplitColumn != split || len(back.Instance.Key) != 1 || back.Instance.Key[0] != split || back.Validate() != nil {
			t.Fatalf("%s: the plan's split column after JSON: %q, key %v, %v", what, back.SplitColumn, back.Instance.Key, back.Validate())
		}
		warned := slices.ContainsFunc(plan.Warnings, func(w string) bool { return strings.Contains(w, "no unique key") })
		if want := keyless && len(plan.Ranges) > 1; warned != want {
			t.Fatalf("%s: %d ranges, warnings %q: want the no-unique-key warning %v", what, len(plan.Ranges), plan.Warnings, want)
		}

		dst := fake.NewMemSink()
		resumed := n > 0 && r.IntN(3) == 0
		if resumed {
			db.FailReadAfter(int64(r.IntN(n)), fake.ErrInjected)
			if _, err := snapshot.Take(ctx, db, dst, opts); !errors.Is(err, fake.ErrInjected) {
				t.Fatalf("%s: the first attempt returned %v, want the injected fault", what, err)
			}
		}
		res, err := snapshot.Take(ctx, db, dst, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resumed && !res.Resumed {
			t.Fatalf("%s: the rerun did not resume", what)
		}
		checkEveryRowOnce(t, what, db, dst)
		dst.Close()
	}
}

// TestOneRangeReason: a capture instance without a unique index, and no
// split column, is read as one range, and the plan says why and which
// option to set; for a heap without indexes it says to create one.
func TestOneRangeReason(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	db := splitTable(t, r, 40, true, false)
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranges) != 1 || !strings.Contains(plan.Reason, "no unique index") || !strings.Contains(plan.Reason, "Options.SplitColumn") || !strings.Contains(plan.Reason, "grp, name") {
		t.Fatalf("keyless table: %d ranges, reason %q", len(plan.Ranges), plan.Reason)
	}
	heap := fake.New(fake.Options{})
	if err := heap.CreateTable(fake.TableDef{Schema: "dbo", Name: "h", Key: []string{"id"}, Keyless: true,
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}}, Rows: []fake.Row{{int64(1)}, {int64(2)}}, CaptureInstance: "dbo_h"}); err != nil {
		t.Fatal(err)
	}
	plan, err = snapshot.NewPlan(ctx, heap, snapshot.Options{CaptureInstance: "dbo_h", Partitions: 4, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranges) != 1 || !strings.Contains(plan.Reason, "heap") || !strings.Contains(plan.Reason, "create an index") {
		t.Fatalf("heap: %d ranges, reason %q", len(plan.Ranges), plan.Reason)
	}
	dst := fake.NewMemSink()
	defer dst.Close()
	if res, err := snapshot.Take(ctx, heap, dst, snapshot.Options{CaptureInstance: "dbo_h", Partitions: 4, MinPartitionRows: -1}); err != nil || res.Rows != 2 {
		t.Fatalf("heap: %+v, %v", res, err)
	}
}

// TestSplitColumnRefused: a split column that no index leads with, or
// that is not captured, is refused before the snapshot's LSN is recorded;
// a plan whose split column is not its key is invalid.
func TestSplitColumnRefused(t *testing.T) {
	ctx := context.Background()
	db := splitTable(t, rand.New(rand.NewPCG(3, 4)), 20, false, false)
	db.FailNext(fake.OpMaxLSN, errors.New("the LSN must not be asked for"))
	defer db.ClearFaults()
	for _, col := range []string{"val", "nope"} {
		_, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: "dbo_t", SplitColumn: col})
		if !errors.Is(err, snapshot.ErrInvalidOptions) || (col == "val") != errors.Is(err, source.ErrNoSplitIndex) {
			t.Fatalf("split on %s: %v, want ErrInvalidOptions (and ErrNoSplitIndex for an unindexed column)", col, err)
		}
	}
	db.ClearFaults()
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", SplitColumn: "grp", Partitions: 3, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(p *snapshot.Plan){
		"another split column": func(p *snapshot.Plan) { p.SplitColumn = "name" },
		"the table's key":      func(p *snapshot.Plan) { p.Instance.Key = []string{"id"} },
		"no index":             func(p *snapshot.Plan) { p.Instance.KeyIndex = nil },
	} {
		p := *plan
		edit(&p)
		if err := p.Validate(); !errors.Is(err, snapshot.ErrInvalidPlan) {
			t.Fatalf("%s: Validate returned %v, want ErrInvalidPlan", name, err)
		}
	}
}

// FuzzSplitFanOut plans a snapshot split on a column whose values repeat,
// ships the plan through JSON as a fan-out coordinator does, executes its
// partitions from the decoded plan in random order and commits: every row
// is in the snapshot exactly once.
func FuzzSplitFanOut(f *testing.F) {
	f.Add(uint64(1), uint8(60), uint8(4), false, false, false)
	f.Add(uint64(2), uint8(120), uint8(8), true, true, true)
	f.Add(uint64(3), uint8(0), uint8(3), true, false, true)
	f.Add(uint64(4), uint8(7), uint8(7), false, true, false)
	f.Fuzz(func(t *testing.T, seed uint64, rows, parts uint8, keyless, clusteredGrp, onName bool) {
		ctx := context.Background()
		r := rand.New(rand.NewPCG(seed, 5))
		db := splitTable(t, r, int(rows), keyless, clusteredGrp)
		split := "grp"
		if onName {
			split = "name"
		}
		plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_t", SplitColumn: split, Partitions: 1 + int(parts)%12, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(9)}})
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		var shipped snapshot.Plan
		if err := json.Unmarshal(js, &shipped); err != nil {
			t.Fatalf("plan JSON does not decode: %v\n%s", err, js)
		}
		dst := fake.NewMemSink()
		defer dst.Close()
		var out []sink.Part
		for _, i := range r.Perm(len(shipped.Ranges)) {
			p, err := snapshot.Execute(ctx, db, dst, &shipped, i, nil)
			if err != nil {
				t.Fatalf("partition %d: %v", i, err)
			}
			out = append(out, p)
		}
		if _, err := snapshot.Commit(ctx, dst, &shipped, out, nil); err != nil {
			t.Fatal(err)
		}
		checkEveryRowOnce(t, fmt.Sprintf("%s plan of %d ranges on %s", plan.Strategy, len(plan.Ranges), split), db, dst)
	})
}
