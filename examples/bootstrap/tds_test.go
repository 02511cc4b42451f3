package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
)

// TestRunManyOverSQLServer runs the many-instance mode with -dsn against
// the fake served over TDS (internal/tdsfake), as against SQL Server:
// -instances all lists the capture instances with
// sys.sp_cdc_help_change_data_capture (source/sqlserver implements
// database.Lister) and snapshots each into its table, and the pool never
// has more connections than -connections, kept open between uses (every
// request of the run comes on one of at most that many connections).
func TestRunManyOverSQLServer(t *testing.T) {
	db := fake.New(fake.Options{})
	for i, schema := range []string{"sales", "hr", "ops", "sales", "hr"} {
		var rows []fake.Row
		for k := range 40 * (i + 1) {
			rows = append(rows, fake.Row{int64(k), fmt.Sprint("v", k)})
		}
		name := fmt.Sprintf("t%d", i)
		if err := db.CreateTable(fake.TableDef{Schema: schema, Name: name, Key: []string{"id"}, Rows: rows, CaptureInstance: schema + "_" + name,
			Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)", Nullable: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := tdsfake.Start(context.Background(), db, tdsfake.Options{PageRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	cfg := config{dsn: srv.DSN("cdcsnap"), target: dir + "/{schema}/{table}", partitions: 2, progress: time.Hour,
		many: manyConfig{instances: "all", tables: 3, connections: 3}}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for _, want := range []string{
		"snapshot hr_t4 -> " + dir + "/hr/t4: 200 rows at LSN 0x",
		"snapshot sales_t0 -> " + dir + "/sales/t0: 40 rows at LSN 0x",
		"tables:   5 selected, 5 snapshotted (600 rows in ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	conns := map[uint64]bool{}
	for _, r := range srv.Requests() {
		conns[r.ConnID] = true
	}
	if len(conns) > cfg.many.connections {
		t.Errorf("the run used %d connections, more than -connections %d", len(conns), cfg.many.connections)
	}
}

// TestPlanOverSQLServer runs -plan with -dsn against the fake served over
// TDS, as against SQL Server: it prints the plan and reads no row of the
// table (the fake's counters), writes nothing, and a capture instance the
// login cannot see is named with what to check. A login granted the
// change table but not cdc.lsn_time_mapping, which the change read joins,
// is told so, with both grants, before anything is read
// (HAS_PERMS_BY_NAME, source/sqlserver FACTS.md F86), and no change is
// read to find out.
func TestPlanOverSQLServer(t *testing.T) {
	db := fake.New(fake.Options{})
	var rows []fake.Row
	for k := range 3000 {
		rows = append(rows, fake.Row{int64(k), fmt.Sprint("v", k)})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_orders",
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	srv, err := tdsfake.Start(context.Background(), db, tdsfake.Options{PageRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir() + "/bronze"
	var out, errOut bytes.Buffer
	code := runMain(t.Context(), []string{"-dsn", srv.DSN("cdcsnap"), "-capture-instance", "dbo_orders", "-target", dir, "-min-partition-rows", "0", "-plan"}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, &out, &errOut)
	}
	for _, want := range []string{
		"instance: dbo_orders on table dbo.orders (2 captured columns, start_lsn 0x",
		"key:      id (unique clustered index ",
		"target:   " + dir + ": new; a run creates the Delta table",
		"~3,000 rows by metadata in 4 uniform partitions",
		"range 3 [[2250], +inf)",
		"access:   may read the key: yes (the plan's reads ran)\n",
		"          may read the changes: yes (the gating role and the captured columns: min LSN none yet, the capture job has not reached this new instance; the change table: SELECT granted)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if st, _ := db.Stats("dbo", "orders"); st.RangeReads != 0 || st.RowsReturned != 0 {
		t.Errorf("-plan read rows: %+v", st)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("-plan left %s: %v", dir, err)
	}

	denied, err := tdsfake.Start(context.Background(), db, tdsfake.Options{PageRows: 16, CDCGrants: []string{"dbo_orders_CT"}})
	if err != nil {
		t.Fatal(err)
	}
	defer denied.Close()
	out.Reset()
	errOut.Reset()
	code = runMain(t.Context(), []string{"-dsn", denied.DSN("cdcsnap"), "-capture-instance", "dbo_orders", "-target", dir, "-min-partition-rows", "0", "-plan"}, &out, &errOut)
	t.Logf("-plan of a login granted the change table only:\n%s", &out)
	want := "          may read the changes: no — the login may not read the change table: SQL Server says it may not SELECT from cdc.lsn_time_mapping (HAS_PERMS_BY_NAME): GRANT SELECT ON cdc.[dbo_orders_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user> (<user>: the login's database user; not GRANT SELECT ON SCHEMA::cdc, which lets it read every capture instance's changes whatever its gating role)\n"
	if code != exitOK || !strings.Contains(out.String(), want) {
		t.Errorf("the change table granted alone: exit %d\n%s\n%s\nwant exit 0 and %q", code, &out, &errOut, want)
	}
	if readme, err := os.ReadFile("../../README.md"); err != nil || !strings.Contains(string(readme), "\n"+want) {
		t.Errorf("README.md does not show the line (%v):\n%s", err, want)
	}
	for _, r := range denied.Requests() {
		if strings.Contains(r.SQL, " FROM [cdc].") {
			t.Errorf("-plan ran a change read: %s", r.SQL)
		}
	}
	if st, _ := db.Stats("dbo", "orders"); st.RangeReads != 0 || st.RowsReturned != 0 {
		t.Errorf("-plan read rows: %+v", st)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("-plan left %s: %v", dir, err)
	}

	out.Reset()
	errOut.Reset()
	code = runMain(t.Context(), []string{"-dsn", srv.DSN("cdcsnap"), "-capture-instance", "dbo_nope", "-target", dir, "-plan"}, &out, &errOut)
	if want := "bootstrap: -capture-instance dbo_nope: no such capture instance, or this login may not read it (SQL Server lists only the capture instances a login may read: it must be in the instance's gating role"; code != exitFailed || !strings.HasPrefix(errOut.String(), want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut.String(), want)
	}
}
