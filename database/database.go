// Package database bootstraps many capture instances of one CDC database
// in one run: the whole database, or the instances of some schemas, or
// those whose names match a pattern, or a list. It is named for what it
// bootstraps (database.Bootstrap next to snapshot.Bootstrap, which takes
// one capture instance); it does not wrap database/sql.
//
// Each selected instance goes to its own target, named by a template such
// as "s3://lake/bronze/{schema}/{table}" and opened by the caller's
// Options.Open (sink/delta's Open, for Delta tables), and is snapshotted
// by snapshot.Bootstrap with the caller's snapshot.Options. Options.Tables
// tables run at once, largest first (by the source's metadata row count),
// and every source call and every open reader of every table holds one
// slot of one budget of Options.Connections. One table's failure does not
// stop the others: each gets its own Result. A rerun skips the tables
// whose snapshot is committed (reading nothing) and resumes the partial
// ones (snapshot's resume), so rerunning until no error is left is safe.
package database

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// Options configure a run. Target and Open are required; the zero value of
// every other field is a sensible default.
type Options struct {
	// Select says which capture instances to bootstrap; the zero value
	// selects every one the source lists (see Lister).
	Select Selection

	// Target is the template of each instance's target: text with the
	// placeholders {schema}, {table} and {capture_instance}, replaced by
	// the source table's schema and name and the capture instance's name,
	// e.g. "s3://lake/bronze/{schema}/{table}". A '{' or '}' outside those
	// placeholders is refused. A template that maps two selected instances
	// to one target is refused (*CollisionError) before any is read,
	// unless they are the two capture instances of one table (during a
	// schema change), which are one table: the one snapshot.PickAmong
	// picks is bootstrapped, and
	// a name holding '/', '\', '?', '#', '%' or a control character, or
	// "." or "..", fails its own instance (ErrInvalidTarget).
	Target string

	// Open opens the sink of one target, e.g.
	//
	//	func(ctx context.Context, target string) (sink.Sink, error) {
	//		return blobstore.Open(ctx, target, delta.Options{})
	//	}
	//
	// It is called when the table starts. A sink that implements io.Closer
	// is closed when its table is finished.
	Open func(ctx context.Context, target string) (sink.Sink, error)

	// Tables is how many tables are bootstrapped at once; zero means 4.
	Tables int

	// Connections is the budget of source operations open at once, every
	// table together: each source call, and each reader until it is
	// released, holds one slot. Zero means 8. With source/sqlserver, set
	// the *sql.DB's SetMaxOpenConns to it as well, so connections the pool
	// keeps or opens for other callers stay within the server's budget
	// (https://go.dev/doc/database/manage-connections). A table reads up
	// to Snapshot.Parallelism partitions at once when slots are free.
	Connections int

	// Snapshot is the template of every table's snapshot.Options: each
	// table gets a copy with CaptureInstance set to its instance's name,
	// Progress set by this package and, when nil, Logger set to
	// Options.Logger. CaptureInstance and Progress must be left empty.
	// What it points to is shared: one rows-per-second Limiter set here
	// caps every table together. Partitions is what a large table gets: a
	// small one gets fewer, one per MinPartitionRows rows (10,000 unless
	// set; snapshot.Options.PartitionsFor), so a tiny table is one file.
	Snapshot snapshot.Options

	// PerTable, when set, adjusts one table's copy of Snapshot before the
	// table starts, from its capture instance as the source described it:
	// a SplitColumn for a table without a unique index, more Partitions
	// for one known to be large. Its CaptureInstance and Progress are set
	// after it.
	PerTable func(ci *source.CaptureInstance, opts *snapshot.Options)

	// Progress, when set, is called as any table progresses and when a
	// table starts or finishes, one call at a time. It must return quickly.
	Progress func(Progress)

	// Logger receives what the run decides (the tables and their order,
	// each table's start and end). Nil is silent.
	Logger *slog.Logger
}

// ErrInvalidOptions is wrapped by errors for options that cannot work.
var ErrInvalidOptions = errors.New("invalid database bootstrap options")

// ErrNoneSelected means the selection kept no capture instance.
var ErrNoneSelected = errors.New("no capture instance selected")

// The defaults of Options.Tables and Options.Connections.
const (
	DefaultTables      = 4
	DefaultConnections = 8
)

func (o Options) withDefaults() (Options, template, error) {
	tmpl, err := parseTemplate(o.Target)
	if err != nil {
		return o, template{}, fmt.Errorf("%w: Target: %w", ErrInvalidOptions, err)
	}
	if o.Open == nil {
		return o, template{}, fmt.Errorf("%w: Open is nil", ErrInvalidOptions)
	}
	if o.Tables < 0 || o.Connections < 0 {
		return o, template{}, fmt.Errorf("%w: Tables (%d) and Connections (%d) must not be negative", ErrInvalidOptions, o.Tables, o.Connections)
	}
	if o.Snapshot.CaptureInstance != "" {
		return o, template{}, fmt.Errorf("%w: Snapshot.CaptureInstance is set (%q): the selection names the instances", ErrInvalidOptions, o.Snapshot.CaptureInstance)
	}
	if o.Snapshot.Progress != nil {
		return o, template{}, fmt.Errorf("%w: Snapshot.Progress is set: use Options.Progress", ErrInvalidOptions)
	}
	// Each table's copy gets its instance's name: check the rest of the
	// template with a stand-in for it.
	so := o.Snapshot
	so.CaptureInstance = "each selected instance"
	if err := so.Validate(); err != nil {
		return o, template{}, fmt.Errorf("%w: Snapshot: %w", ErrInvalidOptions, err)
	}
	if err := o.Select.validate(); err != nil {
		return o, template{}, err
	}
	if o.Tables == 0 {
		o.Tables = DefaultTables
	}
	if o.Connections == 0 {
		o.Connections = DefaultConnections
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, tmpl, nil
}

// Result is how one capture instance's bootstrap ended.
type Result struct {
	// CaptureInstance is the name as the selection gave it (a listed
	// instance's stored name, or an entry of Selection.Names).
	CaptureInstance string
	// SourceSchema and SourceTable name the captured table; empty when the
	// instance could not be described.
	SourceSchema, SourceTable string
	// Target is the instance's target; empty when it could not be made.
	Target string
	// EstimatedRows is the table's metadata row count, or -1 when unknown.
	EstimatedRows int64
	// Snapshot and StreamFrom are snapshot.Bootstrap's results when Err is
	// nil: the snapshot (Existing when an earlier run committed it) and
	// the first LSN the instance's stream must read.
	Snapshot   snapshot.Result
	StreamFrom lsn.LSN
	// Err is nil, or an *InstanceError.
	Err error

	instance *source.CaptureInstance // as described, for PerTable
	// alternates are the table's other capture instance when both were
	// selected into one target: bootstrapOne picks one.
	alternates []source.CaptureInstance
}

// InstanceError is one capture instance's failure. It wraps the cause
// (source.ErrNotFound, ErrInvalidTarget, a sink's error, the context's,
// ...).
type InstanceError struct {
	CaptureInstance string
	Target          string
	Err             error
}

// Error implements error.
func (e *InstanceError) Error() string {
	if e.Target == "" {
		return fmt.Sprintf("capture instance %s: %v", e.CaptureInstance, e.Err)
	}
	return fmt.Sprintf("capture instance %s (to %s): %v", e.CaptureInstance, e.Target, e.Err)
}

// Unwrap returns the cause.
func (e *InstanceError) Unwrap() error { return e.Err }

// RunError reports the capture instances of a run that failed. errors.As
// finds each *InstanceError in it, errors.Is each cause.
type RunError struct {
	// Tables is the number of instances selected.
	Tables int
	// Failed are the failures, in the run's order.
	Failed []*InstanceError
}

// Error implements error.
func (e *RunError) Error() string {
	const shown = 3
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d capture instances failed: ", len(e.Failed), e.Tables)
	for i, f := range e.Failed[:min(shown, len(e.Failed))] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	if len(e.Failed) > shown {
		fmt.Fprintf(&b, "; and %d more", len(e.Failed)-shown)
	}
	return b.String()
}

// Unwrap returns the failures.
func (e *RunError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f
	}
	return out
}

// Bootstrap bootstraps every capture instance opts selects from src, each
// into its target, as snapshot.Bootstrap does one. It returns a Result per
// instance, largest table first. The error is nil when every instance has
// its snapshot, a *RunError when some failed (their Results say why), and
// otherwise says why nothing ran: invalid options (ErrInvalidOptions, also
// when snapshot refuses Options.Snapshot), a source that cannot list
// (ErrCannotList), a failed listing, ErrNoneSelected, or a
// *CollisionError. Options are checked before any I/O, Options.Snapshot
// with snapshot.Options.Validate; a table whose PerTable makes its copy
// invalid fails alone, like any other table's error.
//
// Canceling ctx stops the run: tables in flight stop as snapshot's do
// (their partial snapshots resume on a rerun) and tables not started fail
// with the context's error.
func Bootstrap(ctx context.Context, src source.Source, opts Options) ([]Result, error) {
	opts, tmpl, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	lister, canList := src.(Lister)
	if len(opts.Select.Names) == 0 && !canList {
		return nil, ErrCannotList
	}
	lim := newLimited(src, opts.Connections)

	var candidates []source.CaptureInstance // Name as selected; the rest when listed
	if len(opts.Select.Names) > 0 {
		for _, n := range opts.Select.Names {
			candidates = append(candidates, source.CaptureInstance{Name: n})
		}
	} else {
		listed, err := lim.list(ctx, lister)
		if err != nil {
			return nil, fmt.Errorf("listing capture instances: %w", err)
		}
		for _, ci := range listed {
			if opts.Select.keeps(ci) {
				candidates = append(candidates, ci)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, ErrNoneSelected
	}

	results, err := checkCollisions(describe(ctx, lim, candidates, tmpl, opts))
	if err != nil {
		return nil, err
	}
	order := make([]int, len(results))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(results[b].EstimatedRows, results[a].EstimatedRows),
			cmp.Compare(results[a].CaptureInstance, results[b].CaptureInstance))
	})
	results = permute(results, order)
	opts.Logger.InfoContext(ctx, "bootstrapping capture instances", "tables", len(results), "at_once", opts.Tables, "connections", opts.Connections)

	estimates := make([]int64, len(results))
	for i, r := range results {
		estimates[i] = r.EstimatedRows
	}
	track := newTracker(opts.Progress, estimates)
	for i, r := range results {
		if r.Err != nil {
			track.skipped(i)
		}
	}
	runTables(ctx, lim, results, track, opts)
	var failed []*InstanceError
	for _, r := range results {
		var ie *InstanceError
		if errors.As(r.Err, &ie) {
			failed = append(failed, ie)
		}
	}
	if len(failed) > 0 {
		return results, &RunError{Tables: len(results), Failed: failed}
	}
	return results, nil
}

func permute[T any](s []T, order []int) []T {
	out := make([]T, len(order))
	for i, j := range order {
		out[i] = s[j]
	}
	return out
}

// describe resolves and describes each candidate, counts its rows and
// makes its target, on up to opts.Connections goroutines. A candidate that
// fails gets its Result.Err.
func describe(ctx context.Context, lim *limited, candidates []source.CaptureInstance, tmpl template, opts Options) []Result {
	results := make([]Result, len(candidates))
	next := make(chan int, len(candidates))
	for i := range candidates {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(opts.Connections, len(candidates)) {
		wg.Go(func() {
			for i := range next {
				name := candidates[i].Name
				res := Result{CaptureInstance: name, EstimatedRows: -1}
				ci, err := lim.CaptureInstance(ctx, name)
				if err == nil {
					res.SourceSchema, res.SourceTable = ci.SourceSchema, ci.SourceTable
					if n, cerr := lim.RowCount(ctx, ci); cerr == nil {
						res.EstimatedRows = n
					} else {
						// Only the order and the ETA need it.
						opts.Logger.WarnContext(ctx, "no row count: the table is ordered last", "capture_instance", name, "error", cerr)
					}
					res.Target, err = tmpl.expand(ci)
					res.instance = ci
				}
				if err != nil {
					res.Err = &InstanceError{CaptureInstance: name, Err: err}
				}
				results[i] = res
			}
		})
	}
	wg.Wait()
	return results
}

// checkCollisions refuses two instances with one target (ignoring case),
// unless they are the two capture instances of one table (during a schema
// change, FACTS.md F66): they are one table then, one Result, and
// bootstrapOne picks the instance by snapshot.PickAmong's rule.
func checkCollisions(results []Result) ([]Result, error) {
	seen := map[string]int{}
	var out []Result
	for _, r := range results {
		if r.Target == "" {
			out = append(out, r)
			continue
		}
		k := strings.ToLower(r.Target)
		i, ok := seen[k]
		if !ok {
			seen[k] = len(out)
			out = append(out, r)
			continue
		}
		o := &out[i]
		if o.instance == nil || r.instance == nil || strings.EqualFold(o.instance.Name, r.instance.Name) ||
			!strings.EqualFold(o.SourceSchema, r.SourceSchema) || !strings.EqualFold(o.SourceTable, r.SourceTable) || len(o.alternates) > 0 {
			return nil, &CollisionError{Target: r.Target, Instances: [2]string{o.CaptureInstance, r.CaptureInstance}}
		}
		o.alternates = append(o.alternates, *r.instance)
	}
	return out, nil
}

// runTables bootstraps the described tables, opts.Tables at once, in
// order. A table that fails, even because snapshot refuses its options
// (a copy PerTable made invalid, a SplitColumn no index of the table
// leads with), fails alone: its Result carries the error.
func runTables(ctx context.Context, lim *limited, results []Result, track *tracker, opts Options) {
	next := make(chan int, len(results))
	for i, r := range results {
		if r.Err == nil {
			next <- i
		}
	}
	close(next)
	var wg sync.WaitGroup
	for range opts.Tables {
		wg.Go(func() {
			for i := range next {
				res := &results[i]
				if err := ctx.Err(); err != nil {
					res.Err = &InstanceError{CaptureInstance: res.CaptureInstance, Target: res.Target, Err: err}
					track.skipped(i)
					continue
				}
				track.started()
				snap, from, err := bootstrapOne(ctx, lim, res, track.snapshotProgress(i), opts)
				track.finished(i, snap, err)
				if err != nil {
					res.Err = &InstanceError{CaptureInstance: res.CaptureInstance, Target: res.Target, Err: err}
					opts.Logger.WarnContext(ctx, "capture instance failed", "capture_instance", res.CaptureInstance, "target", res.Target, "error", err)
					continue
				}
				res.Snapshot, res.StreamFrom = snap, from
				opts.Logger.InfoContext(ctx, "capture instance done", "capture_instance", res.CaptureInstance, "target", res.Target,
					"existing", snap.Existing, "rows", snap.Rows, "lsn", snap.LSN)
			}
		})
	}
	wg.Wait()
}

// bootstrapOne opens res's target and bootstraps its instance into it.
func bootstrapOne(ctx context.Context, lim *limited, res *Result, progress func(snapshot.Progress), opts Options) (snapshot.Result, lsn.LSN, error) {
	dst, err := opts.Open(ctx, res.Target)
	if err != nil {
		return snapshot.Result{}, lsn.LSN{}, fmt.Errorf("opening the target: %w", err)
	}
	if c, ok := dst.(io.Closer); ok {
		defer func() {
			// The snapshot is committed or not whatever Close says.
			if err := c.Close(); err != nil {
				opts.Logger.WarnContext(ctx, "closing the target", "target", res.Target, "error", err)
			}
		}()
	}
	if len(res.alternates) > 0 {
		// Two capture instances of one table (a schema change): the one
		// whose snapshot the target holds, else the newer.
		pick, err := snapshot.PickAmong(ctx, dst, append([]source.CaptureInstance{*res.instance}, res.alternates...))
		if err != nil {
			return snapshot.Result{}, lsn.LSN{}, fmt.Errorf("picking between the table's capture instances: %w", err)
		}
		for _, a := range res.alternates {
			if a.Name == pick {
				opts.Logger.InfoContext(ctx, "two capture instances of one table: bootstrapping the one the rule picks", "picked", pick, "other", res.CaptureInstance)
				res.CaptureInstance, res.instance = pick, &a
			}
		}
	}
	so := opts.Snapshot
	if opts.PerTable != nil {
		opts.PerTable(res.instance, &so)
	}
	so.CaptureInstance = res.CaptureInstance
	so.Progress = progress
	if so.Logger == nil {
		so.Logger = opts.Logger
	}
	opts.Logger.InfoContext(ctx, "capture instance starting", "capture_instance", res.CaptureInstance, "target", res.Target, "estimated_rows", res.EstimatedRows)
	from, snap, err := snapshot.Bootstrap(ctx, lim, dst, so)
	return snap, from, err
}
