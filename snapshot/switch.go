package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Following a new capture instance. SQL Server's way to take a schema
// change into CDC is a second capture instance on the table (a table may
// have two), which captures the table's columns as they are now; from its
// start_lsn S the capture job fills both instances' change tables, so the
// stream reads the old instance A below S and the new one B from S, and
// reads every change once (FACTS.md F66). Then A can be disabled (F67).
//
// The procedure: ALTER the table; enable B (sys.sp_cdc_enable_table with a
// new @capture_instance); wait until the capture job has reached B (its
// minimum LSN is set); call Switch, which appends A's last changes, up to
// S - 1; poll B from the LSN it returns (every row B writes carries
// _capture_instance B, and B's new columns join the bronze table as
// nullable columns); disable A only after that.

// BatchFinder is an Appender that tells the newest stream batch it has
// appended for a capture instance (fake.MemSink implements it). Switch
// then knows, after a crash, whether A's last batch landed without reading
// A, which may be disabled by then.
type BatchFinder interface {
	LastBatch(ctx context.Context, captureInstance string) (batchID int64, ok bool, err error)
}

// InstanceLister lists capture instances as sys.sp_cdc_help_change_data_capture
// does (source/sqlserver.Source and fake.DB implement it).
type InstanceLister interface {
	ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error)
}

// ErrSwitchNotReady is wrapped by Switch's error when the new capture
// instance's start is not yet established (the capture job has not reached
// it, its minimum LSN is NULL), or the max LSN the old instance is read on
// is still below that start - 1: retry after the capture job ran.
var ErrSwitchNotReady = errors.New("the new capture instance's start is not established yet")

// ErrSwitchGap is wrapped by Switch's error when the old capture instance
// is gone before the stream read its changes up to the new one's start:
// those changes are lost to the stream, and a new snapshot from the new
// instance is the way on.
var ErrSwitchGap = errors.New("the old capture instance is gone before the stream read its last changes")

// SwitchOptions configure Switch. The zero value of each field but From is
// usable.
type SwitchOptions struct {
	// From is the capture instance the stream reads now (A). Required.
	From string
	// To is the capture instance of the same table the stream moves to
	// (B); empty means the table's other capture instance, which src must
	// then list (InstanceLister).
	To string
	// BatchID is the stream batch A's last changes (up to S - 1) are
	// appended as, idempotently as Poll appends.
	BatchID int64
	// Logger receives what the switch did. Nil is silent.
	Logger *slog.Logger
}

// SwitchResult is what a Switch did.
type SwitchResult struct {
	// From and To are the capture instances, as the source names them.
	From, To string
	// At is To's start_lsn S: changes below it came from From, changes
	// at and above it come from To.
	At lsn.LSN
	// Next is the first LSN the stream reads from To: S, or the stream's
	// position when it was already past S.
	Next lsn.LSN
	// Last is the Poll of From's last changes; zero when there was none
	// to read, or the batch had landed before (Resumed).
	Last PollResult
	// Resumed is true when From's last batch had been appended by an
	// earlier attempt (BatchFinder), so From was not read again.
	Resumed bool
}

// Switch moves a table's change stream from capture instance A
// (opts.From), read up to from, to B (opts.To) at B's start_lsn S
// (FACTS.md F66): it appends A's changes from from to S - 1 as batch
// opts.BatchID and returns where the stream reads B next. Nothing is lost
// or read twice at S: A holds every change below S, B every change from S.
// It is idempotent: a rerun after a crash appends nothing twice, and a
// sink that is a BatchFinder lets it resume when A is already gone. B's
// start must be established (else ErrSwitchNotReady); A gone before its
// changes below S were appended is ErrSwitchGap, naming them.
func Switch(ctx context.Context, src source.Source, dst Appender, from lsn.LSN, opts SwitchOptions) (SwitchResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.From == "" {
		return SwitchResult{}, errors.New("switch: SwitchOptions.From names no capture instance")
	}
	res := SwitchResult{From: opts.From, To: opts.To}
	a, aErr := src.CaptureInstance(ctx, opts.From)
	if aErr != nil && !errors.Is(aErr, source.ErrNotFound) {
		return res, fmt.Errorf("switch from %q: %w", opts.From, aErr)
	}
	if a != nil {
		res.From = a.Name
	}
	if res.To == "" {
		if a == nil {
			return res, fmt.Errorf("switch from %q: SwitchOptions.To is empty and %q is gone, so its table is not known: %w", opts.From, opts.From, aErr)
		}
		other, err := otherInstance(ctx, src, a)
		if err != nil {
			return res, fmt.Errorf("switch from %q: %w", a.Name, err)
		}
		res.To = other
	}
	b, err := src.CaptureInstance(ctx, res.To)
	if err != nil {
		return res, fmt.Errorf("switch from %q to %q: %w", res.From, res.To, err)
	}
	res.To = b.Name
	if a != nil && (!sameTable(a, b) || sink.SameInstance(a.Name, b.Name)) {
		return res, fmt.Errorf("switch from %q to %q: not two capture instances of one table (%s.%s and %s.%s)", a.Name, b.Name, a.SourceSchema, a.SourceTable, b.SourceSchema, b.SourceTable)
	}
	if a != nil && !a.StartLSN.Less(b.StartLSN) {
		return res, fmt.Errorf("switch from %q to %q: %q is not the newer instance (start_lsn %s, %q's is %s)", a.Name, b.Name, b.Name, b.StartLSN, a.Name, a.StartLSN)
	}
	if _, ok, err := src.MinLSN(ctx, b.Name); err != nil {
		return res, fmt.Errorf("switch to %q: %w", b.Name, err)
	} else if !ok || b.StartLSN.IsZero() {
		return res, fmt.Errorf("switch to %q: %w: the capture job has not reached it (sys.fn_cdc_get_min_lsn is NULL); retry after it ran", b.Name, ErrSwitchNotReady)
	}
	res.At = b.StartLSN
	if !from.Less(res.At) {
		// The stream already read past S from A: B takes over where it is.
		res.Next = from
		log.InfoContext(ctx, "stream switched: already past the new instance's start", "from", res.From, "to", res.To, "start_lsn", res.At, "next", from)
		return res, nil
	}
	last, err := res.At.Prev()
	if err != nil {
		return res, fmt.Errorf("switch to %q: %w", b.Name, err)
	}
	if bf, ok := dst.(BatchFinder); ok {
		n, found, err := bf.LastBatch(ctx, res.From)
		if err != nil {
			return res, fmt.Errorf("switch from %q: %w", res.From, err)
		}
		if found && n >= opts.BatchID {
			res.Next, res.Resumed = res.At, true
			log.InfoContext(ctx, "stream switched: the old instance's last batch had landed", "from", res.From, "to", res.To, "batch_id", opts.BatchID, "next", res.Next)
			return res, nil
		}
	}
	if a == nil {
		return res, fmt.Errorf("switch from %q to %q: %w: the changes from %s to %s were only in %q; take a new snapshot from %q (Options{CaptureInstance: %q, Resnapshot: true}): %w", opts.From, res.To, ErrSwitchGap, from, last, opts.From, res.To, res.To, aErr)
	}
	p, err := Poll(ctx, src, dst, res.From, from, PollOptions{BatchID: opts.BatchID, To: last, Logger: log})
	if errors.Is(err, source.ErrReplicaBehind) {
		// The max LSN is below S - 1: on a quiet database it stays below a
		// new instance's start until the capture job maps a later LSN
		// (FACTS.md F15), and a read of A to S - 1 cannot be shown whole.
		return res, fmt.Errorf("switch from %q to %q: %w: the capture job has mapped LSNs only below %s (sys.fn_cdc_get_max_lsn); retry after it ran: %w", res.From, res.To, ErrSwitchNotReady, last, err)
	}
	if errors.Is(err, source.ErrNotFound) {
		return res, fmt.Errorf("switch from %q to %q: %w: the changes from %s to %s were only in %q; take a new snapshot from %q: %w", res.From, res.To, ErrSwitchGap, from, last, res.From, res.To, err)
	}
	if err != nil {
		return res, fmt.Errorf("switch from %q to %q: %w", res.From, res.To, err)
	}
	res.Last, res.Next = p, res.At
	log.InfoContext(ctx, "stream switched", "from", res.From, "to", res.To, "start_lsn", res.At, "rows", p.Rows)
	return res, nil
}

func sameTable(a, b *source.CaptureInstance) bool {
	return sink.SameInstance(a.SourceSchema, b.SourceSchema) && sink.SameInstance(a.SourceTable, b.SourceTable)
}

// tableInstances lists the capture instances of ci's table.
func tableInstances(ctx context.Context, src source.Source, ci *source.CaptureInstance) ([]source.CaptureInstance, error) {
	l, ok := src.(InstanceLister)
	if !ok {
		return nil, errors.New("the source does not list capture instances (InstanceLister)")
	}
	all, err := l.ListCaptureInstances(ctx)
	if err != nil {
		return nil, err
	}
	var out []source.CaptureInstance
	for _, x := range all {
		if sameTable(&x, ci) {
			out = append(out, x)
		}
	}
	return out, nil
}

// otherInstance returns the name of the capture instance of ci's table
// other than ci.
func otherInstance(ctx context.Context, src source.Source, ci *source.CaptureInstance) (string, error) {
	list, err := tableInstances(ctx, src, ci)
	if err != nil {
		return "", err
	}
	for _, x := range list {
		if !sink.SameInstance(x.Name, ci.Name) {
			return x.Name, nil
		}
	}
	return "", fmt.Errorf("the table %s.%s has no other capture instance than %q", ci.SourceSchema, ci.SourceTable, ci.Name)
}

// PickInstance returns the capture instance a bootstrap into dst should
// use for the table that captureInstance captures, by PickAmong's rule
// over the table's capture instances (src must list them: InstanceLister).
// With one instance it is that one.
func PickInstance(ctx context.Context, src source.Source, dst sink.Sink, captureInstance string) (string, error) {
	ci, err := src.CaptureInstance(ctx, captureInstance)
	if err != nil {
		return "", fmt.Errorf("pick instance of %q: %w", captureInstance, err)
	}
	list, err := tableInstances(ctx, src, ci)
	if err != nil {
		return "", fmt.Errorf("pick instance of %q: %w", captureInstance, err)
	}
	if len(list) <= 1 {
		return ci.Name, nil
	}
	pick, err := PickAmong(ctx, dst, list)
	if err != nil {
		return "", fmt.Errorf("pick instance of %q: %w", captureInstance, err)
	}
	return pick, nil
}

// PickAmong returns which of a table's capture instances (one or two) a
// bootstrap into dst uses, by this rule: when dst holds a snapshot (whole,
// or chunked) of one of them, the one with the newest such snapshot, whose
// stream then moves to the newer instance with Switch; otherwise the
// instance with the highest start_lsn (the newest: it captures the table's
// columns as they are now and outlives the older, which is to be
// disabled, FACTS.md F66).
func PickAmong(ctx context.Context, dst sink.Sink, instances []source.CaptureInstance) (string, error) {
	if len(instances) == 0 {
		return "", errors.New("no capture instance to pick")
	}
	best, bestLSN := "", lsn.LSN{}
	for _, x := range instances {
		var l lsn.LSN
		if s, err := dst.FindSnapshot(ctx, x.Name); err == nil {
			l = s.LSN
		} else if !errors.Is(err, sink.ErrNotFound) {
			return "", err
		}
		if cs, ok := dst.(sink.ChunkSink); ok {
			if c, err := cs.FindChunked(ctx, x.Name); err == nil && l.Less(c.LSN) {
				l = c.LSN
			} else if err != nil && !errors.Is(err, sink.ErrNotFound) {
				return "", err
			}
		}
		if !l.IsZero() && (best == "" || bestLSN.Less(l)) {
			best, bestLSN = x.Name, l
		}
	}
	if best != "" {
		return best, nil
	}
	newest := slices.MaxFunc(instances, func(x, y source.CaptureInstance) int { return x.StartLSN.Compare(y.StartLSN) })
	return newest.Name, nil
}
