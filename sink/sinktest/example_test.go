package sinktest_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

// A sink's own tests run the whole suite in one line, one fresh sink per
// subtest. (An example has no *testing.T, so this one only shows the call;
// TestMemSink in this package runs it.)
func ExampleRun() {
	conformance := func(t *testing.T) {
		sinktest.Run(t, func(t *testing.T) sink.Sink { return newMemSink("") })
	}
	_ = conformance // func TestConformance(t *testing.T) { ...the line above... }
}

// The helpers build the plans and bronze records the suite writes, for a
// sink's further tests of its own.
func ExampleRecords() {
	info := sinktest.Info("dbo_Orders", sinktest.LSN(0x2A))
	rr, err := sinktest.Records(memory.DefaultAllocator, info, 1, 11, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		fmt.Println(rec.NumRows(), "rows, ids", rec.Column(0), "names null:", rec.Column(1).NullN())
	}
	fmt.Println(info.LSN, info.CommitTS.Format("2006-01-02T15:04:05.000000Z07:00"), info.Schema.Field(2).Name)
	// Output:
	// 4 rows, ids [1 2 3 4] names null: 0
	// 4 rows, ids [5 6 7 8] names null: 1
	// 2 rows, ids [9 10] names null: 1
	// 0x0000000000000000002A 2026-01-02T03:04:47.123456Z _capture_instance
}
