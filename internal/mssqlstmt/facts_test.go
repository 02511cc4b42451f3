package mssqlstmt

import (
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// F45, F46: go-mssqldb decodes char/varchar/text only in the code pages it
// has, and never UTF-8: such columns (or ones whose code page is not
// visible) are read as nvarchar, under their own names, where other
// columns stay as they are; seeks and bounds stay on the real column.
func TestColumnsTheDriverCannotDecodeAreReadAsNvarchar(t *testing.T) {
	for _, tc := range []struct {
		c    source.Column
		want bool
	}{
		{source.Column{Type: "varchar", Length: 20, CodePage: 1252}, false},
		{source.Column{Type: "varchar", Length: 20, CodePage: 1253}, false},
		{source.Column{Type: "char", Length: 3, CodePage: 932}, false},
		{source.Column{Type: "varchar", Length: 20, CodePage: 65001}, true},
		{source.Column{Type: "varchar", Length: 20, CodePage: 28591}, true},
		{source.Column{Type: "varchar", Length: 20}, true},
		{source.Column{Type: "text", CodePage: 65001}, true},
		{source.Column{Type: "nvarchar", Length: 20}, false},
	} {
		if got := readAsUnicode(tc.c); got != tc.want {
			t.Errorf("%s code page %d: read as nvarchar %v, want %v", tc.c.Declared(), tc.c.CodePage, got, tc.want)
		}
	}
	st, err := ReadRangeStatement(ciUTF8, keyrange.Range{Lower: keyrange.Tuple{"Kraków"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SELECT CAST([name] AS nvarchar(40)) AS [name], CAST([notes] AS nvarchar(max)) AS [notes], CAST([legacy] AS nvarchar(max)) AS [legacy], CAST([code] AS nvarchar(3)) AS [code] FROM",
		"WHERE [name] >= CAST(@p1 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40))",
	} {
		if !strings.Contains(st.SQL, want) {
			t.Errorf("statement lacks %q:\n%s", want, st.SQL)
		}
	}
	st, err = SeekKeyStatement(ciUTF8, keyrange.Tuple{"Kraków"}, 10)
	if err != nil || !strings.HasPrefix(st.SQL, "SELECT CAST([s].[name] AS nvarchar(40)) AS [name] FROM (") || !strings.Contains(st.SQL, "ORDER BY [s].[name] OFFSET") {
		t.Errorf("seek: %v\n%s", err, st.SQL)
	}
}
