package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// ErrStale is wrapped by CheckUsable's error (and so by Take's) when a
// plan may no longer be committed: the stream it hands over would start
// below what change data cleanup kept, the capture instance is not the
// one it read, or a recorded plan passed its Expires.
var ErrStale = errors.New("the snapshot can no longer be used")

// Prepared is where a whole snapshot stands before its read: the snapshot
// the sink holds already, or the plan to read and which of its partitions
// are left. Take runs it; a fan-out coordinator runs it instead of NewPlan,
// has Todo executed, and commits Done plus what they return.
type Prepared struct {
	// Existing is the sink's snapshot of the instance when it holds one
	// (and the options did not ask for a resnapshot): nothing is to be
	// read, and Plan is nil.
	Existing *Result
	// Plan is the snapshot's plan: a new one, or a partial snapshot's.
	Plan *Plan
	// Done are the parts a partial snapshot recorded that are intact, in
	// partition order; Todo are the partitions left to read, in order.
	Done []sink.Part
	Todo []int
	// Resumed is true when Plan is a partial snapshot found in the sink.
	Resumed bool
}

// Prepare finds where a whole snapshot of opts.CaptureInstance stands in
// dst. If dst holds a whole snapshot (and not opts.Resnapshot), it returns
// it as Existing. Otherwise, if dst records partial snapshots
// (sink.PartialSink) and holds one that may still be used, it returns its
// plan, the parts already written and the partitions left; a partial
// snapshot that may not be used (past opts.ResumeWithin, replaced, its
// capture instance recreated or changed, cleanup past its LSN, or
// opts.DiscardPartial) is dropped, the reason logged, and this run never
// commits its files. Else it records L0, plans, and records the plan with dst
// before any row is read, so that a rerun resumes it.
func Prepare(ctx context.Context, src source.Source, dst sink.Sink, opts Options) (*Prepared, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	for range 3 {
		prep, err := prepare(ctx, src, dst, opts)
		if !errors.Is(err, errStaleView) {
			return prep, err
		}
		// A snapshot landed after FindSnapshot answered: look again.
	}
	return nil, fmt.Errorf("snapshot %q: snapshots keep landing while it prepares; try again", opts.CaptureInstance)
}

// ErrTwinSnapshot is wrapped by the error of a re-snapshot (Options.
// Resnapshot) of a capture instance without a unique index whose L0 is
// the LSN of the snapshot it replaces. Both snapshots' rows would carry
// the same _snapshot and _start_lsn, so nothing could tell the copies
// apart, and a multiset of the table (package reconcile) would count each
// row twice. A keyed merge takes either copy, so keyed instances may.
// Nothing is written.
var ErrTwinSnapshot = errors.New("a re-snapshot of a table without a unique key would land at the LSN of the snapshot it replaces")

// errStaleView: the sink holds a partial snapshot planned against a newer
// snapshot than the one FindSnapshot returned.
var errStaleView = errors.New("the sink changed while it was read")

func prepare(ctx context.Context, src source.Source, dst sink.Sink, opts Options) (*Prepared, error) {
	var replaces lsn.LSN
	snap, err := dst.FindSnapshot(ctx, opts.CaptureInstance)
	switch {
	case err == nil && !opts.Resnapshot:
		opts.Logger.InfoContext(ctx, "snapshot exists; reading nothing", "capture_instance", opts.CaptureInstance, "lsn", snap.LSN, "version", snap.Version)
		dropReplaced(ctx, dst, snap, opts)
		res := existing(snap)
		return &Prepared{Existing: &res}, nil
	case err == nil:
		replaces = snap.LSN
	case !errors.Is(err, sink.ErrNotFound):
		return nil, fmt.Errorf("snapshot %q: looking for an earlier snapshot: %w", opts.CaptureInstance, err)
	}
	ps, recording := dst.(sink.PartialSink)
	recording = recording && opts.ResumeWithin > 0
	if recording {
		if prep, err := resume(ctx, src, ps, replaces, opts); err != nil || prep != nil {
			return prep, err
		}
	}
	plan, err := newPlan(ctx, src, opts, sinkCheck(ctx, dst, opts.CaptureInstance))
	if err != nil {
		return nil, err
	}
	plan.Replaces = replaces
	if plan.keyless && !replaces.IsZero() && plan.LSN == replaces {
		return nil, fmt.Errorf("snapshot %q: %w (%s): nothing was captured since it, and without a key its rows and the new ones could never be told apart (every row would count twice); keep that snapshot, or take the new one once the max LSN has moved", opts.CaptureInstance, ErrTwinSnapshot, replaces)
	}
	if recording {
		plan.Recorded = true
		plan.Expires = time.Now().UTC().Add(opts.ResumeWithin)
		info, err := plan.Info()
		if err != nil {
			return nil, fmt.Errorf("snapshot %q: %w", opts.CaptureInstance, err)
		}
		raw, err := json.Marshal(plan)
		if err != nil {
			return nil, fmt.Errorf("snapshot %q: encoding the plan: %w", opts.CaptureInstance, err)
		}
		if err := ps.OpenPartial(ctx, info, raw); err != nil {
			return nil, fmt.Errorf("snapshot %q: recording the plan with the sink: %w", opts.CaptureInstance, err)
		}
	}
	return &Prepared{Plan: plan, Todo: seq(len(plan.Ranges))}, nil
}

// dropReplaced drops the newest partial snapshot of the instance when it
// can never be committed any more: it was planned to replace a snapshot
// older than snap, the newest (the plan that committed snap, its records
// left by a crash between its commit and their removal, or a plan that
// lost the race to it). A partial resnapshot of snap stays, and so does
// one planned against a snapshot newer than this view of the sink.
func dropReplaced(ctx context.Context, dst sink.Sink, snap sink.Snapshot, opts Options) {
	ps, ok := dst.(sink.PartialSink)
	if !ok || opts.ResumeWithin < 0 {
		return
	}
	p, err := ps.FindPartial(ctx, opts.CaptureInstance)
	if err != nil || p.Replaces.Compare(snap.LSN) >= 0 {
		return
	}
	if err := ps.DropPartial(ctx, p.CaptureInstance, p.PlanID); err != nil {
		opts.Logger.WarnContext(ctx, "could not drop a replaced partial snapshot's records", "capture_instance", opts.CaptureInstance, "plan_id", p.PlanID, "err", err)
	}
}

// sinkCheck returns dst's check of a bronze schema (sink.Checker), or nil.
func sinkCheck(ctx context.Context, dst sink.Sink, captureInstance string) func(*arrow.Schema) error {
	c, ok := dst.(sink.Checker)
	if !ok {
		return nil
	}
	return func(schema *arrow.Schema) error { return c.CheckSnapshot(ctx, captureInstance, schema) }
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// maxAbandoned bounds how many partial snapshots one Prepare drops before
// it gives up (each drop makes FindPartial return an older one).
const maxAbandoned = 64

// resume returns the newest partial snapshot ps holds that may still be
// used, dropping the ones that may not; nil when none is left.
func resume(ctx context.Context, src source.Source, ps sink.PartialSink, replaces lsn.LSN, opts Options) (*Prepared, error) {
	for range maxAbandoned {
		p, err := ps.FindPartial(ctx, opts.CaptureInstance)
		if errors.Is(err, sink.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %q: looking for a partial snapshot: %w", opts.CaptureInstance, err)
		}
		plan, reason, err := usablePartial(ctx, src, p, replaces, opts)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			opts.Logger.WarnContext(ctx, "abandoning a partial snapshot; its files are never committed", "capture_instance", opts.CaptureInstance,
				"plan_id", p.PlanID, "lsn", p.LSN, "parts", len(p.Parts), "reason", reason)
			if err := ps.DropPartial(ctx, p.CaptureInstance, p.PlanID); err != nil {
				return nil, fmt.Errorf("snapshot %q: abandoning partial snapshot %s (%s): %w", opts.CaptureInstance, p.PlanID, reason, err)
			}
			continue
		}
		prep := &Prepared{Plan: plan, Resumed: true}
		prep.Done, prep.Todo = partsLeft(plan, p)
		opts.Logger.InfoContext(ctx, "resuming a partial snapshot", "capture_instance", opts.CaptureInstance, "plan_id", plan.ID, "lsn", plan.LSN,
			"partitions", len(plan.Ranges), "written", len(prep.Done), "lost", len(p.Lost), "to_read", len(prep.Todo), "age", time.Since(p.Created).Round(time.Second))
		return prep, nil
	}
	return nil, fmt.Errorf("snapshot %q: gave up after abandoning %d partial snapshots", opts.CaptureInstance, maxAbandoned)
}

// partsLeft returns the parts of p written for plan, in partition order
// (one per partition), and the partitions left to read.
func partsLeft(plan *Plan, p sink.Partial) (done []sink.Part, todo []int) {
	have := make([]bool, len(plan.Ranges))
	for _, part := range p.Parts {
		if part.PlanID == plan.ID && part.Partition >= 0 && part.Partition < len(have) && !have[part.Partition] {
			have[part.Partition] = true
			done = append(done, part)
		}
	}
	for i, ok := range have {
		if !ok {
			todo = append(todo, i)
		}
	}
	return done, todo
}

// usablePartial decodes p's plan and says why it may not be resumed ("" if
// it may). err is a failure to find out (the source unreachable).
func usablePartial(ctx context.Context, src source.Source, p sink.Partial, replaces lsn.LSN, opts Options) (*Plan, string, error) {
	if opts.DiscardPartial {
		return nil, "the options discard partial snapshots (DiscardPartial)", nil
	}
	var plan Plan
	if err := json.Unmarshal(p.Plan, &plan); err != nil {
		return nil, fmt.Sprintf("its stored plan does not decode: %v", err), nil
	}
	if plan.ID != p.PlanID || plan.LSN != p.LSN || plan.Replaces != p.Replaces || !plan.Recorded {
		return nil, fmt.Sprintf("its stored plan (id %q, LSN %s) does not match its record (id %q, LSN %s)", plan.ID, plan.LSN, p.PlanID, p.LSN), nil
	}
	if err := plan.Validate(); err != nil {
		return nil, err.Error(), nil
	}
	switch c := plan.Replaces.Compare(replaces); {
	case c > 0:
		return nil, "", errStaleView
	case c < 0:
		return nil, fmt.Sprintf("it was planned to replace the snapshot at %s, and the sink's newest snapshot of the instance is now at %s", lsnOrNone(plan.Replaces), lsnOrNone(replaces)), nil
	}
	if age := time.Since(p.Created); age > opts.ResumeWithin {
		return nil, fmt.Sprintf("it was planned %s ago, longer than ResumeWithin (%s)", age.Round(time.Second), opts.ResumeWithin), nil
	}
	// The files of its first partitions are as old as it is: a VACUUM may
	// take them once they pass the table's retention.
	if until := p.Created.Add(opts.ResumeWithin); plan.Expires.IsZero() || until.Before(plan.Expires) {
		plan.Expires = until
	}
	err := plan.CheckUsable(ctx, src)
	if errors.Is(err, ErrStale) {
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	// The read tuning is this run's (a rerun after running out of memory
	// lowers it); what the partitions mean is the plan's, its split column
	// too: its ranges hold every row once as they are.
	plan.BatchRows, plan.ReadAhead = opts.BatchRows, opts.ReadAhead
	if plan.SplitColumn != opts.SplitColumn {
		opts.Logger.InfoContext(ctx, "the partial snapshot keeps its own split column", "capture_instance", opts.CaptureInstance, "plan_split_column", plan.SplitColumn, "options_split_column", opts.SplitColumn)
	}
	return &plan, "", nil
}

func lsnOrNone(l lsn.LSN) string {
	if l.IsZero() {
		return "none"
	}
	return l.String()
}

// CheckUsable checks, just before a commit, that the snapshot the plan
// read may still be handed to a stream starting at the plan's LSN + 1: the
// capture instance's columns and key are the ones it read, and its
// start_lsn is not past that point. Retention cleanup
// raises an instance's start_lsn, which is its minimum LSN, to the new low
// water mark (FACTS.md F07, F20), and a capture instance dropped and
// created again after the plan starts after it, so one check covers both.
// A failed check wraps ErrStale (and names what changed); another error is
// a failure to check.
//
// A long read (or a partial snapshot resumed days later) can outlive the
// instance's retention (3 days by default); committing it would hand over
// a stream that fails at once with source.ErrDataLoss.
func (p *Plan) CheckUsable(ctx context.Context, src source.Source) error {
	if !p.Expires.IsZero() && time.Now().After(p.Expires) {
		return fmt.Errorf("snapshot %q: %w: its plan expired at %s (Options.ResumeWithin after it was recorded): a VACUUM may have removed its first partitions' uncommitted files", p.CaptureInstance, ErrStale, p.Expires.Format(time.RFC3339))
	}
	ci, err := src.CaptureInstance(ctx, p.Instance.Name)
	if errors.Is(err, source.ErrNotFound) {
		return fmt.Errorf("snapshot %q: %w: the capture instance %q is gone: %w", p.CaptureInstance, ErrStale, p.Instance.Name, err)
	}
	if err != nil {
		return fmt.Errorf("snapshot %q: checking the capture instance: %w", p.CaptureInstance, err)
	}
	if p.SplitColumn != "" {
		// Compare with the copy the plan read: keyed on the split column,
		// through an index that must still lead with it.
		if ci, err = ci.SplitOn(p.SplitColumn); err != nil {
			return fmt.Errorf("snapshot %q: %w: %w", p.CaptureInstance, ErrStale, err)
		}
	}
	if was, now := tableName(&p.Instance), tableName(ci); was != now {
		return fmt.Errorf("snapshot %q: %w: %w", p.CaptureInstance, ErrStale, &TableRenamedError{CaptureInstance: p.Instance.Name, Was: was, Now: now})
	}
	if what := instanceChange(&p.Instance, ci); what != "" {
		return fmt.Errorf("snapshot %q: %w: %s", p.CaptureInstance, ErrStale, what)
	}
	from, err := p.LSN.Next()
	if err != nil {
		return fmt.Errorf("snapshot %q: %w", p.CaptureInstance, err)
	}
	// start_lsn is the instance's minimum LSN (F07): one question answers
	// both cleanup and recreation.
	if ci.StartLSN.Compare(from) > 0 {
		return fmt.Errorf("snapshot %q: %w: the capture instance's start_lsn, its minimum LSN, is now %s, past %s where the stream would start (the snapshot's LSN + 1): change data cleanup raised it and the changes between are gone, or the instance was recreated", p.CaptureInstance, ErrStale, ci.StartLSN, from)
	}
	return nil
}

// instanceChange names what differs between the instance a plan read and
// the one the source describes now ("" for nothing). A column's type can
// change under the same capture instance and start_lsn: SQL Server alters
// the change table's column in place (sys.sp_cdc_get_ddl_history,
// required_column_update).
func instanceChange(was, now *source.CaptureInstance) string {
	if !slices.Equal(was.Key, now.Key) {
		return fmt.Sprintf("the capture instance's key changed from %v to %v", was.Key, now.Key)
	}
	for i := range max(len(was.Columns), len(now.Columns)) {
		switch {
		case i >= len(now.Columns):
			return fmt.Sprintf("the captured column %q is gone", was.Columns[i].Name)
		case i >= len(was.Columns):
			return fmt.Sprintf("the column %q is captured now", now.Columns[i].Name)
		case !reflect.DeepEqual(withID(was.Columns[i], now.Columns[i]), now.Columns[i]):
			return fmt.Sprintf("the captured column %q changed (%+v, now %+v)", was.Columns[i].Name, was.Columns[i], now.Columns[i])
		}
	}
	return ""
}

// withID returns was with now's column_id when was has none: a plan
// recorded before column ids were read compares as it did.
func withID(was, now source.Column) source.Column {
	if was.ID == 0 {
		was.ID = now.ID
	}
	return was
}

// ErrPlanDropped is wrapped by Execute's error when the partial snapshot
// its Recorded plan belongs to was dropped meanwhile: another process
// committed it (or a newer snapshot), or abandoned it. Its part is not
// recorded; a coordinator looks for the snapshot, or prepares again.
var ErrPlanDropped = errors.New("the partial snapshot was dropped by another process (committed, or abandoned)")

// recordPart records a finished partition of a plan whose parts are
// recorded. If another process recorded the partition first, its part is
// the one to commit, and this one's files never are.
func recordPart(ctx context.Context, ps sink.PartialSink, info sink.Info, part sink.Part) (sink.Part, error) {
	rec, err := ps.RecordPart(ctx, info, part)
	if errors.Is(err, sink.ErrPartRecorded) {
		return rec, nil
	}
	if errors.Is(err, sink.ErrNotFound) {
		return sink.Part{}, fmt.Errorf("recording the finished partition with the sink: %w: %w", ErrPlanDropped, err)
	}
	if err != nil {
		return sink.Part{}, fmt.Errorf("recording the finished partition with the sink: %w", err)
	}
	return rec, nil
}

// dropPartial forgets a committed (or replaced) plan's records; a failure
// only leaves records a later Prepare drops as replaced.
func dropPartial(ctx context.Context, dst sink.Sink, plan *Plan, logger *slog.Logger) {
	ps, ok := dst.(sink.PartialSink)
	if !ok || !plan.Recorded {
		return
	}
	if err := ps.DropPartial(ctx, plan.CaptureInstance, plan.ID); err != nil {
		logger.WarnContext(ctx, "could not drop the partial snapshot's records (a later run drops them)", "capture_instance", plan.CaptureInstance, "plan_id", plan.ID, "err", err)
	}
}
