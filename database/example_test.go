package database_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
)

// exampleDB is an in-memory CDC database with three captured tables of
// 3, 1 and 0 rows.
func exampleDB() *fake.DB {
	db := fake.New(fake.Options{})
	for _, tb := range []struct {
		schema, name string
		rows         int
	}{{"dbo", "orders", 3}, {"dbo", "customers", 1}, {"sales", "returns", 0}} {
		var rows []fake.Row
		for i := range tb.rows {
			rows = append(rows, fake.Row{int64(i + 1), fmt.Sprint("row ", i+1)})
		}
		err := db.CreateTable(fake.TableDef{Schema: tb.schema, Name: tb.name, Key: []string{"id"},
			Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)"}},
			Rows:    rows, CaptureInstance: tb.schema + "_" + tb.name})
		if err != nil {
			log.Fatal(err)
		}
	}
	return db
}

// Example bootstraps every capture instance of a database, each into its
// own target named by the template, largest table first, and runs again:
// the rerun finds every snapshot and reads nothing. The zero Selection
// takes every instance the source lists (database.Lister: the fake and
// source/sqlserver both list); Selection.Names, Schemas or Patterns would
// narrow it. With Delta tables, Open would call blobstore.Open(ctx,
// target, delta.Options{}) and the template would be, say,
// "s3://lake/bronze/{schema}/{table}".
func Example() {
	db := exampleDB()
	var (
		mu      sync.Mutex
		targets = map[string]*fake.MemSink{}
	)
	opts := database.Options{
		Target: "mem://bronze/{schema}/{table}",
		Open: func(ctx context.Context, target string) (sink.Sink, error) {
			mu.Lock()
			defer mu.Unlock()
			if targets[target] == nil {
				targets[target] = fake.NewMemSink()
			}
			return noClose{targets[target]}, nil
		},
		Tables:      2,
		Connections: 4,
	}
	for run := 1; run <= 2; run++ {
		results, err := database.Bootstrap(context.Background(), db, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range results {
			fmt.Printf("run %d: %s -> %s: %d rows, existing %v\n", run, r.CaptureInstance, r.Target, r.Snapshot.Rows, r.Snapshot.Existing)
		}
	}
	for _, s := range targets {
		s.Close()
	}
	// Output:
	// run 1: dbo_orders -> mem://bronze/dbo/orders: 3 rows, existing false
	// run 1: dbo_customers -> mem://bronze/dbo/customers: 1 rows, existing false
	// run 1: sales_returns -> mem://bronze/sales/returns: 0 rows, existing false
	// run 2: dbo_orders -> mem://bronze/dbo/orders: 0 rows, existing true
	// run 2: dbo_customers -> mem://bronze/dbo/customers: 0 rows, existing true
	// run 2: sales_returns -> mem://bronze/sales/returns: 0 rows, existing true
}

// noClose keeps a memory sink open across runs, as a table on disk stays:
// Bootstrap closes the sinks it opened when they implement io.Closer.
type noClose struct{ *fake.MemSink }

func (noClose) Close() error { return nil }
