package keyrange

import (
	"bytes"
	"fmt"
	"time"
)

// Cond bounds one key column: the value and whether the bound includes it.
// Comparisons follow Compare, so NULL sorts first: "> NULL" is IS NOT NULL,
// ">= NULL" holds for every row, "<= NULL" is IS NULL.
type Cond struct {
	Value     any  `json:"value"`
	Inclusive bool `json:"inclusive"`
}

// Guard is a residual predicate on a piece: it never widens what the
// piece's index seek reads, only filters it. Keyrange adds guards where
// two bounds differ in Go but may compare equal under the source's collation
// ('n' and 'N' under a case-insensitive one), so every row is still read by
// exactly one piece.
type Guard struct {
	// From is the first key column the guard compares.
	From int `json:"from"`
	// Below, when set, requires key[From:] < Below (a row-value comparison).
	Below Tuple `json:"below,omitempty"`
	// Above, when set, requires key[From] > Above.Value (Above.Inclusive is
	// false).
	Above *Cond `json:"above,omitempty"`
}

// Piece is one seekable part of a range: equalities on the leading key
// columns, then at most one range on the next column. That is the shape an
// index seek takes, so reading a piece examines only the rows it returns
// (guards aside, which filter nothing out of a seek's range but the
// collation-equal overlap).
type Piece struct {
	// Eq holds key[i] = Eq[i] for the first len(Eq) columns; a nil value
	// means IS NULL.
	Eq []any `json:"eq,omitempty"`
	// Lower and Upper bound column len(Eq); nil when unbounded.
	Lower *Cond `json:"lower,omitempty"`
	Upper *Cond `json:"upper,omitempty"`
	// Guard, when set, filters the seek's rows further (see Guard).
	Guard *Guard `json:"guard,omitempty"`
}

// RangeColumn is the index of the column Lower and Upper apply to.
func (p Piece) RangeColumn() int { return len(p.Eq) }

// Contains reports whether key satisfies every predicate of p.
func (p Piece) Contains(cols []Column, key Tuple) (bool, error) {
	if ok, err := p.InSeek(cols, key); !ok || err != nil {
		return ok, err
	}
	if g := p.Guard; g != nil {
		if g.Below != nil {
			c, err := CompareTuples(cols[g.From:g.From+len(g.Below)], key[g.From:g.From+len(g.Below)], g.Below)
			if err != nil || c >= 0 {
				return false, err
			}
		}
		if g.Above != nil {
			c, err := Compare(cols[g.From], key[g.From], g.Above.Value)
			if err != nil || c <= 0 {
				return false, err
			}
		}
	}
	return true, nil
}

// InSeek reports whether key lies in the index range p seeks: its
// equalities and its range, without the guard. A source's cost model (the
// fake's row counter) counts these rows as examined.
func (p Piece) InSeek(cols []Column, key Tuple) (bool, error) {
	if len(key) != len(cols) {
		return false, fmt.Errorf("keyrange: key has %d values for %d columns", len(key), len(cols))
	}
	for i, v := range p.Eq {
		c, err := Compare(cols[i], key[i], v)
		if err != nil || c != 0 {
			return false, err
		}
	}
	j := len(p.Eq)
	if p.Lower != nil {
		c, err := Compare(cols[j], key[j], p.Lower.Value)
		if err != nil || c < 0 || (c == 0 && !p.Lower.Inclusive) {
			return false, err
		}
	}
	if p.Upper != nil {
		c, err := Compare(cols[j], key[j], p.Upper.Value)
		if err != nil || c > 0 || (c == 0 && !p.Upper.Inclusive) {
			return false, err
		}
	}
	return true, nil
}

// Pieces splits r into seekable pieces, in key order, that together hold
// exactly the keys of r. The leading values both bounds share become
// equalities; from (x, y) to (u, v) the pieces are a = x AND b >= y,
// a > x AND a < u, and a = u AND b < v, recursively for more columns. The
// pieces on a = x carry a guard key < (u, v) and those on a = u a guard
// a > x: if x and u compare equal at the source (though they differ in
// Go), the first group alone reads the range and the last reads nothing.
func Pieces(cols []Column, r Range) ([]Piece, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("keyrange: a key needs at least one column")
	}
	for _, b := range []Tuple{r.Lower, r.Upper} {
		if b != nil && len(b) != len(cols) {
			return nil, fmt.Errorf("keyrange: %s: bound has %d values for %d key columns", r, len(b), len(cols))
		}
		for i, v := range b {
			if _, err := Compare(cols[i], v, v); err != nil {
				return nil, fmt.Errorf("keyrange: %s: %w", r, err)
			}
		}
	}
	if r.Lower != nil && r.Upper != nil {
		c, err := CompareTuples(cols, r.Lower, r.Upper)
		if err != nil {
			return nil, err
		}
		if c > 0 {
			return nil, fmt.Errorf("keyrange: %s: lower bound is above upper bound", r)
		}
	}
	var out []Piece
	split(&out, 0, nil, r.Lower, r.Upper, nil)
	return out, nil
}

// split appends the pieces of prefix + [lo, hi) over columns j.. to out.
// lo and hi are the bound suffixes from column j (nil when open); guard is
// inherited by every piece split from here.
func split(out *[]Piece, j int, prefix []any, lo, hi Tuple, guard *Guard) {
	eq := func(extra ...any) []any {
		return append(append([]any(nil), prefix...), extra...)
	}
	switch {
	case lo == nil && hi == nil:
		*out = append(*out, Piece{Eq: eq(), Guard: guard})
		return
	case lo != nil && hi != nil && identical(lo[0], hi[0]):
		if len(lo) == 1 {
			return // [x, x): empty
		}
		split(out, j+1, eq(lo[0]), lo[1:], hi[1:], guard)
		return
	case (lo == nil || len(lo) == 1) && (hi == nil || len(hi) == 1):
		p := Piece{Eq: eq(), Guard: guard}
		if lo != nil {
			p.Lower = &Cond{Value: lo[0], Inclusive: true}
		}
		if hi != nil {
			if hi[0] == nil {
				return // key < NULL: nothing
			}
			p.Upper = &Cond{Value: hi[0]}
		}
		*out = append(*out, p)
		return
	}
	// Two or more columns left, and the bounds differ on column j.
	lowGuard, highGuard := guard, guard
	if lo != nil && hi != nil && guard == nil {
		lowGuard = &Guard{From: j, Below: hi}
		highGuard = &Guard{From: j, Above: &Cond{Value: lo[0]}}
	}
	if lo != nil {
		split(out, j+1, eq(lo[0]), lo[1:], nil, lowGuard)
	}
	mid := Piece{Eq: eq(), Guard: guard}
	if lo != nil {
		mid.Lower = &Cond{Value: lo[0]}
	}
	if hi != nil {
		mid.Upper = &Cond{Value: hi[0]}
	}
	if hi == nil || hi[0] != nil {
		*out = append(*out, mid)
	}
	if hi != nil {
		split(out, j+1, eq(hi[0]), nil, hi[1:], highGuard)
	}
}

// identical reports whether two key values are the same Go value, byte for
// byte: only then are they certainly equal at the source too.
func identical(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y) && x.Location().String() == y.Location().String()
	default:
		return a == b
	}
}
