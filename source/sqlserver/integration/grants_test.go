package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// readmeGrants is README's least-privilege recipe (the grantcheck block)
// for this database: its names replaced by setup.sql's (dbo.snap_readme,
// gated by cdc_readme) and a login of this run, every statement as
// written. Each name must occur, so a README that changes them fails here
// rather than testing something else.
func readmeGrants(t *testing.T, database, login, password string) string {
	t.Helper()
	block := testenv.READMEBlock(t, "grantcheck")
	_, sqlText, ok := strings.Cut(block, "```sql\n")
	sqlText, _, ok2 := strings.Cut(sqlText, "```")
	if !ok || !ok2 {
		t.Fatalf("README.md's grantcheck block holds no ```sql fence:\n%s", block)
	}
	for _, r := range []struct{ from, to string }{
		{"cdcsnap_reader", login},
		{"<a strong password>", password},
		{"Sales", database},
		{"dbo.Orders", "dbo.snap_readme"},
		{"cdc_reader", "cdc_readme"},
		{"dbo_Orders_CT", "dbo_snap_readme_CT"},
	} {
		re := regexp.MustCompile(`\b` + regexp.QuoteMeta(r.from) + `\b`)
		if strings.HasPrefix(r.from, "<") {
			re = regexp.MustCompile(regexp.QuoteMeta(r.from))
		}
		if !re.MatchString(sqlText) {
			t.Fatalf("README.md's grantcheck block no longer names %s:\n%s", r.from, sqlText)
		}
		sqlText = re.ReplaceAllLiteralString(sqlText, r.to)
	}
	return sqlText
}

// TestREADMEGrants runs README's least-privilege recipe as written (step 3
// of "Against your SQL Server": SELECT on the table, the gating role,
// SELECT on the change table and on cdc.lsn_time_mapping, to the database
// user) and holds the login it makes to what README promises: the plan's
// check (HAS_PERMS_BY_NAME, FACTS.md F86) says it may read the changes, a
// snapshot reads the table, and its changes come from the change table
// (with __$command_id), not the change function. Without the grant on
// cdc.lsn_time_mapping (what README's recipe once said) both the check
// and the change read refuse, naming both grants (F11).
func TestREADMEGrants(t *testing.T) {
	admin, _ := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	var database string
	if err := admin.QueryRowContext(c, "SELECT DB_NAME()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	login := "cdcsnap_readme_" + hex.EncodeToString(suffix)
	password := "Rm-" + hex.EncodeToString(suffix) + "-Xy9!"
	recipe := readmeGrants(t, database, login, password)
	// Dropped after the reader's connections close (cleanups run last
	// registered first, and openWith registers its Close later).
	t.Cleanup(func() {
		c := context.Background()
		if _, err := admin.ExecContext(c, "DROP USER IF EXISTS "+login); err != nil {
			t.Errorf("dropping user %s: %v", login, err)
		}
		if _, err := admin.ExecContext(c, "DROP LOGIN "+login); err != nil {
			t.Errorf("dropping login %s: %v", login, err)
		}
	})
	if _, err := admin.ExecContext(c, recipe); err != nil {
		t.Fatalf("README's recipe:\n%s\n%v", strings.ReplaceAll(recipe, password, "…"), err)
	}
	_, s, logs := openWith(t, "CDCSNAP_MSSQL_DSN", func(u *url.URL) { u.User = url.UserPassword(login, password) })

	ci, err := s.CaptureInstance(c, "dbo_snap_readme")
	if err != nil {
		t.Fatalf("the gated instance, as README's login: %v", err)
	}
	if denied, err := s.ChangeAccess(c, ci); denied != nil || err != nil {
		t.Errorf("ChangeAccess with README's grants: %v, %v; want neither", denied, err)
	}
	in, err := snapshot.Inspect(c, s, fake.NewMemSink(), snapshot.Options{CaptureInstance: ci.Name})
	if err != nil || in.ChangesErr != nil || !in.ChangesChecked || in.Plan == nil {
		t.Fatalf("Inspect with README's grants: %+v, %v; want a plan and the changes checked and granted", in, err)
	}
	res, err := snapshot.Take(c, s, fake.NewMemSink(), snapshot.Options{CaptureInstance: ci.Name})
	if err != nil || res.Rows < 100 {
		t.Fatalf("a snapshot with README's grants: %+v, %v", res, err)
	}

	from, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	id := freshID(t, c, admin, "dbo.snap_readme")
	if _, err := admin.ExecContext(c, "INSERT INTO dbo.snap_readme (id, v) VALUES (@p1, 1)", id); err != nil {
		t.Fatal(err)
	}
	changes := waitForChanges(t, c, s, ci, from, 1)
	if changes[0].op != 2 || changes[0].id != id || !changes[0].commandID {
		t.Errorf("changes %+v: want the insert of %d from the change table (with its command id)", changes, id)
	}
	if strings.Contains(logs.String(), "may not read") {
		t.Errorf("README's grants were refused somewhere:\n%s", logs)
	}

	// The recipe without its last grant is the one README once gave.
	if _, err := admin.ExecContext(c, "REVOKE SELECT ON cdc.lsn_time_mapping FROM "+login); err != nil {
		t.Fatal(err)
	}
	const both = "GRANT SELECT ON cdc.[dbo_snap_readme_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>"
	denied, err := s.ChangeAccess(c, ci)
	if err != nil || !errors.Is(denied, sqlserver.ErrChangeTableDenied) || !strings.Contains(denied.Error(), "may not SELECT from cdc.lsn_time_mapping (") || !strings.Contains(denied.Error(), both) {
		t.Errorf("ChangeAccess without the grant on cdc.lsn_time_mapping: %v, %v; want ErrChangeTableDenied naming it and both grants", denied, err)
	}
	to, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	if rr, err := s.ReadChanges(c, ci, to, to); err == nil {
		rr.Release()
		t.Error("changes read without SELECT on cdc.lsn_time_mapping")
	} else if !errors.Is(err, sqlserver.ErrChangeTableDenied) || !strings.Contains(err.Error(), both) {
		t.Errorf("a change read without SELECT on cdc.lsn_time_mapping: %v; want ErrChangeTableDenied naming both grants", err)
	}
}
