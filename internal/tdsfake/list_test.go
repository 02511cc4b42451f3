package tdsfake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// listed renders a listing for comparison: name, table, start LSN, key
// and the number of columns of each instance.
func listed(cis []source.CaptureInstance) []string {
	var out []string
	for _, ci := range cis {
		out = append(out, fmt.Sprintf("%s %s.%s %s [%s] %d", ci.Name, ci.SourceSchema, ci.SourceTable, ci.StartLSN, strings.Join(ci.Key, "|"), len(ci.Columns)))
	}
	return out
}

// TestListCaptureInstancesOverTheWire: source/sqlserver's
// ListCaptureInstances, one EXEC sys.sp_cdc_help_change_data_capture sent
// through go-mssqldb, lists what the fake lists (FACTS.md F01): names and
// key columns that need quoting, a keyless table, two instances of one
// table, none after DenyChanges; a listing the server fails is an error;
// and database.Bootstrap with the zero Selection bootstraps every listed
// instance over the wire.
func TestListCaptureInstancesOverTheWire(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	for _, def := range []fake.TableDef{
		{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)", Nullable: true}},
			Key: []string{"id"}, Rows: []fake.Row{{int64(1), "a"}, {int64(2), nil}}, CaptureInstance: "dbo_orders"},
		{Schema: "sales", Name: "a]b", Columns: []fake.ColumnDef{{Name: "co,mp", Type: "int"}, {Name: "id ]x", Type: "int"}},
			Key: []string{"co,mp", "id ]x"}, Rows: []fake.Row{{int64(1), int64(2)}}, CaptureInstance: "sales_ab"},
		{Schema: "ops", Name: "log", Columns: []fake.ColumnDef{{Name: "n", Type: "int"}},
			Key: []string{"n"}, Keyless: true, Rows: []fake.Row{{int64(7)}, {int64(8)}}, CaptureInstance: "ops_log"},
	} {
		if err := db.CreateTable(def); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.EnableCDC("dbo", "orders", "dbo_orders_v2", "id"); err != nil {
		t.Fatal(err)
	}
	src, srv, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	var _ database.Lister = src

	check := func(what string, wantN int) {
		t.Helper()
		want, err := db.ListCaptureInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent := len(srv.Requests())
		got, err := src.ListCaptureInstances(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if reqs := srv.Requests()[sent:]; len(reqs) != 1 || reqs[0].SQL != mssqlstmt.ListCaptureInstancesStatement().SQL {
			t.Fatalf("%s: sent %d requests, want one %q", what, len(reqs), mssqlstmt.ListCaptureInstancesStatement().SQL)
		}
		if g, w := listed(got), listed(want); !slices.Equal(g, w) || len(g) != wantN {
			t.Fatalf("%s: over the wire\n%s\nwant %d:\n%s", what, strings.Join(g, "\n"), wantN, strings.Join(w, "\n"))
		}
	}
	check("all", 4)
	if err := db.DenyChanges("sales_ab"); err != nil {
		t.Fatal(err)
	}
	check("after DenyChanges", 3)
	if err := db.GrantChanges("sales_ab"); err != nil {
		t.Fatal(err)
	}
	db.FailNext(fake.OpListInstances, fake.ErrInjected)
	if _, err := src.ListCaptureInstances(ctx); err == nil || !strings.Contains(err.Error(), "listing capture instances") {
		t.Fatalf("a failed listing: %v", err)
	}

	sinks := map[string]*fake.MemSink{}
	results, err := database.Bootstrap(ctx, src, database.Options{
		Target: "mem://{capture_instance}",
		Open: func(_ context.Context, target string) (sink.Sink, error) {
			m := fake.NewMemSink()
			sinks[target] = m
			return struct{ sink.Sink }{m}, nil // not closed by Bootstrap: checked below
		},
		Tables: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, r := range results {
		rows, err := db.Rows(r.SourceSchema, r.SourceTable)
		if err != nil {
			t.Fatal(err)
		}
		var kept int64
		for _, rec := range sinks[r.Target].Records() {
			kept += rec.NumRows()
		}
		if r.Snapshot.Rows != int64(len(rows)) || kept != r.Snapshot.Rows {
			t.Fatalf("%s: %d rows snapshotted, %d kept, the table holds %d", r.CaptureInstance, r.Snapshot.Rows, kept, len(rows))
		}
		done = append(done, r.CaptureInstance)
	}
	slices.Sort(done)
	if want := []string{"dbo_orders", "dbo_orders_v2", "ops_log", "sales_ab"}; !slices.Equal(done, want) {
		t.Fatalf("bootstrapped %q, want %q", done, want)
	}
	for _, m := range sinks {
		m.Close()
	}
}
