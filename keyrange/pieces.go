package keyrange

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Cond bounds one key column: the value and whether the bound includes it.
// Comparisons follow Compare, so NULL sorts first: "> NULL" is IS NOT NULL,
// ">= NULL" holds for every row, "<= NULL" is IS NULL.
//
// Pieces emits only three shapes of Cond: Lower >= v with v not NULL,
// Lower > v (with v NULL: IS NOT NULL), and Upper < v with v not NULL.
type Cond struct {
	// Value is the bound, of its column's Go type, or nil for NULL.
	Value any `json:"value"`
	// Inclusive makes the bound hold its value (>=, <=) rather than not (>, <).
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
//
// Bound values certainly equal at the source (identical, equal but for
// trailing spaces, or for the case of ASCII letters under a non-Turkic
// case-insensitive collation; see sameValue) share an equality, so the range
// seeks exactly its rows. Otherwise the pieces depend only on
// which values are equal, never on Go's order of them, so they read every
// row of the range exactly once under whatever collation the source
// applies (accent-insensitive and linguistic ones included), the guards
// filtering the overlap. Bounds are checked for order only up to the
// first string column, where Go's order is the source's.
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
		// Only columns up to the first string one: past it the source's
		// collation may order the bounds otherwise than Go does
		// (Latin1_General puts 'é' before 'f'), and the pieces do not depend
		// on the bounds' order, only on which values are identical.
		for i, c := range cols {
			if c.Kind == KindString {
				break
			}
			o, err := Compare(c, r.Lower[i], r.Upper[i])
			if err != nil {
				return nil, err
			}
			if o > 0 {
				return nil, fmt.Errorf("keyrange: %s: lower bound is above upper bound", r)
			}
			if o < 0 {
				break
			}
		}
	}
	var out []Piece
	split(&out, cols, 0, nil, r.Lower, r.Upper, nil)
	return out, nil
}

// split appends the pieces of prefix + [lo, hi) over columns j.. to out.
// lo and hi are the bound suffixes from column j (nil when open); guard is
// inherited by every piece split from here.
func split(out *[]Piece, cols []Column, j int, prefix []any, lo, hi Tuple, guard *Guard) {
	eq := func(extra ...any) []any {
		return append(append([]any(nil), prefix...), extra...)
	}
	switch {
	case lo == nil && hi == nil:
		*out = append(*out, Piece{Eq: eq(), Guard: guard})
		return
	case lo != nil && hi != nil && sameValue(cols[j], lo[0], hi[0]):
		if len(lo) == 1 {
			return // [x, x): empty
		}
		split(out, cols, j+1, eq(lo[0]), lo[1:], hi[1:], guard)
		return
	case (lo == nil || len(lo) == 1) && (hi == nil || len(hi) == 1):
		p := Piece{Eq: eq(), Guard: guard}
		if lo != nil && lo[0] != nil {
			// key >= NULL holds for every key: no bound at all.
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
		split(out, cols, j+1, eq(lo[0]), lo[1:], nil, lowGuard)
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
		split(out, cols, j+1, eq(hi[0]), nil, hi[1:], highGuard)
	}
}

// sameValue reports whether two bound values are certainly equal at the
// source: identical in Go; for strings, equal under the rules every such
// collation certainly has (Collation.CertainlyEqual: trailing spaces, and
// the case of ASCII letters under a non-Turkic case-insensitive one); for
// other kinds, equal by Compare (decimals by value, times by instant, -0 and
// 0), which is the source's equality. Then the bounds share an equality and
// the range seeks exactly its rows. Values equal only under rules not
// certain here (accents, the case of 'I' under Turkish_CI_AS, any other
// letter's case) fall to the guard, which reads every row once whatever
// the source decides: sharing an equality the source does not have would
// make a piece such as name = 'I' AND id >= 5 AND id < 3 and drop every row
// between the bounds.
func sameValue(c Column, a, b any) bool {
	if identical(a, b) {
		return true
	}
	if c.Kind == KindString {
		x, ok1 := a.(string)
		y, ok2 := b.(string)
		return ok1 && ok2 && c.Collation.CertainlyEqual(x, y)
	}
	r, err := Compare(c, a, b)
	return err == nil && r == 0
}

// identical reports whether two key values are the same Go value, byte for
// byte: only then are they certainly equal at the source too.
// Values of other types (Pieces has rejected them) are never identical.
func identical(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		if !ok || !x.Equal(y) {
			return false
		}
		_, ox := x.Zone()
		_, oy := y.Zone()
		return ox == oy
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		// -0 and 0 are one value at the source; NaN is none.
		y, ok := b.(float64)
		return ok && x == y
	case Decimal:
		y, ok := b.(Decimal)
		return ok && x == y
	case UUID:
		y, ok := b.(UUID)
		return ok && x == y
	default:
		return false
	}
}

// condJSON is a Cond on the wire: the value as a one-value Tuple, so that it
// decodes to the Go type it was encoded from.
type condJSON struct {
	Value     Tuple `json:"value"`
	Inclusive bool  `json:"inclusive"`
}

// MarshalJSON encodes the value tagged with its Go type, as Tuple does.
func (c Cond) MarshalJSON() ([]byte, error) {
	return json.Marshal(condJSON{Value: Tuple{c.Value}, Inclusive: c.Inclusive})
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (c *Cond) UnmarshalJSON(b []byte) error {
	var j condJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Value) != 1 {
		return fmt.Errorf("keyrange: a bound needs one value, have %d", len(j.Value))
	}
	*c = Cond{Value: j.Value[0], Inclusive: j.Inclusive}
	return nil
}

// pieceJSON is a Piece on the wire, its equalities typed as a Tuple.
type pieceJSON struct {
	Eq    Tuple  `json:"eq,omitempty"`
	Lower *Cond  `json:"lower,omitempty"`
	Upper *Cond  `json:"upper,omitempty"`
	Guard *Guard `json:"guard,omitempty"`
}

// MarshalJSON encodes p so that it decodes to the same Go values (plain
// encoding/json would turn an int64 equality into a float64).
func (p Piece) MarshalJSON() ([]byte, error) {
	return json.Marshal(pieceJSON{Eq: Tuple(p.Eq), Lower: p.Lower, Upper: p.Upper, Guard: p.Guard})
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (p *Piece) UnmarshalJSON(b []byte) error {
	var j pieceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Piece{Eq: []any(j.Eq), Lower: j.Lower, Upper: j.Upper, Guard: j.Guard}
	return nil
}
