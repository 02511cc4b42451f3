package sqlserver_test

import (
	"context"
	"fmt"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// Open a database through go-mssqldb and list the capture instances the
// login can read. Here the server is the project's TDS fake on loopback;
// give Open your own SQL Server's DSN instead.
func Example() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "orders", CaptureInstance: "dbo_orders", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "note", Type: "nvarchar(20)", Nullable: true}},
		Rows:    []fake.Row{{int64(1), "first"}},
	}); err != nil {
		fmt.Println(err)
		return
	}
	srv, err := tdsfake.Start(ctx, db, tdsfake.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	sdb, err := sqlserver.Open(srv.DSN("cdcsnap"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sdb.Close()
	src, err := sqlserver.New(sdb, sqlserver.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cis, err := src.ListCaptureInstances(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ci := range cis {
		fmt.Printf("%s: [%s].[%s] keyed by %v\n", ci.Name, ci.SourceSchema, ci.SourceTable, ci.Key)
	}
	// Output:
	// dbo_orders: [dbo].[orders] keyed by [id]
}

// A DSN with its password replaced, for logs and error messages.
func ExampleRedactDSN() {
	fmt.Println(sqlserver.RedactDSN("sqlserver://cdc:S3cret@db:1433?database=shop"))
	// Output:
	// sqlserver://cdc:xxxxx@db:1433?database=shop
}
