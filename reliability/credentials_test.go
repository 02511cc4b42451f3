package reliability_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// secretForms are the spellings of a password that must never appear.
func secretForms(pw string) []string {
	forms := []string{pw, url.QueryEscape(pw), url.PathEscape(pw), strings.ReplaceAll(pw, "}", "}}")}
	var out []string
	for _, f := range forms {
		if len(f) >= 4 {
			out = append(out, f)
		}
	}
	return out
}

func leaks(s string, pw string) bool {
	for _, f := range secretForms(pw) {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// TestCredentialsNeverLeak: DSNs with a password in the URL, ADO and ODBC
// forms (and malformed ones) are redacted by RedactDSN, and opening them,
// failing to connect, and a whole Take over the failing source produce
// errors and logs (slog, debug level) that never hold the password.
func TestCredentialsNeverLeak(t *testing.T) {
	const pw = "Zq9!s3cr3T-pw"
	const braced = "Br4c;ed}pw'@x"
	dsns := map[string]string{
		"url":                    "sqlserver://sa:" + url.QueryEscape(pw) + "@127.0.0.1:1?database=shop&dial+timeout=2&connection+timeout=2",
		"url, password in query": "sqlserver://127.0.0.1:1?user+id=sa&password=" + url.QueryEscape(pw) + "&dial+timeout=2",
		"ado":                    "server=127.0.0.1;port=1;user id=sa;password=" + pw + ";database=shop;dial timeout=2;connection timeout=2",
		"ado, Pwd":               "Server=127.0.0.1,1;User ID=sa;Pwd=" + pw + ";dial timeout=2",
		"odbc":                   "odbc:server=127.0.0.1;port=1;uid=sa;pwd={" + strings.ReplaceAll(braced, "}", "}}") + "};database=shop;dial timeout=2",
		"url, bad port":          "sqlserver://sa:" + url.QueryEscape(pw) + "@127.0.0.1:notaport?database=shop",
		"ado, unterminated":      "server=127.0.0.1;user id=sa;password=" + pw + ";database={shop",
		"odbc, unterminated":     "odbc:server=127.0.0.1;uid=sa;pwd={" + pw,
	}
	var tried int
	for name, dsn := range dsns {
		secret := pw
		if strings.Contains(dsn, "Br4c") {
			secret = braced
		}
		tried++
		if red := sqlserver.RedactDSN(dsn); leaks(red, secret) {
			t.Errorf("%s: RedactDSN(%q) = %q keeps the password", name, dsn, red)
		}
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		db, err := sqlserver.Open(dsn)
		if err != nil {
			if leaks(err.Error(), secret) {
				t.Errorf("%s: Open's error holds the password: %v", name, err)
			}
			continue
		}
		src, err := sqlserver.New(db, sqlserver.Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = src.MaxLSN(ctx)
		if err == nil {
			t.Errorf("%s: MaxLSN against a closed port succeeded", name)
		} else if leaks(err.Error(), secret) {
			t.Errorf("%s: MaxLSN's error holds the password: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
		ms := fake.NewMemSink()
		_, err = snapshot.Take(ctx, src, ms, snapshot.Options{CaptureInstance: "dbo_orders", RunOptions: snapshot.RunOptions{Logger: logger}})
		if err == nil {
			t.Errorf("%s: Take against a closed port succeeded", name)
		} else if leaks(err.Error(), secret) {
			t.Errorf("%s: Take's error holds the password: %v", name, err)
		}
		ms.Close()
		cancel()
		db.Close()
		if leaks(logs.String(), secret) {
			t.Errorf("%s: the log holds the password:\n%s", name, logs.String())
		}
	}
	t.Logf("credentials: %d DSNs (URL, ADO, ODBC, malformed) redacted and kept out of errors and logs", tried)
}
