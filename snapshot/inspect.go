package snapshot

import (
	"context"
	"errors"
	"fmt"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Inspection is what a whole snapshot of a capture instance would do if it
// ran now, as Inspect finds it: the sink's state, the plan, and whether
// the caller may read what the snapshot and its stream read.
type Inspection struct {
	// Instance is the capture instance as the source describes it now.
	Instance *source.CaptureInstance
	// Existing is the sink's snapshot of the instance when it holds one.
	// Unless Options.Resnapshot, a run returns it and reads nothing, and
	// Plan is nil.
	Existing *Result
	// Partial is the newest partial snapshot of the instance the sink
	// holds (one an interrupted run recorded, sink.PartialSink), or nil.
	Partial *sink.Partial
	// PartialUnusable says why a run would abandon Partial instead of
	// resuming it (Options.DiscardPartial among the reasons); empty when
	// it would resume it.
	PartialUnusable string
	// Plan is the plan a run would read: Partial's when it would resume it
	// (Resumed), else a new one made now and recorded nowhere (a run
	// records its own L0 when it starts, at or after this one's).
	Plan *Plan
	// Resumed is true when Plan is Partial's. Done are its parts already
	// written and Todo the partitions a run would read, as in Prepared.
	Resumed bool
	Done    []sink.Part
	Todo    []int
	// MinLSN is sys.fn_cdc_get_min_lsn of the instance, the first LSN its
	// change table holds (ok false: none yet, a new instance).
	MinLSN   lsn.LSN
	MinLSNOK bool
	// ChangesErr is why the caller may not read the instance's changes,
	// which the stream after the snapshot needs; nil when it may. It is
	// what the source's change reads would fail with: a
	// *source.AccessError when sys.fn_cdc_get_min_lsn refuses (not in the
	// gating role, or no SELECT on a captured column), or, from a source
	// that implements ChangeAccessChecker, a refusal of a grant only its
	// change reads need (source/sqlserver: SELECT on the change table,
	// wrapping sqlserver.ErrChangeTableDenied). The plan's own reads (the
	// key's bounds or keyset seeks) need SELECT on the key columns and
	// failed Inspect if it was missing.
	ChangesErr error
	// ChangesChecked is true when the source checked every grant its
	// change reads need (it implements ChangeAccessChecker), false when
	// only sys.fn_cdc_get_min_lsn answered.
	ChangesChecked bool
}

// ChangeAccessChecker is a source.Source that can tell, reading no change,
// whether its ReadChanges would refuse a capture instance for want of a
// grant that MinLSN does not check. source/sqlserver implements it (SELECT
// on the change table and cdc.lsn_time_mapping, which it reads by default,
// asked of HAS_PERMS_BY_NAME), and so does fake.DB. Inspect calls it.
type ChangeAccessChecker interface {
	// ChangeAccess returns as denied the error ReadChanges of ci would
	// fail with for want of a grant, nil when it would not; err is why it
	// could not tell.
	ChangeAccess(ctx context.Context, ci *source.CaptureInstance) (denied, err error)
}

// Inspect finds what Take or Bootstrap would do with these options now,
// without reading a row of the table or a change, and without writing to
// dst: whether dst holds a snapshot of the instance (Existing) or a
// partial one a run would resume or abandon (and why), the plan it would
// read, and whether the caller may read the instance's changes. It makes
// the plan as Prepare does, the same metadata queries and, for keyset
// ranges, the same key seeks (keys of an index, no row), and checks that
// dst can take the instance's columns (sink.Checker). The changes are
// checked with sys.fn_cdc_get_min_lsn and, when src implements
// ChangeAccessChecker, with its check of the grants its change reads need.
// It drops nothing and records nothing: a partial snapshot it calls
// unusable is still there.
func Inspect(ctx context.Context, src source.Source, dst sink.Sink, opts Options) (*Inspection, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	in := &Inspection{}
	var replaces lsn.LSN
	snap, err := dst.FindSnapshot(ctx, opts.CaptureInstance)
	switch {
	case err == nil:
		res := existing(snap)
		in.Existing, replaces = &res, snap.LSN
	case !errors.Is(err, sink.ErrNotFound):
		return nil, fmt.Errorf("snapshot %q: looking for an earlier snapshot: %w", opts.CaptureInstance, err)
	}
	if in.Existing == nil || opts.Resnapshot {
		if err := in.partial(ctx, src, dst, replaces, opts); err != nil {
			return nil, err
		}
	}
	if (in.Existing == nil || opts.Resnapshot) && !in.Resumed {
		if in.Plan, err = newPlan(ctx, src, opts, sinkCheck(ctx, dst, opts.CaptureInstance)); err != nil {
			return nil, err
		}
		in.Plan.Replaces = replaces
		in.Todo = seq(len(in.Plan.Ranges))
	}
	if in.Plan != nil && in.Plan.SplitColumn == "" {
		in.Instance = &in.Plan.Instance
	} else if in.Instance, err = src.CaptureInstance(ctx, opts.CaptureInstance); err != nil {
		return nil, fmt.Errorf("snapshot %q: %w", opts.CaptureInstance, err)
	}
	in.MinLSN, in.MinLSNOK, err = src.MinLSN(ctx, in.Instance.Name)
	var access *source.AccessError
	switch {
	case errors.As(err, &access):
		in.ChangesErr = err
	case err != nil:
		return nil, fmt.Errorf("snapshot %q: min LSN: %w", opts.CaptureInstance, err)
	}
	if c, ok := src.(ChangeAccessChecker); ok && in.ChangesErr == nil {
		if in.ChangesErr, err = c.ChangeAccess(ctx, in.Instance); err != nil {
			return nil, fmt.Errorf("snapshot %q: checking access to the changes: %w", opts.CaptureInstance, err)
		}
		in.ChangesChecked = true
	}
	return in, nil
}

// partial looks for the newest partial snapshot of the instance in dst and
// decides, as Prepare would, whether a run would resume it.
func (in *Inspection) partial(ctx context.Context, src source.Source, dst sink.Sink, replaces lsn.LSN, opts Options) error {
	ps, ok := dst.(sink.PartialSink)
	if !ok || opts.ResumeWithin < 0 {
		return nil
	}
	p, err := ps.FindPartial(ctx, opts.CaptureInstance)
	if errors.Is(err, sink.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot %q: looking for a partial snapshot: %w", opts.CaptureInstance, err)
	}
	in.Partial = &p
	plan, reason, err := usablePartial(ctx, src, p, replaces, opts)
	switch {
	case errors.Is(err, errStaleView):
		in.PartialUnusable = "it was planned against a newer snapshot than the one the sink showed a moment before: the sink is changing; inspect again"
		return nil
	case err != nil:
		return err
	case reason != "":
		in.PartialUnusable = reason
		return nil
	}
	in.Plan, in.Resumed = plan, true
	in.Done, in.Todo = partsLeft(plan, p)
	return nil
}
