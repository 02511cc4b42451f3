package sqlserver

import (
	"strings"
	"testing"

	"github.com/microsoft/go-mssqldb/msdsn"
)

func TestParseQuotedList(t *testing.T) {
	got, err := parseQuotedList("[id], [a]]b] , [c,d],plain , [ ü ]")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"id", "a]b", "c,d", "plain", " ü "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
	for _, bad := range []string{"[a", "[a],", "[a] [b]", "a]b", "[]"} {
		if _, err := parseQuotedList(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got, err := parseQuotedList("  "); err != nil || got != nil {
		t.Errorf("blank list: %v %v", got, err)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{"sqlserver://sa:S3cret!pass@localhost:1433?database=cdc", "S3cret!pass"},
		{"sqlserver://sa:p%40ss%3Bword@localhost?database=cdc&password=alsoSecret1", "alsoSecret1"},
		{"server=localhost;user id=sa;password=Hunter2xyz;database=cdc", "Hunter2xyz"},
		{"server=localhost;user id=sa;Password=\"quo;ted\"\"pw\";database=cdc", "quo;ted"},
		{"odbc:server=localhost;uid=sa;pwd={br;ace}}pw};database=cdc", "br;ace"},
		{"server=h;ACCESS TOKEN=eyJhbGciOi;database=d", "eyJhbGciOi"},
	} {
		got := RedactDSN(tc.in)
		if strings.Contains(got, tc.secret) || !strings.Contains(got, "xxxxx") {
			t.Errorf("RedactDSN(%q) = %q still holds %q", tc.in, got, tc.secret)
		}
		if cfg, err := msdsn.Parse(tc.in); err == nil && cfg.Password != "" && strings.Contains(got, cfg.Password) {
			t.Errorf("RedactDSN(%q) = %q holds the password go-mssqldb reads", tc.in, got)
		}
		if !strings.Contains(got, "localhost") && !strings.Contains(got, "server=h") {
			t.Errorf("RedactDSN(%q) = %q lost the host", tc.in, got)
		}
	}
	if got := RedactDSN("odbc:pwd={unterminated"); strings.Contains(got, "unterminated") {
		t.Errorf("unparseable DSN leaked: %q", got)
	}
}

func TestOpenKeepsPasswordsOutOfErrors(t *testing.T) {
	db, err := Open("server=localhost;password=TopSecret99;port=notaport")
	if err == nil {
		db.Close()
		t.Skip("go-mssqldb accepted the DSN at Open")
	}
	if strings.Contains(err.Error(), "TopSecret99") {
		t.Fatalf("error leaks the password: %v", err)
	}
}
