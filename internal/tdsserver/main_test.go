package tdsserver

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"testing"

	_ "github.com/microsoft/go-mssqldb" // registers the "sqlserver" driver
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testUser and testPassword log in; the password has characters a URL
// must escape.
const (
	testUser     = "cdcsnap"
	testPassword = "p@ss:w/rd é?&"
)

// startServer starts a server for t, closed when t ends.
func startServer(t testing.TB, h Handler, edit ...func(*Options)) *Server {
	t.Helper()
	o := Options{User: testUser, Password: testPassword}
	if testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, e := range edit {
		e(&o)
	}
	s, err := Start(context.Background(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// openDB opens a database/sql pool on s through go-mssqldb.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
