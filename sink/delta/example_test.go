package delta_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
)

// Write a snapshot into a table in a temporary folder, then find it again
// as a rerun would.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bronze")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	captured := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	schema, err := sink.BronzeSchema(captured)
	if err != nil {
		log.Fatal(err)
	}
	l0, _ := lsn.Parse("0x0000002A00000F380003")
	info := sink.Info{CaptureInstance: "dbo_Orders", LSN: l0, CommitTS: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Schema: schema, PlanID: "example"}

	// One partition of three snapshot rows.
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := int64(1); id <= 3; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(info.CaptureInstance)
		b.Field(2).(*array.Int32Builder).Append(sink.OperationSnapshot)
		b.Field(3).(*array.StringBuilder).Append(l0.String())
		b.Field(4).AppendNull() // _seqval
		b.Field(5).AppendNull() // _command_id
		b.Field(6).AppendNull() // _batch_id
		b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(info.CommitTS.UnixMicro()))
		b.Field(8).(*array.StringBuilder).Append(l0.String()) // _snapshot
		b.Field(9).AppendNull()                               // _chunk
	}
	rec := b.NewRecordBatch()
	rr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	rec.Release()

	table, err := delta.Open(ctx, dir, delta.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer table.Close()
	part, err := table.WritePartition(ctx, info, 0, rr)
	if err != nil {
		log.Fatal(err)
	}
	snap, err := table.CommitSnapshot(ctx, info, []sink.Part{part})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed version", snap.Version, "rows", snap.Rows)

	// A rerun, in another process or later: the name matches ignoring case.
	again, err := delta.Open(ctx, dir, delta.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer again.Close()
	found, err := again.FindSnapshot(ctx, "DBO_ORDERS")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found", found.CaptureInstance, found.LSN, found.CommitTS.Format(time.RFC3339))
	// Output:
	// committed version 0 rows 3
	// found dbo_Orders 0x0000002A00000F380003 2026-12-01T08:00:00Z
}

// Create the bronze table with the features Databricks turns on for new
// tables, partitioned by a captured column, when the first snapshot
// lands. An existing table keeps what it has: Open only reads it.
func ExampleCreateOptions() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bronze")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	table, err := delta.Open(ctx, dir, delta.Options{Create: delta.CreateOptions{
		PartitionBy: []string{"region"},
		Properties:  map[string]string{"delta.logRetentionDuration": "interval 30 days"},
		Features:    []string{"deletionVectors", "inCommitTimestamp", "rowTracking"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer table.Close()
	v, _ := table.Version(ctx)
	fmt.Println("version", v, "(created by the first commit)")
	_, err = delta.Open(ctx, dir, delta.Options{Create: delta.CreateOptions{Features: []string{"liquidClustering"}}})
	fmt.Println(err != nil)
	// Output:
	// version -1 (created by the first commit)
	// true
}
