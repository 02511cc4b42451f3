package mssqlstmt

import (
	"strconv"

	"github.com/cdcsnap/cdcsnap/source"
)

// What the range and change reads ask the server to convert, so that
// go-mssqldb hands the decoder (source/sqlserver) cheap values: the two
// largest costs of a read were go-mssqldb's UTF-16 decoding and its
// decimal text (BENCHMARKS.md, "Reading from SQL Server: cdcsnap against Microsoft's drivers").

// utf16Read reports whether captured column c of t is read as the UTF-16
// bytes of its text (FACTS.md F90): CAST(c AS varbinary(2n)) for an nchar
// or nvarchar column, CAST(CAST(c AS nvarchar(n)) AS varbinary(2n)) for a
// char, varchar or text one (readAsUnicode), when it is not a key column (a
// key column keeps its name in ORDER BY and its text for keyrange, see
// OrderedRange).
func (t *table) utf16Read(c source.Column) bool {
	return (c.Type == "nchar" || c.Type == "nvarchar" || readAsUnicode(c)) && !t.isKey(c)
}

// isKey reports whether c is one of t's key columns.
func (t *table) isKey(c source.Column) bool {
	for _, k := range t.key {
		if k.Name == c.Name {
			return true
		}
	}
	return false
}

// utf16BinaryType is the varbinary type that holds every value of the
// Unicode character column c as UTF-16 bytes: two per character.
func utf16BinaryType(c source.Column) string {
	if c.Length < 1 || c.Length > 4000 {
		return "varbinary(max)"
	}
	return "varbinary(" + strconv.Itoa(2*c.Length) + ")"
}

// scaledDecimal reports whether captured column c of t is read as its
// unscaled integer, CAST(c * @p AS bigint) with @p = 10^scale (FACTS.md
// F91): a decimal or numeric of precision 18 or less that is not a key
// column (as utf16Read), whose every value times
// 10^scale is an integer below 10^18, so the bigint holds it exactly.
// go-mssqldb turns each decimal into text through math/big, which the
// decoder then parsed back.
func (t *table) scaledDecimal(c source.Column) bool {
	return (c.Type == "decimal" || c.Type == "numeric") && c.Precision >= 1 && c.Precision <= 18 && !t.isKey(c)
}

// pow10 is 10^n, the bigint parameter of a scaled decimal.
func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
