// Package snapshot takes the snapshot that bootstraps a CDC stream: it
// records an LSN before reading, reads the table in parallel key ranges
// without locks, writes the rows to a sink in one atomic commit, and returns
// that LSN so the stream starts right after it. The target converges to the
// source once the latest image per key is applied (see Order and Image).
//
// Take does it in one process; Bootstrap also returns the first LSN the
// stream reads. Its three steps are exported for fan-out across processes:
// Prepare (its Plan is JSON), Execute of one partition on any worker (its
// sink.Part is JSON), and Commit of all parts at once.
//
// A whole snapshot survives a crash without giving up its one commit: with
// a sink that records partial snapshots (sink.PartialSink; sink/delta does,
// beside its log where no reader sees them), the plan with its L0 is
// recorded before any row is read and each partition's part as it
// finishes. A rerun with the same options (Take, or a fan-out coordinator
// calling Prepare) reads only the partitions not yet written and commits
// every part at once. It abandons the partial snapshot instead, logging
// why, when the capture instance was recreated or its columns changed,
// when change data cleanup passed L0 + 1 (the stream could not start
// there), when it is older than Options.ResumeWithin, or when asked
// (Options.DiscardPartial); Plan.CheckUsable makes the same checks just
// before every commit.
//
// Backfill takes a chunked snapshot next to a running stream instead: the
// snapshot's LSN S is recorded first, every chunk is planned and stored with
// the target, and waves of chunks commit one after another, resumable after
// a crash. Changes and Poll are the stream's pieces: changes between two
// LSNs as bronze rows, appended per batch, with source.ErrDataLoss after
// retention cleanup and an optional re-snapshot. Image is the latest-image
// merge, for verification.
//
// # When the table changes
//
// A captured column dropped, a column added, a type or length changed:
// Poll carries what flows and stops with a *SchemaChangeError, before
// anything is written, on a type the bronze table cannot take (ddl.go
// says which is which). Switch moves a stream to a table's newer capture
// instance at its start_lsn, the way SQL Server takes a schema change into
// CDC; PickInstance and PickAmong say which instance a bootstrap uses while
// a table has two.
//
// # A light touch on the source
//
// Options.RowsPerSecond caps the rows one snapshot reads per second, all
// its partitions together; Options.Limiter is a budget shared by every
// snapshot given the same one (a *rate.Limiter of golang.org/x/time/rate),
// to cap a process that bootstraps many tables at once. Both apply to
// Backfill too (BackfillOptions). Rows are paid for batch by batch as the
// source returns them; waits end with the context.
//
// # Reading from a readable secondary
//
// A source whose connections can land on different replicas (a DSN with
// ApplicationIntent=ReadOnly behind an availability group listener:
// source/sqlserver's doc) may plan on one replica and read a partition on
// another that has not yet applied the log up to L0. Every partition read
// therefore asks the source for a database at least as recent as the max
// LSN the plan read (Plan.MaxLSN, source.ReadOptions.NotBefore; for a
// chunk of Backfill, its wave's stamp), and a replica behind it refuses
// the read with source.ErrReplicaBehind: the snapshot fails and commits
// nothing, and a rerun after the replica caught up resumes the same plan
// (with a sink that records partial snapshots), reading only what is
// missing. A new capture instance on a quiet database, whose L0 is its
// start_lsn - 1 (above every max LSN so far), is checked against that
// max LSN, not L0, so it is never refused for it.
//
// # Tables without a unique index
//
// A capture instance without a unique index has no key to cut into
// ranges and is read as one range (Plan.Reason says so, and which option
// to set). Options.SplitColumn names an indexed column to cut on instead,
// unique or not: complementary range predicates read every row exactly
// once, NULLs in the first range. The plan records the split column, so a
// resumed or fanned-out snapshot reads the same ranges.
//
// Without a key, nothing in this lock-free design makes the snapshot and
// its stream idempotent. The read never sees the table exactly at L0: L0
// is the last LSN the capture job has processed, which trails the log
// (sys.fn_cdc_get_max_lsn; source/sqlserver/FACTS.md F06), so a commit it
// has not harvested yet is above L0 and visible to the read; and the
// read's own view is taken later still (at its first read under
// SNAPSHOT, F33) or moves while it scans (READ COMMITTED, F34). A row
// inserted in between arrives twice, from the snapshot and from the
// stream; one deleted in between is removed by the stream from a
// snapshot that never held it. A keyed merge absorbs both; a multiset
// cannot. Take a table without a key while it is quiet and the capture
// job has caught up; package reconcile compares its target with the
// source as a multiset and reports the copies that differ.
//
// # Metrics
//
// With Options.MeterProvider (or BackfillOptions.MeterProvider) set, a
// snapshot records these instruments through OpenTelemetry's metric API
// (instrumentation scope github.com/cdcsnap/cdcsnap/snapshot; the package
// depends on the API only, never the SDK). Every measurement carries the
// attribute cdcsnap.capture_instance, the capture instance as the options
// name it; cdcsnap.snapshot.tables also carries cdcsnap.snapshot.outcome.
//
//	name                                  kind       unit         what
//	cdcsnap.snapshot.read.rows            counter    {row}        rows read from the source
//	cdcsnap.snapshot.read.size            counter    By           bytes of the Arrow buffers of those rows
//	cdcsnap.snapshot.written.rows         counter    {row}        rows of each partition (chunk) written to the sink
//	cdcsnap.snapshot.written.size         counter    By           bytes written, as the sink reports them (sink.Part.Bytes)
//	cdcsnap.snapshot.partitions           counter    {partition}  partitions (chunks) read and written
//	cdcsnap.snapshot.tables               counter    {table}      Take, Bootstrap or Backfill calls ended, by outcome
//	cdcsnap.snapshot.partition.duration   histogram  s            time to read a partition and write it to the sink
//	cdcsnap.snapshot.commit.duration      histogram  s            time of the sink's commit (of a snapshot, or of a wave)
//	cdcsnap.snapshot.throttle.time        counter    s            time reads waited for the rows-per-second limits
//
// cdcsnap.snapshot.outcome is committed (a new snapshot), existing (the
// sink held it, or another process committed first), stale (ErrStale),
// canceled (the context ended) or failed. Rows read count every batch the
// source returned, also those of a partition that then failed; rows
// written count finished partitions only, so after a failure and a
// resumed rerun the written rows add up to the table once. Partitions a
// rerun resumes are not counted again.
package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Result is the outcome of a snapshot.
type Result struct {
	// LSN is the snapshot's LSN: every commit up to it is in the rows, and
	// the stream starts after it (StreamFrom).
	LSN lsn.LSN
	// CommitTS is the commit time of LSN at the source; zero when the
	// source has none (no captured commit at or below LSN yet), and then
	// _commit_ts is NULL on the snapshot rows.
	CommitTS time.Time
	// Existing is true when the sink already held the snapshot (a rerun, or
	// another process that committed first) and nothing new was committed.
	Existing bool
	// Rows is the number of rows committed by this call (zero when Existing).
	Rows int64
	// Partitions is the number of ranges committed (zero when Existing).
	Partitions int
	// Resumed is true when the snapshot resumed a partial one (Take, after
	// a failure or a crash); PartitionsResumed of its partitions, holding
	// RowsResumed of its rows, were written by that earlier attempt and
	// not read again.
	Resumed           bool
	PartitionsResumed int
	RowsResumed       int64
	// Version is the sink's commit version of the snapshot.
	Version int64
}

// StreamFrom returns the first LSN the stream must read: the one after LSN.
func (r Result) StreamFrom() (lsn.LSN, error) { return r.LSN.Next() }

// Plan is everything the workers of one snapshot share. It is JSON so it
// can be shipped to other processes; Execute and Commit need nothing else.
type Plan struct {
	// PlanHeader is the plan (parts written for another plan ID are
	// refused), its instance and its LSN L0.
	PlanHeader
	// SplitColumn is Options.SplitColumn: when set, Instance is the
	// resolved instance's SplitOn copy, whose Key is this one column and
	// whose KeyIndex is the index that seeks on it, and Ranges cut it.
	SplitColumn string `json:"split_column,omitempty"`
	// Strategy says how the key was cut ("uniform", "keyset", "single").
	Strategy string `json:"strategy"`
	// Reason says why the key is read as one range, when it is.
	Reason string `json:"reason,omitempty"`
	// Warnings say what makes the read costlier than its plan looks (a
	// nonclustered key index, for one); they are logged too.
	Warnings []string `json:"warnings,omitempty"`
	// Ranges are the partitions, by index.
	Ranges []keyrange.Range `json:"ranges"`
	// EstimatedRows is the table's row count from metadata, -1 if unknown.
	EstimatedRows int64 `json:"estimated_rows"`
	// Replaces is the LSN of the snapshot a resnapshot replaces (zero when
	// the sink held none when the plan was made); see sink.Info.Replaces.
	Replaces lsn.LSN `json:"replaces"`
	// ReadOptions are the read options.
	ReadOptions
	// Recorded is true when the plan is recorded with the sink as a partial
	// snapshot (Prepare): Execute then records each finished partition's
	// part with it (sink.PartialSink), so a rerun resumes.
	Recorded bool `json:"recorded,omitempty"`
	// Expires, for a Recorded plan, is Options.ResumeWithin after the plan
	// was recorded: CheckUsable refuses to commit it later, since a VACUUM
	// may by then have removed the uncommitted files of its first
	// partitions. Zero: never.
	Expires time.Time `json:"expires,omitzero"`

	keyless bool // the instance has no unique key (before any SplitOn)
}

// PlanHeader is what a plan, whole (Plan) or chunked (BackfillPlan),
// starts with: which snapshot it is and the LSN it is stamped with. Its
// fields keep their place in the plan's JSON.
type PlanHeader struct {
	// ID identifies the plan: random bytes, in hex.
	ID string `json:"id"`
	// CaptureInstance is the name as the options gave it.
	CaptureInstance string `json:"capture_instance"`
	// Instance is the resolved capture instance (its stored name, columns
	// and key).
	Instance source.CaptureInstance `json:"instance"`
	// LSN is the snapshot's LSN (L0 of a whole snapshot, S of a chunked
	// one), recorded before any row was read.
	LSN lsn.LSN `json:"lsn"`
	// MaxLSN is sys.fn_cdc_get_max_lsn() as read when LSN was recorded:
	// LSN itself, or below it when LSN is a new instance's start_lsn - 1
	// (a quiet database, whose max LSN stays below that). Every partition
	// read asks for a database at least that recent
	// (source.ReadOptions.NotBefore), so a read that lands on a readable
	// secondary whose redo is behind it fails with source.ErrReplicaBehind
	// instead of reading rows older than LSN, which the stream, starting
	// after LSN, would never correct; a rerun resumes once the replica
	// has caught up. LSN is never checked itself: on a quiet database no
	// replica reaches it. A chunk whose wave is stamped above S (the max
	// LSN its wave read) asks for its stamp instead. Zero, in a plan
	// written before it was recorded or when nothing was captured yet,
	// checks nothing. A resumed plan keeps its own.
	MaxLSN lsn.LSN `json:"max_lsn,omitzero"`
	// CommitTS is the commit time of LSN.
	CommitTS time.Time `json:"commit_ts"`
}

// Take takes a whole snapshot of opts.CaptureInstance from src into dst,
// keeping the rules of DESIGN.md: if dst already holds a whole snapshot of
// the instance (and not opts.Resnapshot), it returns that snapshot's LSN and
// reads nothing (R2); otherwise it records L0 (R3), plans, reads the
// partitions in parallel, and commits once (R7). A failure before the
// commit commits nothing.
//
// When dst records partial snapshots (sink.PartialSink, as sink/delta
// does), the plan is recorded before any row is read and every partition's
// part as it finishes, so a rerun after a failure or a crash resumes: it
// reads only the partitions not yet written and commits every part at once
// (see Prepare for when a partial snapshot is abandoned instead). Just
// before the commit Take checks that the snapshot may still be handed to a
// stream (CommitUsable); if not, it drops the partial snapshot and
// returns an error wrapping ErrStale, and a rerun starts a new one.
func Take(ctx context.Context, src source.Source, dst sink.Sink, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	m, err := newMetrics(opts.MeterProvider, opts.CaptureInstance)
	if err != nil {
		return Result{}, err
	}
	res, err := take(ctx, src, dst, opts, newRun(opts.RowsPerSecond, opts.Limiter, m))
	m.ended(ctx, res, err)
	return res, err
}

func take(ctx context.Context, src source.Source, dst sink.Sink, opts Options, run *run) (Result, error) {
	var (
		prep  *Prepared
		parts []sink.Part
		err   error
	)
	for attempt := 0; ; attempt++ {
		prep, err = Prepare(ctx, src, dst, opts)
		if err != nil {
			return Result{}, err
		}
		if prep.Existing != nil {
			return *prep.Existing, nil
		}
		parts, err = executeAll(ctx, src, dst, prep, opts, run)
		if !errors.Is(err, ErrPlanDropped) || attempt == 2 {
			// A read that failed for a DDL (a column dropped: error 207; the
			// table renamed: 208) says so.
			err = explainReadError(ctx, src, &prep.Plan.Instance, false, err)
			break
		}
		// Another process committed the plan, or a newer snapshot: return
		// what landed. Or it abandoned the plan: prepare again.
		if snap, ferr := dst.FindSnapshot(ctx, opts.CaptureInstance); ferr == nil && snap.LSN != prep.Plan.Replaces {
			opts.Logger.InfoContext(ctx, "another process committed a snapshot first; returning it", "capture_instance", opts.CaptureInstance, "lsn", snap.LSN)
			return existing(snap), nil
		}
		opts.Logger.InfoContext(ctx, "the partial snapshot was abandoned by another process; preparing again", "capture_instance", opts.CaptureInstance, "plan_id", prep.Plan.ID)
	}
	if err != nil {
		return Result{}, err
	}
	res, err := commitUsable(ctx, src, dst, prep.Plan, parts, opts.Logger, run.metrics)
	if err != nil || res.Existing {
		return res, err
	}
	res.Resumed = prep.Resumed
	res.PartitionsResumed = len(prep.Done)
	for _, p := range prep.Done {
		res.RowsResumed += p.Rows
	}
	return res, nil
}

func existing(s sink.Snapshot) Result {
	return Result{LSN: s.LSN, CommitTS: s.CommitTS, Existing: true, Version: s.Version}
}

// Bootstrap takes (or finds) the whole snapshot, as Take does, and returns
// the first LSN the caller's stream must read.
func Bootstrap(ctx context.Context, src source.Source, dst sink.Sink, opts Options) (from lsn.LSN, res Result, err error) {
	res, err = Take(ctx, src, dst, opts)
	if err != nil {
		return lsn.LSN{}, res, err
	}
	from, err = res.StreamFrom()
	return from, res, err
}

// NewPlan resolves the capture instance, records L0 and its commit time,
// and plans the partitions. It reads no row of the table, and it neither
// looks for an existing snapshot nor records the plan with the sink:
// Prepare does both, and is what a fan-out coordinator should call.
func NewPlan(ctx context.Context, src source.Source, opts Options) (*Plan, error) {
	return newPlan(ctx, src, opts, nil)
}

// newPlan is NewPlan, with check (when not nil) run on the bronze schema
// before L0 is recorded.
func newPlan(ctx context.Context, src source.Source, opts Options, check func(*arrow.Schema) error) (*Plan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	o, err := open(ctx, src, opts.CaptureInstance, opts.SplitColumn, opts.Logger, check)
	if err != nil {
		return nil, fmt.Errorf("snapshot %q: %w", opts.CaptureInstance, err)
	}
	ci, l0 := o.ci, o.lsn
	plan := &Plan{
		PlanHeader: PlanHeader{
			ID:              o.id,
			CaptureInstance: opts.CaptureInstance,
			Instance:        *ci,
			LSN:             l0,
			MaxLSN:          o.maxLSN,
			CommitTS:        o.commitTS,
		},
		SplitColumn:   opts.SplitColumn,
		EstimatedRows: o.estimatedRows,
		ReadOptions:   opts.ReadOptions,
		keyless:       o.keyless,
	}
	if err := planRanges(ctx, src, ci, plan, opts); err != nil {
		return nil, fmt.Errorf("snapshot %q: planning partitions: %w", opts.CaptureInstance, err)
	}
	if o.keyless && len(plan.Ranges) > 1 {
		w := fmt.Sprintf("the table has no unique key and is cut on %s: a row whose %s changes while the snapshot reads can be missed or read twice, and nothing repairs it (see Options.SplitColumn)", opts.SplitColumn, opts.SplitColumn)
		plan.Warnings = append(plan.Warnings, w)
		opts.Logger.WarnContext(ctx, w, "capture_instance", ci.Name)
	}
	opts.Logger.InfoContext(ctx, "snapshot planned", "capture_instance", ci.Name, "lsn", l0, "commit_ts", plan.CommitTS,
		"strategy", plan.Strategy, "partitions", len(plan.Ranges), "estimated_rows", plan.EstimatedRows)
	return plan, nil
}

// opening is what every snapshot, whole or chunked, records before it
// reads: the resolved capture instance, its LSN, the max LSN it came from
// and its commit time, a new plan id, and the row count of metadata (-1
// when unavailable).
type opening struct {
	ci            *source.CaptureInstance
	lsn           lsn.LSN
	maxLSN        lsn.LSN // as read: at or below lsn
	commitTS      time.Time
	id            string
	estimatedRows int64
	keyless       bool // the instance has no unique key (before any SplitOn)
}

// open resolves the capture instance (DESIGN.md R1) and, when split is set,
// takes its copy keyed on that column (source.CaptureInstance.SplitOn); checks
// that its columns make a bronze schema the target can take (check, when
// not nil: the sink's sink.Checker), and only then records the snapshot's
// LSN (R3) and commit time.
func open(ctx context.Context, src source.Source, name, split string, logger *slog.Logger, check func(*arrow.Schema) error) (opening, error) {
	ci, err := src.CaptureInstance(ctx, name)
	if err != nil {
		return opening{}, err
	}
	if p := pendingColumns(ci); len(p) > 0 {
		// The table's type is not the captured one yet (an ALTER COLUMN
		// the capture job has not processed, FACTS.md F62): reads cast to
		// the captured type would truncate or round (F92). DESIGN.md R15.
		return opening{}, &ColumnsChangedError{CaptureInstance: ci.Name, Columns: p, Pending: true}
	}
	keyless := len(ci.Key) == 0
	if split != "" {
		if ci, err = ci.SplitOn(split); err != nil {
			return opening{}, fmt.Errorf("%w: SplitColumn: %w", ErrInvalidOptions, err)
		}
	}
	captured, err := source.ArrowSchema(ci.Columns)
	if err != nil {
		return opening{}, err
	}
	bronze, err := sink.BronzeSchema(captured)
	if err != nil {
		return opening{}, err
	}
	if check != nil {
		if err := check(bronze); err != nil {
			return opening{}, fmt.Errorf("the target cannot take capture instance %q: %w", ci.Name, err)
		}
	}
	at, maxLSN, err := startLSN(ctx, src, ci)
	if err != nil {
		return opening{}, err
	}
	commitTS, err := src.LSNTime(ctx, at)
	if err != nil {
		return opening{}, fmt.Errorf("commit time of %s: %w", at, err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return opening{}, fmt.Errorf("plan id: %w", err)
	}
	o := opening{ci: ci, lsn: at, maxLSN: maxLSN, commitTS: commitTS.UTC(), id: hex.EncodeToString(id), estimatedRows: -1, keyless: keyless}
	if n, err := src.RowCount(ctx, ci); err == nil {
		o.estimatedRows = n
	} else {
		logger.WarnContext(ctx, "row count unavailable", "capture_instance", ci.Name, "err", err)
	}
	return o, nil
}

// startLSN is DESIGN.md R3: max LSN, or start_lsn - 1 when capture has not
// reached a new instance yet (min LSN is NULL meanwhile). It returns the max LSN as
// read too: what reads must see (Plan.MaxLSN).
func startLSN(ctx context.Context, src source.Source, ci *source.CaptureInstance) (at, maxLSN lsn.LSN, err error) {
	maxLSN, err = src.MaxLSN(ctx)
	if err != nil {
		return lsn.LSN{}, lsn.LSN{}, fmt.Errorf("max LSN: %w", err)
	}
	if ci.StartLSN.Compare(maxLSN) > 0 {
		at, err = ci.StartLSN.Prev()
		return at, maxLSN, err
	}
	return maxLSN, maxLSN, nil
}

func planRanges(ctx context.Context, src source.Source, ci *source.CaptureInstance, plan *Plan, opts Options) error {
	key, err := ci.KeyColumns()
	if err != nil {
		return err
	}
	strategy, reason := keyrange.Choose(key, opts.Partitions)
	if len(key) == 0 && opts.Partitions > 1 {
		reason = noKeyReason(ci)
	}
	plan.Strategy, plan.Reason = strategy.String(), reason
	if w := keyIndexWarning(ci); w != "" && strategy != keyrange.Single {
		plan.Warnings = append(plan.Warnings, w)
		opts.Logger.WarnContext(ctx, w, "capture_instance", ci.Name)
	}
	switch strategy {
	case keyrange.Uniform:
		lo, hi, ok, err := src.IntKeyBounds(ctx, ci)
		if err != nil {
			return fmt.Errorf("key bounds: %w", err)
		}
		if !ok {
			plan.Ranges = keyrange.Whole()
			return nil
		}
		rows := plan.EstimatedRows
		if ci.UniqueKey() {
			// A unique integer key holds at most MAX - MIN + 1 rows,
			// whatever the metadata says (it is stale by nature, F16).
			if span := uint64(hi) - uint64(lo) + 1; span != 0 && span <= math.MaxInt64 && (rows < 0 || int64(span) < rows) {
				rows = int64(span)
			}
		}
		n := fewerPartitions(ctx, ci, plan, rows, opts)
		plan.Ranges = keyrange.UniformRanges(lo, hi, n)
	case keyrange.Keyset:
		if plan.EstimatedRows < 0 {
			plan.Ranges = keyrange.Whole()
			plan.Reason = "no row count to plan keyset ranges from"
			break
		}
		n := fewerPartitions(ctx, ci, plan, plan.EstimatedRows, opts)
		ranges, err := keyrange.NTile(ctx, seeker{src, ci, opts.Isolation}, plan.EstimatedRows, n)
		if err != nil {
			return err
		}
		if plan.Ranges, err = dropEmptyRanges(ranges, key); err != nil {
			return err
		}
	default:
		plan.Ranges = keyrange.Whole()
	}
	if plan.Reason != "" && opts.Partitions > 1 {
		opts.Logger.InfoContext(ctx, "reading the table as one partition", "capture_instance", ci.Name, "reason", plan.Reason)
	}
	return nil
}

// fewerPartitions is how many partitions a table of rows rows (-1:
// unknown) is cut into (Options.PartitionsFor): when that is fewer than
// Options.Partitions it logs why, and when it is one it says so in
// plan.Reason.
func fewerPartitions(ctx context.Context, ci *source.CaptureInstance, plan *Plan, rows int64, opts Options) int {
	n := opts.PartitionsFor(rows)
	if n >= opts.Partitions {
		return n
	}
	least := cmp.Or(opts.MinPartitionRows, DefaultMinPartitionRows)
	if n == 1 {
		plan.Reason = fmt.Sprintf("the table holds ~%d rows, too few for two partitions of at least %d (Options.MinPartitionRows)", rows, least)
	} else {
		opts.Logger.InfoContext(ctx, "a small table: fewer partitions than Options.Partitions", "capture_instance", ci.Name,
			"partitions", n, "asked", opts.Partitions, "rows", rows, "min_partition_rows", least)
	}
	return n
}

// noKeyReason says why a capture instance without a key is read as one
// range, and which option reads it in parallel.
func noKeyReason(ci *source.CaptureInstance) string {
	const why = "the capture instance has no unique index, so it has no key to cut into ranges"
	var lead []string
	for _, ix := range ci.Indexes {
		if len(ix.Columns) > 0 && !slices.Contains(lead, ix.Columns[0]) {
			lead = append(lead, ix.Columns[0])
		}
	}
	switch {
	case len(lead) > 0:
		return fmt.Sprintf("%s: set Options.SplitColumn to the leading column of one of the table's indexes (%s) to read it in ranges", why, strings.Join(lead, ", "))
	case ci.Heap:
		return fmt.Sprintf("%s, and the table is a heap without indexes: a range of any column would scan the whole table; create an index and set Options.SplitColumn to its leading column to read it in ranges", why)
	default:
		return fmt.Sprintf("%s: set Options.SplitColumn to the leading column of one of the table's indexes to read it in ranges", why)
	}
}

// dropEmptyRanges merges each range whose bounds compare equal (a seek
// over a column whose values repeat may return its start again) into the
// range before it, renumbering the rest. Merging, not dropping: Go's model
// of a collation may call two bounds equal that the server orders apart
// (FACTS.md F53: "aA" and "aa" under Danish_Norwegian_CI_AS), and the rows
// between them must still belong to a range. The ranges still meet at
// identical bounds, so every key lies in exactly one range.
func dropEmptyRanges(ranges []keyrange.Range, key []keyrange.Column) ([]keyrange.Range, error) {
	out := ranges[:0:0]
	for _, r := range ranges {
		if len(out) > 0 && r.Lower != nil && r.Upper != nil {
			c, err := keyrange.CompareTuples(key, r.Lower, r.Upper)
			if err != nil {
				return nil, fmt.Errorf("comparing the bounds of %s: %w", r, err)
			}
			if c == 0 {
				out[len(out)-1].Upper = r.Upper
				continue
			}
		}
		r.Index = len(out)
		out = append(out, r)
	}
	return out, nil
}

// keyIndexWarning says when ci's key comes from a nonclustered index: a
// range of it is then an index seek plus a key lookup per row, or a scan of
// the whole table, per partition (FACTS.md F36).
func keyIndexWarning(ci *source.CaptureInstance) string {
	if ci.KeyIndex == nil || ci.KeyIndex.Clustered {
		return ""
	}
	return fmt.Sprintf("the key's unique index %s is nonclustered: each key range costs an index seek plus a key lookup per row, or a scan of the table; a clustered index on the key, or fewer partitions, reads less", ci.KeyIndex.Name)
}

// seeker adapts a Source to keyrange.Seeker for one capture instance.
type seeker struct {
	src source.Source
	ci  *source.CaptureInstance
	iso source.Isolation
}

func (s seeker) SeekKey(ctx context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	return s.src.SeekKey(ctx, s.ci, s.iso, from, k)
}

// Info returns what a sink needs to know of the snapshot being written.
func (p *Plan) Info() (sink.Info, error) {
	captured, err := source.ArrowSchema(p.Instance.Columns)
	if err != nil {
		return sink.Info{}, err
	}
	schema, err := sink.BronzeSchema(captured)
	if err != nil {
		return sink.Info{}, err
	}
	return sink.Info{CaptureInstance: p.CaptureInstance, LSN: p.LSN, CommitTS: p.CommitTS, Schema: schema, PlanID: p.ID, Replaces: p.Replaces}, nil
}

// ErrInvalidPlan is wrapped by Execute and Commit for a plan whose ranges
// do not tile the key space exactly once (a plan damaged or edited on its
// way to a worker): reading it would lose or repeat rows.
var ErrInvalidPlan = errors.New("invalid snapshot plan")

// Validate checks that the plan's ranges tile the key space: at least one,
// numbered in order, the first open below and the last open above, each
// upper bound the next range's lower bound, bounds strictly increasing;
// and that MaxLSN is not above LSN (L0 is never below the max LSN it was
// taken from).
func (p *Plan) Validate() error {
	key, err := p.Instance.KeyColumns()
	if err == nil {
		err = checkReadAhead(p.ReadAhead)
	}
	if err == nil {
		err = checkMaxLSN(p.MaxLSN, p.LSN)
	}
	if err == nil {
		err = p.checkSplit()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	return validateRanges(p.Ranges, key)
}

// checkMaxLSN checks a plan's recorded max LSN against its LSN.
func checkMaxLSN(maxLSN, at lsn.LSN) error {
	if at.Less(maxLSN) {
		return fmt.Errorf("the max LSN %s it was planned at is above its LSN %s", maxLSN, at)
	}
	return nil
}

// checkSplit checks that a plan with a SplitColumn reads by that column
// alone, through an index that leads with it.
func (p *Plan) checkSplit() error {
	if p.SplitColumn == "" {
		return nil
	}
	ix := p.Instance.KeyIndex
	switch {
	case len(p.Instance.Key) != 1 || p.Instance.Key[0] != p.SplitColumn:
		return fmt.Errorf("the plan splits on %q but its key is %v", p.SplitColumn, p.Instance.Key)
	case ix == nil || len(ix.Columns) == 0 || ix.Columns[0] != p.SplitColumn:
		return fmt.Errorf("the plan splits on %q but names no index leading with it (%+v)", p.SplitColumn, ix)
	}
	return nil
}

func validateRanges(ranges []keyrange.Range, key []keyrange.Column) error {
	n := len(ranges)
	switch {
	case n == 0:
		return fmt.Errorf("%w: no ranges", ErrInvalidPlan)
	case ranges[0].Lower != nil:
		return fmt.Errorf("%w: the first range is not open below", ErrInvalidPlan)
	case ranges[n-1].Upper != nil:
		return fmt.Errorf("%w: the last range is not open above", ErrInvalidPlan)
	}
	for i, r := range ranges {
		if r.Index != i {
			return fmt.Errorf("%w: range %d has index %d", ErrInvalidPlan, i, r.Index)
		}
		if i == n-1 {
			break
		}
		next := ranges[i+1]
		if r.Upper == nil || next.Lower == nil {
			return fmt.Errorf("%w: ranges %d and %d do not meet", ErrInvalidPlan, i, i+1)
		}
		// Identical values, not only equal under Go's model of the
		// collation: the server may order two such values apart, and the
		// keys between them would be in no range.
		if c, err := keyrange.CompareTuples(key, r.Upper, next.Lower); err != nil || c != 0 || !reflect.DeepEqual(r.Upper, next.Lower) {
			return fmt.Errorf("%w: range %d ends at %v but range %d starts at %v", ErrInvalidPlan, i, r.Upper, i+1, next.Lower)
		}
		if r.Lower != nil {
			if c, err := keyrange.CompareTuples(key, r.Lower, r.Upper); err != nil || c >= 0 {
				return fmt.Errorf("%w: range %d is empty or reversed (%s)", ErrInvalidPlan, i, r)
			}
		}
	}
	return nil
}

// Execute reads partition i of the plan from src and writes its rows to
// dst, invisible until Commit. It can run on any process that has the plan.
// When the plan is Recorded, it records the part with dst once written; if
// another process recorded the partition first, it returns that part (its
// own files are never committed).
// progress, when non-nil, is called with the rows written so far in this
// partition after each batch. A plan whose ranges do not tile the key space
// is refused (ErrInvalidPlan).
func Execute(ctx context.Context, src source.Source, dst sink.Sink, plan *Plan, i int, progress func(rows int64)) (sink.Part, error) {
	return execute(ctx, src, dst, plan, i, progress, nil)
}

// execute is Execute, reading through run's budgets and metrics.
func execute(ctx context.Context, src source.Source, dst sink.Sink, plan *Plan, i int, progress func(rows int64), run *run) (sink.Part, error) {
	if err := plan.Validate(); err != nil {
		return sink.Part{}, fmt.Errorf("snapshot %q: %w", plan.CaptureInstance, err)
	}
	if i < 0 || i >= len(plan.Ranges) {
		return sink.Part{}, fmt.Errorf("snapshot %q: partition %d does not exist (the plan has %d)", plan.CaptureInstance, i, len(plan.Ranges))
	}
	info, err := plan.Info()
	if err != nil {
		return sink.Part{}, fmt.Errorf("snapshot %q: %w", plan.CaptureInstance, err)
	}
	ps, records := dst.(sink.PartialSink)
	if plan.Recorded && !records {
		return sink.Part{}, fmt.Errorf("snapshot %q: the plan records its parts with the sink, and %T does not implement sink.PartialSink", plan.CaptureInstance, dst)
	}
	rr, err := readRange(ctx, src, &plan.Instance, plan.Ranges[i], source.ReadOptions{Isolation: plan.Isolation, BatchRows: plan.BatchRows, NotBefore: plan.MaxLSN}, plan.ReadAhead, run)
	if err != nil {
		return sink.Part{}, fmt.Errorf("snapshot %q: reading partition %d (%s): %w", plan.CaptureInstance, i, plan.Ranges[i], err)
	}
	stamped, err := newStamper(rr, info.Schema, stamp{
		captureInstance: plan.CaptureInstance,
		lsn:             plan.LSN.String(),
		commitTS:        plan.CommitTS,
	}, progress)
	rr.Release()
	if err != nil {
		return sink.Part{}, fmt.Errorf("snapshot %q: partition %d: %w", plan.CaptureInstance, i, err)
	}
	defer stamped.Release()
	part, err := dst.WritePartition(ctx, info, i, stamped)
	if err == nil {
		err = stamped.Err()
	}
	if err == nil && plan.Recorded {
		part, err = recordPart(ctx, ps, info, part)
	}
	if err != nil {
		return sink.Part{}, fmt.Errorf("snapshot %q: partition %d (%s): %w", plan.CaptureInstance, i, plan.Ranges[i], err)
	}
	return part, nil
}

// Commit commits every partition's part in one sink commit. Parts must come
// from this plan, one per partition. If a snapshot of the same capture
// instance landed meanwhile, Commit returns that one (Existing) and the
// parts stay invisible. A Recorded plan's records are dropped from the sink
// afterwards. logger may be nil. CommitUsable checks the plan first, as a
// caller should.
func Commit(ctx context.Context, dst sink.Sink, plan *Plan, parts []sink.Part, logger *slog.Logger) (Result, error) {
	return commit(ctx, dst, plan, parts, logger, nil)
}

// commit is Commit, recording the sink commit's duration in m.
func commit(ctx context.Context, dst sink.Sink, plan *Plan, parts []sink.Part, logger *slog.Logger, m *metrics) (Result, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := plan.Validate(); err != nil {
		return Result{}, fmt.Errorf("snapshot %q: %w", plan.CaptureInstance, err)
	}
	if err := checkParts(plan, parts); err != nil {
		return Result{}, err
	}
	info, err := plan.Info()
	if err != nil {
		return Result{}, fmt.Errorf("snapshot %q: %w", plan.CaptureInstance, err)
	}
	start := time.Now()
	snap, err := dst.CommitSnapshot(ctx, info, parts)
	m.committed(ctx, time.Since(start))
	if errors.Is(err, sink.ErrSnapshotExists) {
		logger.InfoContext(ctx, "another snapshot landed first; returning it", "capture_instance", plan.CaptureInstance, "lsn", snap.LSN)
		dropPartial(ctx, dst, plan, logger)
		return existing(snap), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("snapshot %q: commit: %w", plan.CaptureInstance, err)
	}
	var rows int64
	for _, p := range parts {
		rows += p.Rows
	}
	logger.InfoContext(ctx, "snapshot committed", "capture_instance", plan.CaptureInstance, "lsn", plan.LSN, "rows", rows, "version", snap.Version)
	dropPartial(ctx, dst, plan, logger)
	return Result{LSN: plan.LSN, CommitTS: plan.CommitTS, Rows: rows, Partitions: len(plan.Ranges), Version: snap.Version}, nil
}

// CommitUsable commits parts as Commit does, after Plan.CheckUsable: a
// plan that may no longer be used commits nothing, its records are dropped
// from dst (so a rerun starts a new snapshot), and the error wraps
// ErrStale. Take ends with it; so should a fan-out coordinator. logger may
// be nil.
func CommitUsable(ctx context.Context, src source.Source, dst sink.Sink, plan *Plan, parts []sink.Part, logger *slog.Logger) (Result, error) {
	return commitUsable(ctx, src, dst, plan, parts, logger, nil)
}

func commitUsable(ctx context.Context, src source.Source, dst sink.Sink, plan *Plan, parts []sink.Part, logger *slog.Logger, m *metrics) (Result, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := plan.CheckUsable(ctx, src); err != nil {
		if errors.Is(err, ErrStale) {
			logger.WarnContext(ctx, "abandoning the snapshot before its commit", "capture_instance", plan.CaptureInstance, "plan_id", plan.ID, "reason", err)
			dropPartial(ctx, dst, plan, logger)
		}
		return Result{}, err
	}
	return commit(ctx, dst, plan, parts, logger, m)
}

// checkParts refuses parts of another plan, duplicates and missing ones.
func checkParts(plan *Plan, parts []sink.Part) error {
	seen := make([]bool, len(plan.Ranges))
	for _, p := range parts {
		switch {
		case p.PlanID != plan.ID:
			return fmt.Errorf("snapshot %q: part of partition %d belongs to plan %q, not %q", plan.CaptureInstance, p.Partition, p.PlanID, plan.ID)
		case p.Partition < 0 || p.Partition >= len(seen):
			return fmt.Errorf("snapshot %q: part of partition %d: the plan has %d partitions", plan.CaptureInstance, p.Partition, len(seen))
		case seen[p.Partition]:
			return fmt.Errorf("snapshot %q: two parts for partition %d", plan.CaptureInstance, p.Partition)
		}
		seen[p.Partition] = true
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("snapshot %q: no part for partition %d", plan.CaptureInstance, i)
		}
	}
	return nil
}

// executeAll runs Execute for every partition of prep.Todo, at most
// opts.Parallelism at once, and returns them with prep.Done in partition
// order. The first error cancels the rest; every goroutine has returned
// when it does.
func executeAll(ctx context.Context, src source.Source, dst sink.Sink, prep *Prepared, opts Options, run *run) ([]sink.Part, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plan := prep.Plan
	n := len(plan.Ranges)
	parts := make([]sink.Part, n)
	errs := make([]error, n)
	var (
		mu      sync.Mutex
		done    = len(prep.Done)
		perPart = make([]int64, n)
		total   int64
		resumed int64
		start   = time.Now()
	)
	for _, p := range prep.Done {
		parts[p.Partition] = p
		resumed += p.Rows
	}
	total = resumed
	report := func(i int, rows int64, finished bool) {
		if opts.Progress == nil && !finished {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		total += rows - perPart[i]
		perPart[i] = rows
		if finished {
			done++
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Rows: total, EstimatedRows: plan.EstimatedRows, PartitionsDone: done, PartitionsResumed: len(prep.Done), RowsResumed: resumed, Partitions: n, Elapsed: time.Since(start)})
		}
	}
	if opts.Progress != nil && len(prep.Done) > 0 {
		opts.Progress(Progress{Rows: total, EstimatedRows: plan.EstimatedRows, PartitionsDone: done, PartitionsResumed: len(prep.Done), RowsResumed: resumed, Partitions: n})
	}
	// Workers take partitions in plan order, so a failure leaves a prefix
	// of the plan (with one worker) recorded, and progress reads in order.
	todo := make(chan int, len(prep.Todo))
	for _, i := range prep.Todo {
		todo <- i
	}
	close(todo)
	var wg sync.WaitGroup
	for range min(opts.Parallelism, len(prep.Todo)) {
		wg.Go(func() {
			for i := range todo {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					return
				}
				began := time.Now()
				var part sink.Part
				err := again(ctx, opts.Logger, fmt.Sprintf("partition %d", i), func() (err error) {
					part, err = execute(ctx, src, dst, plan, i, func(rows int64) { report(i, rows, false) }, run)
					return err
				})
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				run.metrics.partitionWritten(ctx, part.Rows, part.Bytes, time.Since(began))
				parts[i] = part
				report(i, part.Rows, true)
				opts.Logger.DebugContext(ctx, "partition written", "partition", i, "rows", part.Rows)
			}
		})
	}
	wg.Wait()
	// Report the first real failure, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return parts, nil
}
