package fake

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// ErrArithmeticOverflow is wrapped by a CAST whose value does not fit its
// numeric target type: SQL Server's error 8115 ("Arithmetic overflow
// error converting ... to data type ...").
var ErrArithmeticOverflow = fmt.Errorf("arithmetic overflow (SQL Server error 8115)")

// castValue converts v, a value of column from as the table stores it,
// to column to as SQL Server's CAST does (source/sqlserver FACTS.md F92,
// "CAST and CONVERT", "Truncating and rounding results"), which is not
// what ALTER COLUMN does (convertValue refuses a value that does not
// fit): a string or a byte string longer than the target is truncated on
// the right without an error ("Conversions to binary, char, nchar,
// nvarchar, varbinary, or varchar are truncated"; binary(n) pads with
// zero bytes); a decimal to a decimal of smaller scale rounds half away
// from zero, to an integer type truncates toward zero; a datetime2, time
// or datetimeoffset of smaller scale rounds; a number whose integer part
// the target cannot hold is ErrArithmeticOverflow. Other pairs convert as
// convertValue does.
func castValue(t *table, v any, from, to source.Column) (any, error) {
	if v == nil {
		return nil, nil
	}
	overflow := func() error {
		return fmt.Errorf("fake: table %s, column %q: value %s of %s does not fit %s: %w", t, to.Name, describe(v), from.Declared(), to.Declared(), ErrArithmeticOverflow)
	}
	to.Nullable = true
	switch x := v.(type) {
	case string:
		switch to.Type {
		case "char", "varchar", "nchar", "nvarchar":
			if to.Length > 0 && utf8.RuneCountInString(x) > to.Length {
				x = string([]rune(x)[:to.Length])
			}
			return checkValue(t, -1, &to, x)
		case "binary", "varbinary":
			// nchar and nvarchar give their UTF-16LE units (F90); the fake
			// keeps char and varchar as text, which reads as nvarchar.
			b := utf16LE(x)
			return castBytes(t, b, to)
		}
	case []byte:
		if to.Type == "binary" || to.Type == "varbinary" {
			return castBytes(t, x, to)
		}
	case keyrange.Decimal:
		switch to.Type {
		case "decimal", "numeric":
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				break
			}
			s, fits := roundDecimal(r, to.Precision, to.Scale)
			if !fits {
				return nil, overflow()
			}
			return checkValue(t, -1, &to, keyrange.Decimal(s))
		case "tinyint", "smallint", "int", "bigint":
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				break
			}
			n := new(big.Int).Quo(r.Num(), r.Denom()) // toward zero
			if !n.IsInt64() || !intFits(n.Int64(), to.Type) {
				return nil, overflow()
			}
			return checkValue(t, -1, &to, n.Int64())
		}
	case int64:
		switch to.Type {
		case "tinyint", "smallint", "int", "bigint":
			if !intFits(x, to.Type) {
				return nil, overflow()
			}
			return checkValue(t, -1, &to, x)
		case "decimal", "numeric":
			if s, fits := roundDecimal(new(big.Rat).SetInt64(x), to.Precision, to.Scale); fits {
				return checkValue(t, -1, &to, keyrange.Decimal(s))
			}
			return nil, overflow()
		}
	case time.Time:
		switch to.Type {
		case "time", "datetime2", "datetimeoffset":
			if from.Type == to.Type && to.Scale < from.Scale {
				unit := time.Duration(math.Pow10(9 - to.Scale))
				return checkValue(t, -1, &to, x.Round(unit))
			}
		}
	}
	return convertValue(t, v, from, to)
}

// CastValue converts v, a value of type from as the fake stores it, to
// type to as SQL Server's CAST does (see castValue): for a front end that
// serves the fake's values to a statement that casts them
// (internal/tdsfake).
func CastValue(v any, from, to source.Column) (any, error) {
	return castValue(&table{schema: "(cast)", name: to.Name}, v, from, to)
}

// castBytes truncates b to to's length, and pads a binary(n) with zero
// bytes.
func castBytes(t *table, b []byte, to source.Column) (any, error) {
	if to.Length > 0 && len(b) > to.Length {
		b = b[:to.Length]
	}
	return checkValue(t, -1, &to, b)
}

// utf16LE is s as UTF-16 code units, little-endian.
func utf16LE(s string) []byte {
	out := make([]byte, 0, 2*len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			hi, lo := 0xD800+(r>>10), 0xDC00+(r&0x3FF)
			out = append(out, byte(hi), byte(hi>>8), byte(lo), byte(lo>>8))
			continue
		}
		out = append(out, byte(r), byte(r>>8))
	}
	return out
}

// roundDecimal rounds r half away from zero to scale digits and reports
// whether the result has at most prec-scale integer digits.
func roundDecimal(r *big.Rat, prec, scale int) (string, bool) {
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(pow))
	num, den := scaled.Num(), scaled.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	// |m|/den >= 1/2: away from zero.
	if new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2)).Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	digits := new(big.Int).Abs(q).String()
	neg := q.Sign() < 0
	for len(digits) <= scale {
		digits = "0" + digits
	}
	ip, fp := digits[:len(digits)-scale], digits[len(digits)-scale:]
	if strings.TrimLeft(ip, "0") != "" && len(strings.TrimLeft(ip, "0")) > prec-scale {
		return "", false
	}
	s := ip
	if scale > 0 {
		s += "." + fp
	}
	if neg {
		s = "-" + s
	}
	return s, true
}

// intFits reports whether n is in the range of integer type typ.
func intFits(n int64, typ string) bool {
	switch typ {
	case "tinyint":
		return n >= 0 && n <= 255
	case "smallint":
		return n >= math.MinInt16 && n <= math.MaxInt16
	case "int":
		return n >= math.MinInt32 && n <= math.MaxInt32
	}
	return true
}
