package integration

import (
	"bytes"
	"database/sql/driver"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
)

// TestOrderedRangeHasNoSort: the range read of a clustered composite key
// ends in ORDER BY the key (FACTS.md F95), and SQL Server plans it without
// a Sort, merging the pieces' seeks in key order (the plan's XML, read
// with SET SHOWPLAN_XML ON, names no Sort operator).
func TestOrderedRangeHasNoSort(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_comp20")
	if err != nil {
		t.Fatal(err)
	}
	if !mssqlstmt.OrderedRange(ci) {
		t.Fatalf("dbo_snap_comp20 (key index %+v) is not an ordered range", ci.KeyIndex)
	}
	st, err := mssqlstmt.ReadRangeStatement(ci, keyrange.Range{Lower: keyrange.Tuple{int64(3), int64(50)}, Upper: keyrange.Tuple{int64(12), int64(7)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.SQL, "\nUNION ALL\n") || !strings.Contains(st.SQL, "\nORDER BY ") {
		t.Fatalf("want pieces joined by UNION ALL and ordered: %s", st.SQL)
	}
	cn, err := db.Conn(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if _, err := cn.ExecContext(c, "SET SHOWPLAN_XML ON"); err != nil {
		t.Fatal(err)
	}
	var plan string
	err = cn.QueryRowContext(c, st.SQL, st.Args...).Scan(&plan)
	if _, off := cn.ExecContext(c, "SET SHOWPLAN_XML OFF"); off != nil {
		_ = cn.Raw(func(any) error { return driver.ErrBadConn }) // never pooled with SHOWPLAN on
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "<ShowPlanXML") || strings.Contains(plan, `PhysicalOp="Sort"`) {
		t.Errorf("the ordered range read's plan holds a Sort (or is no plan):\n%s", plan)
	}
}

// TestBoundCheckOnServer: the bound check (FACTS.md F96) passes a Latin1
// bound holding the C1 controls 1252's undefined bytes read as (F82), and
// refuses one holding a character code page 1252 lacks ("Ā"), which the
// conversion turns into another character.
func TestBoundCheckOnServer(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_Snap_Case")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		bound string
		exact bool
	}{{"Ã\u0081\u008D", true}, {"abc", true}, {"Āb", false}} {
		st, vals, err := mssqlstmt.BoundCheckStatement(ci, keyrange.Range{Lower: keyrange.Tuple{b.bound, int64(1)}})
		if err != nil || len(vals) != 1 {
			t.Fatalf("%q: %v, %v", b.bound, vals, err)
		}
		var back []byte
		if err := db.QueryRowContext(c, st.SQL, st.Args...).Scan(&back); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, u := range utf16.Encode([]rune(b.bound)) {
			want = append(want, byte(u), byte(u>>8))
		}
		if bytes.Equal(back, want) != b.exact {
			t.Errorf("bound %q came back as %x (UTF-16LE); exact %v, want %v", b.bound, back, !b.exact, b.exact)
		}
	}
}
