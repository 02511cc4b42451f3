package cdcsnap_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Example bootstraps a CDC stream: it takes the snapshot (snapshot.Bootstrap
// returns the first LSN the stream reads), streams the changes committed
// after it into the same sink, and checks that the sink's latest image per
// key equals the source table. The source here is the in-memory fake CDC
// database and the sink a memory sink; source/sqlserver and sink/delta take
// their places in production.
func Example() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"}, Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)", Nullable: true},
	}}); err != nil {
		fmt.Println(err)
		return
	}
	// Rows written before CDC was enabled: no change stream will ever
	// carry them, only the snapshot.
	if _, err := db.Load("dbo", "orders", fake.Row{int64(1), "tea"}, fake.Row{int64(2), "cake"}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.EnableCDC("dbo", "orders", "dbo_orders"); err != nil {
		fmt.Println(err)
		return
	}
	dst := fake.NewMemSink()
	defer dst.Close()

	from, res, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_orders"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("snapshot: %d rows at LSN %s; the stream reads from %s\n", res.Rows, res.LSN, from)

	// Changes after the snapshot, read by the stream from `from` on.
	tx := db.Begin()
	if err := tx.Update("dbo", "orders", []any{int64(1)}, fake.Row{int64(1), "green tea"}); err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Delete("dbo", "orders", []any{int64(2)}); err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Insert("dbo", "orders", fake.Row{int64(3), "scone"}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	to, err := db.MaxLSN(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	changes, err := snapshot.Changes(ctx, db, "dbo_orders", from, to, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	commit, err := dst.AppendChanges(ctx, "dbo_orders", 1, changes)
	changes.Release()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stream: %d change rows up to %s\n", commit.Rows, to)

	// The latest image per key of snapshot + changes is the source table.
	ci, err := db.CaptureInstance(ctx, "dbo_orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	key, err := ci.KeyColumns()
	if err != nil {
		fmt.Println(err)
		return
	}
	got := snapshot.NewImage(ci.Columns, key)
	for _, rec := range dst.Records() {
		err := got.AddBronze(rec)
		rec.Release()
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	want, err := snapshot.SourceImage(ctx, db, ci)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("converged: %v (%d keys)\n", len(want.Diff(got, 0)) == 0, got.Len())
	// Output:
	// snapshot: 2 rows at LSN 0x0000002A00000F380003; the stream reads from 0x0000002A00000F380004
	// stream: 4 change rows up to 0x0000002A00000F380004
	// converged: true (2 keys)
}
