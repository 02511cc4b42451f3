package tdsfake

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
)

// boundCheckItem is one column of mssqlstmt.BoundCheckStatement.
var boundCheckItem = regexp.MustCompile(`^CAST\(CAST\(CAST\((@p\d+) COLLATE (\w+) AS varchar\(\w+\)\) AS nvarchar\(\w+\)\) AS (varbinary\(\w+\))\) AS \[(\w+)\]$`)

// boundCheck answers BoundCheckStatement: each bound converted to its
// collation's code page and back (tdsserver's Convert: '?' for a
// character the code page lacks, FACTS.md F29, F96), as UTF-16 bytes.
func (h *handler) boundCheck(sql string, a args, w *tdsserver.ResponseWriter) error {
	var cols []tdsserver.Column
	var row []any
	for _, item := range splitTop(strings.TrimPrefix(sql, "SELECT "), ", ") {
		m := boundCheckItem.FindStringSubmatch(item)
		if m == nil {
			return fmt.Errorf("tdsfake: bound check %q: want CAST(CAST(CAST(@pN COLLATE c AS varchar(n)) AS nvarchar(n)) AS varbinary(2n)) AS [bN]", clip(item))
		}
		s, err := a.str(m[1])
		if err != nil {
			return err
		}
		got, err := convertBound(m[2], s)
		if err != nil {
			return err
		}
		var b []byte
		for _, u := range utf16.Encode([]rune(got)) {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
		cols = append(cols, tdsserver.Column{Name: m[4], Type: m[3], Nullable: true})
		row = append(row, b)
	}
	if err := w.Columns(cols); err != nil {
		return err
	}
	return w.Row(row...)
}

// convertBound is CAST(s COLLATE collation AS varchar(n)) read back as
// nvarchar: s in the collation's code page, '?' for what it lacks.
func convertBound(collation, s string) (string, error) {
	c, err := tdsserver.ParseCollation(collation)
	if err != nil {
		return "", fmt.Errorf("tdsfake: collation %q: %w", collation, err)
	}
	return c.Convert(s)
}
