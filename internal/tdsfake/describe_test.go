package tdsfake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestDescribedInstancesAreNotReadAgain: the second CaptureInstance of a
// name (what every poll asks) lists only its table's instances
// (@source_schema, @source_name) and reads the captured columns and
// sys.columns, where DDL shows, but not the indexes again; a column added
// to the table shows; the instance dropped and enabled again under its
// name (a new change table, another captured column list) is described
// afresh; a name that resolves ignoring case lists every instance.
func TestDescribedInstancesAreNotReadAgain(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	for _, name := range []string{"t", "u"} {
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: name, Key: []string{"id"}, Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"}, {Name: "v", Type: "varchar(10)", Nullable: true}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", name, "dbo_"+name); err != nil {
			t.Fatal(err)
		}
	}
	src, srv, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	seen := 0
	// sent describes the statements of the last call: the kinds sent.
	sent := func() string {
		reqs := srv.Requests()
		var kinds []string
		for _, r := range reqs[seen:] {
			switch {
			case strings.HasPrefix(r.SQL, "EXEC sys.sp_cdc_help_change_data_capture @source_schema"):
				kinds = append(kinds, "list "+r.Params[0].Value.(string)+"."+r.Params[1].Value.(string))
			case strings.HasPrefix(r.SQL, "EXEC sys.sp_cdc_help_change_data_capture"):
				kinds = append(kinds, "list all")
			case strings.HasPrefix(r.SQL, "EXEC sys.sp_cdc_get_captured_columns"):
				kinds = append(kinds, "captured")
			case strings.Contains(r.SQL, "FROM [sys].[indexes]"):
				kinds = append(kinds, "indexes")
			case strings.Contains(r.SQL, "FROM [sys].[columns]"):
				kinds = append(kinds, "columns")
			}
		}
		seen = len(reqs)
		return strings.Join(kinds, ", ")
	}
	describe := func(name, want string, cols ...string) {
		t.Helper()
		ci, err := src.CaptureInstance(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sent(); got != want {
			t.Errorf("CaptureInstance(%q) sent %s; want %s", name, got, want)
		}
		var names []string
		for _, c := range ci.Columns {
			names = append(names, c.Name)
		}
		if strings.Join(names, ",") != strings.Join(cols, ",") || len(ci.Indexes) == 0 {
			t.Errorf("CaptureInstance(%q): columns %v, indexes %v; want columns %v", name, names, ci.Indexes, cols)
		}
	}
	describe("dbo_t", "list all, captured, columns, indexes", "id", "v")
	describe("dbo_t", "list dbo.t, captured, columns", "id", "v")
	if _, err := db.AddColumn("dbo", "t", fake.ColumnDef{Name: "w", Type: "int", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	describe("dbo_t", "list dbo.t, captured, columns", "id", "v")
	if err := db.DisableCDC("dbo_t"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	describe("dbo_t", "list dbo.t, list all, captured, columns, indexes", "id", "v", "w")
	describe("dbo_t", "list dbo.t, captured, columns", "id", "v", "w")
	describe("DBO_U", "list all, captured, columns, indexes", "id", "v")
	describe("DBO_U", "list all, captured, columns, indexes", "id", "v")
}
