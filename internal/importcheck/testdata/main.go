package main

import (
	"context"
	"fmt"
	"log"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func main() {
	db := fake.New(fake.Options{}) // an in-memory CDC database; sqlserver.New(sqlDB, ...) for a real one
	must(db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}},
		Rows:    []fake.Row{{int64(1), "tea"}, {int64(2), "cake"}}, CaptureInstance: "dbo_orders"}))
	table, err := delta.Open(context.Background(), "bronze/orders", delta.Options{}) // blobstore.Open for s3://bucket/bronze/orders
	must(err)
	defer table.Close()
	from, res, err := snapshot.Bootstrap(context.Background(), db, table, snapshot.Options{CaptureInstance: "dbo_orders"})
	must(err)
	fmt.Printf("snapshot: %d rows at LSN %s; stream from %s\n", res.Rows, res.LSN, from)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
