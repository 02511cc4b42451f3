package fake

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cdcsnap/cdcsnap/internal/collate"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// checkValue validates v for column c of table and returns the value as the
// table stores it: char(n)/nchar(n) padded with spaces to n characters and
// binary(n) padded with zero bytes to n bytes (as SQL Server stores them),
// byte slices copied. NULL is refused for a column that is not nullable.
// defRow names the row in errors (see table.rowPrefix).
func checkValue(t *table, defRow int, c *source.Column, v any) (any, error) {
	bad := func(format string, args ...any) error { return badValue(t, defRow, c, v, format, args...) }
	if v == nil {
		if !c.Nullable {
			return nil, bad("the column is NOT NULL")
		}
		return nil, nil
	}
	switch c.Type {
	case "tinyint", "smallint", "int", "bigint":
		x, ok := v.(int64)
		if !ok {
			return nil, bad("want int64")
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		switch c.Type {
		case "tinyint":
			lo, hi = 0, 255
		case "smallint":
			lo, hi = math.MinInt16, math.MaxInt16
		case "int":
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if x < lo || x > hi {
			return nil, bad("out of range %d..%d", lo, hi)
		}
		return v, nil
	case "bit":
		if _, ok := v.(bool); !ok {
			return nil, bad("want bool")
		}
		return v, nil
	case "decimal", "numeric", "money", "smallmoney":
		d, ok := v.(keyrange.Decimal)
		if !ok {
			return nil, bad("want keyrange.Decimal")
		}
		prec, scale := decimalPrecision(*c)
		if _, err := decimalDigits(string(d), prec, scale); err != nil {
			return nil, bad("%v", err)
		}
		return d, nil
	case "float", "real":
		x, ok := v.(float64)
		if !ok {
			return nil, bad("want float64")
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, bad("SQL Server stores no NaN or infinity")
		}
		if c.Type == "real" && math.Abs(x) > math.MaxFloat32 {
			return nil, bad("out of range for real")
		}
		return v, nil
	case "char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml":
		s, ok := v.(string)
		if !ok {
			return nil, bad("want string")
		}
		if !utf8.ValidString(s) {
			return nil, bad("not valid UTF-8")
		}
		n := utf8.RuneCountInString(s)
		if c.Length > 0 && n > c.Length {
			return nil, bad("%d characters, the column holds %d (SQL Server would truncate: error 2628)", n, c.Length)
		}
		if (c.Type == "char" || c.Type == "nchar") && n < c.Length {
			return s + strings.Repeat(" ", c.Length-n), nil
		}
		return v, nil
	case "binary", "varbinary", "image", "rowversion", "timestamp", "hierarchyid", "geometry", "geography":
		b, ok := v.([]byte)
		if !ok {
			return nil, bad("want []byte")
		}
		if c.Length > 0 && len(b) > c.Length {
			return nil, bad("%d bytes, the column holds %d", len(b), c.Length)
		}
		out := make([]byte, len(b), max(len(b), c.Length))
		copy(out, b)
		if c.Type == "binary" && len(out) < c.Length {
			out = out[:c.Length]
		}
		return out, nil
	case "date", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset":
		t, ok := v.(time.Time)
		if !ok {
			return nil, bad("want time.Time")
		}
		if err := checkTime(c, t, bad); err != nil {
			return nil, err
		}
		return v, nil
	case "uniqueidentifier":
		if _, ok := v.(keyrange.UUID); !ok {
			return nil, bad("want keyrange.UUID")
		}
		return v, nil
	case "sql_variant":
		switch v.(type) {
		case int64, bool, keyrange.Decimal, float64, string, []byte, time.Time, keyrange.UUID:
			return v, nil
		}
		return nil, bad("not a value the fake stores")
	default:
		return nil, bad("the fake does not know type %s", c.Type)
	}
}

// badValue is the error for a value column c of t cannot hold.
func badValue(t *table, defRow int, c *source.Column, v any, format string, args ...any) error {
	return fmt.Errorf("%s, column %q (%s): value %s: %s", t.rowPrefix(defRow), c.Name, c.Declared(), describe(v), fmt.Sprintf(format, args...))
}

func checkTime(c *source.Column, t time.Time, bad func(string, ...any) error) error {
	if c.Type != "datetimeoffset" && t.Location() != time.UTC {
		return bad("%s is a wall clock without offset: pass it in time.UTC", c.Type)
	}
	if t.Year() < 1 || t.Year() > 9999 {
		return bad("year outside 1..9999")
	}
	switch c.Type {
	case "date":
		if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
			return bad("a date is midnight UTC")
		}
		return nil
	case "time":
		if t.Year() != 1 || t.Month() != 1 || t.Day() != 1 {
			return bad("a time of day is on 0001-01-01 UTC")
		}
	case "datetime", "smalldatetime":
		if t.Nanosecond()%int(time.Millisecond) != 0 {
			return bad("%s has at most millisecond precision", c.Type)
		}
		return nil
	}
	unit := int(math.Pow10(9 - c.Scale))
	if t.Nanosecond()%unit != 0 {
		return bad("more fractional digits than scale %d", c.Scale)
	}
	return nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return fmt.Sprintf("%q", x)
	case []byte:
		return fmt.Sprintf("0x%X", x)
	case keyrange.Decimal:
		return fmt.Sprintf("%s (keyrange.Decimal)", string(x))
	default:
		return fmt.Sprintf("%v (%T)", v, v)
	}
}

// decimalPrecision returns the precision and scale of a decimal-like column.
func decimalPrecision(c source.Column) (int, int) {
	switch c.Type {
	case "money":
		return 19, 4
	case "smallmoney":
		return 10, 4
	}
	return c.Precision, c.Scale
}

// decimalDigits parses "-123.4500" exactly and returns the unscaled integer
// at scale: -1234500 at scale 4. More fractional digits than scale (other
// than trailing zeros), or more integer digits than prec-scale, is an error.
func decimalDigits(s string, prec, scale int) (*big.Int, error) {
	t := s
	neg := false
	if t != "" && (t[0] == '-' || t[0] == '+') {
		neg = t[0] == '-'
		t = t[1:]
	}
	ip, fp, _ := strings.Cut(t, ".")
	if ip == "" && fp == "" || !allDigits(ip) || !allDigits(fp) {
		return nil, fmt.Errorf("%q is not a decimal (want digits with an optional sign and point)", s)
	}
	fp = strings.TrimRight(fp, "0")
	if len(fp) > scale {
		return nil, fmt.Errorf("%q has more than %d fractional digits", s, scale)
	}
	ip = strings.TrimLeft(ip, "0")
	if len(ip) > prec-scale {
		return nil, fmt.Errorf("%q has more than %d integer digits (decimal(%d,%d))", s, prec-scale, prec, scale)
	}
	digits := ip + fp + strings.Repeat("0", scale-len(fp))
	n := new(big.Int)
	if digits != "" {
		n.SetString(digits, 10)
	}
	if neg {
		n.Neg(n)
	}
	return n, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// keyPart is how the fake orders one key column: values are normalized once
// (strings case-folded under a case-insensitive collation and trimmed of
// trailing spaces, decimals parsed, uniqueidentifiers reordered into SQL
// Server's byte groups) so comparisons in the read path are cheap and agree
// with keyrange.Compare.
type keyPart struct {
	kind keyrange.Kind
	fold func(string) string // the collation's case folding; nil when case-sensitive
}

// newKeyPart orders key column c as keyrange.Compare does: case folded
// under a case-insensitive collation, with Turkish rules under a Turkic one.
func newKeyPart(c keyrange.Column) keyPart {
	k := keyPart{kind: c.Kind}
	switch {
	case c.Kind != keyrange.KindString || !c.Collation.CaseInsensitive:
	case c.Collation.Turkic:
		k.fold = collate.FoldTurkic
	default:
		k.fold = collate.Fold
	}
	return k
}

// normalize returns the sort form of v, which must already have passed
// keyrange.Compare's type check for the column.
func (k keyPart) normalize(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		t := strings.TrimRight(x, " ")
		if k.fold != nil {
			t = k.fold(t)
		}
		if t == x {
			return v
		}
		return t
	case keyrange.Decimal:
		d, _ := decnum.Parse(string(x)) // checked by keyrange.Compare already
		return d
	case keyrange.UUID:
		return x.SortKey()
	default:
		return v
	}
}

// compare orders two normalized values, NULL first.
func (k keyPart) compare(a, b any) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return -1
		default:
			return 1
		}
	}
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case string:
		return collate.ComparePadded(x, b.(string))
	case float64:
		return cmp.Compare(x, b.(float64))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		default:
			return 1
		}
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case time.Time:
		return x.Compare(b.(time.Time))
	case decnum.Num:
		return x.Compare(b.(decnum.Num))
	case [16]byte:
		y := b.([16]byte)
		return bytes.Compare(x[:], y[:])
	}
	return 0
}

// keyOrder orders normalized key tuples.
type keyOrder []keyPart

// compare compares the first min(len(a), len(b)) columns of two normalized
// keys; callers pass prefixes of equal length or full keys.
func (o keyOrder) compare(a, b []any) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if c := o[i].compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// compareFrom compares a[from:] with b, b starting at key column from.
func (o keyOrder) compareFrom(from int, a, b []any) int {
	for i := range b {
		if c := o[from+i].compare(a[from+i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// normalizeTuple checks each value against its column with keyrange.Compare
// (so a wrong Go type is an error naming the column) and normalizes it.
func normalizeTuple(cols []keyrange.Column, parts keyOrder, from int, t []any) ([]any, error) {
	out := make([]any, len(t))
	for i, v := range t {
		if _, err := keyrange.Compare(cols[from+i], v, v); err != nil {
			return nil, err
		}
		out[i] = parts[from+i].normalize(v)
	}
	return out, nil
}
