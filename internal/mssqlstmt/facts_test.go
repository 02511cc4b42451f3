package mssqlstmt

import (
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// F45, F46, F82: go-mssqldb decodes char/varchar/text only in the code
// pages it has, never UTF-8, and turns bytes those leave undefined into
// U+FFFD: every such column is read converted by the server to nvarchar,
// under its own name (as UTF-16 bytes unless it is a key column), where
// other columns stay as they are; seeks and bounds stay on the real column.
func TestColumnsTheDriverCannotDecodeAreReadAsNvarchar(t *testing.T) {
	for _, tc := range []struct {
		c    source.Column
		want bool
	}{
		{source.Column{Type: "varchar", Length: 20, CodePage: 1252}, true},
		{source.Column{Type: "varchar", Length: 20, CodePage: 1253}, true},
		{source.Column{Type: "char", Length: 3, CodePage: 932}, true},
		{source.Column{Type: "varchar", Length: 20, CodePage: 65001}, true},
		{source.Column{Type: "varchar", Length: 20, CodePage: 28591}, true},
		{source.Column{Type: "varchar", Length: 20}, true},
		{source.Column{Type: "text", CodePage: 65001}, true},
		{source.Column{Type: "nvarchar", Length: 20}, false},
		{source.Column{Type: "varbinary", Length: 20}, false},
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
		"SELECT CAST([name] AS nvarchar(40)) AS [name], CAST(CAST([notes] AS nvarchar(max)) AS varbinary(max)) AS [notes], CAST(CAST([legacy] AS nvarchar(max)) AS varbinary(max)) AS [legacy], CAST(CAST([code] AS nvarchar(3)) AS varbinary(6)) AS [code] FROM",
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
