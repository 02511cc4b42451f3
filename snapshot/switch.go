package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Following a new capture instance. SQL Server's way to take a schema
// change into CDC is a second capture instance on the table (a table may
// have two), which captures the table's columns as they are now; from its
// start_lsn S the capture job fills both instances' change tables, so the
// stream reads the old instance A below S and the new one B from S
// (FACTS.md F66, an inference from "without loss of change data"). Then A
// can be disabled (F67).
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

// SwitchRecorder is an Appender that keeps a switch's start S with the
// target (sink/delta's Table and fake.MemSink implement it): Switch
// records S, B's start_lsn, before it appends anything, and a rerun takes
// S from the record. Cleanup raises every instance's start_lsn to its low
// water mark (F20), so B's start_lsn at a rerun can be past S; a rerun
// that took it would skip B's changes from S up to it. The record is
// keyed by B's name and create date: an instance enabled again under the
// name has another.
type SwitchRecorder interface {
	RecordSwitch(ctx context.Context, to string, created time.Time, at lsn.LSN) error
	FindSwitch(ctx context.Context, to string, created time.Time) (lsn.LSN, bool, error)
}

// InstanceLister lists capture instances as sys.sp_cdc_help_change_data_capture
// does (source/sqlserver.Source and fake.DB implement it).
type InstanceLister interface {
	ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error)
}

// ErrSwitchNotReady is wrapped by Switch's error when the new capture
// instance's start is not yet established (the capture job has not reached
// it: its minimum LSN, or its start_lsn, is NULL), or the max LSN the old
// instance is read on is still below that start - 1: retry after the
// capture job ran.
var ErrSwitchNotReady = errors.New("the new capture instance's start is not established yet")

// ErrSwitchGap is wrapped by Switch's error when the old capture instance
// is gone before the stream read its changes up to the new one's start:
// those changes are lost to the stream, and a new snapshot from the new
// instance is the way on.
var ErrSwitchGap = errors.New("the old capture instance is gone before the stream read its last changes")

// ErrSwitchKeyChange is wrapped by Switch's error when the new capture
// instance identifies rows by other columns than the old one
// (index_column_list: sys.sp_cdc_enable_table's @index_name takes
// precedence over the primary key), and SwitchOptions.AllowKeyChange is
// not set: the bronze table's latest image per key would mix two keys.
var ErrSwitchKeyChange = errors.New("the new capture instance has another key than the old one")

// ErrSwitchBackfillOpen is wrapped by Switch's error when the target holds
// an open chunked snapshot of the old capture instance: its chunks still
// to come would be stamped after the switch, with the old instance's
// columns, and outrank the new instance's change rows in the latest image.
// Finish it first (Backfill until Complete), then switch.
var ErrSwitchBackfillOpen = errors.New("a chunked snapshot of the old capture instance is open")

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
	// AllowKeyChange lets the switch move to an instance whose key
	// (index_column_list) is not A's. The bronze table's rows then carry
	// two keys; the caller must merge by the new one (and deduplicate
	// what it holds by the old). The zero value refuses with
	// ErrSwitchKeyChange.
	AllowKeyChange bool
	// Backfill, when set, takes a chunked snapshot of To after the
	// switch, as Backfill does with these options (CaptureInstance is set
	// to To): its chunks fill To's columns for the rows no change has
	// touched since S, which otherwise keep NULL in them (a column added
	// with ADD ... DEFAULT ... WITH VALUES, or values written before S).
	// The target must be a sink.ChunkSink. A rerun resumes it; the
	// stream polls To from SwitchResult.Next meanwhile or after, as
	// Backfill's next to a stream always does. Nil takes none.
	Backfill *BackfillOptions
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
	// Backfill is the chunked snapshot of To that SwitchOptions.Backfill
	// took; nil without it.
	Backfill *BackfillResult
}

// Switch moves a table's change stream from capture instance A
// (opts.From), read up to from, to B (opts.To) at B's start_lsn S
// (FACTS.md F66): it appends A's changes from from to S - 1 as batch
// opts.BatchID and returns where the stream reads B next. Nothing is lost
// or read twice at S: A holds every change below S, B every change from S.
//
// B must be the newer of the two (the later create_date, F66), its start
// established (else ErrSwitchNotReady), its key A's (else
// ErrSwitchKeyChange, unless opts.AllowKeyChange), and no chunked snapshot
// of A open in dst (else ErrSwitchBackfillOpen). It is idempotent: a
// rerun after a crash appends nothing twice; a sink that is a
// SwitchRecorder keeps the S of the first attempt, and one that is a
// BatchFinder lets it resume when A is already gone. A gone before its
// changes below S were appended is ErrSwitchGap, naming them.
func Switch(ctx context.Context, src source.Source, dst Appender, from lsn.LSN, opts SwitchOptions) (SwitchResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.From == "" {
		return SwitchResult{}, errors.New("switch: SwitchOptions.From names no capture instance")
	}
	chunks, isChunkSink := dst.(sink.ChunkSink)
	if opts.Backfill != nil && !isChunkSink {
		return SwitchResult{}, fmt.Errorf("switch from %q: SwitchOptions.Backfill takes a chunked snapshot, and %T is not a sink.ChunkSink", opts.From, dst)
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
	if a != nil && !slices.Equal(a.Key, b.Key) && !opts.AllowKeyChange {
		return res, fmt.Errorf("switch from %q to %q: %w: %q identifies rows by %v, %q by %v; set SwitchOptions.AllowKeyChange once the bronze table's merge uses the new key", a.Name, b.Name, ErrSwitchKeyChange, a.Name, a.Key, b.Name, b.Key)
	}
	if isChunkSink {
		for _, name := range []string{opts.From, res.From} {
			c, err := chunks.FindChunked(ctx, name)
			if err != nil && !errors.Is(err, sink.ErrNotFound) {
				return res, fmt.Errorf("switch from %q: %w", res.From, err)
			}
			if err == nil && !c.Complete {
				return res, fmt.Errorf("switch from %q to %q: %w (%d of %d chunks committed, snapshot at %s): run Backfill until it is complete, then switch", res.From, res.To, ErrSwitchBackfillOpen, c.Committed, c.Chunks, c.LSN)
			}
		}
	}
	at, err := switchStart(ctx, src, dst, a, b)
	if err != nil {
		return res, err
	}
	res.At = at
	if err := switchOver(ctx, src, dst, from, opts, &res, a, aErr, log); err != nil {
		return res, err
	}
	if opts.Backfill != nil {
		bo := *opts.Backfill
		bo.CaptureInstance, bo.Resnapshot = res.To, false
		if bo.Logger == nil {
			bo.Logger = log
		}
		bf, err := Backfill(ctx, src, chunks, bo)
		res.Backfill = &bf
		if err != nil {
			return res, fmt.Errorf("switch to %q: the chunked snapshot of %q (SwitchOptions.Backfill): %w", res.To, res.To, err)
		}
	}
	return res, nil
}

// switchStart returns the switch's S: the one a SwitchRecorder recorded
// for b at an earlier attempt, else b's start_lsn, once established and b
// the newer instance, recorded first.
func switchStart(ctx context.Context, src source.Source, dst Appender, a, b *source.CaptureInstance) (lsn.LSN, error) {
	rec, recorder := dst.(SwitchRecorder)
	if recorder {
		at, ok, err := rec.FindSwitch(ctx, b.Name, b.CreateDate)
		if err != nil {
			return lsn.LSN{}, fmt.Errorf("switch to %q: %w", b.Name, err)
		}
		if ok {
			return at, nil
		}
	}
	// Whether B's start is established comes first: a NULL start_lsn
	// says nothing of which instance is newer (F02).
	if _, ok, err := src.MinLSN(ctx, b.Name); err != nil {
		return lsn.LSN{}, fmt.Errorf("switch to %q: %w", b.Name, err)
	} else if !ok || b.StartLSN.IsZero() {
		return lsn.LSN{}, fmt.Errorf("switch to %q: %w: the capture job has not reached it (sys.fn_cdc_get_min_lsn or start_lsn is NULL); retry after it ran", b.Name, ErrSwitchNotReady)
	}
	if a != nil {
		switch newer, known := newerInstance(b, a); {
		case !known:
			return lsn.LSN{}, fmt.Errorf("switch from %q to %q: which is the newer instance is not known: neither has a create date and their start_lsn are equal (%s)", a.Name, b.Name, b.StartLSN)
		case !newer:
			return lsn.LSN{}, fmt.Errorf("switch from %q to %q: %q is not the newer instance (created %s, %q %s)", a.Name, b.Name, b.Name, b.CreateDate.Format(time.RFC3339Nano), a.Name, a.CreateDate.Format(time.RFC3339Nano))
		}
	}
	if recorder {
		if err := rec.RecordSwitch(ctx, b.Name, b.CreateDate, b.StartLSN); err != nil {
			return lsn.LSN{}, fmt.Errorf("switch to %q: %w", b.Name, err)
		}
	}
	return b.StartLSN, nil
}

// switchOver appends A's changes from from to S - 1, unless the stream
// is past S or an earlier attempt appended them, and sets res.Next.
func switchOver(ctx context.Context, src source.Source, dst Appender, from lsn.LSN, opts SwitchOptions, res *SwitchResult, a *source.CaptureInstance, aErr error, log *slog.Logger) error {
	if !from.Less(res.At) {
		// The stream already read past S from A: B takes over where it is.
		res.Next = from
		log.InfoContext(ctx, "stream switched: already past the new instance's start", "from", res.From, "to", res.To, "start_lsn", res.At, "next", from)
		return nil
	}
	last, err := res.At.Prev()
	if err != nil {
		return fmt.Errorf("switch to %q: %w", res.To, err)
	}
	if bf, ok := dst.(BatchFinder); ok {
		n, found, err := bf.LastBatch(ctx, res.From)
		if err != nil {
			return fmt.Errorf("switch from %q: %w", res.From, err)
		}
		if found && n >= opts.BatchID {
			res.Next, res.Resumed = res.At, true
			log.InfoContext(ctx, "stream switched: the old instance's last batch had landed", "from", res.From, "to", res.To, "batch_id", opts.BatchID, "next", res.Next)
			return nil
		}
	}
	if a == nil {
		return fmt.Errorf("switch from %q to %q: %w: the changes from %s to %s were only in %q; take a new snapshot from %q (Options{CaptureInstance: %q, Resnapshot: true}): %w", opts.From, res.To, ErrSwitchGap, from, last, opts.From, res.To, res.To, aErr)
	}
	p, err := Poll(ctx, src, dst, res.From, from, PollOptions{BatchID: opts.BatchID, To: last, Logger: log})
	if errors.Is(err, source.ErrReplicaBehind) {
		// The max LSN is below S - 1: on a quiet database it stays below a
		// new instance's start until the capture job maps a later LSN
		// (FACTS.md F15), and a read of A to S - 1 cannot be shown whole.
		return fmt.Errorf("switch from %q to %q: %w: the capture job has mapped LSNs only below %s (sys.fn_cdc_get_max_lsn); retry after it ran: %w", res.From, res.To, ErrSwitchNotReady, last, err)
	}
	if errors.Is(err, source.ErrNotFound) {
		return fmt.Errorf("switch from %q to %q: %w: the changes from %s to %s were only in %q; take a new snapshot from %q: %w", res.From, res.To, ErrSwitchGap, from, last, res.From, res.To, err)
	}
	if err != nil {
		return fmt.Errorf("switch from %q to %q: %w", res.From, res.To, err)
	}
	res.Last, res.Next = p, res.At
	log.InfoContext(ctx, "stream switched", "from", res.From, "to", res.To, "start_lsn", res.At, "rows", p.Rows)
	return nil
}

// newerInstance reports whether b was enabled after a, by create_date
// (sys.sp_cdc_help_change_data_capture: "Date that the capture instance
// was enabled"); without create dates, by start_lsn, a NULL one newest.
// start_lsn alone is no order: cleanup raises every instance's to one low
// water mark (F20), and a new one's may be NULL (F02). known is false when
// nothing tells them apart.
func newerInstance(b, a *source.CaptureInstance) (newer, known bool) {
	if !a.CreateDate.IsZero() && !b.CreateDate.IsZero() && !a.CreateDate.Equal(b.CreateDate) {
		return a.CreateDate.Before(b.CreateDate), true
	}
	switch {
	case a.StartLSN == b.StartLSN:
		return false, false
	case b.StartLSN.IsZero():
		return true, true
	case a.StartLSN.IsZero():
		return false, true
	}
	return a.StartLSN.Less(b.StartLSN), true
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
// newest instance, by create_date (start_lsn, which cleanup raises to one
// low water mark, only without create dates): it captures the table's
// columns as they are now and outlives the older, which is to be
// disabled (FACTS.md F66).
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
	newest := &instances[0]
	for i := 1; i < len(instances); i++ {
		switch newer, known := newerInstance(&instances[i], newest); {
		case !known:
			return "", fmt.Errorf("which of the capture instances %q and %q is the newer is not known: neither has a create date and their start_lsn are equal", newest.Name, instances[i].Name)
		case newer:
			newest = &instances[i]
		}
	}
	return newest.Name, nil
}
