package keyrange_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// sameGo reports whether two values are the same Go value (what Pieces
// treats as certainly equal at the source).
func sameGo(a, b any) bool {
	return fmtValue(a) == fmtValue(b)
}

// hasTwins reports whether column c can hold two values that differ in Go
// and compare equal (strings with trailing spaces or another case,
// decimals with other zeros).
func hasTwins(c keyrange.Column) bool {
	return c.Kind == keyrange.KindString || c.Kind == keyrange.KindDecimal
}

// checkPieces checks Pieces(cols, r) against the brute-force oracle
// Range.Contains over keys (distinct under the key's order) and probes
// (any tuples). It returns the pieces.
func checkPieces(t *testing.T, cols []keyrange.Column, r keyrange.Range, keys, probes []keyrange.Tuple) []keyrange.Piece {
	t.Helper()
	ps, err := keyrange.Pieces(cols, r)
	if err != nil {
		t.Fatalf("Pieces(%s): %v", fmtRange(r), err)
	}
	dump := func() string {
		s := fmtRange(r) + "\n"
		for i, p := range ps {
			s += "  " + string(rune('0'+i%10)) + " " + fmtPiece(cols, p) + "\n"
		}
		return s
	}
	// Shape: equalities on a prefix, then at most one range column.
	for i, p := range ps {
		if len(p.Eq) > len(cols) {
			t.Fatalf("piece %d has %d equalities for %d columns\n%s", i, len(p.Eq), len(cols), dump())
		}
		if (p.Lower != nil || p.Upper != nil) && p.RangeColumn() >= len(cols) {
			t.Fatalf("piece %d bounds column %d of %d\n%s", i, p.RangeColumn(), len(cols), dump())
		}
		if p.Lower != nil && p.Lower.Value == nil && p.Lower.Inclusive {
			t.Fatalf("piece %d has >= NULL\n%s", i, dump())
		}
		if p.Upper != nil && (p.Upper.Value == nil || p.Upper.Inclusive) {
			t.Fatalf("piece %d has upper %+v: want < non-NULL\n%s", i, *p.Upper, dump())
		}
		if g := p.Guard; g != nil {
			if g.From < 0 || g.From >= len(cols) || (g.Below != nil && len(g.Below) != len(cols)-g.From) || (g.Below == nil) == (g.Above == nil) {
				t.Fatalf("piece %d has a malformed guard %+v\n%s", i, *g, dump())
			}
		}
	}
	// Pieces survive JSON with their Go types.
	js, err := json.Marshal(ps)
	if err != nil {
		t.Fatalf("json.Marshal(pieces of %s): %v", fmtRange(r), err)
	}
	var back []keyrange.Piece
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", js, err)
	}
	if len(back) != len(ps) {
		t.Fatalf("pieces JSON round trip: %d pieces became %d", len(ps), len(back))
	}
	for i := range ps {
		if a, b := fmtPiece(cols, ps[i]), fmtPiece(cols, back[i]); a != b {
			t.Fatalf("piece %d JSON round trip: %s became %s (%s)", i, a, b, js)
		}
		for j := range ps[i].Eq {
			if fmt.Sprintf("%T", ps[i].Eq[j]) != fmt.Sprintf("%T", back[i].Eq[j]) {
				t.Fatalf("piece %d JSON round trip changed the type of Eq[%d]: %T to %T", i, j, ps[i].Eq[j], back[i].Eq[j])
			}
		}
	}
	for _, k := range append(slices.Clone(keys), probes...) {
		want, err := r.Contains(cols, k)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, p := range ps {
			in, err := p.Contains(cols, k)
			if err != nil {
				t.Fatal(err)
			}
			seek, err := p.InSeek(cols, k)
			if err != nil {
				t.Fatal(err)
			}
			if in {
				n++
				if !seek {
					t.Fatalf("key %s is in piece %d but not in its seek\n%s", fmtTuple(k), i, dump())
				}
			}
			if seek && !in {
				// Only the collation-equal overlap: the guard's column
				// has bounds that differ in Go and compare equal.
				g := p.Guard
				if g == nil || r.Lower == nil || r.Upper == nil {
					t.Fatalf("key %s is in the seek of piece %d, not in it, and no guard explains it\n%s", fmtTuple(k), i, dump())
				}
				c, err := keyrange.Compare(cols[g.From], r.Lower[g.From], r.Upper[g.From])
				if err != nil {
					t.Fatal(err)
				}
				if c != 0 || sameGo(r.Lower[g.From], r.Upper[g.From]) || !hasTwins(cols[g.From]) {
					t.Fatalf("key %s is in the seek of piece %d but not in it, and the bounds on %s are not twins\n%s", fmtTuple(k), i, cols[g.From].Name, dump())
				}
			}
		}
		if (want && n != 1) || (!want && n != 0) {
			t.Fatalf("key %s: Contains=%v, in %d pieces\n%s", fmtTuple(k), want, n, dump())
		}
	}
	// Key order: every key of piece i sorts before every key of piece j > i.
	byPiece := make([][]keyrange.Tuple, len(ps))
	for _, k := range keys {
		for i, p := range ps {
			if in, _ := p.Contains(cols, k); in {
				byPiece[i] = append(byPiece[i], k)
			}
		}
	}
	for i := range byPiece {
		for j := i + 1; j < len(byPiece); j++ {
			for _, a := range byPiece[i] {
				for _, b := range byPiece[j] {
					if c, _ := keyrange.CompareTuples(cols, a, b); c >= 0 {
						t.Fatalf("piece %d holds %s, not below %s of piece %d\n%s", i, fmtTuple(a), fmtTuple(b), j, dump())
					}
				}
			}
		}
	}
	return ps
}

func TestPiecesProperties(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := gen{r}
	cases := testCases(t)
	var nPieces, nGuarded, nTwinRanges int
	for c := range cases {
		cols := g.cols()
		pool := []int{1, 3, 50}[r.IntN(3)]
		keys := g.keys(t, cols, pool, r.IntN(40))
		var probes []keyrange.Tuple
		for range 10 {
			probes = append(probes, g.tuple(cols, pool))
			if len(keys) > 0 {
				probes = append(probes, g.twinTuple(cols, keys[r.IntN(len(keys))]))
			}
		}
		for range 8 {
			lo, hi := g.bound(cols, keys, pool), g.bound(cols, keys, pool)
			if r.IntN(5) == 0 && lo != nil {
				hi = g.twinTuple(cols, lo) // twins on every column, or a prefix
			}
			if lo != nil && hi != nil {
				if c, err := keyrange.CompareTuples(cols, lo, hi); err != nil {
					t.Fatal(err)
				} else if c > 0 {
					lo, hi = hi, lo
				}
			}
			rg := keyrange.Range{Index: c, Lower: lo, Upper: hi}
			extra := slices.Clone(probes)
			for _, b := range []keyrange.Tuple{lo, hi} {
				if b != nil {
					extra = append(extra, b)
				}
			}
			ps := checkPieces(t, cols, rg, keys, extra)
			nPieces += len(ps)
			for _, p := range ps {
				if p.Guard != nil {
					nGuarded++
				}
			}
			if lo != nil && hi != nil {
				for i := range cols {
					if c, _ := keyrange.Compare(cols[i], lo[i], hi[i]); c == 0 && !sameGo(lo[i], hi[i]) {
						nTwinRanges++
						break
					}
				}
			}
		}
	}
	t.Logf("%d cases: %d pieces, %d guarded, %d ranges with twin bounds", cases, nPieces, nGuarded, nTwinRanges)
	if nTwinRanges == 0 || nGuarded == 0 {
		t.Errorf("the generator made no twin bounds or no guards: the test proves too little")
	}
}

func TestFromBoundsEveryKeyOnce(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	g := gen{r}
	cases := testCases(t)
	for range cases {
		cols := g.cols()
		pool := []int{1, 3, 50}[r.IntN(3)]
		keys := g.keys(t, cols, pool, r.IntN(40))
		var bounds []keyrange.Tuple
		for range r.IntN(6) {
			if b := g.bound(cols, keys, pool); b != nil {
				bounds = append(bounds, b)
				if r.IntN(6) == 0 {
					bounds = append(bounds, g.twinTuple(cols, b)) // an empty range between twins
				}
			}
		}
		var sortErr error
		slices.SortStableFunc(bounds, func(a, b keyrange.Tuple) int {
			c, err := keyrange.CompareTuples(cols, a, b)
			if err != nil {
				sortErr = err
			}
			return c
		})
		if sortErr != nil {
			t.Fatal(sortErr)
		}
		ranges := keyrange.FromBounds(bounds)
		if len(ranges) != len(bounds)+1 || ranges[0].Lower != nil || ranges[len(ranges)-1].Upper != nil {
			t.Fatalf("FromBounds(%d bounds) = %v", len(bounds), ranges)
		}
		var allPieces [][]keyrange.Piece
		for i, rg := range ranges {
			if rg.Index != i {
				t.Fatalf("range %d has Index %d", i, rg.Index)
			}
			allPieces = append(allPieces, checkPieces(t, cols, rg, keys, nil))
		}
		probes := slices.Clone(keys)
		for range 10 {
			probes = append(probes, g.tuple(cols, pool))
		}
		probes = append(probes, bounds...)
		for _, k := range probes {
			rangeOf(t, cols, ranges, k)
			n := 0
			for _, ps := range allPieces {
				for _, p := range ps {
					if in, _ := p.Contains(cols, k); in {
						n++
					}
				}
			}
			if n != 1 {
				t.Fatalf("key %s is in %d pieces of the ranges %v", fmtTuple(k), n, ranges)
			}
		}
	}
}

// The guard of DESIGN.md R4: 'n' and 'N' under a case-insensitive
// collation. The first group of pieces reads the range alone.
func TestPiecesCollationEqualBounds(t *testing.T) {
	cols, err := parseCols("a:ci b:int")
	if err != nil {
		t.Fatal(err)
	}
	rg := keyrange.Range{Lower: keyrange.Tuple{"n", int64(2)}, Upper: keyrange.Tuple{"N", int64(5)}}
	keys := []keyrange.Tuple{
		{"m", int64(9)}, {"n", int64(1)}, {"N", int64(2)}, {"n", int64(4)}, {"N ", int64(5)}, {"n", int64(6)}, {"o", int64(0)},
	}
	ps := checkPieces(t, cols, rg, nil, keys) // probes: some are twins of each other
	var got []string
	for _, k := range keys {
		for i, p := range ps {
			if in, _ := p.Contains(cols, k); in {
				got = append(got, fmtTuple(k)+" in piece "+string(rune('0'+i)))
			}
		}
	}
	want := []string{"('N', 2) in piece 0", "('n', 4) in piece 0"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPiecesErrors(t *testing.T) {
	cols, _ := parseCols("a:int b:ci")
	for _, tc := range []struct {
		name string
		cols []keyrange.Column
		r    keyrange.Range
	}{
		{"no columns", nil, keyrange.Range{}},
		{"short bound", cols, keyrange.Range{Lower: keyrange.Tuple{int64(1)}}},
		{"long bound", cols, keyrange.Range{Upper: keyrange.Tuple{int64(1), "a", "b"}}},
		{"wrong type", cols, keyrange.Range{Lower: keyrange.Tuple{"1", "a"}}},
		{"map value", cols, keyrange.Range{Lower: keyrange.Tuple{int64(1), map[string]int{}}}},
		{"reversed", cols, keyrange.Range{Lower: keyrange.Tuple{int64(2), "a"}, Upper: keyrange.Tuple{int64(1), "b"}}},
		{"unknown kind", []keyrange.Column{{Name: "x", Kind: 99}}, keyrange.Range{Lower: keyrange.Tuple{int64(1)}}},
	} {
		if ps, err := keyrange.Pieces(tc.cols, tc.r); err == nil {
			t.Errorf("%s: Pieces = %v, want an error", tc.name, ps)
		}
	}
	// Bounds whose order Go cannot know (a string column first) are not
	// refused: the source's collation may order them otherwise.
	if _, err := keyrange.Pieces(cols[1:], keyrange.Range{Lower: keyrange.Tuple{"f"}, Upper: keyrange.Tuple{"é"}}); err != nil {
		t.Errorf("string bounds: %v", err)
	}
	// Reversed on a string column past an equal int: still accepted, and
	// the pieces hold nothing.
	r := keyrange.Range{Lower: keyrange.Tuple{int64(1), "z"}, Upper: keyrange.Tuple{int64(1), "a"}}
	checkPieces(t, cols, r, nil, []keyrange.Tuple{{int64(1), "m"}, {int64(1), "z"}, {int64(1), "a"}})
}
