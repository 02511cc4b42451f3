package snapshot_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// ExampleBackfill bootstraps a stream from a chunked snapshot: the stream
// starts after S at once, the chunks are read a wave at a time next to it,
// and a crash between waves would resume at the first uncommitted chunk.
func ExampleBackfill() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	_ = db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true}},
		Key:     []string{"id"}})
	_, _ = db.EnableCDC("dbo", "orders", "dbo_orders")
	var rows []fake.Row
	for i := range 10 {
		rows = append(rows, fake.Row{int64(i * i), fmt.Sprint("note ", i)}) // sparse keys
	}
	_, _ = db.Load("dbo", "orders", rows...)

	dst := fake.NewMemSink()
	defer dst.Close()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_orders", ChunkRows: 4, WaveChunks: 2, MaxWaves: 1}
	from, open, err := snapshot.BootstrapBackfill(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("S %s, %d chunks planned; the stream starts at %s\n", open.LSN, open.Chunks, from)

	// One wave, then a change the stream carries, then the rest.
	res, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("after one wave: %d of %d chunks, complete %v\n", res.Committed, res.Chunks, res.Complete)
	tx := db.Begin()
	_ = tx.Delete("dbo", "orders", []any{int64(81)})
	_, _ = tx.Commit()

	opts.MaxWaves = 0
	res, err = snapshot.Backfill(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("resumed: %d of %d chunks, complete %v, S unchanged %v\n", res.Committed, res.Chunks, res.Complete, res.LSN == open.LSN)

	app := snapshot.AppendFunc(func(ctx context.Context, ci string, batch int64, rr array.RecordReader) (int64, error) {
		c, err := dst.AppendChanges(ctx, ci, batch, rr)
		return c.Version, err
	})
	poll, err := snapshot.Poll(ctx, db, app, "dbo_orders", from, snapshot.PollOptions{BatchID: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("change rows streamed:", poll.Rows)
	// Output:
	// S 0x0000002A00000F380001, 3 chunks planned; the stream starts at 0x0000002A00000F380002
	// after one wave: 2 of 3 chunks, complete false
	// resumed: 3 of 3 chunks, complete true, S unchanged true
	// change rows streamed: 1
}
