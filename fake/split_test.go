package fake_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// splitTable creates dbo.s: id int primary key, g int NULL (heavy
// duplicates and NULLs) indexed by IX_s_g, name varchar NULL (a
// case-insensitive collation, so 'a' and 'A ' are one value) indexed by
// IX_s_name, u int NULL with no index.
func splitTable(t *testing.T, r *rand.Rand, n int, pkClustered bool) (*fake.DB, *source.CaptureInstance, []fake.Row) {
	t.Helper()
	db := fake.New(fake.Options{})
	distinct := 1 + r.IntN(6)
	names := []string{"a", "A ", "b", "B", "c ", "é", "É"}
	var rows []fake.Row
	for i := range n {
		var g, name, u any
		if r.IntN(4) > 0 {
			g = int64(r.IntN(distinct))
		}
		if r.IntN(5) > 0 {
			name = names[r.IntN(len(names))]
		}
		if r.IntN(3) > 0 {
			u = int64(r.IntN(distinct))
		}
		rows = append(rows, fake.Row{int64(i*3 - n), g, name, u})
	}
	check(t, db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "s",
		Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"}, {Name: "g", Type: "int", Nullable: true},
			{Name: "name", Type: "varchar(10)", Nullable: true, Collation: "Latin1_General_CI_AS"},
			{Name: "u", Type: "int", Nullable: true},
		},
		Key: []string{"id"}, KeyNonclustered: !pkClustered,
		Indexes: []fake.IndexDef{
			{Name: "IX_s_g", Columns: []string{"g", "id"}},
			{Name: "IX_s_name", Columns: []string{"name"}, Clustered: !pkClustered},
		},
		Rows: rows, CaptureInstance: "dbo_s",
	}))
	ci := must[*source.CaptureInstance](t)(db.CaptureInstance(context.Background(), "dbo_s"))
	return db, ci, rows
}

// TestSplitColumnRangesReadEveryRowOnce is the property of issue 18's
// split columns: on random tables with heavy duplicates and NULLs in a
// non-unique column, ranges planned by SeekKey (keyrange.NTile over an
// exact or a skewed row count) and ranges cut at random bounds read,
// together, every row exactly once, NULLs in the first range; each bound
// SeekKey returns is the brute-force oracle's; a range of an indexed
// column examines only its rows, and one of the unindexed column scans.
func TestSplitColumnRangesReadEveryRowOnce(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 18))
		n := r.IntN(120)
		db, ci, rows := splitTable(t, r, n, seed%2 == 0)
		for ci2, col := range []string{"g", "name", "u"} {
			split, err := ci.SplitOn(col)
			if col == "u" {
				if !errors.Is(err, source.ErrNoSplitIndex) {
					t.Fatalf("SplitOn(u): %v, want ErrNoSplitIndex", err)
				}
				// A user's own copy of an unindexed column: still read
				// exactly once, by scans.
				cp := *ci
				cp.Key, cp.KeyIndex = []string{"u"}, &source.Index{Name: "none", Columns: []string{"u"}}
				split = &cp
			} else if err != nil {
				t.Fatal(err)
			}
			if split.UniqueKey() {
				t.Fatalf("%s: a split on a non-unique index claims a unique key", col)
			}
			j := 1 + ci2
			keyCol := must[keyrange.Column](t)(func() (keyrange.Column, error) {
				kc, err := split.KeyColumns()
				if err != nil {
					return keyrange.Column{}, err
				}
				return kc[0], nil
			}())
			parts := 1 + r.IntN(7)
			count := int64(n) + int64(r.IntN(21)-10)
			planned, err := keyrange.NTile(ctx, seeker{db, split}, max(count, 0), parts)
			check(t, err)
			checkBounds(t, planned, keyCol, col)
			readOnce(t, db, split, planned, rows, j, col, "NTile")
			// Random bounds from seeks of random lengths.
			var bounds []keyrange.Tuple
			var from keyrange.Tuple
			for range r.IntN(5) {
				k := int64(r.IntN(max(n/3, 1)))
				got, ok, err := db.SeekKey(ctx, split, source.ReadCommitted, from, k)
				check(t, err)
				want, wantOK := seekOracle(t, keyCol, rows, j, from, k)
				if ok != wantOK || ok && !sameTuple(t, keyCol, got, want) {
					t.Fatalf("seed %d %s: SeekKey(from %v, %d) = %v %v, oracle %v %v", seed, col, from, k, got, ok, want, wantOK)
				}
				if !ok {
					break
				}
				bounds = append(bounds, got)
				from = got
			}
			checkBounds(t, keyrange.FromBounds(bounds), keyCol, col)
			readOnce(t, db, split, keyrange.FromBounds(bounds), rows, j, col, "seeks")
		}
	}
}

func sameTuple(t *testing.T, c keyrange.Column, a, b keyrange.Tuple) bool {
	t.Helper()
	o, err := keyrange.Compare(c, a[0], b[0])
	check(t, err)
	return o == 0
}

// checkBounds: every bound is above the one before (so no range is empty
// by construction) and none is NULL.
func checkBounds(t *testing.T, ranges []keyrange.Range, c keyrange.Column, col string) {
	t.Helper()
	var prev keyrange.Tuple
	for _, rg := range ranges[1:] {
		if rg.Lower[0] == nil {
			t.Fatalf("%s: a NULL bound: %v", col, ranges)
		}
		if prev != nil {
			if o, _ := keyrange.Compare(c, prev[0], rg.Lower[0]); o >= 0 {
				t.Fatalf("%s: bounds %v then %v do not increase", col, prev, rg.Lower)
			}
		}
		prev = rg.Lower
	}
}

// seekOracle is SeekKey's contract for a key that repeats, by brute force:
// sort the column's values (NULL first), take the (k+1)-th at or after
// from, then the smallest value at or above it and above from (nil from:
// above NULL).
func seekOracle(t *testing.T, c keyrange.Column, rows []fake.Row, j int, from keyrange.Tuple, k int64) (keyrange.Tuple, bool) {
	t.Helper()
	var vals []any
	for _, row := range rows {
		vals = append(vals, row[j])
	}
	cmp := func(a, b any) int {
		o, err := keyrange.Compare(c, a, b)
		check(t, err)
		return o
	}
	slices.SortStableFunc(vals, cmp)
	var at []any
	for _, v := range vals {
		if from == nil || cmp(v, from[0]) >= 0 {
			at = append(at, v)
		}
	}
	if int64(len(at)) <= k {
		return nil, false
	}
	v := at[k]
	var lo any
	if from != nil {
		lo = from[0]
	}
	for _, w := range vals {
		if cmp(w, v) >= 0 && cmp(w, lo) > 0 {
			return keyrange.Tuple{w}, true
		}
	}
	return nil, false
}

// readOnce reads ranges and checks their union is rows, each row once,
// each in the range its value belongs to (NULL in the first), and the
// rows each read examined.
func readOnce(t *testing.T, db *fake.DB, ci *source.CaptureInstance, ranges []keyrange.Range, rows []fake.Row, j int, col, how string) {
	t.Helper()
	ctx := context.Background()
	seen := map[int64]int{}
	kc, _ := ci.KeyColumns()
	for _, rg := range ranges {
		db.ResetStats()
		got, err := readAll(t, must[arrowReader](t)(db.ReadRange(ctx, ci, rg, source.ReadOptions{BatchRows: 7})))
		check(t, err)
		for _, row := range got {
			seen[row[0].(int64)]++
			in, err := rg.Contains(kc, keyrange.Tuple{row[j]})
			check(t, err)
			if !in {
				t.Fatalf("%s %s: %s returned a row with %s = %v", how, col, rg, col, row[j])
			}
			if row[j] == nil && rg.Index != 0 {
				t.Fatalf("%s %s: a NULL %s in %s, not the first range", how, col, col, rg)
			}
		}
		st := must[fake.Stats](t)(db.Stats("dbo", "s"))
		if col == "u" {
			if want := int64(len(rows)) * piecesOf(t, kc, rg); st.RowsExamined != want {
				t.Fatalf("%s u: %s examined %d rows, want %d (a scan per piece)", how, rg, st.RowsExamined, want)
			}
		} else if st.RowsExamined != st.RowsReturned {
			t.Fatalf("%s %s: %s examined %d rows to return %d", how, col, rg, st.RowsExamined, st.RowsReturned)
		}
	}
	for _, row := range rows {
		if seen[row[0].(int64)] != 1 {
			t.Fatalf("%s %s: row %v read %d times over %v", how, col, row, seen[row[0].(int64)], describeRanges(ranges))
		}
	}
	if len(seen) != len(rows) {
		t.Fatalf("%s %s: read %d rows, the table has %d", how, col, len(seen), len(rows))
	}
}

func piecesOf(t *testing.T, kc []keyrange.Column, rg keyrange.Range) int64 {
	ps, err := keyrange.Pieces(kc, rg)
	check(t, err)
	return int64(len(ps))
}

func describeRanges(rs []keyrange.Range) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, " ")
}

// TestIndexesDescribed: a capture instance lists the table's indexes
// (clustered first), its key index, and whether the table is a heap; a
// keyless table reports no key and reads as one range.
func TestIndexesDescribed(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	_, ci, _ := splitTable(t, r, 10, false)
	want := []source.Index{
		{Name: "IX_s_name", Columns: []string{"name"}, Clustered: true},
		{Name: "IX_s_g", Columns: []string{"g", "id"}},
		{Name: "PK_s", Columns: []string{"id"}, Unique: true},
	}
	if fmt.Sprint(ci.Indexes) != fmt.Sprint(want) || ci.Heap {
		t.Fatalf("indexes %v heap %v, want %v and no heap", ci.Indexes, ci.Heap, want)
	}
	if ci.KeyIndex == nil || ci.KeyIndex.Name != "PK_s" || ci.KeyIndex.Clustered || !ci.UniqueKey() {
		t.Fatalf("key index %+v", ci.KeyIndex)
	}
	split := must[*source.CaptureInstance](t)(ci.SplitOn("name"))
	if split.KeyIndex.Name != "IX_s_name" || split.Key[0] != "name" || split.UniqueKey() {
		t.Fatalf("SplitOn(name) = key %v index %+v", split.Key, split.KeyIndex)
	}
	if ci.Key[0] != "id" || ci.KeyIndex.Name != "PK_s" {
		t.Fatal("SplitOn changed the original")
	}

	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "h", Keyless: true,
		Columns: []fake.ColumnDef{{Name: "rid", Type: "int"}, {Name: "v", Type: "nvarchar(5)", Nullable: true}},
		Key:     []string{"rid"}, Indexes: []fake.IndexDef{{Name: "IX_h_v", Columns: []string{"v"}}},
		Rows: []fake.Row{{int64(1), "x"}, {int64(2), "x"}, {int64(3), nil}}, CaptureInstance: "dbo_h",
	}))
	h := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_h"))
	if len(h.Key) != 0 || h.KeyIndex != nil || !h.Heap || len(h.Indexes) != 1 {
		t.Fatalf("heap described as key %v, key index %v, heap %v, indexes %v", h.Key, h.KeyIndex, h.Heap, h.Indexes)
	}
	if got := mustReadAll(t)(db.ReadRange(ctx, h, keyrange.Range{}, source.ReadOptions{})); len(got) != 3 {
		t.Fatalf("heap read %d rows, want 3", len(got))
	}
	if _, err := db.ReadRange(ctx, h, keyrange.Range{Upper: keyrange.Tuple{int64(2)}}, source.ReadOptions{}); err == nil {
		t.Fatal("a bounded range of a keyless instance was read")
	}
	hs := must[*source.CaptureInstance](t)(h.SplitOn("v"))
	ranges := must[[]keyrange.Range](t)(keyrange.NTile(ctx, seeker{db, hs}, 3, 3))
	total := 0
	for _, rg := range ranges {
		total += len(mustReadAll(t)(db.ReadRange(ctx, hs, rg, source.ReadOptions{})))
	}
	if len(ranges) != 2 || total != 3 {
		t.Fatalf("heap split on v: ranges %v read %d rows; want two ranges (NULL, then the one value x) and 3 rows", ranges, total)
	}
}

// TestReadRangeNotBefore: a read that must see an LSN the capture job has
// not reached is refused with a *source.ReplicaBehindError; one at the
// max LSN reads.
func TestReadRangeNotBefore(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	db, ci, rows := splitTable(t, r, 20, true)
	tx := db.Begin()
	check(t, tx.Insert("dbo", "s", fake.Row{int64(1000), nil, nil, nil}))
	at := must[lsn.LSN](t)(tx.Commit())
	if got := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{NotBefore: at})); len(got) != len(rows)+1 {
		t.Fatalf("read at the max LSN: %d rows, want %d", len(got), len(rows)+1)
	}
	next := must[lsn.LSN](t)(at.Next())
	_, err := db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{NotBefore: next})
	var rb *source.ReplicaBehindError
	if !errors.As(err, &rb) || rb.Have != at || rb.Need != next {
		t.Fatalf("read beyond the max LSN: %v, want a ReplicaBehindError", err)
	}
}

// TestIndexDefErrors: indexes that cannot exist are refused, naming why.
func TestIndexDefErrors(t *testing.T) {
	cols := []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "g", Type: "int", Nullable: true}, {Name: "x", Type: "xml", Nullable: true}}
	for _, c := range []struct {
		def  fake.TableDef
		want string
	}{
		{fake.TableDef{Indexes: []fake.IndexDef{{Name: "CX", Columns: []string{"g"}, Clustered: true}}}, "more than one clustered index"},
		{fake.TableDef{Indexes: []fake.IndexDef{{Name: "IX", Columns: []string{"nope"}}}}, `column "nope" is not a column`},
		{fake.TableDef{Indexes: []fake.IndexDef{{Name: "IX", Columns: []string{"x"}}}}, "cannot be an index key"},
		{fake.TableDef{Indexes: []fake.IndexDef{{Name: "pk_t", Columns: []string{"g"}}}}, "two indexes are called"},
		{fake.TableDef{Indexes: []fake.IndexDef{{Name: "IX"}}}, "needs a name and columns"},
	} {
		def := c.def
		def.Schema, def.Name, def.Columns, def.Key = "dbo", "t", cols, []string{"id"}
		err := fake.New(fake.Options{}).CreateTable(def)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.def.Indexes, err, c.want)
		}
	}
}
