package snapshot

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// TestDropEmptyRanges: ranges cut at sorted bounds that repeat (as seeks
// over a column whose values repeat may give) lose their empty ranges,
// stay a valid plan, and hold every key exactly once, NULL included:
// checked against every key of a small domain (the brute-force oracle).
func TestDropEmptyRanges(t *testing.T) {
	key := []keyrange.Column{{Name: "grp", Kind: keyrange.KindInt}}
	r := rand.New(rand.NewPCG(7, 18))
	for c := range 2000 {
		bounds := make([]int64, r.IntN(8))
		for i := range bounds {
			bounds[i] = int64(r.IntN(6))
		}
		slices.Sort(bounds)
		tuples := make([]keyrange.Tuple, len(bounds))
		for i, b := range bounds {
			tuples[i] = keyrange.Tuple{b}
		}
		ranges, err := dropEmptyRanges(keyrange.FromBounds(tuples), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateRanges(ranges, key); err != nil {
			t.Fatalf("case %d, bounds %v: %v", c, bounds, err)
		}
		if want := len(slices.Compact(bounds)) + 1; len(ranges) != want {
			t.Fatalf("case %d, bounds %v: %d ranges, want %d", c, bounds, len(ranges), want)
		}
		for _, k := range []keyrange.Tuple{{nil}, {int64(-1)}, {int64(0)}, {int64(1)}, {int64(2)}, {int64(3)}, {int64(4)}, {int64(5)}, {int64(6)}} {
			in := 0
			for _, rg := range ranges {
				ok, err := rg.Contains(key, k)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("case %d, bounds %v: key %v lies in %d ranges", c, bounds, k, in)
			}
		}
	}
}

// TestEqualBoundsAreMergedNotDropped: under Danish_Norwegian_CI_AS Go's
// model calls "aA" and "aa" equal while the server orders them apart
// (FACTS.md F53), so a range between them holds rows: it is merged into the
// range before it, and a plan whose ranges meet at two such values (a gap
// on the server) is refused.
func TestEqualBoundsAreMergedNotDropped(t *testing.T) {
	key := []keyrange.Column{{Name: "name", Kind: keyrange.KindString, SQLType: "nvarchar(10)", Unicode: true,
		Collation: keyrange.ParseCollation("Danish_Norwegian_CI_AS")}}
	if c, err := keyrange.CompareTuples(key, keyrange.Tuple{"aA"}, keyrange.Tuple{"aa"}); err != nil || c != 0 {
		t.Skipf("the model no longer folds aA and aa (%d, %v): this case needs other values", c, err)
	}
	ranges, err := dropEmptyRanges(keyrange.FromBounds([]keyrange.Tuple{{"aA"}, {"aa"}, {"b"}}), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 3 || ranges[0].Upper[0] != "aa" || ranges[1].Lower[0] != "aa" {
		t.Fatalf("ranges %v: want (-inf, aa), [aa, b), [b, +inf)", ranges)
	}
	if err := validateRanges(ranges, key); err != nil {
		t.Fatal(err)
	}
	gapped := keyrange.FromBounds([]keyrange.Tuple{{"aA"}, {"b"}})
	gapped[1].Lower = keyrange.Tuple{"aa"}
	if err := validateRanges(gapped, key); !errors.Is(err, ErrInvalidPlan) {
		t.Fatalf("a plan meeting at aA and aa: %v, want ErrInvalidPlan", err)
	}
}
