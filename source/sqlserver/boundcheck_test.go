package sqlserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
)

// TestParseBoundCheck: BoundCheckStatement's row passes only when every
// bound came back as its own UTF-16 bytes; a bound that came back changed
// is ErrBoundNotExact naming the column and the bound, and a row of
// another shape is an error that is not.
func TestParseBoundCheck(t *testing.T) {
	r := keyrange.Range{Lower: keyrange.Tuple{"Ăb"}, Upper: keyrange.Tuple{"Zoë"}}
	vals := []mssqlstmt.BoundValue{{Column: "name", Value: "Ăb"}, {Column: "name", Value: "Zoë"}}
	for _, c := range []struct {
		name     string
		row      []any
		exact    bool   // no error
		notExact bool   // ErrBoundNotExact
		want     string // in the error
	}{
		{"both back", []any{utf16LE("Ăb"), utf16LE("Zoë")}, true, false, ""},
		{"one changed", []any{utf16LE("?b"), utf16LE("Zoë")}, false, true, `column "name", bound "Ăb"`},
		{"a trailing unit more", []any{utf16LE("Ăb"), utf16LE("Zoë ")}, false, true, `bound "Zoë"`},
		{"not bytes", []any{int64(1), utf16LE("Zoë")}, false, false, "want varbinary"},
		{"one column short", []any{utf16LE("Ăb")}, false, false, "want one row of 2 columns"},
	} {
		err := parseBoundCheck("dbo_names", r, vals, resultSet{Columns: []string{"b1", "b2"}, Rows: [][]any{c.row}})
		switch {
		case c.exact && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.exact && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error holding %q", c.name, err, c.want)
		case errors.Is(err, ErrBoundNotExact) != c.notExact:
			t.Errorf("%s: %v: ErrBoundNotExact only for a bound that came back changed", c.name, err)
		}
	}
}
