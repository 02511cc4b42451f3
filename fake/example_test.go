package fake_test

import (
	"context"
	"fmt"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// Example builds a database with one table, enables CDC, commits, and reads
// a key range as a snapshot partition would.
func Example() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "customers",
		Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"},
			{Name: "name", Type: "varchar(20)", Collation: "Latin1_General_CI_AS", Nullable: true},
		},
		Key: []string{"id"},
	}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.EnableCDC("dbo", "customers", "dbo_customers"); err != nil {
		fmt.Println(err)
		return
	}
	tx := db.Begin()
	for i, name := range []string{"ann", "bob", "cid", "dee"} {
		if err := tx.Insert("dbo", "customers", fake.Row{int64(i + 1), name}); err != nil {
			fmt.Println(err)
			return
		}
	}
	commit, err := tx.Commit()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("committed at", commit)

	ci, err := db.CaptureInstance(ctx, "DBO_CUSTOMERS") // names match ignoring case
	if err != nil {
		fmt.Println(err)
		return
	}
	maxLSN, _ := db.MaxLSN(ctx)
	fmt.Println("max LSN", maxLSN)

	rr, err := db.ReadRange(ctx, ci, keyrange.Range{Lower: keyrange.Tuple{int64(2)}, Upper: keyrange.Tuple{int64(4)}}, source.ReadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			fmt.Println(rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i))
		}
	}
	if err := rr.Err(); err != nil {
		fmt.Println(err)
	}
	st, _ := db.Stats("dbo", "customers")
	fmt.Println("rows examined", st.RowsExamined)
	// Output:
	// committed at 0x0000002A00000F380001
	// max LSN 0x0000002A00000F380001
	// 2 bob
	// 3 cid
	// rows examined 2
}

// ExampleDB_CreateTable sets up the table a bootstrap test needs in one
// call: rows written before CDC was enabled (no change table holds them,
// only a snapshot reads them), then a capture instance. A definition with a
// row that does not fit is refused whole: no table, no commit, no instance.
func ExampleDB_CreateTable() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	err := db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "orders", Key: []string{"id"},
		Columns:         []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}},
		Rows:            []fake.Row{{int64(2), "cake"}, {int64(1), "tea"}},
		CaptureInstance: "dbo_orders",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, _ := db.Rows("dbo", "orders")
	fmt.Println("rows:", rows)
	ci, err := db.CaptureInstance(ctx, "dbo_orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("capture instance", ci.Name, "starts at", ci.StartLSN, "after the load")

	err = db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "items", Key: []string{"id"},
		Columns:         []fake.ColumnDef{{Name: "id", Type: "bigint"}},
		Rows:            []fake.Row{{int64(1)}, {int64(2)}, {int64(1)}},
		CaptureInstance: "dbo_items",
	})
	fmt.Println(err)
	_, err = db.Table("dbo", "items")
	fmt.Println(err)
	// Output:
	// rows: [[1 tea] [2 cake]]
	// capture instance dbo_orders starts at 0x0000002A00000F380004 after the load
	// fake: create table dbo.items: Rows[2]: key (1) violates the primary key: it equals the key (1) of Rows[0] under (id bigint)
	// fake: table dbo.items does not exist
}
