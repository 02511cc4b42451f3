package keyrange_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// sourceOrder is a source's own comparison of key column i's values,
// independent of keyrange's model of collations.
type sourceOrder func(i int, a, b any) int

// cldrOrder compares strings as ICU/CLDR's collator for tag does,
// ignoring case, after SQL Server's trailing-space rule; other values by
// Go order. It stands in for a server's collation in these tests: an
// implementation of the real language rules that keyrange does not use.
func cldrOrder(tag language.Tag) sourceOrder {
	c := collate.New(tag, collate.IgnoreCase)
	return func(_ int, a, b any) int {
		switch x := a.(type) {
		case string:
			return c.CompareString(strings.TrimRight(x, " "), strings.TrimRight(b.(string), " "))
		case int64:
			return cmp.Compare(x, b.(int64))
		}
		panic(fmt.Sprintf("cldrOrder: %T", a))
	}
}

func tupleCompare(o sourceOrder, a, b keyrange.Tuple) int {
	for i := range min(len(a), len(b)) {
		if c := o(i, a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// inPiece evaluates p's predicates on key (no NULLs) as the source would,
// with its own order.
func inPiece(o sourceOrder, p keyrange.Piece, key keyrange.Tuple) bool {
	for i, v := range p.Eq {
		if o(i, key[i], v) != 0 {
			return false
		}
	}
	j := len(p.Eq)
	if l := p.Lower; l != nil && l.Value != nil {
		if c := o(j, key[j], l.Value); c < 0 || c == 0 && !l.Inclusive {
			return false
		}
	}
	if u := p.Upper; u != nil {
		if c := o(j, key[j], u.Value); c > 0 || c == 0 && !u.Inclusive {
			return false
		}
	}
	if g := p.Guard; g != nil {
		if g.Below != nil && tupleCompare(o, key[g.From:], g.Below) >= 0 {
			return false
		}
		if g.Above != nil && o(g.From, key[g.From], g.Above.Value) <= 0 {
			return false
		}
	}
	return true
}

// TestPiecesUnderLanguageRules: under Turkish_CI_AS, 'I' pairs with 'ı'
// and 'i' with 'İ', so 'I' and 'i' are different keys. A range from
// ('I', 5) to ('i', 3) must not become the one piece name = 'I' AND id >= 5
// AND id < 3, which reads nothing and drops every row between the bounds.
// The same holds for collations that tie two letters into one: under
// Danish "aa" is å and a mixed-case "aA" is two letters, unequal even
// case-insensitively; likewise Hungarian "cs", Croatian "lj", Albanian
// "dh", Welsh "ll". The pieces are evaluated with CLDR's collator for the
// language, not keyrange's model.
func TestPiecesUnderLanguageRules(t *testing.T) {
	for _, tc := range []struct {
		collation string
		order     sourceOrder
	}{
		{"Turkish_CI_AS", cldrOrder(language.Turkish)},
		{"Azeri_Latin_100_CI_AS", cldrOrder(language.Azerbaijani)},
		{"Latin1_General_CI_AS", cldrOrder(language.English)},
		{"Danish_Norwegian_CI_AS", cldrOrder(language.Danish)},
		{"Hungarian_CI_AS", cldrOrder(language.Hungarian)},
		{"Croatian_CI_AS", cldrOrder(language.Croatian)},
		{"Albanian_CI_AS", cldrOrder(language.Albanian)},
		{"Welsh_100_CI_AS", cldrOrder(language.MustParse("cy"))},
		{"Traditional_Spanish_CI_AS", cldrOrder(language.MustParse("es-u-co-trad"))},
	} {
		t.Run(tc.collation, func(t *testing.T) {
			cols := []keyrange.Column{
				{Name: "name", Kind: keyrange.KindString, SQLType: "varchar(10)", Collation: keyrange.ParseCollation(tc.collation)},
				{Name: "id", Kind: keyrange.KindInt, SQLType: "int"},
			}
			check := func(lo, hi keyrange.Tuple, keys []keyrange.Tuple) {
				t.Helper()
				ps, err := keyrange.Pieces(cols, keyrange.Range{Lower: lo, Upper: hi})
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					want := (lo == nil || tupleCompare(tc.order, k, lo) >= 0) && (hi == nil || tupleCompare(tc.order, k, hi) < 0)
					n := 0
					for _, p := range ps {
						if inPiece(tc.order, p, k) {
							n++
						}
					}
					if want && n != 1 || !want && n != 0 {
						t.Fatalf("range [%v, %v): key %v in range %v, in %d pieces: %+v", lo, hi, k, want, n, ps)
					}
				}
			}
			// The example, and the digraph cases, with the keys
			// between the bounds, whenever the language orders the pair.
			var between []keyrange.Tuple
			for _, name := range []string{"I", "ı", "i", "İ", "h", "j", "aa", "aA", "Aa", "b", "z", "å", "cs", "cS", "d", "lj", "lJ", "m", "dh", "dH", "e", "ll", "lL", "ch", "cH", "ci"} {
				for id := range int64(8) {
					between = append(between, keyrange.Tuple{name, id})
				}
			}
			for _, pair := range [][2]string{{"I", "i"}, {"aA", "aa"}, {"cS", "cs"}, {"lJ", "lj"}, {"dH", "dh"}, {"lL", "ll"}, {"cH", "ch"}} {
				lo, hi := pair[0], pair[1]
				if tc.order(0, lo, hi) > 0 {
					lo, hi = hi, lo
				}
				if tc.order(0, lo, hi) < 0 {
					check(keyrange.Tuple{lo, int64(5)}, keyrange.Tuple{hi, int64(3)}, between)
				}
			}

			// Property: random unique keys sorted by the source, bounds
			// taken from them (as a source's seeks return them).
			seed := testSeed(t)
			r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
			names := []string{"I", "i", "ı", "İ", "a", "A", "Ia", "ia", "ıa", "İA", "I ", "i  ", "h", "j", "z", "aa", "aA", "AA", "å", "cs", "cS", "CS", "lj", "lJ", "ll", "lL", "dh", "dH", "ch", "cH"}
			for range testCases(t) {
				var keys []keyrange.Tuple
				for range 1 + r.IntN(30) {
					k := keyrange.Tuple{names[r.IntN(len(names))], int64(r.IntN(6))}
					if !slices.ContainsFunc(keys, func(x keyrange.Tuple) bool { return tupleCompare(tc.order, x, k) == 0 }) {
						keys = append(keys, k)
					}
				}
				slices.SortFunc(keys, func(a, b keyrange.Tuple) int { return tupleCompare(tc.order, a, b) })
				bound := func() keyrange.Tuple {
					if r.IntN(6) == 0 {
						return nil
					}
					return keys[r.IntN(len(keys))]
				}
				lo, hi := bound(), bound()
				if lo != nil && hi != nil && tupleCompare(tc.order, lo, hi) > 0 {
					lo, hi = hi, lo
				}
				check(lo, hi, keys)
			}
		})
	}
}
