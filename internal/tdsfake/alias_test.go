package tdsfake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestAliasTypesTakeTheirBaseType: sys.sp_cdc_get_captured_columns names a
// column's alias type (sysname, CREATE TYPE phone FROM varchar(20)) as its
// data_type; the source takes the base type and its length from sys.columns
// and reads the table, where before the whole instance failed on a type it
// did not know. A login that may not see sys.columns' rows gets an error
// naming the column and the alias.
func TestAliasTypesTakeTheirBaseType(t *testing.T) {
	ctx := context.Background()
	for _, hidden := range []bool{false, true} {
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "people", Key: []string{"login"}, Columns: []fake.ColumnDef{
			{Name: "login", Type: "nvarchar(128)", Alias: "sysname", Collation: "Latin1_General_CI_AS"},
			{Name: "phone", Type: "varchar(20)", Alias: "phone", Collation: "Latin1_General_CI_AS", Nullable: true, HideCollation: hidden},
			{Name: "score", Type: "decimal(9,2)", Alias: "points", Nullable: true},
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load("dbo", "people", fake.Row{"ann", "+44 20 7946 0000", keyrange.Decimal("12.50")}, fake.Row{"Bob", nil, nil}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "people", "dbo_people"); err != nil {
			t.Fatal(err)
		}
		src, _, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
		ci, err := src.CaptureInstance(ctx, "dbo_people")
		if hidden {
			if err == nil || !strings.Contains(err.Error(), `column "login" has type "sysname"`) {
				t.Errorf("sys.columns hidden: %v, want an error naming the column and its alias type", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range ci.Columns {
			got = append(got, c.Declared())
		}
		if strings.Join(got, ", ") != "nvarchar(128), varchar(20), decimal(9,2)" {
			t.Fatalf("declared types %v; want the base types", got)
		}
		rr, err := src.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := count(rr)
		if err != nil || n != 2 {
			t.Errorf("read %d rows, %v; want 2", n, err)
		}
	}
}
