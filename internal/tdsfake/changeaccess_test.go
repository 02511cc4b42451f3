package tdsfake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// source/sqlserver checks the change reads' grants for snapshot.Inspect.
var _ snapshot.ChangeAccessChecker = (*sqlserver.Source)(nil)

// TestInspectChecksTheChangeTableOverTheWire: snapshot.Inspect through
// source/sqlserver and go-mssqldb asks HAS_PERMS_BY_NAME (FACTS.md F86)
// and says what the stream's change reads would then say: a login without
// SELECT on the cdc schema (tdsfake.Options.DenyChangeTables), on one
// change table (fake.DB.DenyChangeTable), or granted the change table but
// not cdc.lsn_time_mapping (tdsfake.Options.CDCGrants), is refused naming the grant,
// unless the source may read through the change function. Inspect reads
// no row and runs no change read (every request the server saw).
func TestInspectChecksTheChangeTableOverTheWire(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		denySchema  bool
		denyTable   bool
		allowFunc   bool
		grants      []string // tdsfake.Options.CDCGrants
		wantMissing string   // "": not refused
	}{
		{name: "granted"},
		{name: "no SELECT on schema cdc", denySchema: true, wantMissing: "cdc.[dbo_t_CT] and cdc.lsn_time_mapping"},
		{name: "no SELECT on the change table", denyTable: true, wantMissing: "cdc.[dbo_t_CT] (HAS_PERMS_BY_NAME)"},
		{name: "the change table granted alone", grants: []string{"dbo_t_CT"}, wantMissing: "cdc.lsn_time_mapping (HAS_PERMS_BY_NAME)"},
		{name: "both tables granted", grants: []string{"dbo_t_CT", "lsn_time_mapping"}},
		{name: "change function allowed", denySchema: true, allowFunc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fake.New(fake.Options{})
			var rows []fake.Row
			for i := range 500 {
				rows = append(rows, fake.Row{int64(i), fmt.Sprint("v", i)})
			}
			if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_t",
				Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)"}}}); err != nil {
				t.Fatal(err)
			}
			// A change the capture job has processed: the minimum LSN is
			// set, so a change read runs its statement.
			tx := db.Begin()
			if err := tx.Update("dbo", "t", []any{int64(7)}, fake.Row{int64(7), "changed"}); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			db.RunCaptureJob()
			if tc.denyTable {
				if err := db.DenyChangeTable("dbo_t"); err != nil {
					t.Fatal(err)
				}
			}
			src, srv, _ := serve(t, db, tdsfake.Options{DenyChangeTables: tc.denySchema, CDCGrants: tc.grants}, sqlserver.Options{AllowChangeFunction: tc.allowFunc})
			in, err := snapshot.Inspect(ctx, src, fake.NewMemSink(), snapshot.Options{CaptureInstance: "dbo_t", MinPartitionRows: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !in.ChangesChecked || in.Plan == nil || len(in.Plan.Ranges) != 4 {
				t.Fatalf("checked %v, plan %+v; want the check and a plan of 4 ranges", in.ChangesChecked, in.Plan)
			}
			switch {
			case tc.wantMissing == "" && in.ChangesErr != nil:
				t.Errorf("ChangesErr %v, want none", in.ChangesErr)
			case tc.wantMissing != "" && (!errors.Is(in.ChangesErr, sqlserver.ErrChangeTableDenied) ||
				!strings.Contains(in.ChangesErr.Error(), "may not SELECT from "+tc.wantMissing) ||
				!strings.Contains(in.ChangesErr.Error(), "GRANT SELECT ON cdc.[dbo_t_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>")):
				t.Errorf("ChangesErr %v; want sqlserver.ErrChangeTableDenied naming %s and the grant", in.ChangesErr, tc.wantMissing)
			}
			if st, _ := db.Stats("dbo", "t"); st.RangeReads != 0 || st.RowsReturned != 0 {
				t.Errorf("Inspect read rows: %+v", st)
			}
			checks := 0
			for _, r := range srv.Requests() {
				if strings.Contains(r.SQL, " FROM [cdc].") {
					t.Errorf("Inspect ran a change read: %s", r.SQL)
				}
				if strings.Contains(r.SQL, "HAS_PERMS_BY_NAME") {
					checks++
				}
			}
			if checks != 1 {
				t.Errorf("HAS_PERMS_BY_NAME asked %d times, want once", checks)
			}
			// The stream's change read agrees with the check.
			to, err := src.MaxLSN(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := src.ReadChanges(ctx, in.Instance, in.Instance.StartLSN, to)
			if err == nil {
				rr.Release()
			}
			if refused := errors.Is(err, sqlserver.ErrChangeTableDenied); refused != (tc.wantMissing != "") || (!refused && err != nil) {
				t.Errorf("ReadChanges: %v; Inspect said %v", err, in.ChangesErr)
			}
		})
	}
}
