package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// The metric names, units and attributes, documented in the package doc
// (Metrics). They follow OpenTelemetry's naming rules: a namespace of the
// system's name, dot-separated, units in UCUM rather than in the name, and
// counters of countable things pluralized with a {annotation} unit
// (https://opentelemetry.io/docs/specs/semconv/general/naming/#metrics,
// https://opentelemetry.io/docs/specs/semconv/general/metrics/#units).
// meterName is the instrumentation scope of every instrument.
const meterName = "github.com/cdcsnap/cdcsnap/snapshot"

// The instruments a snapshot records with Options.MeterProvider.
const (
	// MetricReadRows counts rows read from the source ({row}).
	MetricReadRows = "cdcsnap.snapshot.read.rows"
	// MetricReadSize counts the bytes of the Arrow buffers of the rows
	// read (By): memory the batches held, not bytes on the wire.
	MetricReadSize = "cdcsnap.snapshot.read.size"
	// MetricWrittenRows counts rows of the partitions written to the sink
	// ({row}), when each partition's write ends.
	MetricWrittenRows = "cdcsnap.snapshot.written.rows"
	// MetricWrittenSize counts bytes written to the sink as sink.Part.Bytes
	// reports them (By); zero for a sink that does not know.
	MetricWrittenSize = "cdcsnap.snapshot.written.size"
	// MetricPartitions counts partitions read and written ({partition}).
	MetricPartitions = "cdcsnap.snapshot.partitions"
	// MetricTables counts snapshot calls ended ({table}), with AttrOutcome.
	MetricTables = "cdcsnap.snapshot.tables"
	// MetricPartitionDuration is a histogram of the time each partition
	// took to read and write (s).
	MetricPartitionDuration = "cdcsnap.snapshot.partition.duration"
	// MetricCommitDuration is a histogram of the sink's commit time (s).
	MetricCommitDuration = "cdcsnap.snapshot.commit.duration"
	// MetricThrottleTime counts the time reads waited for the
	// rows-per-second limits (s).
	MetricThrottleTime = "cdcsnap.snapshot.throttle.time"

	// AttrCaptureInstance is on every measurement: the capture instance
	// as the options name it (the value written to _capture_instance).
	AttrCaptureInstance = "cdcsnap.capture_instance"
	// AttrOutcome is on MetricTables: one of the Outcome values.
	AttrOutcome = "cdcsnap.snapshot.outcome"
)

// The values of AttrOutcome: how a Take (or Bootstrap) call ended.
const (
	// OutcomeCommitted: this call committed a new snapshot.
	OutcomeCommitted = "committed"
	// OutcomeExisting: the sink held the snapshot already (a rerun, or
	// another process committed first); nothing new was committed.
	OutcomeExisting = "existing"
	// OutcomeStale: the snapshot could no longer be committed (ErrStale).
	OutcomeStale = "stale"
	// OutcomeCanceled: the context was cancelled or its deadline passed.
	OutcomeCanceled = "canceled"
	// OutcomeFailed: any other error.
	OutcomeFailed = "failed"
)

// Bucket boundaries (seconds), advice to the SDK: a partition's read takes
// seconds to hours, a commit milliseconds to a minute. The SDK's default
// boundaries (0 to 10000) suit milliseconds. Functions, not variables:
// no package-level state a caller could change.
func partitionBuckets() []float64 {
	return []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}
}

func commitBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// metrics are one snapshot's instruments and the attribute they record
// with. A nil *metrics records nothing.
type metrics struct {
	attrs             metric.MeasurementOption
	captureInstance   string
	readRows          metric.Int64Counter
	readSize          metric.Int64Counter
	writtenRows       metric.Int64Counter
	writtenSize       metric.Int64Counter
	partitions        metric.Int64Counter
	tables            metric.Int64Counter
	partitionDuration metric.Float64Histogram
	commitDuration    metric.Float64Histogram
	throttleTime      metric.Float64Counter
}

// newMetrics creates the instruments of mp for a snapshot of
// captureInstance; nil mp records nothing (nil *metrics).
func newMetrics(mp metric.MeterProvider, captureInstance string) (*metrics, error) {
	if mp == nil {
		return nil, nil
	}
	if _, ok := mp.(noop.MeterProvider); ok {
		return nil, nil
	}
	meter := mp.Meter(meterName)
	m := &metrics{
		attrs:           metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrCaptureInstance, captureInstance))),
		captureInstance: captureInstance,
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	m.readRows = counter(MetricReadRows, "{row}", "Rows read from the source.")
	m.readSize = counter(MetricReadSize, "By", "Size of the Arrow buffers of the rows read from the source.")
	m.writtenRows = counter(MetricWrittenRows, "{row}", "Rows of the partitions written to the sink.")
	m.writtenSize = counter(MetricWrittenSize, "By", "Bytes of the partitions written to the sink, as the sink reports them.")
	m.partitions = counter(MetricPartitions, "{partition}", "Partitions read and written.")
	m.tables = counter(MetricTables, "{table}", "Snapshots ended, by outcome.")
	m.partitionDuration = seconds(MetricPartitionDuration, "Time to read a partition from the source and write it to the sink.", partitionBuckets())
	m.commitDuration = seconds(MetricCommitDuration, "Time of the sink's commit of a snapshot.", commitBuckets())
	tt, err := meter.Float64Counter(MetricThrottleTime, metric.WithUnit("s"), metric.WithDescription("Time spent waiting for the rows-per-second limits."))
	errs = append(errs, err)
	m.throttleTime = tt
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: MeterProvider: %w", ErrInvalidOptions, err)
	}
	return m, nil
}

// read records a batch read from the source.
func (m *metrics) read(ctx context.Context, rows, size int64) {
	m.readRows.Add(ctx, rows, m.attrs)
	m.readSize.Add(ctx, size, m.attrs)
}

// throttled records time spent waiting for row budgets.
func (m *metrics) throttled(ctx context.Context, d time.Duration) {
	m.throttleTime.Add(ctx, d.Seconds(), m.attrs)
}

// partitionWritten records a partition read and written in d.
func (m *metrics) partitionWritten(ctx context.Context, rows, size int64, d time.Duration) {
	if m == nil {
		return
	}
	m.writtenRows.Add(ctx, rows, m.attrs)
	m.writtenSize.Add(ctx, size, m.attrs)
	m.partitions.Add(ctx, 1, m.attrs)
	m.partitionDuration.Record(ctx, d.Seconds(), m.attrs)
}

// committed records the duration of a sink commit.
func (m *metrics) committed(ctx context.Context, d time.Duration) {
	if m == nil {
		return
	}
	m.commitDuration.Record(ctx, d.Seconds(), m.attrs)
}

// ended records how a snapshot call ended.
func (m *metrics) ended(ctx context.Context, res Result, err error) {
	if m == nil {
		return
	}
	outcome := OutcomeCommitted
	switch {
	case errors.Is(err, ErrStale):
		outcome = OutcomeStale
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	case err != nil:
		outcome = OutcomeFailed
	case res.Existing:
		outcome = OutcomeExisting
	}
	m.tables.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(AttrCaptureInstance, m.captureInstance),
		attribute.String(AttrOutcome, outcome))))
}
