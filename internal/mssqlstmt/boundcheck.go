package mssqlstmt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// BoundValue is one char or varchar value of a range's bounds that
// BoundCheckStatement checks.
type BoundValue struct {
	Column string // the key column
	Value  string // the bound as read, in Unicode
}

// BoundCheckStatement converts each char or varchar value in r's bounds on
// the server to its column's code page and back to nvarchar, as UTF-16
// bytes (FACTS.md F96): one row, one varbinary column per value of the
// returned list, which must be the value's own UTF-16 bytes. Such a
// bound was read as nvarchar (readAsUnicode) and is bound back as
// CAST(@p COLLATE c AS varchar(n)) (boundExpr); a value that changes on
// the way is another key, and ranges that share it could overlap or
// invert. The list is empty when r holds no such value.
func BoundCheckStatement(ci *source.CaptureInstance, r keyrange.Range) (Stmt, []BoundValue, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, nil, err
	}
	var ps params
	var exprs []string
	var vals []BoundValue
	seen := map[BoundValue]bool{}
	for _, b := range []keyrange.Tuple{r.Lower, r.Upper} {
		for i, v := range b {
			s, ok := v.(string)
			if !ok || i >= len(t.key) {
				continue
			}
			c := t.key[i]
			if c.Type != "char" && c.Type != "varchar" {
				continue
			}
			bv := BoundValue{Column: c.Name, Value: s}
			if seen[bv] {
				continue
			}
			seen[bv] = true
			if !ValidCollation(c.Collation) {
				return Stmt{}, nil, fmt.Errorf("sqlserver: key column %q: collation %q cannot be named in a statement", c.Name, c.Collation)
			}
			varchar := "varchar(max)"
			if c.Length > 0 && c.Length <= 8000 {
				varchar = "varchar(" + strconv.Itoa(c.Length) + ")"
			}
			exprs = append(exprs, "CAST(CAST(CAST("+ps.add(s)+" COLLATE "+c.Collation+" AS "+varchar+") AS "+unicodeType(c)+") AS "+utf16BinaryType(c)+
				") AS [b"+strconv.Itoa(len(vals)+1)+"]")
			vals = append(vals, bv)
		}
	}
	if len(vals) == 0 {
		return Stmt{}, nil, nil
	}
	return Stmt{SQL: "SELECT " + strings.Join(exprs, ", "), Args: ps.args}, vals, nil
}
