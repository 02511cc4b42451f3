package sqlserver

import (
	"errors"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

func TestParseCapturedColumnTypes(t *testing.T) {
	rs := resultSet{Columns: docCapturedColumns}
	add := func(name, typ string, length, prec, scale, dt any) {
		rs.Rows = append(rs.Rows, []any{"dbo", "t", "dbo_t", name, int64(len(rs.Rows) + 1), int64(len(rs.Rows) + 1), typ, length, prec, int64(10), scale, dt})
	}
	add("a", "datetime2", nil, nil, nil, int64(3))
	add("b", "nvarchar", int64(-1), nil, nil, nil)
	add("c", "decimal", nil, int64(38), int64(10), nil)
	add("d", "varbinary", int64(16), nil, nil, nil)
	add("e", "time", nil, nil, nil, int64(0))
	add("f", "datetimeoffset", nil, nil, nil, int64(7))
	add("g", "timestamp", nil, nil, nil, nil)
	add("h", "geography", int64(-1), nil, nil, nil)
	cols, err := parseCapturedColumns(rs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Declared())
	}
	want := "datetime2(3) nvarchar(max) decimal(38,10) varbinary(16) time(0) datetimeoffset(7) timestamp geography"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q want %q", strings.Join(got, " "), want)
	}
	// A NULL character_maximum_length leaves the length unknown (0) for
	// sys.columns to fill (FACTS.md F05); a bad one is an error.
	rs.Rows = nil
	add("x", "varbinary", nil, nil, nil, nil)
	cols, err = parseCapturedColumns(rs)
	if err != nil || cols[0].Length != 0 || cols[0].KeyColumn().Kind != keyrange.KindUnsupported {
		t.Fatalf("varbinary with NULL character_maximum_length: %+v, %v", cols, err)
	}
	rs.Rows = nil
	add("x", "varchar", int64(0), nil, nil, nil)
	if _, err := parseCapturedColumns(rs); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("varchar(0) accepted: %v", err)
	}
}

func TestParseSmallResults(t *testing.T) {
	n, err := parseSpaceUsed(resultSet{Columns: docSpaceUsed,
		Rows: [][]any{{"orders", "10000               ", "2000 KB", "1000 KB", "16 KB", "984 KB"}}})
	if err != nil || n != 10000 {
		t.Fatalf("%d %v", n, err)
	}
	min, max, ok, err := parseIntKeyBounds(resultSet{Columns: []string{"min", "max"}, Rows: [][]any{{nil, nil}}})
	if err != nil || ok || min != 0 || max != 0 {
		t.Fatalf("empty table: %v %v", ok, err)
	}
	l, err := parseLSN("min", resultSet{Columns: []string{""}, Rows: [][]any{{make([]byte, 10)}}})
	if err != nil || l.Valid {
		t.Fatalf("zero LSN is not valid: %+v %v", l, err)
	}
	tm, ok, err := parseLSNTime(resultSet{Columns: []string{""}, Rows: [][]any{{time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)}}})
	if err != nil || !ok || !tm.Equal(time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("%v %v %v", tm, ok, err)
	}
	if _, ok, err := parseLSNTime(resultSet{Columns: []string{""}, Rows: [][]any{{nil}}}); ok || err != nil {
		t.Fatalf("NULL: %v %v", ok, err)
	}
	for _, rs := range []resultSet{
		{Columns: []string{"major", "edition"}, Rows: [][]any{{int64(16), int64(3)}}},
		{Columns: []string{"major", "edition"}, Rows: [][]any{{int64(12), int64(5)}}},
		{Columns: []string{"major", "edition"}, Rows: [][]any{{nil, int64(8)}}},
	} {
		if v, err := parseServerVersion(rs); !v.namesZone || v.azureSQLDatabase != (rs.Rows[0][1] == int64(5)) || err != nil {
			t.Errorf("%v: %+v, %v", rs.Rows, v, err)
		}
	}
	if v, err := parseServerVersion(resultSet{Columns: []string{"major", "edition"}, Rows: [][]any{{int64(15), int64(3)}}}); v.namesZone || err != nil {
		t.Errorf("SQL Server 2019: names a zone %v, %v", v, err)
	}
	if !isServerError(mssql.Error{Number: 313}, 313) || isServerError(errors.New("313"), 313) {
		t.Fatal("isServerError")
	}
	if !isServerError(mssql.Error{Number: 50000, All: []mssql.Error{{Number: 313}, {Number: 50000}}}, 313) {
		t.Fatal("313 earlier in the chain")
	}
}
