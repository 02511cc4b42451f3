package snapshot

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

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
	// One integer key column gives uniform ranges over MIN..MAX, any other
	// key NTILE-equal ranges found by keyset seeks; a key that cannot be
	// bound safely is read as one range (the reason is logged).
	Partitions int

	// Parallelism caps how many partitions are read (and written) at once;
	// zero means the smaller of Partitions and max(2, GOMAXPROCS). Memory
	// grows with it: each partition in flight holds a batch and a Parquet
	// row group.
	Parallelism int

	// Isolation is the read's isolation level; zero is READ COMMITTED.
	Isolation source.Isolation

	// BatchRows caps the rows per record batch; zero means the source's
	// default.
	BatchRows int

	// ReadAhead is how many record batches each partition reads ahead of
	// its writer, on a goroutine of its own, so the source's read overlaps
	// with Parquet encoding. Zero means 2; a negative value reads in step
	// with the writer; above 1024 is refused. A partition in flight holds
	// up to ReadAhead+1 batches besides the one being written (the
	// goroutine holds one while it waits to hand it over).
	ReadAhead int

	// Resnapshot takes a new snapshot even when the sink already holds one
	// of the capture instance (recovery after source.ErrDataLoss).
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

	// Logger receives progress and decisions (the partition strategy and
	// why). Nil is silent.
	Logger *slog.Logger

	// Progress, when set, is called after every record batch written, one
	// call at a time. It must return quickly.
	Progress func(Progress)
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

// defaultResumeWithin is under Delta's default VACUUM retention of 7 days
// (https://docs.databricks.com/sql/language-manual/delta-vacuum.html).
const defaultResumeWithin = 6 * 24 * time.Hour

func (o Options) withDefaults() (Options, error) {
	if o.CaptureInstance == "" {
		return o, fmt.Errorf("%w: CaptureInstance is empty", ErrInvalidOptions)
	}
	if o.Partitions < 0 || o.Parallelism < 0 || o.BatchRows < 0 {
		return o, fmt.Errorf("%w: Partitions (%d), Parallelism (%d) and BatchRows (%d) must not be negative", ErrInvalidOptions, o.Partitions, o.Parallelism, o.BatchRows)
	}
	if o.Isolation != source.ReadCommitted && o.Isolation != source.Snapshot {
		return o, fmt.Errorf("%w: unknown isolation level %d", ErrInvalidOptions, o.Isolation)
	}
	if err := checkReadAhead(o.ReadAhead); err != nil {
		return o, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
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
