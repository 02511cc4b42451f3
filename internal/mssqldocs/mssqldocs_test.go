package mssqldocs

import "testing"

func TestDriverType(t *testing.T) {
	for typ, want := range map[string]string{"sysname": "NVARCHAR", "binary(10)": "BINARY", "nvarchar(max)": "NVARCHAR", "char(20)": "CHAR", "int": "INT"} {
		if got := (Column{Type: typ}).DriverType(); got != want {
			t.Errorf("%s: %s, want %s", typ, got, want)
		}
	}
	if got := Names(CapturedColumnsBefore2017)[5]; got != "ordinal_position" || Names(CapturedColumns)[5] != "column_ordinal" {
		t.Errorf("sixth captured column: %s / %s", got, Names(CapturedColumns)[5])
	}
}
