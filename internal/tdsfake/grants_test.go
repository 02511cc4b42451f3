package tdsfake_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
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
	read := func(grants []string) (int64, error) {
		src, _, _ := serve(t, db, tdsfake.Options{CDCGrants: grants}, sqlserver.Options{})
		ci, err := src.CaptureInstance(ctx, "dbo_big")
		if err != nil {
			t.Fatal(err)
		}
		rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, lsns[2])
		if err != nil {
			return 0, err
		}
		return count(rr)
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

// TestREADMEGrantsOverTheWire: the tables of schema cdc that README's
// least-privilege recipe grants (its grantcheck block; FACTS.md F11) are
// what the default source's change read needs, no more: granted exactly
// those, one by one, it reads every change from the change table and
// HAS_PERMS_BY_NAME says so before (F86); without any one of them both
// refuse. The recipe never grants the schema, which would pass CDC's
// gating role by (README says why).
func TestREADMEGrantsOverTheWire(t *testing.T) {
	block := testenv.READMEBlock(t, "grantcheck")
	if strings.Contains(block, "SCHEMA::cdc") {
		t.Errorf("README's recipe grants schema cdc:\n%s", block)
	}
	var grants []string
	for _, m := range regexp.MustCompile(`(?m)^GRANT SELECT ON cdc\.(\w+) TO cdcsnap_reader;$`).FindAllStringSubmatch(block, -1) {
		// README's instance is dbo_Orders; this test's is dbo_big.
		grants = append(grants, strings.Replace(m[1], "dbo_Orders_CT", "dbo_big_CT", 1))
	}
	if want := []string{"dbo_big_CT", "lsn_time_mapping"}; !slices.Equal(grants, want) {
		t.Fatalf("README's recipe grants SELECT on cdc tables %q, want %q:\n%s", grants, want, block)
	}
	ctx := context.Background()
	db := bigTable(t, 10)
	lsns := commitInserts(t, db, 3)
	for drop := -1; drop < len(grants); drop++ {
		granted := slices.Clone(grants)
		name := "README's grants"
		if drop >= 0 {
			granted = slices.Delete(granted, drop, drop+1)
			name = "without " + grants[drop]
		}
		src, _, _ := serve(t, db, tdsfake.Options{CDCGrants: granted}, sqlserver.Options{})
		ci, err := src.CaptureInstance(ctx, "dbo_big")
		if err != nil {
			t.Fatal(err)
		}
		denied, err := src.ChangeAccess(ctx, ci)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		rr, readErr := src.ReadChanges(ctx, ci, ci.StartLSN, lsns[2])
		if readErr == nil {
			n, readErr = count(rr)
		}
		switch {
		case drop < 0 && (denied != nil || readErr != nil || n != 3):
			t.Errorf("%s: ChangeAccess %v, read %d changes, %v; want 3 changes and no refusal", name, denied, n, readErr)
		case drop >= 0 && (!errors.Is(denied, sqlserver.ErrChangeTableDenied) || !errors.Is(readErr, sqlserver.ErrChangeTableDenied)):
			t.Errorf("%s: ChangeAccess %v, read %v; want both to wrap ErrChangeTableDenied", name, denied, readErr)
		}
	}
}
