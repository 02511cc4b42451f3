package keyrange_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// checkUniform checks UniformRanges(lo, hi, n) by its definition: the
// ranges cut [lo, hi] into min(n, span) spans whose sizes differ by at most
// one, larger first; every int64 lies in exactly one range.
func checkUniform(t *testing.T, lo, hi int64, n int) []keyrange.Range {
	t.Helper()
	rs := keyrange.UniformRanges(lo, hi, n)
	cols := []keyrange.Column{{Name: "id", Kind: keyrange.KindInt}}
	span := new(big.Int).Sub(big.NewInt(hi), big.NewInt(lo))
	span.Add(span, big.NewInt(1))
	want := int64(1)
	if n > 1 && hi > lo {
		want = int64(n)
		if span.IsInt64() && span.Int64() < want {
			want = span.Int64()
		}
	}
	if int64(len(rs)) != want {
		t.Fatalf("UniformRanges(%d, %d, %d) = %d ranges, want %d: %v", lo, hi, n, len(rs), want, rs)
	}
	if rs[0].Lower != nil || rs[len(rs)-1].Upper != nil {
		t.Fatalf("UniformRanges(%d, %d, %d): ends not open: %v", lo, hi, n, rs)
	}
	for i := range rs {
		if rs[i].Index != i || (i > 0 && !equalTuples(rs[i].Lower, rs[i-1].Upper)) {
			t.Fatalf("UniformRanges(%d, %d, %d): ranges not consecutive: %v", lo, hi, n, rs)
		}
	}
	if len(rs) > 1 {
		// Sizes within [lo, hi]: span/parts, the first span%parts one more.
		parts := big.NewInt(int64(len(rs)))
		q, rem := new(big.Int).QuoRem(span, parts, new(big.Int))
		start := big.NewInt(lo)
		for i, r := range rs {
			end := big.NewInt(hi)
			end.Add(end, big.NewInt(1))
			if r.Upper != nil {
				end = big.NewInt(r.Upper[0].(int64))
			}
			size := new(big.Int).Sub(end, start)
			w := new(big.Int).Set(q)
			if int64(i) < rem.Int64() {
				w.Add(w, big.NewInt(1))
			}
			if size.Cmp(w) != 0 {
				t.Fatalf("UniformRanges(%d, %d, %d): range %d holds %s values of [min, max], want %s", lo, hi, n, i, size, w)
			}
			start = end
		}
	}
	probes := []int64{math.MinInt64, math.MaxInt64, lo, hi, lo + 1, hi - 1, 0}
	for _, r := range rs {
		if r.Upper != nil {
			u := r.Upper[0].(int64)
			probes = append(probes, u, u-1, u+1)
		}
	}
	for _, p := range probes {
		rangeOf(t, cols, rs, keyrange.Tuple{p})
	}
	rangeOf(t, cols, rs, keyrange.Tuple{nil})
	if rangeOf(t, cols, rs, keyrange.Tuple{nil}) != 0 {
		t.Fatalf("NULL is not in the first range")
	}
	return rs
}

func equalTuples(a, b keyrange.Tuple) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if fmtValue(a[i]) != fmtValue(b[i]) {
			return false
		}
	}
	return true
}

func TestUniformRanges(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int64
		n      int
	}{
		{1, 100, 4}, {1, 10, 3}, {0, 0, 4}, {5, 5, 1}, {5, 4, 3}, {1, 3, 10}, {1, 2, 2}, {-5, 5, 3},
		{1, 100, 0}, {1, 100, -3}, {1, 100, 1},
		{math.MinInt64, math.MaxInt64, 2},
		{math.MinInt64, math.MaxInt64, 7},
		{math.MinInt64, math.MinInt64 + 2, 5},
		{math.MaxInt64 - 2, math.MaxInt64, 5},
		{math.MaxInt64 - 1, math.MaxInt64, 2},
		{math.MinInt64, 0, 3},
		{-1, math.MaxInt64, 3},
	} {
		checkUniform(t, tc.lo, tc.hi, tc.n)
	}
	// min == max: one range holding everything.
	if rs := keyrange.UniformRanges(7, 7, 8); len(rs) != 1 || rs[0].Lower != nil || rs[0].Upper != nil {
		t.Errorf("UniformRanges(7, 7, 8) = %v", rs)
	}
	// Span below n: one value per range.
	rs := keyrange.UniformRanges(10, 12, 8)
	if len(rs) != 3 || rs[1].Lower[0] != int64(11) || rs[2].Lower[0] != int64(12) {
		t.Errorf("UniformRanges(10, 12, 8) = %v", rs)
	}
}

func TestUniformRangesRandom(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	for range testCases(t) {
		var lo, hi int64
		switch r.IntN(3) {
		case 0:
			lo, hi = r.Int64N(100)-50, r.Int64N(100)-50
		case 1:
			lo, hi = int64(r.Uint64()), int64(r.Uint64())
		default:
			lo = math.MinInt64 + r.Int64N(20)
			hi = math.MaxInt64 - r.Int64N(20)
			if r.IntN(2) == 0 {
				lo = hi - r.Int64N(30)
			}
		}
		if lo > hi && r.IntN(4) != 0 {
			lo, hi = hi, lo
		}
		checkUniform(t, lo, hi, r.IntN(40)-2)
	}
}

// checkNTile runs NTile with an estimate and Tiles with the exact count
// over keys, checking them against NTILE's definition.
func checkNTile(t *testing.T, cols []keyrange.Column, keys []keyrange.Tuple, est int64, n int) []keyrange.Range {
	t.Helper()
	s := newSliceSeeker(t, cols, keys)
	rows := len(s.keys)
	rs, err := keyrange.NTile(context.Background(), s, est, n)
	if err != nil {
		t.Fatalf("NTile(%d rows, est %d, n %d): %v", rows, est, n, err)
	}
	if rs[0].Lower != nil || rs[len(rs)-1].Upper != nil {
		t.Fatalf("NTile: ends not open: %v", rs)
	}
	sizes := make([]int, len(rs))
	last := -1
	for _, k := range s.keys {
		i := rangeOf(t, cols, rs, k)
		if i < last {
			t.Fatalf("NTile: ranges out of key order at %s", fmtTuple(k))
		}
		last = i
		sizes[i]++
	}
	// NTILE by definition over the estimate: where the estimate is right,
	// the sizes are NTILE's; too high, fewer ranges; too low, the rest in
	// the last range.
	switch {
	case est <= 1 || n <= 1:
		if len(rs) != 1 {
			t.Fatalf("NTile(est %d, n %d) = %d ranges, want 1", est, n, len(rs))
		}
	default:
		m := min(int64(n), est)
		q, rem := est/m, est%m
		wantRanges := int(m)
		covered := int64(0)
		for i := 0; i < int(m)-1; i++ {
			size := q
			if int64(i) < rem {
				size++
			}
			if covered+size >= int64(rows) {
				wantRanges = i + 1
				break
			}
			covered += size
			if int64(sizes[i]) != size {
				t.Fatalf("NTile(%d rows, est %d, n %d): range %d holds %d rows, want %d (sizes %v)", rows, est, n, i, sizes[i], size, sizes)
			}
		}
		if len(rs) != wantRanges {
			t.Fatalf("NTile(%d rows, est %d, n %d) = %d ranges, want %d (sizes %v)", rows, est, n, len(rs), wantRanges, sizes)
		}
	}
	// Cost: each seek reads its range's keys and one more; unless the
	// estimate is too high (the seeks run out of keys there), never the
	// last range's.
	lastRows := int64(sizes[len(sizes)-1])
	if s.examined > int64(rows)+int64(s.seeks) || (est <= int64(rows) && s.examined > int64(rows)-lastRows+int64(s.seeks)) {
		t.Fatalf("NTile(%d rows, est %d, n %d): %d seeks examined %d keys, last range %d rows", rows, est, n, s.seeks, s.examined, lastRows)
	}
	if s.seeks > max(n-1, 0) {
		t.Fatalf("NTile made %d seeks for n=%d", s.seeks, n)
	}
	return rs
}

// checkTiles checks that Tiles with the exact count puts every key in the
// range NTILE(n) numbers it.
func checkTiles(t *testing.T, cols []keyrange.Column, keys []keyrange.Tuple, n int) {
	t.Helper()
	s := newSliceSeeker(t, cols, keys)
	rows := len(s.keys)
	rs, err := keyrange.Tiles(context.Background(), s, int64(rows), n)
	if err != nil {
		t.Fatalf("Tiles(%d rows, n %d): %v", rows, n, err)
	}
	nt := max(n, 1)
	tiles := ntileOf(rows, nt)
	wantRanges := min(nt, max(rows, 1))
	if len(rs) != wantRanges {
		t.Fatalf("Tiles(%d rows, n %d) = %d ranges, want %d", rows, n, len(rs), wantRanges)
	}
	for i, k := range s.keys {
		if got := rangeOf(t, cols, rs, k); got != tiles[i] {
			t.Fatalf("Tiles(%d rows, n %d): key %s (row %d) in range %d, NTILE says tile %d", rows, n, fmtTuple(k), i+1, got, tiles[i]+1)
		}
	}
	// NTile with the exact count gives the same ranges.
	rs2, err := keyrange.NTile(context.Background(), newSliceSeeker(t, cols, keys), int64(rows), n)
	if err != nil || len(rs2) != len(rs) {
		t.Fatalf("NTile = %v, %v; Tiles = %v", rs2, err, rs)
	}
	for i := range rs {
		if !equalTuples(rs[i].Lower, rs2[i].Lower) || !equalTuples(rs[i].Upper, rs2[i].Upper) {
			t.Fatalf("NTile and Tiles differ: %v vs %v", rs2, rs)
		}
	}
}

func TestNTileRandom(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	g := gen{r}
	cases := testCases(t)
	for range cases {
		cols := g.cols()
		pool := []int{1, 3, 50}[r.IntN(3)]
		var keys []keyrange.Tuple
		switch r.IntN(4) {
		case 0:
			keys = g.keys(t, cols, pool, r.IntN(4)) // 0..3 rows
		default:
			keys = g.keys(t, cols, pool, r.IntN(120))
		}
		rows := int64(len(keys))
		n := r.IntN(12) - 1
		checkTiles(t, cols, keys, n)
		for _, est := range []int64{rows, rows - 1 - r.Int64N(rows/2+1), rows + 1 + r.Int64N(rows+3), 0, 1, -5, 1 << 40} {
			checkNTile(t, cols, keys, est, n)
		}
	}
}

func TestNTileSmallTables(t *testing.T) {
	cols := []keyrange.Column{{Name: "k", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_CI_AS")}}
	keys := func(ss ...string) []keyrange.Tuple {
		var out []keyrange.Tuple
		for _, s := range ss {
			out = append(out, keyrange.Tuple{s})
		}
		return out
	}
	// Empty and one-row tables: one range.
	for _, ks := range [][]keyrange.Tuple{nil, keys("a")} {
		for _, n := range []int{1, 2, 8} {
			if rs := checkNTile(t, cols, ks, int64(len(ks)), n); len(rs) != 1 {
				t.Errorf("%d rows, n=%d: %v", len(ks), n, rs)
			}
		}
	}
	// Fewer rows than n: one row per range.
	rs := checkNTile(t, cols, keys("c", "A", "b"), 3, 8)
	if len(rs) != 3 || fmtTuple(rs[1].Lower) != "('b')" || fmtTuple(rs[2].Lower) != "('c')" {
		t.Errorf("3 rows, n=8: %v", rs)
	}
	// Ten rows in three: 4, 3, 3.
	checkTiles(t, cols, keys("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"), 3)
}

type failingSeeker struct{ after int }

func (f *failingSeeker) SeekKey(_ context.Context, _ keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	if f.after == 0 {
		return nil, false, errors.New("boom")
	}
	f.after--
	return keyrange.Tuple{int64(f.after)}, true, nil
}

func TestNTileErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := keyrange.NTile(ctx, &failingSeeker{after: 2}, 100, 5); err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "range 3") {
		t.Errorf("NTile with a failing seeker: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := keyrange.NTile(cctx, &failingSeeker{after: 100}, 100, 5); !errors.Is(err, context.Canceled) {
		t.Errorf("NTile with a canceled context: %v", err)
	}
	cols := []keyrange.Column{{Name: "id", Kind: keyrange.KindInt}}
	keys := []keyrange.Tuple{{int64(1)}, {int64(2)}, {int64(3)}}
	if _, err := keyrange.Tiles(ctx, newSliceSeeker(t, cols, keys), 10, 4); !errors.Is(err, keyrange.ErrRowCount) {
		t.Errorf("Tiles with a count too high: %v", err)
	}
	if _, err := keyrange.Tiles(ctx, newSliceSeeker(t, cols, keys), -1, 4); !errors.Is(err, keyrange.ErrRowCount) {
		t.Errorf("Tiles with a negative count: %v", err)
	}
}

func TestChoose(t *testing.T) {
	intCol := keyrange.Column{Name: "id", Kind: keyrange.KindInt, SQLType: "bigint"}
	vc := keyrange.Column{Name: "code", Kind: keyrange.KindString, SQLType: "varchar(10)", Collation: keyrange.ParseCollation("Greek_CI_AS")}
	nvc := keyrange.Column{Name: "name", Kind: keyrange.KindString, SQLType: "nvarchar(10)", Unicode: true}
	hidden := keyrange.Column{Name: "code", Kind: keyrange.KindString, SQLType: "varchar(10)"}
	xml := keyrange.Column{Name: "doc", Kind: keyrange.KindUnsupported, SQLType: "sql_variant"}
	odd := keyrange.Column{Name: "odd", Kind: keyrange.Kind(200)}
	for _, tc := range []struct {
		cols   []keyrange.Column
		parts  int
		want   keyrange.Strategy
		reason string // substring of the reason, "" for none
	}{
		{[]keyrange.Column{intCol}, 4, keyrange.Uniform, ""},
		{[]keyrange.Column{intCol}, 1, keyrange.Single, "one partition"},
		{[]keyrange.Column{intCol}, 0, keyrange.Single, "one partition"},
		{[]keyrange.Column{intCol, vc}, 4, keyrange.Keyset, ""},
		{[]keyrange.Column{vc}, 4, keyrange.Keyset, ""},
		{[]keyrange.Column{nvc}, 4, keyrange.Keyset, ""},
		{[]keyrange.Column{{Name: "d", Kind: keyrange.KindDecimal}}, 4, keyrange.Keyset, ""},
		{[]keyrange.Column{{Name: "u", Kind: keyrange.KindUUID}}, 4, keyrange.Keyset, ""},
		{nil, 4, keyrange.Single, "no key columns"},
		{[]keyrange.Column{intCol, hidden}, 4, keyrange.Single, `"code" (varchar(10)) has no visible collation`},
		{[]keyrange.Column{xml}, 4, keyrange.Single, `"doc" has type sql_variant`},
		{[]keyrange.Column{odd}, 4, keyrange.Single, `"odd" (unknown) has kind(200)`},
	} {
		got, reason := keyrange.Choose(tc.cols, tc.parts)
		if got != tc.want || (tc.reason == "") != (reason == "") || !strings.Contains(reason, tc.reason) {
			t.Errorf("Choose(%v, %d) = %s, %q; want %s, %q", tc.cols, tc.parts, got, reason, tc.want, tc.reason)
		}
		if tc.parts > 1 && (keyrange.Ineligible(tc.cols) == "") != (got != keyrange.Single) {
			t.Errorf("Ineligible(%v) = %q disagrees with Choose", tc.cols, keyrange.Ineligible(tc.cols))
		}
	}
	// Every reason is named in one message.
	r := keyrange.Ineligible([]keyrange.Column{xml, hidden})
	if !strings.Contains(r, "doc") || !strings.Contains(r, "code") {
		t.Errorf("Ineligible with two reasons = %q", r)
	}
	for s, want := range map[keyrange.Strategy]string{keyrange.Single: "single", keyrange.Uniform: "uniform", keyrange.Keyset: "keyset"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q", s, s.String())
		}
	}
}
