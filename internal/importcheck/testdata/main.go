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
	ctx := context.Background()
	db := fake.New(fake.Options{}) // an in-memory CDC database; sqlserver.New(sqlDB, ...) for a real one
	must(db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}}}))
	_, err := db.Load("dbo", "orders", fake.Row{int64(1), "tea"}, fake.Row{int64(2), "cake"})
	must(err)
	_, err = db.EnableCDC("dbo", "orders", "dbo_orders")
	must(err)
	table, err := delta.Open(ctx, "bronze/orders", delta.Options{}) // or s3://bucket/bronze/orders
	must(err)
	defer table.Close()
	from, res, err := snapshot.Bootstrap(ctx, db, table, snapshot.Options{CaptureInstance: "dbo_orders"})
	must(err)
	fmt.Printf("snapshot: %d rows at LSN %s; stream from %s\n", res.Rows, res.LSN, from)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
