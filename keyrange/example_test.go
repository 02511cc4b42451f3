package keyrange_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// A range of a (company, id) key, cut into the pieces a source reads with
// one index seek each, joined by UNION ALL.
func ExamplePieces() {
	cols := []keyrange.Column{
		{Name: "company", Kind: keyrange.KindString, SQLType: "varchar(10)", Collation: keyrange.ParseCollation("Latin1_General_CI_AS")},
		{Name: "id", Kind: keyrange.KindInt, SQLType: "int"},
	}
	r := keyrange.Range{Lower: keyrange.Tuple{"acme", int64(500)}, Upper: keyrange.Tuple{"globex", int64(20)}}
	pieces, err := keyrange.Pieces(cols, r)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pieces {
		fmt.Println(where(cols, p))
	}
	// Output:
	// company = acme AND id >= 500 (guard: key < [globex 20])
	// company > acme AND company < globex
	// company = globex AND id < 20 (guard: company > acme)
}

// where renders a piece roughly as a source's WHERE clause would.
func where(cols []keyrange.Column, p keyrange.Piece) string {
	var s string
	and := func(x string) {
		if s != "" {
			s += " AND "
		}
		s += x
	}
	for i, v := range p.Eq {
		and(fmt.Sprintf("%s = %v", cols[i].Name, v))
	}
	name := ""
	if p.RangeColumn() < len(cols) {
		name = cols[p.RangeColumn()].Name
	}
	if c := p.Lower; c != nil {
		op := ">"
		if c.Inclusive {
			op = ">="
		}
		and(fmt.Sprintf("%s %s %v", name, op, c.Value))
	}
	if c := p.Upper; c != nil {
		and(fmt.Sprintf("%s < %v", name, c.Value))
	}
	if g := p.Guard; g != nil && g.Below != nil {
		s += fmt.Sprintf(" (guard: key < %v)", []any(g.Below))
	}
	if g := p.Guard; g != nil && g.Above != nil {
		s += fmt.Sprintf(" (guard: %s > %v)", cols[g.From].Name, g.Above.Value)
	}
	return s
}

// One integer key: uniform ranges over MIN..MAX, the ends open.
func ExampleUniformRanges() {
	for _, r := range keyrange.UniformRanges(1, 10, 3) {
		fmt.Println(r)
	}
	// Output:
	// range 0 [-inf, [5])
	// range 1 [[5], [8])
	// range 2 [[8], +inf)
}

// sortedSeeker is a Seeker over keys held in order (an in-memory table).
type sortedSeeker struct {
	cols []keyrange.Column
	keys []keyrange.Tuple
}

func (s sortedSeeker) SeekKey(_ context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	i := 0
	if from != nil {
		i, _ = slices.BinarySearchFunc(s.keys, from, func(e, t keyrange.Tuple) int {
			c, _ := keyrange.CompareTuples(s.cols, e, t)
			return c
		})
	}
	if j := int64(i) + k; j < int64(len(s.keys)) {
		return s.keys[j], true, nil
	}
	return nil, false, nil
}

// NTILE-equal ranges of a string key found by keyset seeks: ten rows in
// three ranges of 4, 3 and 3.
func ExampleNTile() {
	cols := []keyrange.Column{{Name: "code", Kind: keyrange.KindString, Unicode: true, Collation: keyrange.ParseCollation("Latin1_General_CI_AS")}}
	var keys []keyrange.Tuple
	for _, s := range []string{"a", "B", "c", "D", "e", "F", "g", "H", "i", "J"} {
		keys = append(keys, keyrange.Tuple{s})
	}
	ranges, err := keyrange.NTile(context.Background(), sortedSeeker{cols, keys}, int64(len(keys)), 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range ranges {
		fmt.Println(r)
	}
	// Output:
	// range 0 [-inf, [e])
	// range 1 [[e], [H])
	// range 2 [[H], +inf)
}
