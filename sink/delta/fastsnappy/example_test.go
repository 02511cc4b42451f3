package fastsnappy_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/fastsnappy"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// Register once at the start of main, before anything reads or writes
// Parquet; every sink/delta write after it uses the fast encoder.
func ExampleRegister() {
	if err := fastsnappy.Register(); err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}},
		Rows:    []fake.Row{{int64(1), "tea"}, {int64(2), "cake"}}, CaptureInstance: "dbo_orders"}); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fastsnappy-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	table, err := delta.Open(ctx, filepath.Join(dir, "orders"), delta.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer table.Close()
	res, err := snapshot.Take(ctx, db, table, snapshot.Options{CaptureInstance: "dbo_orders"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Rows, "rows written with the fast Snappy encoder")
	// Output: 2 rows written with the fast Snappy encoder
}
