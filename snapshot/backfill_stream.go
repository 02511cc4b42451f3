package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// The change stream, in its simplest form: a loop that calls Poll with the
// LSN the previous call returned. It starts from a snapshot's
// StreamFrom (Bootstrap, BootstrapBackfill) and appends each poll's changes
// as one batch of bronze rows (_operation 1-4, _start_lsn, _seqval,
// _command_id, _commit_ts, _batch_id = the poll's batch id).
//
// When retention cleanup purged changes the stream has not read yet, the
// source reports *source.DataLossError and no change row will ever record
// what happened in the gap (a deleted row has no delete). PollOptions.
// OnDataLoss re-snapshots the instance (ResnapshotOnDataLoss,
// BackfillOnDataLoss) and the stream continues after the new snapshot's
// LSN. Downstream must then rebuild from the newest snapshot: apply only
// the rows whose _start_lsn is at or above its LSN (its snapshot rows, the
// chunks of a chunked one, and the changes after it), never the older rows.

// Appender appends change rows to a bronze table as one stream batch,
// idempotently per (capture instance, batch id): a batch already appended
// is not appended again. It returns the table version committed.
// (*delta.Table) implements it; wrap other sinks (fake.MemSink) with
// AppendFunc.
type Appender interface {
	AppendChanges(ctx context.Context, captureInstance string, batchID int64, rr array.RecordReader) (int64, error)
}

// AppendFunc adapts a function to Appender.
type AppendFunc func(ctx context.Context, captureInstance string, batchID int64, rr array.RecordReader) (int64, error)

// AppendChanges calls f.
func (f AppendFunc) AppendChanges(ctx context.Context, captureInstance string, batchID int64, rr array.RecordReader) (int64, error) {
	return f(ctx, captureInstance, batchID, rr)
}

// PollOptions configure one Poll.
type PollOptions struct {
	// BatchID is the stream batch number the changes are appended as
	// (_batch_id, and the appender's idempotency key). A caller numbers its
	// polls; a poll that finds nothing new appends nothing.
	BatchID int64

	// To caps the LSNs read (inclusive); zero means the source's current
	// max LSN.
	To lsn.LSN

	// OnDataLoss, when set, is called when the changes from the requested
	// LSN were purged; it re-snapshots the instance and returns the first
	// LSN the stream reads next. Nil makes Poll return the
	// *source.DataLossError.
	OnDataLoss func(ctx context.Context, loss *source.DataLossError) (lsn.LSN, error)

	// Logger receives what the poll did. Nil is silent.
	Logger *slog.Logger
}

// PollResult is what one Poll did.
type PollResult struct {
	// From and To are the LSNs read (inclusive); To is zero when there was
	// nothing new to read.
	From, To lsn.LSN
	// Next is the first LSN the next poll reads.
	Next lsn.LSN
	// Rows is the change rows appended, Version the appender's version
	// (zero when nothing was appended).
	Rows    int64
	Version int64
	// Appended is true when a batch was appended.
	Appended bool
	// DataLoss is set when the changes from From were purged and
	// OnDataLoss re-snapshotted: Next is then after the new snapshot.
	DataLoss *source.DataLossError
	// DDL are the changes of the table's columns the capture instance
	// recorded between From and To (sys.sp_cdc_get_ddl_history, FACTS.md
	// F65), each also logged with what it does to the stream; nil when
	// the source keeps no history.
	DDL []source.DDL
}

// Poll reads the changes of one capture instance from from up to the
// current max LSN (or opts.To) and appends them to dst as batch
// opts.BatchID, in the bronze schema (see Changes). It returns the LSN the
// next poll starts from: one past the last LSN read whole. A read that
// lands on a readable secondary behind the max LSN reads as far as that
// replica has captured (PollResult.To says how far); with opts.To set it
// is a *source.ReplicaBehindError instead. Changes purged below from are an error wrapping
// source.ErrDataLoss (*source.DataLossError), unless opts.OnDataLoss
// re-snapshots.
func Poll(ctx context.Context, src source.Source, dst Appender, captureInstance string, from lsn.LSN, opts PollOptions) (PollResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := PollResult{From: from, Next: from}
	to := opts.To
	if to.IsZero() {
		m, err := src.MaxLSN(ctx)
		if err != nil {
			return res, fmt.Errorf("poll %q: max LSN: %w", captureInstance, err)
		}
		to = m
	}
	if to.Less(from) {
		return res, nil
	}
	ci, err := src.CaptureInstance(ctx, captureInstance)
	if err != nil {
		return res, fmt.Errorf("poll %q: %w", captureInstance, err)
	}
	rr, err := changes(ctx, src, ci, captureInstance, from, to, opts.BatchID, tableSchema(ctx, dst))
	// A read on a replica behind the one the max LSN came from (FACTS.md
	// F56) is refused, never cut short; the poll reads as far as that
	// replica has captured instead, or nothing when it has not reached
	// from. A caller's own To must be read whole: its refusal is the error.
	for try := 0; opts.To.IsZero() && try < 3; try++ {
		var behind *source.ReplicaBehindError
		if !errors.As(err, &behind) || !behind.Have.Less(to) {
			break
		}
		log.InfoContext(ctx, "the replica read from is behind the max LSN; reading as far as it has captured", "capture_instance", captureInstance, "max_lsn", to, "replica_max_lsn", behind.Have)
		if to = behind.Have; to.Less(from) {
			return res, nil
		}
		rr, err = changes(ctx, src, ci, captureInstance, from, to, opts.BatchID, tableSchema(ctx, dst))
	}
	var loss *source.DataLossError
	if errors.As(err, &loss) && opts.OnDataLoss != nil {
		log.WarnContext(ctx, "changes purged by retention; re-snapshotting", "capture_instance", captureInstance, "requested", loss.Requested, "min_lsn", loss.MinLSN)
		next, err := opts.OnDataLoss(ctx, loss)
		if err != nil {
			return res, fmt.Errorf("poll %q: re-snapshot after data loss from %s (min LSN %s): %w", captureInstance, loss.Requested, loss.MinLSN, err)
		}
		res.Next, res.DataLoss = next, loss
		log.InfoContext(ctx, "re-snapshot taken; the stream continues after it", "capture_instance", captureInstance, "next", next)
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("poll: %w", err)
	}
	cr := &countingReader{RecordReader: rr}
	defer cr.Release()
	// A captured column retyped (FACTS.md F62) in a way the table cannot
	// take stops here, before anything is written.
	if c, ok := dst.(sink.Checker); ok {
		if err := c.CheckSnapshot(ctx, captureInstance, rr.Schema()); err != nil {
			return res, fmt.Errorf("poll: %w", schemaChange(ctx, src, captureInstance, from, to, err, log))
		}
	}
	v, err := dst.AppendChanges(ctx, captureInstance, opts.BatchID, cr)
	if err != nil {
		if sc := schemaChange(ctx, src, captureInstance, from, to, err, log); len(sc.DDL) > 0 && !errors.Is(err, context.Canceled) {
			return res, fmt.Errorf("poll %q: appending batch %d: %w", captureInstance, opts.BatchID, sc)
		}
		return res, fmt.Errorf("poll %q: appending batch %d (%s..%s): %w", captureInstance, opts.BatchID, from, to, err)
	}
	for _, d := range ddlHistory(ctx, src, captureInstance, log) {
		if !d.LSN.Less(from) && !to.Less(d.LSN) {
			res.DDL = append(res.DDL, d)
		}
	}
	logDDL(ctx, log, res.DDL, captureInstance)
	next, err := to.Next()
	if err != nil {
		return res, fmt.Errorf("poll %q: %w", captureInstance, err)
	}
	res.To, res.Next, res.Version, res.Appended, res.Rows = to, next, v, true, cr.rows.Load()
	log.DebugContext(ctx, "changes appended", "capture_instance", captureInstance, "batch_id", opts.BatchID, "from", from, "to", to, "rows", res.Rows, "version", v)
	return res, nil
}

// countingReader counts the rows read through it.
type countingReader struct {
	array.RecordReader
	rows atomic.Int64
}

func (c *countingReader) Next() bool {
	if !c.RecordReader.Next() {
		return false
	}
	c.rows.Add(c.RecordReader.RecordBatch().NumRows())
	return true
}

// RecordBatch returns the current batch.
func (c *countingReader) RecordBatch() arrow.RecordBatch { return c.RecordReader.RecordBatch() }

// ResnapshotOnDataLoss returns a PollOptions.OnDataLoss that takes a new
// whole snapshot of the instance into dst (Take with Resnapshot) and
// continues after its LSN.
func ResnapshotOnDataLoss(src source.Source, dst sink.Sink, opts Options) func(context.Context, *source.DataLossError) (lsn.LSN, error) {
	opts.Resnapshot = true
	return func(ctx context.Context, _ *source.DataLossError) (lsn.LSN, error) {
		res, err := Take(ctx, src, dst, opts)
		if err != nil {
			return lsn.LSN{}, err
		}
		return res.StreamFrom()
	}
}

// BackfillOnDataLoss returns a PollOptions.OnDataLoss that opens a new
// chunked snapshot of the instance in dst (BootstrapBackfill with
// Resnapshot) and continues after its S; the caller keeps running Backfill
// (Resnapshot false) to read its chunks.
func BackfillOnDataLoss(src source.Source, dst sink.ChunkSink, opts BackfillOptions) func(context.Context, *source.DataLossError) (lsn.LSN, error) {
	opts.Resnapshot = true
	return func(ctx context.Context, _ *source.DataLossError) (lsn.LSN, error) {
		from, _, err := BootstrapBackfill(ctx, src, dst, opts)
		return from, err
	}
}
