package tdsfake_test

import (
	"context"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/mssqldocs"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestResultShapesAreTheDocumented holds the fake's answers, as go-mssqldb
// reads them off the wire, to the result sets Microsoft documents
// (internal/mssqldocs, FACTS.md F01, F04, F16): names, order and types,
// whatever the fake's Go structs hold.
func TestResultShapesAreTheDocumented(t *testing.T) {
	db := bigTable(t, 3)
	src, _, sdb := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	ci, err := src.CaptureInstance(context.Background(), "dbo_big")
	if err != nil {
		t.Fatal(err)
	}
	spaceUsed, err := mssqlstmt.RowCountStatement(ci)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		stmt mssqlstmt.Stmt
		want []mssqldocs.Column
	}{
		{"sp_cdc_help_change_data_capture", mssqlstmt.ListCaptureInstancesStatement(), mssqldocs.HelpChangeDataCapture},
		{"sp_cdc_get_captured_columns", mssqlstmt.CapturedColumnsStatement("dbo_big"), mssqldocs.CapturedColumns},
		{"sp_spaceused", spaceUsed, mssqldocs.SpaceUsed},
	} {
		rows, err := sdb.QueryContext(context.Background(), tc.stmt.SQL, tc.stmt.Args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		types, err := rows.ColumnTypes()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if n == 0 {
			t.Errorf("%s: no rows", tc.name)
		}
		if len(types) != len(tc.want) {
			t.Fatalf("%s: %d columns, documented %d", tc.name, len(types), len(tc.want))
		}
		for i, c := range types {
			if c.Name() != tc.want[i].Name || c.DatabaseTypeName() != tc.want[i].DriverType() {
				t.Errorf("%s column %d: %s %s, documented %s %s (%s)", tc.name, i+1, c.Name(), c.DatabaseTypeName(),
					tc.want[i].Name, tc.want[i].DriverType(), tc.want[i].Type)
			}
		}
	}
}
