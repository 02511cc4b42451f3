package tdsfake_test

import (
	"context"
	"database/sql"
	"testing"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source/sourcetest"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts db over TDS and returns source/sqlserver reading it through
// go-mssqldb, and the server.
func serve(t testing.TB, db *fake.DB, opts tdsfake.Options, sopts sqlserver.Options) (*sqlserver.Source, *tdsfake.Server, *sql.DB) {
	t.Helper()
	srv, err := tdsfake.Start(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sdb, err := sqlserver.Open(srv.DSN("cdcsnap"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	src, err := sqlserver.New(sdb, sopts)
	if err != nil {
		t.Fatal(err)
	}
	return src, srv, sdb
}

// TestSourceConformanceOverTheWire runs the source conformance suite on
// source/sqlserver reading the fake through go-mssqldb and TDS.
func TestSourceConformanceOverTheWire(t *testing.T) {
	db := fake.New(fake.Options{})
	src, _, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	sourcetest.Run(t, sourcetest.FakeHarness(db, src))
}
