// Package keyrange plans how a snapshot cuts a table into key ranges, and
// how each range is read as seekable pieces.
//
// It is pure Go with no SQL text: a source renders a Piece in its own
// dialect, and the fake CDC database evaluates the same Piece in Go. A key is
// every column of the capture instance's unique index, or one split column
// whose values may repeat, compared as SQL Server compares them (see
// Compare): NULL first, strings by their column's collation with trailing
// spaces ignored. Ranges are of values, so they hold every row exactly
// once whether or not keys repeat.
//
// A Range is [Lower, Upper): the lower bound inclusive, the upper exclusive,
// nil for open. The first range of a plan is open below (and so takes NULL
// keys) and the last open above (and so takes keys inserted beyond the
// planned maximum). Ranges hold only plain Go values and round-trip through
// JSON, so a plan can be shipped to other processes.
package keyrange

import (
	"fmt"
)

// Range is the keys k with Lower <= k < Upper, by CompareTuples. A nil bound
// is open.
type Range struct {
	// Index numbers the range within its plan, from 0.
	Index int `json:"index"`
	// Lower is the first key of the range (inclusive); nil when open below.
	Lower Tuple `json:"lower"`
	// Upper is the first key of the next range (exclusive); nil when open above.
	Upper Tuple `json:"upper"`
}

// String returns "range i [lower, upper)", open bounds as -inf and +inf.
func (r Range) String() string {
	return fmt.Sprintf("range %d [%s, %s)", r.Index, fmtBound(r.Lower, "-inf"), fmtBound(r.Upper, "+inf"))
}

func fmtBound(t Tuple, open string) string {
	if t == nil {
		return open
	}
	return fmt.Sprint([]any(t))
}

// Contains reports whether key lies in r under the columns' order.
func (r Range) Contains(cols []Column, key Tuple) (bool, error) {
	if r.Lower != nil {
		c, err := CompareTuples(cols, key, r.Lower)
		if err != nil || c < 0 {
			return false, err
		}
	}
	if r.Upper != nil {
		c, err := CompareTuples(cols, key, r.Upper)
		if err != nil || c >= 0 {
			return false, err
		}
	}
	return true, nil
}

// Whole is the single range that holds every key.
func Whole() []Range { return []Range{{Index: 0}} }

// FromBounds builds consecutive ranges from sorted, distinct split points:
// n bounds give n+1 ranges, the first open below and the last open above.
func FromBounds(bounds []Tuple) []Range {
	out := make([]Range, 0, len(bounds)+1)
	var lo Tuple
	for i, b := range bounds {
		out = append(out, Range{Index: i, Lower: lo, Upper: b})
		lo = b
	}
	return append(out, Range{Index: len(bounds), Lower: lo})
}
