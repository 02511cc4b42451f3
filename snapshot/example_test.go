package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// exampleDB is an in-memory CDC database with dbo.orders (five rows) and
// its capture instance dbo_orders.
func exampleDB() (*fake.DB, error) {
	db := fake.New(fake.Options{})
	err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"}, Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"},
		{Name: "item", Type: "nvarchar(40)", Nullable: true},
	}})
	if err != nil {
		return nil, err
	}
	if _, err := db.Load("dbo", "orders",
		fake.Row{int64(1), "tea"}, fake.Row{int64(2), "cake"}, fake.Row{int64(3), nil},
		fake.Row{int64(40), "jam"}, fake.Row{int64(50), "bread"}); err != nil {
		return nil, err
	}
	if _, err := db.EnableCDC("dbo", "orders", "dbo_orders"); err != nil {
		return nil, err
	}
	return db, nil
}

// Example takes a whole snapshot of a capture instance into a sink, in two
// partitions, and runs it again: the rerun finds the snapshot and reads
// nothing. The database is quiet since CDC was enabled, so the snapshot's
// LSN is the instance's start_lsn - 1 (DESIGN.md R3).
func Example() {
	ctx := context.Background()
	db, err := exampleDB()
	if err != nil {
		fmt.Println(err)
		return
	}
	dst := fake.NewMemSink()
	defer dst.Close()

	// Names match ignoring case. MinPartitionRows: the default would read
	// a table this small as one partition.
	opts := snapshot.Options{CaptureInstance: "DBO_Orders", Partitions: 2, MinPartitionRows: 2}
	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	from, err := res.StreamFrom()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("snapshot: %d rows in %d partitions at LSN %s, version %d\n", res.Rows, res.Partitions, res.LSN, res.Version)
	fmt.Println("stream from:", from)

	again, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("rerun: existing=%v at LSN %s, %d rows read\n", again.Existing, again.LSN, again.Rows)
	// Output:
	// snapshot: 5 rows in 2 partitions at LSN 0x0000002A00000F380006, version 0
	// stream from: 0x0000002A00000F380007
	// rerun: existing=true at LSN 0x0000002A00000F380006, 0 rows read
}

// ExampleNewPlan splits a snapshot into its three steps, as a fan-out
// across processes does: the coordinator plans (the plan is JSON), each
// worker executes one partition (its result is JSON), and the coordinator
// commits every part at once.
func ExampleNewPlan() {
	ctx := context.Background()
	db, err := exampleDB()
	if err != nil {
		fmt.Println(err)
		return
	}
	dst := fake.NewMemSink()
	defer dst.Close()

	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_orders", Partitions: 3, MinPartitionRows: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	shipped, err := json.Marshal(plan) // to every worker
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("plan:", plan.Strategy, len(plan.Ranges), "ranges at LSN", plan.LSN)

	var results [][]byte // each worker's JSON result
	for i := range plan.Ranges {
		var workerPlan snapshot.Plan
		if err := json.Unmarshal(shipped, &workerPlan); err != nil {
			fmt.Println(err)
			return
		}
		part, err := snapshot.Execute(ctx, db, dst, &workerPlan, i, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, err := json.Marshal(part)
		if err != nil {
			fmt.Println(err)
			return
		}
		results = append(results, b)
		fmt.Printf("partition %d %s: %d rows\n", i, workerPlan.Ranges[i], part.Rows)
	}

	parts := make([]sink.Part, len(results))
	for i, b := range results {
		if err := json.Unmarshal(b, &parts[i]); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := snapshot.Commit(ctx, dst, plan, parts[:2], nil); err != nil {
		fmt.Println("refused:", err)
	}
	res, err := snapshot.Commit(ctx, dst, plan, parts, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("committed %d rows at LSN %s\n", res.Rows, res.LSN)
	// Output:
	// plan: uniform 3 ranges at LSN 0x0000002A00000F380006
	// partition 0 range 0 [-inf, [18]): 3 rows
	// partition 1 range 1 [[18], [35]): 0 rows
	// partition 2 range 2 [[35], +inf): 2 rows
	// refused: snapshot "dbo_orders": no part for partition 2
	// committed 5 rows at LSN 0x0000002A00000F380006
}

// ExampleTake_resume shows a whole snapshot resumed after a failure: the
// first Take loses its connection in its last partition, after three were
// written and recorded with the sink; the rerun reads only the one left and
// commits all four at once, at the first attempt's LSN.
func ExampleTake_resume() {
	ctx := context.Background()
	db, err := exampleDB()
	if err != nil {
		fmt.Println(err)
		return
	}
	dst := fake.NewMemSink() // records partial snapshots, as sink/delta does
	defer dst.Close()
	opts := snapshot.Options{CaptureInstance: "dbo_orders", Partitions: 4, MinPartitionRows: 1, Parallelism: 1}

	reset := errors.New("connection reset")
	db.FailReadAfter(4, reset) // in the last partition (keys 40 and 50)
	_, err = snapshot.Take(ctx, db, dst, opts)
	fmt.Println("first attempt failed:", errors.Is(err, reset))
	db.ClearFaults()
	p, err := dst.FindPartial(ctx, "dbo_orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("recorded: %d of 4 partitions at LSN %s\n", len(p.Parts), p.LSN)

	res, err := snapshot.Take(ctx, db, dst, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("resumed: %v, %d partitions (%d rows) not read again; committed %d rows at LSN %s\n",
		res.Resumed, res.PartitionsResumed, res.RowsResumed, res.Rows, res.LSN)
	// Output:
	// first attempt failed: true
	// recorded: 3 of 4 partitions at LSN 0x0000002A00000F380006
	// resumed: true, 3 partitions (3 rows) not read again; committed 5 rows at LSN 0x0000002A00000F380006
}
