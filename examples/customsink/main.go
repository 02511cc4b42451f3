// Command customsink shows a sink of one's own: FolderSink implements
// sink.Sink, and sink.ChunkSink for snapshot.Backfill (chunked.go), with
// Parquet files (arrow-go pqarrow) and a JSON manifest per snapshot (and
// per wave of chunks) in a local folder. The program writes a
// snapshot of a few thousand generated bronze rows through it, in parallel
// partitions and one atomic commit, and prints the manifest, rows and LSN.
// Run it twice with the same -dir: the second run finds the snapshot and
// writes nothing, as snapshot.Take does.
//
//	go run ./examples/customsink [-dir DIR] [-rows N] [-partitions N]
//
// FolderSink's tests run the sinktest conformance suites (Run and
// RunChunked), the same ones sink/delta passes.
//
// Limits of FolderSink, which is an example and not a table format:
//
//   - One snapshot per capture instance, ever: a manifest is never
//     replaced, so a resnapshot needs the old manifest removed by hand (and
//     a reader could then see no snapshot for a moment).
//   - Snapshots only: no change rows are appended after the snapshot, no
//     schema evolution, no statistics, no checkpoints.
//   - No clean-up: staged files of failed, refused or abandoned plans stay
//     under _staging until removed by hand.
//   - Put-if-absent relies on link(2) on a local file system; it is not
//     atomic on every network file system, and not available on object
//     stores (sink/delta uses their conditional writes).
//   - Instance names match ignoring case by Unicode lowercasing, which
//     agrees with sink.SameInstance for the names SQL Server allows in
//     practice, not for every exotic fold.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "folder of the sink (default: a new temporary folder)")
	flag.StringVar(&cfg.captureInstance, "ci", "dbo_Orders", "capture instance name")
	flag.IntVar(&cfg.rows, "rows", 5000, "rows to generate")
	flag.IntVar(&cfg.partitions, "partitions", 4, "partitions to write in parallel")
	flag.Parse()
	if cfg.dir == "" {
		dir, err := os.MkdirTemp("", "customsink-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "customsink:", err)
			os.Exit(1)
		}
		cfg.dir = dir
	}
	if err := run(context.Background(), cfg, memory.DefaultAllocator, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "customsink:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	dir             string
	captureInstance string
	rows            int
	partitions      int
}

// exampleLSN stands for the LSN a real snapshot records first
// (sys.fn_cdc_get_max_lsn()).
var exampleLSN = lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}

// run writes (or finds) the snapshot and reports it on out.
func run(ctx context.Context, cfg config, mem memory.Allocator, out io.Writer) error {
	if cfg.rows < 0 || cfg.partitions < 1 {
		return fmt.Errorf("want -rows >= 0 and -partitions >= 1, have %d and %d", cfg.rows, cfg.partitions)
	}
	dst, err := NewFolderSink(cfg.dir, mem)
	if err != nil {
		return err
	}
	// DESIGN.md R2: a snapshot that exists is the answer; read nothing.
	if snap, err := dst.FindSnapshot(ctx, cfg.captureInstance); err == nil {
		fmt.Fprintf(out, "snapshot exists: %s\nrows: %d\nlsn: %s (stream from the next LSN)\n", dst.ManifestPath(cfg.captureInstance, snap.Version), snap.Rows, snap.LSN)
		return nil
	} else if !errors.Is(err, sink.ErrNotFound) {
		return err
	}

	schema, err := sink.BronzeSchema(capturedSchema())
	if err != nil {
		return err
	}
	info := sink.Info{
		CaptureInstance: cfg.captureInstance,
		LSN:             exampleLSN,
		CommitTS:        time.Now().UTC().Truncate(time.Millisecond),
		Schema:          schema,
		PlanID:          fmt.Sprintf("plan-%d", time.Now().UnixNano()),
	}

	// Each partition is written by its own goroutine (it could be another
	// process: a Part is JSON); the commit makes all of them visible at once.
	parts := make([]sink.Part, cfg.partitions)
	errs := make([]error, cfg.partitions)
	var wg sync.WaitGroup
	for i := range cfg.partitions {
		from, to := int64(i*cfg.rows/cfg.partitions), int64((i+1)*cfg.rows/cfg.partitions)
		wg.Go(func() {
			rr, err := bronzeRecords(mem, info, from+1, to+1, 1024)
			if err != nil {
				errs[i] = err
				return
			}
			defer rr.Release()
			parts[i], errs[i] = dst.WritePartition(ctx, info, i, rr)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err // nothing was committed: a rerun starts over
	}
	snap, err := dst.CommitSnapshot(ctx, info, parts)
	if errors.Is(err, sink.ErrSnapshotExists) {
		fmt.Fprintf(out, "another process committed first: %s\nrows: %d\nlsn: %s\n", dst.ManifestPath(cfg.captureInstance, snap.Version), snap.Rows, snap.LSN)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "snapshot committed: %s\nrows: %d in %d partitions\nlsn: %s (stream from the next LSN)\n", dst.ManifestPath(cfg.captureInstance, snap.Version), snap.Rows, len(parts), snap.LSN)
	return nil
}

// capturedSchema is the example table's captured columns, as
// source.ArrowSchema maps bigint, nvarchar(100) and int.
func capturedSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "order_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "quantity", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
}

// bronzeRecords returns the snapshot rows with order ids [from, to), in
// batches of batchRows, stamped as info's snapshot rows. The caller
// releases the reader.
func bronzeRecords(mem memory.Allocator, info sink.Info, from, to int64, batchRows int) (array.RecordReader, error) {
	ts, err := arrow.TimestampFromTime(info.CommitTS, arrow.Microsecond)
	if err != nil {
		return nil, err
	}
	stamp := info.LSN.String()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	b := array.NewRecordBuilder(mem, info.Schema)
	defer b.Release()
	for lo := from; lo < to; lo += int64(batchRows) {
		for id := lo; id < min(lo+int64(batchRows), to); id++ {
			b.Field(0).(*array.Int64Builder).Append(id)
			if id%7 == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer %d", id%97))
			}
			if id%11 == 0 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.Int32Builder).Append(int32(id % 13))
			}
			for j := 3; j < info.Schema.NumFields(); j++ {
				switch info.Schema.Field(j).Name {
				case sink.ColCaptureInstance:
					b.Field(j).(*array.StringBuilder).Append(info.CaptureInstance)
				case sink.ColOperation:
					b.Field(j).(*array.Int32Builder).Append(sink.OperationSnapshot)
				case sink.ColStartLSN, sink.ColSnapshot:
					b.Field(j).(*array.StringBuilder).Append(stamp)
				case sink.ColCommitTS:
					b.Field(j).(*array.TimestampBuilder).Append(ts)
				default:
					b.Field(j).AppendNull()
				}
			}
		}
		recs = append(recs, b.NewRecordBatch())
	}
	return array.NewRecordReader(info.Schema, recs)
}
