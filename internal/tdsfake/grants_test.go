package tdsfake_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestLeastPrivilegeGrantsOverTheWire: a user granted SELECT on the change
// table alone (what README's recipe once said) is refused, because the
// change read joins cdc.lsn_time_mapping for commit times: the error
// wraps ErrChangeTableDenied, names both tables and the user the grant
// goes to, and warns that a grant on schema cdc passes CDC's own checks
// by. Granted both tables, the same user reads every change.
func TestLeastPrivilegeGrantsOverTheWire(t *testing.T) {
	ctx := context.Background()
	db := bigTable(t, 10)
	lsns := commitInserts(t, db, 3)
	read := func(grants []string) (int, error) {
		src, _, _ := serve(t, db, tdsfake.Options{CDCGrants: grants}, sqlserver.Options{})
		ci, err := src.CaptureInstance(ctx, "dbo_big")
		if err != nil {
			t.Fatal(err)
		}
		rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, lsns[2])
		if err != nil {
			return 0, err
		}
		defer rr.Release()
		n := 0
		for rr.Next() {
			n += int(rr.RecordBatch().NumRows())
		}
		return n, rr.Err()
	}
	_, err := read([]string{"dbo_big_CT"})
	if !errors.Is(err, sqlserver.ErrChangeTableDenied) {
		t.Fatalf("the change table granted alone: %v, want ErrChangeTableDenied", err)
	}
	for _, want := range []string{"GRANT SELECT ON cdc.[dbo_big_CT] TO <user>", "GRANT SELECT ON cdc.lsn_time_mapping TO <user>", "SCHEMA::cdc", "gating role"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	if n, err := read([]string{"dbo_big_CT", "lsn_time_mapping"}); err != nil || n != 3 {
		t.Fatalf("both tables granted: %d changes, %v; want 3", n, err)
	}
}

