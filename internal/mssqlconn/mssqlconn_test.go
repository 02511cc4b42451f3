package mssqlconn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/azuread"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMaxConns: with maxOpen set, the pool opens no more than that many
// connections: the next caller waits (here until its deadline), and gets
// one as soon as another is released. Zero leaves the pool unlimited.
func TestMaxConns(t *testing.T) {
	ctx := context.Background()
	srv, err := tdsfake.Start(ctx, fake.New(fake.Options{}), tdsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, db, err := open(ctx, srv.DSN("cdcsnap"), "", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Stats().MaxOpenConnections; n != 3 {
		t.Fatalf("MaxOpenConnections %d, want 3", n)
	}
	var held []interface{ Close() error }
	for range 3 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := db.Conn(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fourth connection: %v, want to wait until the deadline", err)
	}
	cancel()
	held[0].Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("after one was released: %v", err)
	}
	c.Close()
	for _, h := range held[1:] {
		h.Close()
	}

	_, unlimited, err := open(ctx, srv.DSN("cdcsnap"), "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlimited.Close()
	if n := unlimited.Stats().MaxOpenConnections; n != 0 {
		t.Fatalf("MaxOpenConnections %d with no limit, want 0", n)
	}
	if _, _, err := open(ctx, srv.DSN("cdcsnap"), "", -1, nil); err == nil {
		t.Fatal("a negative limit was accepted")
	}
}

// TestEntraIDUsesTheAzureadDriver: a DSN with a fedauth parameter is
// opened with go-mssqldb's azuread driver, whose own validation answers
// (no network is reached: the DSN is refused before any login); without
// fedauth the plain driver connects as before (TestMaxConns).
func TestEntraIDUsesTheAzureadDriver(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlserver://someone:s3cret-pw@127.0.0.1:1?database=sales&fedauth=ActiveDirectoryPassword"
	_, _, err := Open(ctx, dsn, "", nil)
	if err == nil || !strings.Contains(err.Error(), "applicationclientid parameter is required for ActiveDirectoryPassword") {
		t.Fatalf("got %v, want azuread's refusal of ActiveDirectoryPassword without applicationclientid", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("the error shows the password: %v", err)
	}
	db, err := openDB("sqlserver://127.0.0.1:1?database=sales&fedauth=ActiveDirectoryDefault")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, ok := db.Driver().(*azuread.Driver); !ok {
		t.Fatalf("fedauth=ActiveDirectoryDefault opened with %T, want *azuread.Driver", db.Driver())
	}
	plain, err := openDB("sqlserver://u:p@127.0.0.1:1?database=sales")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.Driver().(*azuread.Driver); ok {
		t.Fatal("a DSN without fedauth opened with the azuread driver")
	}
}
