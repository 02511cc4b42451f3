package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// A chunked snapshot ("backfill", DESIGN.md R12) reads the table in
// chunks next to a stream that already runs from its LSN S:
//
//   - Open records S (as a whole snapshot records L0, DESIGN.md R3) before
//     any row is read, plans every chunk, and stores the plan durably in the sink
//     (sink.ChunkSink.OpenChunked), so a rerun resumes it.
//   - Each wave records its stamp L = max(S, max LSN) before reading, reads
//     its chunks in parallel, and commits them in one sink commit with
//     _snapshot = S, _chunk = the chunk number and _start_lsn = L. A crash
//     between (or during) waves resumes at the first uncommitted chunk; the
//     sink refuses a chunk committed already, so none is written twice.
//   - The snapshot is complete only after its last chunk, recorded durably.
//
// The stream runs from S meanwhile: every change after S is in it, and a
// chunk's rows sort after every change at or below their stamp and before
// every change after it, so the latest image per key (Order, DESIGN.md R11)
// of chunks plus changes equals the source table.

// BackfillOptions configure a chunked snapshot. The zero value of every
// field but CaptureInstance is a sensible default.
type BackfillOptions struct {
	// CaptureInstance names the CDC capture instance, matched as in
	// Options.CaptureInstance and written to _capture_instance as given.
	CaptureInstance string

	// ChunkRows, when positive, plans chunks of exactly ChunkRows rows each
	// (the last one holds the rest) by keyset seeks, whatever the row
	// count's metadata says. Zero plans Chunks chunks instead.
	ChunkRows int64

	// Chunks is the number of chunks to plan when ChunkRows is zero; zero
	// means 16. The chunks are NTILE-equal by keyset seeks from the row
	// count of metadata (sp_spaceused): with a stale count the last chunk
	// holds the rest (count too low) or fewer chunks come out (too high).
	Chunks int

	// WaveChunks is how many chunks one wave reads and commits; zero
	// means 4.
	WaveChunks int

	// Parallelism caps the chunks of a wave read at once; zero means
	// WaveChunks.
	Parallelism int

	// ReadOptions are how the source is read: isolation (of the reads
	// and the seeks), batch size, read-ahead.
	ReadOptions

	// RunOptions limit the read's rate, this call's chunks together, and
	// say where the snapshot reports: RowsPerSecond, Limiter,
	// MeterProvider, Logger.
	RunOptions

	// Resnapshot opens a new chunked snapshot even when the sink holds one
	// of the instance, open or complete (recovery after
	// source.ErrDataLoss). Pass it once: a later call with it set opens yet
	// another one instead of resuming.
	Resnapshot bool

	// MaxWaves caps the waves this call runs; zero runs until the snapshot
	// is complete. A caller that interleaves waves with stream polls runs
	// one at a time.
	MaxWaves int

	// Progress, when set, is called after every record batch written and
	// after every wave's commit, one call at a time. It must return quickly.
	Progress func(BackfillProgress)
}

// BackfillProgress reports how far a chunked snapshot has come.
type BackfillProgress struct {
	// Wave is the wave being read or just committed, from 0.
	Wave int
	// Committed is the number of chunks committed, Chunks the number planned.
	Committed, Chunks int
	// Rows is the rows written by this call so far (committed or not).
	Rows int64
	// EstimatedRows is the table's row count from metadata when the plan
	// was made, -1 when unknown.
	EstimatedRows int64
	// Elapsed is the time since this call started.
	Elapsed time.Duration
}

// BackfillPlan is a chunked snapshot's plan, stored durably in the sink
// (as JSON) when the snapshot opens, so a rerun resumes it unchanged.
type BackfillPlan struct {
	// PlanHeader is the chunked snapshot (ID is sink.Chunked.PlanID), its
	// instance and its LSN S.
	PlanHeader
	// Strategy is "keyset" or "single"; Reason says why the table is one
	// chunk, when it is.
	Strategy string `json:"strategy"`
	Reason   string `json:"reason,omitempty"`
	// Warnings say what makes the read costlier than its plan looks (a
	// nonclustered key index, for one); they are logged too.
	Warnings []string `json:"warnings,omitempty"`
	// Ranges are the chunks, by number.
	Ranges []keyrange.Range `json:"ranges"`
	// ChunkRows is the rows per chunk asked for (zero: Chunks NTILE-equal).
	ChunkRows int64 `json:"chunk_rows,omitempty"`
	// EstimatedRows is the row count from metadata, -1 if unknown.
	EstimatedRows int64 `json:"estimated_rows"`
	// WaveChunks is the chunks per wave.
	WaveChunks int `json:"wave_chunks"`
	// ReadOptions are the read options.
	ReadOptions
}

// Info returns what a sink needs to know of the chunked snapshot's writes:
// its LSN S, commit time, bronze schema and PlanID.
func (p *BackfillPlan) Info() (sink.Info, error) {
	captured, err := source.ArrowSchema(p.Instance.Columns)
	if err != nil {
		return sink.Info{}, err
	}
	schema, err := sink.BronzeSchema(captured)
	if err != nil {
		return sink.Info{}, err
	}
	return sink.Info{CaptureInstance: p.CaptureInstance, LSN: p.LSN, CommitTS: p.CommitTS, Schema: schema, PlanID: p.ID}, nil
}

// BackfillResult is the outcome of Backfill.
type BackfillResult struct {
	// LSN is the chunked snapshot's LSN S: the stream starts after it,
	// complete or not.
	LSN lsn.LSN
	// CommitTS is the commit time of S.
	CommitTS time.Time
	// PlanID identifies the chunked snapshot.
	PlanID string
	// Chunks is the number of chunks planned, Committed those committed.
	Chunks, Committed int
	// Complete is true once every chunk is committed and recorded so.
	Complete bool
	// Existing is true when the sink held the snapshot complete already
	// and nothing was read.
	Existing bool
	// Resumed is true when this call continued a snapshot opened earlier.
	Resumed bool
	// Waves is the waves this call committed, Rows their rows.
	Waves int
	Rows  int64
	// Version is the sink's version of the snapshot's latest commit.
	Version int64
}

// StreamFrom returns the first LSN the stream must read: the one after S.
func (r BackfillResult) StreamFrom() (lsn.LSN, error) { return r.LSN.Next() }

func (r *BackfillResult) set(st sink.Chunked) {
	r.LSN, r.CommitTS, r.PlanID = st.LSN, st.CommitTS, st.PlanID
	r.Chunks, r.Committed, r.Complete, r.Version = st.Chunks, st.Committed, st.Complete, st.Version
}

const (
	defaultChunks     = 16
	defaultWaveChunks = 4
)

func (o BackfillOptions) withDefaults() (BackfillOptions, error) {
	if o.CaptureInstance == "" {
		return o, fmt.Errorf("%w: CaptureInstance is empty", ErrInvalidOptions)
	}
	if o.ChunkRows < 0 || o.Chunks < 0 || o.WaveChunks < 0 || o.Parallelism < 0 || o.BatchRows < 0 || o.MaxWaves < 0 || o.RowsPerSecond < 0 {
		return o, fmt.Errorf("%w: ChunkRows (%d), Chunks (%d), WaveChunks (%d), Parallelism (%d), BatchRows (%d), MaxWaves (%d) and RowsPerSecond (%d) must not be negative",
			ErrInvalidOptions, o.ChunkRows, o.Chunks, o.WaveChunks, o.Parallelism, o.BatchRows, o.MaxWaves, o.RowsPerSecond)
	}
	if o.Isolation != source.ReadCommitted && o.Isolation != source.Snapshot {
		return o, fmt.Errorf("%w: unknown isolation level %d", ErrInvalidOptions, o.Isolation)
	}
	if err := checkReadAhead(o.ReadAhead); err != nil {
		return o, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	if o.Chunks == 0 {
		o.Chunks = defaultChunks
	}
	if o.WaveChunks == 0 {
		o.WaveChunks = defaultWaveChunks
	}
	if o.Parallelism == 0 || o.Parallelism > o.WaveChunks {
		o.Parallelism = o.WaveChunks
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Backfill takes a chunked snapshot of opts.CaptureInstance from src into
// dst, or resumes the one dst holds open: it runs waves until the snapshot
// is complete (or opts.MaxWaves waves ran) and returns its state. If dst
// holds the instance's newest chunked snapshot complete (and not
// opts.Resnapshot), it returns that one (Existing) and reads nothing.
//
// On error, the waves committed stay committed and the open snapshot is
// resumed by the next call; parts written for the failed wave never become
// visible.
func Backfill(ctx context.Context, src source.Source, dst sink.ChunkSink, opts BackfillOptions) (BackfillResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return BackfillResult{}, err
	}
	m, err := newMetrics(opts.MeterProvider, opts.CaptureInstance)
	if err != nil {
		return BackfillResult{}, err
	}
	res, err := backfill(ctx, src, dst, opts, newRun(opts.RowsPerSecond, opts.Limiter, m))
	m.ended(ctx, Result{Existing: res.Existing}, err)
	return res, err
}

func backfill(ctx context.Context, src source.Source, dst sink.ChunkSink, opts BackfillOptions, run *run) (BackfillResult, error) {
	start := time.Now()
	plan, st, res, err := openBackfill(ctx, src, dst, opts)
	if err != nil || res.Existing {
		return res, err
	}
	info, err := plan.Info()
	if err != nil {
		return res, fmt.Errorf("backfill %q: %w", opts.CaptureInstance, err)
	}
	var rowsMu sync.Mutex
	report := func(wave int, st sink.Chunked) {
		if opts.Progress == nil {
			return
		}
		rowsMu.Lock()
		defer rowsMu.Unlock()
		opts.Progress(BackfillProgress{Wave: wave, Committed: st.Committed, Chunks: st.Chunks, Rows: res.Rows, EstimatedRows: plan.EstimatedRows, Elapsed: time.Since(start)})
	}
	for st.Committed < st.Chunks && (opts.MaxWaves == 0 || res.Waves < opts.MaxWaves) {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("backfill %q: before chunk %d: %w", plan.CaptureInstance, st.Committed, err)
		}
		next, rows, err := runWave(ctx, src, dst, plan, info, st, opts, run, func(delta int64) {
			rowsMu.Lock()
			res.Rows += delta
			rowsMu.Unlock()
			report(st.Committed/plan.WaveChunks, st)
		})
		if errors.Is(err, sink.ErrChunkCommitted) && next.PlanID == plan.ID {
			// Another writer committed these chunks first: carry on after them.
			opts.Logger.InfoContext(ctx, "chunks committed by another writer; continuing", "capture_instance", plan.CaptureInstance, "committed", next.Committed)
			st = next
			res.set(st)
			continue
		}
		if err != nil {
			return res, err
		}
		st = next
		res.set(st)
		res.Waves++
		opts.Logger.InfoContext(ctx, "wave committed", "capture_instance", plan.CaptureInstance, "committed", st.Committed, "chunks", st.Chunks, "rows", rows, "version", st.Version)
		report(st.Committed/plan.WaveChunks, st)
	}
	if st.Committed == st.Chunks && !st.Complete {
		st, err = dst.CompleteChunked(ctx, info)
		if err != nil {
			return res, fmt.Errorf("backfill %q: recording completion: %w", plan.CaptureInstance, err)
		}
		res.set(st)
		opts.Logger.InfoContext(ctx, "chunked snapshot complete", "capture_instance", plan.CaptureInstance, "lsn", st.LSN, "chunks", st.Chunks, "version", st.Version)
	}
	return res, nil
}

// BootstrapBackfill opens the chunked snapshot (or finds the open or
// complete one dst holds) without reading a row of the table, and returns
// the first LSN the caller's stream must read: the one after S. Until the
// snapshot is complete it always returns that S, never a newer LSN, so the
// stream never skips the changes after it. Run Backfill next to the stream
// (same options, Resnapshot false) to read the chunks.
func BootstrapBackfill(ctx context.Context, src source.Source, dst sink.ChunkSink, opts BackfillOptions) (from lsn.LSN, res BackfillResult, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return lsn.LSN{}, res, err
	}
	_, _, res, err = openBackfill(ctx, src, dst, opts)
	if err != nil {
		return lsn.LSN{}, res, err
	}
	from, err = res.StreamFrom()
	return from, res, err
}

// openBackfill finds the instance's newest chunked snapshot and resumes it
// (open) or returns it (complete, res.Existing), or plans and opens a new
// one. plan and st are set unless res.Existing.
func openBackfill(ctx context.Context, src source.Source, dst sink.ChunkSink, opts BackfillOptions) (*BackfillPlan, sink.Chunked, BackfillResult, error) {
	var res BackfillResult
	var replaces string
	cur, err := dst.FindChunked(ctx, opts.CaptureInstance)
	switch {
	case err == nil && !opts.Resnapshot:
		return adopt(ctx, cur, opts)
	case err == nil:
		replaces = cur.PlanID
	case !errors.Is(err, sink.ErrNotFound):
		return nil, sink.Chunked{}, res, fmt.Errorf("backfill %q: looking for a chunked snapshot: %w", opts.CaptureInstance, err)
	}
	plan, err := newBackfillPlan(ctx, src, opts, sinkCheck(ctx, dst, opts.CaptureInstance))
	if err != nil {
		return nil, sink.Chunked{}, res, err
	}
	info, err := plan.Info()
	if err != nil {
		return nil, sink.Chunked{}, res, fmt.Errorf("backfill %q: %w", opts.CaptureInstance, err)
	}
	raw, err := json.Marshal(plan)
	if err != nil {
		return nil, sink.Chunked{}, res, fmt.Errorf("backfill %q: encoding the plan: %w", opts.CaptureInstance, err)
	}
	st, err := dst.OpenChunked(ctx, info, len(plan.Ranges), raw, replaces)
	if errors.Is(err, sink.ErrSnapshotExists) {
		opts.Logger.InfoContext(ctx, "another chunked snapshot opened first; adopting it", "capture_instance", opts.CaptureInstance, "lsn", st.LSN, "plan_id", st.PlanID)
		opts.Resnapshot = false
		return adopt(ctx, st, opts)
	}
	if err != nil {
		return nil, sink.Chunked{}, res, fmt.Errorf("backfill %q: opening the chunked snapshot: %w", opts.CaptureInstance, err)
	}
	res.set(st)
	opts.Logger.InfoContext(ctx, "chunked snapshot opened", "capture_instance", plan.CaptureInstance, "lsn", plan.LSN, "chunks", len(plan.Ranges), "plan_id", plan.ID, "version", st.Version)
	return plan, st, res, nil
}

// adopt resumes an open chunked snapshot or returns a complete one.
func adopt(ctx context.Context, st sink.Chunked, opts BackfillOptions) (*BackfillPlan, sink.Chunked, BackfillResult, error) {
	var res BackfillResult
	res.set(st)
	if st.Complete {
		opts.Logger.InfoContext(ctx, "chunked snapshot complete already; reading nothing", "capture_instance", opts.CaptureInstance, "lsn", st.LSN, "version", st.Version)
		res.Existing = true
		return nil, st, res, nil
	}
	var plan BackfillPlan
	if err := json.Unmarshal(st.Plan, &plan); err != nil {
		return nil, st, res, fmt.Errorf("backfill %q: the stored plan of chunked snapshot %s does not decode: %w", opts.CaptureInstance, st.PlanID, err)
	}
	if plan.ID != st.PlanID || len(plan.Ranges) != st.Chunks || plan.LSN != st.LSN || plan.WaveChunks < 1 {
		return nil, st, res, fmt.Errorf("backfill %q: the stored plan (id %q, %d chunks, LSN %s) does not match the sink's chunked snapshot (id %q, %d chunks, LSN %s)",
			opts.CaptureInstance, plan.ID, len(plan.Ranges), plan.LSN, st.PlanID, st.Chunks, st.LSN)
	}
	// The read tuning is this run's: a rerun after running out of memory
	// lowers it. What the chunks mean (ranges, LSN, isolation) is the plan's.
	plan.BatchRows, plan.ReadAhead = opts.BatchRows, opts.ReadAhead
	res.Resumed = true
	opts.Logger.InfoContext(ctx, "resuming the open chunked snapshot", "capture_instance", opts.CaptureInstance, "lsn", st.LSN, "committed", st.Committed, "chunks", st.Chunks)
	return &plan, st, res, nil
}

// NewBackfillPlan resolves the capture instance, records S and its commit
// time, and plans every chunk by keyset seeks (keyrange.Seeker): chunks of
// opts.ChunkRows rows, or opts.Chunks NTILE-equal chunks from the row
// count of metadata. It reads keys, not rows, and stores nothing: Backfill
// stores the plan when it opens the snapshot.
//
// Every key (an integer one too) is planned by seeks rather than uniform
// spans or per-slice counts: a seek's chunk holds exactly its rows however
// sparse or skewed the key is, and reading each chunk's keys once costs what
// counting them would. A key that cannot be bound safely is one chunk, the
// reason logged.
func NewBackfillPlan(ctx context.Context, src source.Source, opts BackfillOptions) (*BackfillPlan, error) {
	return newBackfillPlan(ctx, src, opts, nil)
}

// newBackfillPlan is NewBackfillPlan, with check (when not nil) run on the
// bronze schema before S is recorded.
func newBackfillPlan(ctx context.Context, src source.Source, opts BackfillOptions, check func(*arrow.Schema) error) (*BackfillPlan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	o, err := open(ctx, src, opts.CaptureInstance, "", opts.Logger, check)
	if err != nil {
		return nil, fmt.Errorf("backfill %q: %w", opts.CaptureInstance, err)
	}
	ci, s := o.ci, o.lsn
	plan := &BackfillPlan{
		PlanHeader: PlanHeader{
			ID:              o.id,
			CaptureInstance: opts.CaptureInstance,
			Instance:        *ci,
			LSN:             s,
			MaxLSN:          o.maxLSN,
			CommitTS:        o.commitTS,
		},
		ChunkRows:     opts.ChunkRows,
		EstimatedRows: o.estimatedRows,
		WaveChunks:    opts.WaveChunks,
		ReadOptions:   opts.ReadOptions,
	}
	if err := planChunks(ctx, src, ci, plan, opts); err != nil {
		return nil, fmt.Errorf("backfill %q: planning chunks: %w", opts.CaptureInstance, err)
	}
	if plan.Reason != "" {
		opts.Logger.InfoContext(ctx, "reading the table as one chunk", "capture_instance", ci.Name, "reason", plan.Reason)
	} else if w := keyIndexWarning(ci); w != "" {
		plan.Warnings = append(plan.Warnings, w)
		opts.Logger.WarnContext(ctx, w, "capture_instance", ci.Name)
	}
	opts.Logger.InfoContext(ctx, "chunked snapshot planned", "capture_instance", ci.Name, "lsn", s, "strategy", plan.Strategy, "chunks", len(plan.Ranges), "estimated_rows", plan.EstimatedRows)
	return plan, nil
}

func planChunks(ctx context.Context, src source.Source, ci *source.CaptureInstance, plan *BackfillPlan, opts BackfillOptions) error {
	key, err := ci.KeyColumns()
	if err != nil {
		return err
	}
	plan.Strategy, plan.Ranges = keyrange.Single.String(), keyrange.Whole()
	if reason := keyrange.Ineligible(key); reason != "" {
		plan.Reason = reason
		return nil
	}
	sk := seeker{src, ci, opts.Isolation}
	switch {
	case opts.ChunkRows > 0:
		var bounds []keyrange.Tuple
		var from keyrange.Tuple
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("seeking the start of chunk %d: %w", len(bounds)+1, err)
			}
			k, ok, err := sk.SeekKey(ctx, from, opts.ChunkRows)
			if err != nil {
				return fmt.Errorf("seeking the start of chunk %d: %w", len(bounds)+1, err)
			}
			if !ok {
				break
			}
			if k == nil {
				return fmt.Errorf("seeking the start of chunk %d: the source returned no key", len(bounds)+1)
			}
			bounds = append(bounds, k)
			from = k
		}
		plan.Ranges = keyrange.FromBounds(bounds)
	case plan.EstimatedRows < 0:
		plan.Reason = "no row count to plan chunks from (set ChunkRows)"
		return nil
	case opts.Chunks > 1:
		plan.Ranges, err = keyrange.NTile(ctx, sk, plan.EstimatedRows, opts.Chunks)
		if err != nil {
			return err
		}
	}
	plan.Strategy = keyrange.Keyset.String()
	return nil
}

// runWave reads and commits the next wave of chunks. It returns the sink's
// state after the commit and the rows committed. rows, when non-nil, is
// called with the rows each batch adds.
func runWave(ctx context.Context, src source.Source, dst sink.ChunkSink, plan *BackfillPlan, info sink.Info, st sink.Chunked, opts BackfillOptions, run *run, rows func(int64)) (sink.Chunked, int64, error) {
	first := st.Committed
	end := min(first+plan.WaveChunks, len(plan.Ranges))
	wave := sink.Wave{Number: first / plan.WaveChunks}
	// The stamp: recorded before any chunk of the wave is read, never below S.
	maxLSN, err := src.MaxLSN(ctx)
	if err != nil {
		return st, 0, fmt.Errorf("backfill %q: wave %d: max LSN: %w", plan.CaptureInstance, wave.Number, err)
	}
	wave.Stamp = maxLSN
	if wave.Stamp.Less(plan.LSN) {
		wave.Stamp = plan.LSN
	}
	ts, err := src.LSNTime(ctx, wave.Stamp)
	if err != nil {
		return st, 0, fmt.Errorf("backfill %q: wave %d: commit time of %s: %w", plan.CaptureInstance, wave.Number, wave.Stamp, err)
	}
	wave.CommitTS = ts.UTC()
	// The chunks read with the instance's columns as they are now, which
	// must be the plan's: a type that changed, or lags the table's, would
	// read truncated or rounded values (FACTS.md F62, F92). A column
	// dropped since reads NULL, and a renamed table by its new name.
	// DESIGN.md R15.
	read, err := waveInstance(ctx, src, plan, &plan.Instance)
	if err != nil {
		return st, 0, fmt.Errorf("backfill %q: wave %d: %w", plan.CaptureInstance, wave.Number, err)
	}
	opts.Logger.DebugContext(ctx, "wave started", "capture_instance", plan.CaptureInstance, "wave", wave.Number, "stamp", wave.Stamp, "chunks", fmt.Sprintf("%d..%d", first, end-1))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := end - first
	parts := make([]sink.Part, n)
	errs := make([]error, n)
	sem := make(chan struct{}, opts.Parallelism)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			var last int64
			began := time.Now()
			var part sink.Part
			err := again(ctx, opts.Logger, fmt.Sprintf("chunk %d", first+i), func() (err error) {
				part, err = executeChunk(ctx, src, dst, plan, read, first+i, wave, func(r int64) {
					if rows != nil {
						rows(r - last)
					}
					last = r
				}, run)
				return err
			})
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			run.metrics.partitionWritten(ctx, part.Rows, part.Bytes, time.Since(began))
			parts[i] = part
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return st, 0, explainReadError(ctx, src, read, true, err)
	}
	// And they still are: a DDL after the check above and before a chunk's
	// read would have changed what the chunk read.
	after, err := waveInstance(ctx, src, plan, read)
	if err == nil && tableName(after) != tableName(read) {
		err = &TableRenamedError{CaptureInstance: plan.Instance.Name, Was: tableName(read), Now: tableName(after)}
	}
	if err != nil {
		return st, 0, fmt.Errorf("backfill %q: wave %d (chunks %d..%d), before its commit: %w", plan.CaptureInstance, wave.Number, first, end-1, err)
	}
	var total int64
	for _, p := range parts {
		total += p.Rows
	}
	began := time.Now()
	next, err := dst.CommitChunks(ctx, info, wave, parts)
	run.metrics.committed(ctx, time.Since(began))
	if err != nil {
		return next, 0, fmt.Errorf("backfill %q: committing wave %d (chunks %d..%d): %w", plan.CaptureInstance, wave.Number, first, end-1, err)
	}
	return next, total, nil
}

// firstError returns the first error that is not a cancellation, else the
// first cancellation, else nil.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ExecuteChunk reads chunk i of the plan from src, stamps its rows for wave
// (_snapshot = S, _chunk = i, _start_lsn and _commit_ts of the wave's
// stamp) and writes them to dst, invisible until the wave's CommitChunks.
// It can run on any process that has the plan. progress, when non-nil, is
// called with the rows written so far in this chunk after each batch.
//
// It reads with the plan's description of the instance. Backfill checks
// that description against the source's around each wave (DESIGN.md R15):
// a caller that runs chunks itself should too.
func ExecuteChunk(ctx context.Context, src source.Source, dst sink.Sink, plan *BackfillPlan, i int, wave sink.Wave, progress func(rows int64)) (sink.Part, error) {
	return executeChunk(ctx, src, dst, plan, &plan.Instance, i, wave, progress, nil)
}

// waveInstance describes plan's capture instance and returns what a wave
// reads with (readInstance, against was), or a *ColumnsChangedError naming
// the type changes the DDL history records since the snapshot's LSN.
func waveInstance(ctx context.Context, src source.Source, plan *BackfillPlan, was *source.CaptureInstance) (*source.CaptureInstance, error) {
	now, err := src.CaptureInstance(ctx, plan.Instance.Name)
	if err != nil {
		return nil, fmt.Errorf("describing the capture instance: %w", err)
	}
	read, err := readInstance(was, now, true)
	var ce *ColumnsChangedError
	if errors.As(err, &ce) {
		for _, d := range ddlHistory(ctx, src, plan.Instance.Name, slog.New(slog.DiscardHandler)) {
			if d.RequiredColumnUpdate && !d.LSN.Less(plan.LSN) {
				ce.DDL = append(ce.DDL, d)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return read, nil
}

// executeChunk is ExecuteChunk reading with ci (the plan's instance as a
// wave reads it), through run's budgets and metrics.
func executeChunk(ctx context.Context, src source.Source, dst sink.Sink, plan *BackfillPlan, ci *source.CaptureInstance, i int, wave sink.Wave, progress func(rows int64), run *run) (sink.Part, error) {
	key, err := plan.Instance.KeyColumns()
	if err == nil {
		err = validateRanges(plan.Ranges, key)
	}
	if err == nil {
		if err = checkReadAhead(plan.ReadAhead); err == nil {
			err = checkMaxLSN(plan.MaxLSN, plan.LSN)
		}
		if err != nil {
			err = fmt.Errorf("%w: %v", ErrInvalidPlan, err)
		}
	}
	if err != nil {
		return sink.Part{}, fmt.Errorf("backfill %q: %w", plan.CaptureInstance, err)
	}
	if i < 0 || i >= len(plan.Ranges) {
		return sink.Part{}, fmt.Errorf("backfill %q: chunk %d does not exist (the plan has %d)", plan.CaptureInstance, i, len(plan.Ranges))
	}
	if wave.Stamp.Less(plan.LSN) {
		return sink.Part{}, fmt.Errorf("backfill %q: chunk %d: stamp %s is below the snapshot's LSN %s", plan.CaptureInstance, i, wave.Stamp, plan.LSN)
	}
	info, err := plan.Info()
	if err != nil {
		return sink.Part{}, fmt.Errorf("backfill %q: %w", plan.CaptureInstance, err)
	}
	r := plan.Ranges[i]
	// A stamp above S is the max LSN the wave read; S may be a new
	// instance's start_lsn - 1, above the max LSN (see Plan.MaxLSN).
	notBefore := wave.Stamp
	if !plan.LSN.Less(wave.Stamp) {
		notBefore = plan.MaxLSN
	}
	rr, err := readRange(ctx, src, ci, r, source.ReadOptions{Isolation: plan.Isolation, BatchRows: plan.BatchRows, NotBefore: notBefore}, plan.ReadAhead, run)
	if err != nil {
		return sink.Part{}, fmt.Errorf("backfill %q: reading chunk %d (%s): %w", plan.CaptureInstance, i, r, err)
	}
	chunk := int32(i)
	stamped, err := newStamper(rr, info.Schema, stamp{
		captureInstance: plan.CaptureInstance,
		lsn:             wave.Stamp.String(),
		snapshot:        plan.LSN.String(),
		commitTS:        wave.CommitTS,
		chunk:           &chunk,
	}, progress)
	rr.Release()
	if err != nil {
		return sink.Part{}, fmt.Errorf("backfill %q: chunk %d: %w", plan.CaptureInstance, i, err)
	}
	defer stamped.Release()
	part, err := dst.WritePartition(ctx, info, i, stamped)
	if err == nil {
		err = stamped.Err()
	}
	if err != nil {
		return sink.Part{}, fmt.Errorf("backfill %q: chunk %d (%s): %w", plan.CaptureInstance, i, r, err)
	}
	return part, nil
}
