package snapshot

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/cdcsnap/cdcsnap/source"
)

// Options configure a whole snapshot. The zero value of every field but
// CaptureInstance is a sensible default.
type Options struct {
	// CaptureInstance names the CDC capture instance to snapshot. It is
	// matched exactly first, else ignoring case (see source.Resolve), and
	// written to _capture_instance as given here.
	CaptureInstance string

	// Partitions is how many key ranges to cut the table into; zero means 4.
	// A small table gets fewer (MinPartitionRows).
	// One integer key column gives uniform ranges over MIN..MAX, any other
	// key NTILE-equal ranges found by keyset seeks; a key that cannot be
	// bound safely is read as one range (the reason is logged).
	Partitions int

	// MinPartitionRows is the fewest rows worth a partition of their own:
	// each partition is a query and at least one data file, so a table
	// that holds fewer than Partitions × MinPartitionRows rows is cut into
	// fewer partitions, rows / MinPartitionRows of them (at least one; see
	// PartitionsFor), and a table of a few rows is written as one file.
	// The rows are the source's metadata row count (source.Source.RowCount,
	// stale by nature), and for a unique integer key at most its span
	// MAX - MIN + 1; when neither is known the table gets Partitions. Zero
	// means DefaultMinPartitionRows; a negative value sets no minimum.
	MinPartitionRows int64

	// SplitColumn, when set, is the captured column the table is cut into
	// ranges on instead of the capture instance's key: for a table whose
	// instance has no unique index (which is otherwise read as one range),
	// or to cut on another column. It must lead an index of the table
	// (source.CaptureInstance.SplitOn picks among those: the clustered
	// one first, then the one with the fewest key columns, then a unique
	// one, then by name), unique or not; ranges of a column whose values repeat still
	// read every row exactly once (NULLs in the first range), though a
	// run of one value is never cut, so a column of few distinct values
	// gives fewer, unequal partitions. Empty means the key. The plan
	// records it, so a resumed or fanned-out plan reads the same ranges.
	// Exactly once holds for rows whose split value does not change
	// while the snapshot reads: each partition is its own statement, so a
	// row updated from a range not yet read into one already read is
	// missed, and the other way round read twice. With a unique key the
	// latest-image merge and the stream repair that; a table without one
	// cannot be repaired, so choose a column that is never updated
	// (an identity, an insert time) or read it as one range. The plan
	// carries a warning when the table has no unique key.
	SplitColumn string

	// Parallelism caps how many partitions are read (and written) at once;
	// zero means the smaller of Partitions and max(2, GOMAXPROCS). Memory
	// grows with it: each partition in flight holds a batch and a Parquet
	// row group.
	Parallelism int

	// ReadOptions are how the source is read: isolation, batch size,
	// read-ahead.
	ReadOptions

	// RunOptions limit the read's rate and say where the snapshot reports:
	// RowsPerSecond, Limiter, MeterProvider, Logger.
	RunOptions

	// Resnapshot takes a new snapshot even when the sink already holds one
	// of the capture instance (recovery after source.ErrDataLoss). For an
	// instance without a unique index it is refused (ErrTwinSnapshot,
	// nothing written) when L0 is the LSN of the snapshot it replaces:
	// the two snapshots' rows could not be told apart.
	Resnapshot bool

	// ResumeWithin is how long after its plan was recorded a partial
	// snapshot (one that failed or was killed before its commit) may be
	// resumed, when the sink records partial snapshots (sink.PartialSink:
	// sink/delta and fake.MemSink do). Zero means 6 days: under Delta's
	// default VACUUM retention of 7 days, after which VACUUM may delete the
	// partial snapshot's uncommitted files (a partition whose files are
	// gone is read again, whatever its age). A negative value records
	// nothing and resumes nothing: a rerun starts over.
	ResumeWithin time.Duration

	// DiscardPartial abandons a partial snapshot the sink holds instead of
	// resuming it: this run drops its records and never commits its files
	// (a process resuming it at that moment may still commit it, after the
	// same checks). Ignored when ResumeWithin is negative.
	DiscardPartial bool

	// Progress, when set, is called after every record batch written, one
	// call at a time. It must return quickly.
	Progress func(Progress)
}

// ReadOptions are how a snapshot reads the source, whole (Options) or
// chunked (BackfillOptions); its plan (Plan, BackfillPlan) records them,
// so a resumed or fanned-out read reads the same way. The zero value
// reads under READ COMMITTED, in the source's default batch size, two
// batches ahead of the writer.
type ReadOptions struct {
	// Isolation is the read's (and a chunked snapshot's seeks') isolation
	// level; zero is READ COMMITTED. Whatever it is, every partition or
	// chunk read also asks the source for a database at least as recent as
	// the plan's max LSN (PlanHeader.MaxLSN), so a read on a readable
	// secondary that is behind fails with source.ErrReplicaBehind instead
	// of reading older rows (see "Reading from a readable secondary" in
	// the package doc).
	Isolation source.Isolation `json:"isolation"`

	// BatchRows caps the rows per record batch; zero means the source's
	// default.
	BatchRows int `json:"batch_rows,omitempty"`

	// ReadAhead is how many record batches each partition (or chunk)
	// reads ahead of its writer, on a goroutine of its own, so the
	// source's read overlaps with Parquet encoding. Zero means 2; a
	// negative value reads in step with the writer; above 1024 is refused.
	// A partition in flight holds up to ReadAhead+1 batches besides the
	// one being written (the goroutine holds one while it waits to hand it
	// over). For a chunked snapshot it and BatchRows apply to this run,
	// also when it resumes an open one.
	ReadAhead int `json:"read_ahead,omitempty"`
}

// RunOptions limit how fast a snapshot, whole (Options) or chunked
// (BackfillOptions), reads the source, and say where it reports. The
// zero value reads at full speed, records no metrics and logs nothing.
type RunOptions struct {
	// RowsPerSecond caps the rows this call reads from the source per
	// second, all its partitions (or a wave's chunks) together; zero means
	// no limit, negative is refused. Each batch's rows are paid for as it
	// arrives, before it is handed on (with read-ahead, the reading
	// goroutine waits, so the source is read no faster), so the rate holds
	// from the first row over any stretch longer than a batch. Waits end
	// when ctx is done. It limits this call only: Execute, called alone by
	// a fan-out worker, reads unthrottled. A paused read keeps its
	// statement open: under locking READ COMMITTED the server may hold the
	// lock of the row or page it stopped at, and under SNAPSHOT the
	// version store keeps its versions, for as long as the pause lasts
	// (not measured on a server here); a database with
	// READ_COMMITTED_SNAPSHOT on takes no such lock.
	RowsPerSecond int

	// Limiter, when set, is a rows-per-second budget shared by every
	// snapshot (or Backfill) given the same one, on top of RowsPerSecond:
	// pass one *rate.Limiter (golang.org/x/time/rate) to all the snapshots
	// a process runs at once to cap them together. Every row read takes a
	// token; a batch larger than the limiter's burst waits in pieces. Nil
	// means no shared limit. A limiter with a finite rate needs a burst of
	// at least 1.
	Limiter Limiter

	// MeterProvider receives the snapshot's metrics through
	// OpenTelemetry's metric API (names, units and attributes in the
	// package doc, Metrics); a chunked snapshot records them per chunk
	// (MetricPartitions counts chunks) and per wave's commit, and a call
	// ends as one MetricTables outcome. Nil records none.
	MeterProvider metric.MeterProvider

	// Logger receives progress and decisions (the partition strategy and
	// why). Nil is silent.
	Logger *slog.Logger
}

// Progress reports how far a snapshot has come.
type Progress struct {
	// Rows is the number of rows written so far, all partitions together.
	Rows int64
	// EstimatedRows is the table's row count from metadata at planning, or
	// -1 when unknown. Rows can pass it: the count is stale by nature.
	EstimatedRows int64
	// PartitionsDone counts partitions whose rows are all written,
	// PartitionsResumed among them.
	PartitionsDone int
	// PartitionsResumed counts partitions a partial snapshot had written
	// before this run, which it does not read again; RowsResumed are their
	// rows (in Rows too: this run read Rows - RowsResumed).
	PartitionsResumed int
	RowsResumed       int64
	// Partitions is the number of partitions planned.
	Partitions int
	// Elapsed is the time since the read started.
	Elapsed time.Duration
}

// ErrInvalidOptions is wrapped by errors for options that cannot work.
var ErrInvalidOptions = errors.New("invalid snapshot options")

const defaultPartitions = 4

// DefaultMinPartitionRows is Options.MinPartitionRows' zero value. Flink
// CDC's incremental snapshot reads chunks of 8,096 rows by default
// (scan.incremental.snapshot.chunk.size); a partition here is also a data
// file, and fewer than this many rows cost more in queries and files than
// they save by reading in parallel.
const DefaultMinPartitionRows = 10_000

// PartitionsFor returns how many partitions a table of rows rows is cut
// into under o: Partitions (4 when zero), lowered to rows /
// MinPartitionRows when that is fewer, and at least one. A negative rows
// (unknown) or a negative MinPartitionRows keeps Partitions. The plan may
// still have fewer ranges than this: keyset seeks that run out of keys,
// or an integer key whose span is smaller.
func (o Options) PartitionsFor(rows int64) int {
	n := o.Partitions
	if n <= 0 {
		n = defaultPartitions
	}
	least := o.MinPartitionRows
	if least == 0 {
		least = DefaultMinPartitionRows
	}
	if least < 0 || rows < 0 {
		return n
	}
	return int(max(1, min(int64(n), rows/least)))
}

// defaultResumeWithin is under Delta's default VACUUM retention of 7 days
// (https://docs.databricks.com/sql/language-manual/delta-vacuum.html).
const defaultResumeWithin = 6 * 24 * time.Hour

// Validate reports why o cannot work, as Take, Bootstrap and Plan would
// before any I/O: an empty CaptureInstance, a negative Partitions,
// Parallelism, BatchRows or RowsPerSecond, an unknown Isolation, or a
// ReadAhead out of range. The error wraps ErrInvalidOptions. It does not
// check what needs the source (that CaptureInstance exists, that
// SplitColumn leads an index).
func (o Options) Validate() error {
	if o.CaptureInstance == "" {
		return fmt.Errorf("%w: CaptureInstance is empty", ErrInvalidOptions)
	}
	if o.Partitions < 0 || o.Parallelism < 0 || o.BatchRows < 0 {
		return fmt.Errorf("%w: Partitions (%d), Parallelism (%d) and BatchRows (%d) must not be negative", ErrInvalidOptions, o.Partitions, o.Parallelism, o.BatchRows)
	}
	if o.Isolation != source.ReadCommitted && o.Isolation != source.Snapshot {
		return fmt.Errorf("%w: unknown isolation level %d", ErrInvalidOptions, o.Isolation)
	}
	if err := checkReadAhead(o.ReadAhead); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	if o.RowsPerSecond < 0 {
		return fmt.Errorf("%w: RowsPerSecond (%d) must not be negative", ErrInvalidOptions, o.RowsPerSecond)
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	if err := o.Validate(); err != nil {
		return o, err
	}
	if o.Partitions == 0 {
		o.Partitions = defaultPartitions
	}
	if o.ResumeWithin == 0 {
		o.ResumeWithin = defaultResumeWithin
	}
	if o.Parallelism == 0 {
		o.Parallelism = max(2, runtime.GOMAXPROCS(0))
	}
	o.Parallelism = min(o.Parallelism, o.Partitions)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
