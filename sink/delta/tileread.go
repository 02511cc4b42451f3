package delta

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
)

// ReadKeyRange reads back the live rows of the latest version that may be
// rows of captureInstance with a key in r: only the files whose add
// statistics (minValues, maxValues and nullCount of the key columns and
// of _capture_instance) allow such a row, each read whole, deletion
// vectors applied, in the table's schema as ReadAll reads it. A file
// without statistics, or whose statistics cannot be compared with r's
// bounds, is read. The rows are a superset: rows of other instances and
// keys outside r come with the wanted ones, and the caller drops them.
// key is the capture instance's key, ordered as keyrange orders it. It
// implements reconcile.TileReader; release the reader when done.
func (t *Table) ReadKeyRange(ctx context.Context, captureInstance string, key []keyrange.Column, r keyrange.Range) (array.RecordReader, error) {
	s, as, err := t.readable(ctx)
	if err != nil {
		return nil, err
	}
	cm, err := s.Mapping()
	if err != nil {
		return nil, err
	}
	var files []deltalog.AddFile
	for _, f := range s.SortedFiles() {
		if st, err := f.ParseStats(); err == nil && !mayHoldKeys(cm.DisplayStats(st), captureInstance, key, r) {
			continue
		}
		files = append(files, f)
	}
	return t.newReader(ctx, s, files, as)
}

// mayHoldKeys reports whether a file with statistics st may hold a row of
// capture instance ci whose key lies in r. It answers false only when the
// statistics prove there is none, under the Delta protocol's reading of
// them ("Per-file Statistics", PROTOCOL.md, github.com/delta-io/delta):
// min and max are wide bounds of the valid values (tight bounds are wide
// ones too), a nullCount of 0 or numRecords is exact, any other is no
// information, string values are cut to a prefix and timestamps truncated
// to milliseconds.
func mayHoldKeys(st deltalog.FileStats, ci string, key []keyrange.Column, r keyrange.Range) bool {
	if !mayHoldInstance(st, ci) {
		return false
	}
	bounds := make([]colBounds, len(key))
	for i, c := range key {
		bounds[i] = boundsOf(st, c)
	}
	if r.Lower != nil && len(r.Lower) == len(key) && allBelow(key, bounds, r.Lower) {
		return false
	}
	if r.Upper != nil && len(r.Upper) == len(key) && allAtOrAbove(key, bounds, r.Upper) {
		return false
	}
	return true
}

// mayHoldInstance reports whether the file may hold a row whose
// _capture_instance equals ci ignoring case (sink.SameInstance).
func mayHoldInstance(st deltalog.FileStats, ci string) bool {
	if n, ok := st.NullCount[sink.ColCaptureInstance]; ok && n == st.NumRecords && n > 0 {
		return false
	}
	mn, ok1 := st.MinValues[sink.ColCaptureInstance].(string)
	mx, ok2 := st.MaxValues[sink.ColCaptureInstance].(string)
	if !ok1 || !ok2 {
		return true
	}
	// Every name equal to ci ignoring case lies in [lo, hi] byte-wise, and
	// every value of the file has the prefix p (commonPrefix). A truncated
	// min is still at most the true min, so hi < mn rules the file out.
	lo, hi := foldRange(ci)
	if hi < mn {
		return false
	}
	p := commonPrefix(mn, mx)
	return !(hi < p || (lo > p && !strings.HasPrefix(lo, p)))
}

// commonPrefix returns a prefix that every string between min and max
// (statistics of one column) has: their longest common prefix, cut back
// to whole UTF-8 characters. It holds whichever way the writer truncated:
// a truncated min is a prefix of the true min, and a truncated max is
// either a prefix of the true max or above it (Spark and this package
// append a tie-breaker), so every value lies byte-wise between min and a
// string with max's prefix, and every string between two strings shares
// their common prefix.
func commonPrefix(min, max string) string {
	n := 0
	for n < len(min) && n < len(max) && min[n] == max[n] {
		n++
	}
	p := min[:n]
	for len(p) > 0 && !utf8.ValidString(p) {
		p = p[:len(p)-1]
	}
	return p
}

// colBounds is what a file's statistics say about one key column's values.
type colBounds struct {
	// mayNull is false when nullCount says no valid row is NULL; allNull
	// is true when it says every one is.
	mayNull, allNull bool
	// lo and hi bound the non-NULL values (keyrange's Go values) when
	// loOK and hiOK.
	lo, hi     any
	loOK, hiOK bool
	// prefix, when isString, is what every non-NULL value starts with,
	// folded as the collation folds (keyrange.CollationKey).
	prefix   string
	isString bool
}

// boundsOf reads one key column's statistics. A kind whose statistics do
// not order as keyrange orders it stays unknown: binary (no statistics),
// uniqueidentifier (stored as text, ordered by SQL Server's byte groups),
// time (text), and float (a writer may round a real's bound in JSON).
func boundsOf(st deltalog.FileStats, c keyrange.Column) colBounds {
	b := colBounds{mayNull: true}
	if n, ok := st.NullCount[c.Name]; ok {
		b.mayNull = n != 0
		b.allNull = n == st.NumRecords && n > 0
	}
	mn, okMin := st.MinValues[c.Name]
	mx, okMax := st.MaxValues[c.Name]
	parse := func(v any, widen time.Duration) (any, bool) {
		switch c.Kind {
		case keyrange.KindInt:
			n, ok := v.(json.Number)
			if !ok {
				return nil, false
			}
			i, err := n.Int64()
			return i, err == nil
		case keyrange.KindDecimal:
			n, ok := v.(json.Number)
			if !ok {
				return nil, false
			}
			d := keyrange.Decimal(n.String())
			_, err := keyrange.Compare(c, d, d) // a form keyrange cannot parse is unknown
			return d, err == nil
		case keyrange.KindBool:
			x, ok := v.(bool)
			return x, ok
		case keyrange.KindDate:
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			d, err := time.Parse(time.DateOnly, s)
			return d, err == nil
		case keyrange.KindDateTime, keyrange.KindDateTimeOffset:
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				// timestamp_ntz: no zone, the wall clock read as UTC
				if ts, err = time.Parse("2006-01-02T15:04:05.999999999", s); err != nil {
					return nil, false
				}
			}
			// The protocol truncates timestamp bounds to milliseconds:
			// widen by one either way (down or towards zero).
			return ts.Add(widen).UTC(), true
		}
		return nil, false
	}
	if c.Kind == keyrange.KindString {
		smin, ok1 := mn.(string)
		smax, ok2 := mx.(string)
		if okMin && okMax && ok1 && ok2 {
			if k, err := keyrange.CollationKey(c, commonPrefix(smin, smax)); err == nil {
				b.prefix, b.isString = k[1:], true // CollationKey prefixes a string's key with "s"
			}
		}
		return b
	}
	if okMin {
		b.lo, b.loOK = parse(mn, -time.Millisecond)
	}
	if okMax {
		b.hi, b.hiOK = parse(mx, time.Millisecond)
	}
	return b
}

// against says how the file's values of column c stand against bound v:
// every value below it (lt), at most it (le), above it (gt), at least it
// (ge). NULL sorts first. False means "not proven".
func (b colBounds) against(c keyrange.Column, v any) (lt, le, gt, ge bool) {
	if v == nil {
		return false, b.allNull, !b.mayNull, true
	}
	if b.allNull {
		return true, true, false, false
	}
	switch {
	case b.isString:
		lt, le, gt, ge = b.againstPrefix(c, v)
	default:
		if b.hiOK {
			if n, err := keyrange.Compare(c, b.hi, v); err == nil {
				lt, le = n < 0, n <= 0
			}
		}
		if b.loOK {
			if n, err := keyrange.Compare(c, b.lo, v); err == nil {
				gt, ge = n > 0, n >= 0
			}
		}
	}
	// NULLs, when there may be some, are below v.
	return lt, le, gt && !b.mayNull, ge && !b.mayNull
}

// againstPrefix compares values that all start with b.prefix (folded)
// with v as keyrange compares strings: folded, the shorter padded with
// spaces (collate.ComparePadded). When the prefix and v's folded form,
// padded to the prefix's length, differ, every value differs from v at
// the same byte, the same way; when they agree nothing is proven.
func (b colBounds) againstPrefix(c keyrange.Column, v any) (lt, le, gt, ge bool) {
	k, err := keyrange.CollationKey(c, v)
	if err != nil {
		return false, false, false, false
	}
	fv := k[1:]
	if len(fv) < len(b.prefix) {
		fv += strings.Repeat(" ", len(b.prefix)-len(fv))
	}
	switch strings.Compare(b.prefix, fv[:len(b.prefix)]) {
	case -1:
		return true, true, false, false
	case 1:
		return false, false, true, true
	}
	return false, false, false, false
}

// allBelow reports whether the statistics prove every key of the file
// sorts before bound: some column is below it while the ones before it
// are at most equal to it.
func allBelow(key []keyrange.Column, bounds []colBounds, bound keyrange.Tuple) bool {
	for i, c := range key {
		lt, le, _, _ := bounds[i].against(c, bound[i])
		if lt {
			return true
		}
		if !le {
			return false
		}
	}
	return false // keys equal to bound are not below it
}

// allAtOrAbove reports whether the statistics prove every key of the file
// sorts at or after bound.
func allAtOrAbove(key []keyrange.Column, bounds []colBounds, bound keyrange.Tuple) bool {
	for i, c := range key {
		_, _, gt, ge := bounds[i].against(c, bound[i])
		if gt {
			return true
		}
		if !ge {
			return false
		}
	}
	return true
}
