package mssqlstmt

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/source"
)

func TestInlineTypeAllowlist(t *testing.T) {
	ok := []source.Column{
		{Type: "varchar", Length: 8000}, {Type: "varchar", Length: -1}, {Type: "nchar", Length: 4000},
		{Type: "decimal", Precision: 38, Scale: 38}, {Type: "datetime2", Scale: 0}, {Type: "uniqueidentifier"},
	}
	for _, c := range ok {
		if _, err := InlineType(c); err != nil {
			t.Errorf("%s refused: %v", c.Declared(), err)
		}
	}
	bad := []source.Column{
		{Type: "varchar", Length: 0}, {Type: "char", Length: -1}, {Type: "nvarchar", Length: 4001},
		{Type: "decimal", Precision: 39}, {Type: "time", Scale: 8}, {Type: "xml"}, {Type: "sql_variant"},
		{Type: "int; DROP TABLE x"}, {Type: "geography"}, {Type: "varchar(20)"},
	}
	for _, c := range bad {
		if d, err := InlineType(c); err == nil {
			t.Errorf("%+v inlined as %q", c, d)
		}
	}
	if _, err := InlineType(source.Column{Type: "xml"}); !errors.Is(err, source.ErrUnsupportedType) {
		t.Errorf("xml: %v", err)
	}
	for _, c := range []string{"Greek_CI_AS", "Latin1_General_100_CI_AS_SC_UTF8"} {
		if !ValidCollation(c) {
			t.Errorf("%s refused", c)
		}
	}
	for _, c := range []string{"", "Greek_CI_AS AS int", "[x]", "a-b", strings.Repeat("a", 129)} {
		if ValidCollation(c) {
			t.Errorf("%q accepted", c)
		}
	}
}

func TestVarcharBoundNeedsCollation(t *testing.T) {
	c := source.Column{Name: "k", Type: "varchar", Length: 10}
	if _, _, err := boundExpr(c, "a", "@p1"); err == nil || !strings.Contains(err.Error(), "collation") {
		t.Fatalf("%v", err)
	}
}
