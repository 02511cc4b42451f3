package mssqlstmt

import (
	"fmt"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// maxDecimalText bounds the decimal text of a bound: 38 digits, a sign
// and a point, with room for leading zeros (source/sqlserver's decoder
// reads no longer text).
const maxDecimalText = 128

// typeRule says which arguments a type takes when it is inlined, and their
// limits.
type typeRule struct {
	args   int // 0 none, 1 length, 2 precision and scale, 3 fractional scale
	maxLen int // for args == 1: the largest length; max allowed when varMax
	varMax bool
}

// inlineRule is the allowlist of types cdcsnap inlines in a CAST: the
// types a key bound can have. Every length is written out: CAST(x AS
// varchar) would mean varchar(30) (FACTS.md F27). Anything else is never written into SQL text.
func inlineRule(name string) (typeRule, bool) {
	switch name {
	case "tinyint", "smallint", "int", "bigint", "bit", "money", "smallmoney", "float", "real",
		"date", "datetime", "smalldatetime", "uniqueidentifier":
		return typeRule{}, true
	case "decimal", "numeric":
		return typeRule{args: 2}, true
	case "time", "datetime2", "datetimeoffset":
		return typeRule{args: 3}, true
	case "char", "binary":
		return typeRule{args: 1, maxLen: 8000}, true
	case "varchar", "varbinary":
		return typeRule{args: 1, maxLen: 8000, varMax: true}, true
	case "nchar":
		return typeRule{args: 1, maxLen: 4000}, true
	case "nvarchar":
		return typeRule{args: 1, maxLen: 4000, varMax: true}, true
	}
	return typeRule{}, false
}

// InlineType returns the declared type of c ("varchar(20)", "decimal(18,4)",
// "datetime2(7)") after checking it against the allowlist of types cdcsnap
// inlines: the base name must be listed and every length, precision and
// scale within SQL Server's limits. The text is rebuilt from c's fields,
// never copied from the server, and re-parsed with source.ParseType to the
// same fields.
func InlineType(c source.Column) (string, error) {
	rule, ok := inlineRule(c.Type)
	if !ok {
		return "", fmt.Errorf("sqlserver: column %q: type %q is not one cdcsnap inlines: %w", c.Name, c.Type, source.ErrUnsupportedType)
	}
	switch rule.args {
	case 1:
		switch {
		case c.Length == -1 && rule.varMax:
		case c.Length >= 1 && c.Length <= rule.maxLen:
		default:
			return "", fmt.Errorf("sqlserver: column %q: %s length %d out of range (1-%d%s)", c.Name, c.Type, c.Length, rule.maxLen, map[bool]string{true: " or max", false: ""}[rule.varMax])
		}
	case 2:
		if c.Precision < 1 || c.Precision > 38 || c.Scale < 0 || c.Scale > c.Precision {
			return "", fmt.Errorf("sqlserver: column %q: %s(%d,%d) out of range", c.Name, c.Type, c.Precision, c.Scale)
		}
	case 3:
		if c.Scale < 0 || c.Scale > 7 {
			return "", fmt.Errorf("sqlserver: column %q: %s scale %d out of range (0-7)", c.Name, c.Type, c.Scale)
		}
	}
	decl := c.Declared()
	back, err := source.ParseType(decl)
	if err != nil {
		return "", fmt.Errorf("sqlserver: column %q: rebuilt type %q does not parse: %w", c.Name, decl, err)
	}
	if back.Type != c.Type || (rule.args == 1 && back.Length != c.Length) ||
		(rule.args == 2 && (back.Precision != c.Precision || back.Scale != c.Scale)) ||
		(rule.args == 3 && back.Scale != c.Scale) {
		return "", fmt.Errorf("sqlserver: column %q: rebuilt type %q does not round-trip", c.Name, decl)
	}
	return decl, nil
}

// ValidCollation reports whether name can be inlined after COLLATE: 1-128
// ASCII letters, digits and underscores, as every SQL Server collation name
// is ("Greek_CI_AS", "Latin1_General_100_CI_AS_SC_UTF8").
func ValidCollation(name string) bool {
	if name == "" || len(name) > maxSysname {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// boundExpr renders a key bound for column c as a parameter (FACTS.md F28,
// F29, F47): the Go value
// to bind and the SQL expression, CAST(@pN AS <declared type>), with
// COLLATE <collation> before AS for char/varchar. The value must have the
// Go type c's keyrange.Kind names.
//
// Bindings (chosen so no conversion loses precision or changes order):
// integers int64, bit bool, decimal/numeric/money as their exact text
// (nvarchar, converted by the CAST), float/real float64, strings string
// (nvarchar; a char/varchar bound converts in its column's collation),
// binary []byte, date civil.Date, time civil.Time (time(7), 100 ns),
// datetime/smalldatetime/datetime2 civil.DateTime (datetime2(7), 100 ns),
// datetimeoffset mssql.DateTimeOffset (datetimeoffset(7)),
// uniqueidentifier its canonical string.
func boundExpr(c source.Column, v any, param string) (arg any, expr string, err error) {
	decl, err := InlineType(c)
	if err != nil {
		return nil, "", err
	}
	kc := c.KeyColumn()
	if _, err := keyrange.Compare(kc, v, v); err != nil {
		return nil, "", fmt.Errorf("sqlserver: bound for column %q: %w", c.Name, err)
	}
	cast := "CAST(" + param + " AS " + decl + ")"
	switch x := v.(type) {
	case int64, bool, float64, []byte:
		return x, cast, nil
	case keyrange.Decimal:
		// keyrange.Compare above parsed it; no decimal text longer than
		// source/sqlserver's decoder reads (maxDecimalText) is sent either.
		if len(x) > maxDecimalText {
			return nil, "", fmt.Errorf("sqlserver: bound for column %q: decimal text %q: want 1-%d characters", c.Name, string(x), maxDecimalText)
		}
		return string(x), cast, nil
	case string:
		if c.Type == "char" || c.Type == "varchar" {
			if !ValidCollation(c.Collation) {
				return nil, "", fmt.Errorf("sqlserver: key column %q (%s) has no usable collation (%q): its bounds would convert in the database default code page", c.Name, decl, c.Collation)
			}
			// ReadRange first checks that it converts back unchanged
			// (BoundCheckStatement, FACTS.md F96).
			return x, "CAST(" + param + " COLLATE " + c.Collation + " AS " + decl + ")", nil
		}
		return x, cast, nil
	case keyrange.UUID:
		return x.String(), cast, nil
	case time.Time:
		switch kc.Kind {
		case keyrange.KindDate:
			return civil.DateOf(x), cast, nil
		case keyrange.KindTime:
			return civil.TimeOf(x), cast, nil
		case keyrange.KindDateTime:
			return civil.DateTimeOf(x), cast, nil
		case keyrange.KindDateTimeOffset:
			return mssql.DateTimeOffset(x), cast, nil
		}
	}
	return nil, "", fmt.Errorf("sqlserver: bound for column %q (%s): cannot bind %T", c.Name, decl, v)
}
