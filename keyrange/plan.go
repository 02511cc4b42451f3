package keyrange

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Strategy is how a key is cut into ranges.
type Strategy int

const (
	// Single reads the table as one range.
	Single Strategy = iota
	// Uniform cuts MIN..MAX of one integer key column into equal spans.
	Uniform
	// Keyset finds NTILE-equal ranges by keyset seeks (see NTile).
	Keyset
)

// String returns "single", "uniform" or "keyset".
func (s Strategy) String() string {
	switch s {
	case Uniform:
		return "uniform"
	case Keyset:
		return "keyset"
	default:
		return "single"
	}
}

// Choose picks the strategy for a key and a requested partition count, and
// says why when it falls back to Single. One integer column is Uniform;
// any other key with partitions > 1 is Keyset, when every column can be
// bound back to the source exactly; otherwise Single.
func Choose(cols []Column, partitions int) (Strategy, string) {
	if partitions <= 1 {
		return Single, "one partition requested"
	}
	if reason := Ineligible(cols); reason != "" {
		return Single, reason
	}
	if len(cols) == 1 && cols[0].Kind == KindInt {
		return Uniform, ""
	}
	return Keyset, ""
}

// Ineligible returns why a key cannot be cut into ranges, or "" when it
// can: a key with no columns, a column of a kind that has no exact bound
// (KindUnsupported, or a Kind this package does not know), or a
// non-Unicode string column whose collation is not visible (its bounds
// would convert in the database's default code page and lose their order).
// Several reasons are joined with "; ", each naming its column, for logs.
func Ineligible(cols []Column) string {
	if len(cols) == 0 {
		return "the capture instance has no unique index (no key columns)"
	}
	var why []string
	for _, c := range cols {
		switch {
		case c.Kind == KindUnsupported:
			why = append(why, fmt.Sprintf("key column %q has type %s, which cannot be bound as a bound", c.Name, orUnknown(c.SQLType)))
		case !c.Kind.known():
			why = append(why, fmt.Sprintf("key column %q (%s) has %s, which keyrange cannot order", c.Name, orUnknown(c.SQLType), c.Kind))
		case c.Kind == KindString && !c.Unicode && c.Collation.Name == "":
			why = append(why, fmt.Sprintf("key column %q (%s) has no visible collation", c.Name, orUnknown(c.SQLType)))
		}
	}
	return strings.Join(why, "; ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// UniformRanges cuts [min, max] of an integer key into n ranges of equal
// span (the first spans absorb the remainder). The first range is open
// below and takes NULL keys, the last is open above. Fewer distinct values
// than n give one range per value; n < 1 is treated as 1.
func UniformRanges(min, max int64, n int) []Range {
	if n < 1 || max <= min {
		return Whole()
	}
	span := new(big.Int).Sub(big.NewInt(max), big.NewInt(min))
	span.Add(span, big.NewInt(1))
	parts := big.NewInt(int64(n))
	if span.Cmp(parts) < 0 {
		parts.Set(span)
	}
	q, rem := new(big.Int).QuoRem(span, parts, new(big.Int))
	var bounds []Tuple
	at := big.NewInt(min)
	for i := int64(0); i < parts.Int64()-1; i++ {
		at.Add(at, q)
		if i < rem.Int64() {
			at.Add(at, big.NewInt(1))
		}
		bounds = append(bounds, Tuple{at.Int64()})
	}
	return FromBounds(bounds)
}

// Seeker finds split points by keyset seeks; a source implements it with a
// TOP (k + 1) per seekable piece of [from, +inf), merged in key order.
type Seeker interface {
	// SeekKey returns the key k rows after from: the (k+1)-th key at or
	// after from in key order, or with from nil the (k+1)-th key of the
	// table. ok is false when fewer keys remain. Over a key whose values
	// repeat (a split column) a source returns instead a key above from
	// (source.Source.SeekKey), so bounds strictly increase; ranges cut at
	// values hold every row once either way, but NTILE sizes are then
	// only approximate.
	SeekKey(ctx context.Context, from Tuple, k int64) (key Tuple, ok bool, err error)
}

// NTile plans up to n ranges of NTILE-equal size by keyset seeks, from a
// row count that may be estimated (sp_spaceused). The first rows % n
// ranges hold one row more. With an exact count the ranges equal
// NTILE(n) OVER (ORDER BY key). A count too low leaves the rest in the
// last range; too high, the seeks run out of keys and fewer ranges come
// out. Fewer rows than n gives one row per range; zero or one row, one
// range. Every key lies in exactly one range whatever the count.
//
// It makes at most n-1 seeks, each reading its range's keys and one more
// (the first key of the next range); the last range's keys are not read.
func NTile(ctx context.Context, s Seeker, rows int64, n int) ([]Range, error) {
	bounds, _, err := seekBounds(ctx, s, rows, n)
	if err != nil {
		return nil, err
	}
	return FromBounds(bounds), nil
}

// Tiles returns the ranges of NTILE(n) OVER (ORDER BY key), given the
// table's exact row count (SELECT COUNT(*) in the transaction that reads
// the tiles): range i holds exactly the rows NTILE numbers i+1, so a
// reconcile can compare tile by tile. It shares NTile's seeks; where NTile
// tolerates an estimate, Tiles reports a count the seeks prove too high
// (the table ran out of keys before the last tile) as an error wrapping
// ErrRowCount. A count too low goes unnoticed here (the last range holds
// the rest): a caller that must know counts the last range's rows.
func Tiles(ctx context.Context, s Seeker, exactRows int64, n int) ([]Range, error) {
	if exactRows < 0 {
		return nil, fmt.Errorf("keyrange: %w: %d rows", ErrRowCount, exactRows)
	}
	bounds, short, err := seekBounds(ctx, s, exactRows, n)
	if err != nil {
		return nil, err
	}
	if short {
		return nil, fmt.Errorf("keyrange: %w: %d rows in %d tiles, but the keys ran out before tile %d", ErrRowCount, exactRows, min(int64(n), exactRows), len(bounds)+2)
	}
	return FromBounds(bounds), nil
}

// ErrRowCount reports a row count that does not match the table's keys
// (see Tiles).
var ErrRowCount = errors.New("row count does not match the keys")

// seekBounds finds the first key of tiles 2..n. short reports that the
// seeks ran out of keys before the last tile.
func seekBounds(ctx context.Context, s Seeker, rows int64, n int) (bounds []Tuple, short bool, err error) {
	if n <= 1 || rows <= 1 {
		return nil, false, nil
	}
	if rows < int64(n) {
		n = int(rows)
	}
	q, rem := rows/int64(n), rows%int64(n)
	var from Tuple
	for i := 0; i < n-1; i++ {
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("keyrange: seeking the start of range %d: %w", i+1, err)
		}
		size := q
		if int64(i) < rem {
			size++
		}
		key, ok, err := s.SeekKey(ctx, from, size)
		if err != nil {
			return nil, false, fmt.Errorf("keyrange: seeking the start of range %d: %w", i+1, err)
		}
		if !ok {
			return bounds, true, nil
		}
		if key == nil {
			return nil, false, fmt.Errorf("keyrange: seeking the start of range %d: the seeker returned no key", i+1)
		}
		bounds = append(bounds, key)
		from = key
	}
	return bounds, false, nil
}
