package reconcile_test

import (
	"context"
	"fmt"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// Example snapshots a table into a memory sink, lets the target drift (a
// row deleted at the source whose delete the target never received), and
// reconciles: one tile differs, narrowed down to the one key.
func Example() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	_ = db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true}},
		Key:     []string{"id"}})
	_, _ = db.EnableCDC("dbo", "orders", "dbo_orders")
	var rows []fake.Row
	for i := range 100 {
		rows = append(rows, fake.Row{int64(i), fmt.Sprint("note ", i)})
	}
	_, _ = db.Load("dbo", "orders", rows...)

	dst := fake.NewMemSink()
	defer dst.Close()
	if _, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_orders"}); err != nil {
		fmt.Println(err)
		return
	}
	rep, err := reconcile.Run(ctx, db, dst, reconcile.Options{CaptureInstance: "dbo_orders", Tiles: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("converged:", rep.Clean())

	// The source loses row 42; the target is not told.
	tx := db.Begin()
	_ = tx.Delete("dbo", "orders", []any{int64(42)})
	_, _ = tx.Commit()

	rep, err = reconcile.Run(ctx, db, dst, reconcile.Options{CaptureInstance: "dbo_orders", Tiles: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range rep.DifferingTiles() {
		fmt.Printf("%s: %d source rows, %d target rows\n", t.Range, t.SourceRows, t.TargetRows)
	}
	for _, d := range rep.Differences {
		fmt.Println(d)
	}
	// Output:
	// converged: true
	// range 1 [[25], [51]): 25 source rows, 26 target rows
	// tile 1: key [42] extra in the target (["v42" "vnote 42"])
}

// ExampleRunAll verifies two capture instances of one database, each
// snapshotted into its own Delta table (read tile by tile through the
// files' key statistics), and a third that does not exist: its error is
// its own result, and the others are still verified.
func ExampleRunAll() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	var instances []reconcile.Instance
	for _, name := range []string{"orders", "items"} {
		_ = db.CreateTable(fake.TableDef{Schema: "dbo", Name: name,
			Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true}},
			Key:     []string{"id"}})
		_, _ = db.EnableCDC("dbo", name, "dbo_"+name)
		var rows []fake.Row
		for i := range 1000 {
			rows = append(rows, fake.Row{int64(i), fmt.Sprint(name, " ", i)})
		}
		_, _ = db.Load("dbo", name, rows...)
		dst, err := delta.Open(ctx, "mem://", delta.Options{})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer dst.Close()
		if _, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_" + name, Partitions: 4, MinPartitionRows: 250}); err != nil {
			fmt.Println(err)
			return
		}
		instances = append(instances, reconcile.Instance{Source: db, Target: dst, Options: reconcile.Options{CaptureInstance: "dbo_" + name, Tiles: 8}})
	}
	instances = append(instances, reconcile.Instance{Source: db, Target: instances[0].Target, Options: reconcile.Options{CaptureInstance: "dbo_gone"}})

	results, err := reconcile.RunAll(ctx, instances, reconcile.DatabaseOptions{Instances: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		if r.Err != nil {
			fmt.Printf("%s: failed\n", r.CaptureInstance)
			continue
		}
		fmt.Printf("%s: %d tiles, clean %v\n", r.CaptureInstance, len(r.Report.Tiles), r.Clean())
	}
	// Output:
	// dbo_orders: 8 tiles, clean true
	// dbo_items: 8 tiles, clean true
	// dbo_gone: failed
}
