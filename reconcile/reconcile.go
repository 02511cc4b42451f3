// Package reconcile compares a CDC source table with the latest image of
// its bronze target, tile by tile, and narrows every tile that differs down
// to the keys that differ.
//
// The key is cut into NTILE-compatible tiles (keyrange.Tiles, by keyset
// seeks from the row count of metadata). For each tile both sides give a
// row count and an order-independent hash of their rows' canonical values
// (every captured column, typed values rendered one way whatever the Arrow
// width, NULL distinct from every value), so equal tiles cost one read of
// each side and no sort. A tile whose count or hash differs is read again
// from the source and compared key by key with the target: a key only in
// the source is Missing, only in the target Extra, in both with other
// values Different. Keys match by stored value, trailing spaces aside
// (keyrange.RowKey), as the latest image groups them: a unique index holds
// one row among the values its collation takes for equal, and every image
// of the row carries its stored value. A source key and a target key left
// unmatched that the source certainly takes for equal (keyrange.CertainKey:
// ASCII case under a case-insensitive collation that folds it letter by
// letter) are one key with a Different value; any other spelling, which
// the server's equality may or may not take for the same key (accents,
// width, expansions, tied letters), is Missing and Extra.
//
// The target side is any bronze table that can read its rows back
// (RowReader: (*delta.Table).ReadAll, fake.MemSink.ReadAll). Its latest
// image per stored key is merged in memory by snapshot.CompareOrder; rows of
// other capture instances are skipped. A target that is also a
// TileReader ((*delta.Table), whose ReadKeyRange reads only the files
// whose key statistics may hold the tile) is read tile by tile, so memory
// is bounded by Options.Parallel tiles' images and open data files, not by
// the table; any other target is read whole once and must fit in memory.
// Tiles are compared Options.Parallel at a time. Differences are kept in
// memory too: set Options.MaxDifferences when a target may be far off.
//
// A capture instance without a unique index has no key: its target is
// compared as a multiset of rows, in one tile (Report.Keyless). The image
// is its latest snapshot's rows (the newest the target records, as a sink
// does, or whose rows it holds) plus the change rows stamped after them:
// an insert or update-after adds a copy of its row, a delete or
// update-before removes one. Both sides are counted and hashed while they
// stream, so a table that matches costs two reads of the target and one
// of the source whatever its size; one that differs is read once more
// from each side, holding the distinct rows of both sides, and is
// reported as one Missing or Extra row per copy. Columns that change rows
// do not carry are left out (Report.Omitted). A chunked snapshot counts
// once complete. Two cases cannot be verified: two snapshots at one LSN
// cannot be told apart (their rows count twice; snapshot.Take refuses
// such a re-snapshot, snapshot.ErrTwinSnapshot, but a backfill at the
// LSN of a whole snapshot still makes one), and a chunked snapshot that
// wrote no rows leaves no record of the LSN its chunk was read at (an
// error says so).
//
// RunAll verifies many capture instances, each against its own source
// and target, a few at a time, and reports each on its own: one
// instance's error does not stop the others.
//
// Reconcile compares two moving things unless they are still: run it when
// the target has applied the changes up to the source's current max LSN
// and the source is quiet, or treat differences in a Report whose
// SourceChanged is true as possibly in flight.
package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// RowReader reads every row of a bronze table back, at its latest version.
// (*delta.Table) and fake.MemSink implement it. The caller releases the
// reader.
type RowReader interface {
	ReadAll(ctx context.Context) (array.RecordReader, error)
}

// TileReader is a target that reads only the part of itself that can
// hold one tile: (*delta.Table).ReadKeyRange prunes its files by their
// key statistics. Run reads a target that implements it one tile at a
// time, so it holds one tile's latest image per tile compared at once,
// not the table's.
type TileReader interface {
	// ReadKeyRange reads rows of the bronze table, at its latest version,
	// in the table's schema: at least every row of captureInstance
	// (matched ignoring case) whose key columns, ordered as keyrange
	// orders key, lie in r. Other rows may come too; the caller drops
	// them. The caller releases the reader.
	ReadKeyRange(ctx context.Context, captureInstance string, key []keyrange.Column, r keyrange.Range) (array.RecordReader, error)
}

// Options configure a reconcile. The zero value of every field but
// CaptureInstance is a sensible default.
type Options struct {
	// CaptureInstance names the capture instance, matched as the snapshot
	// matches it; target rows whose _capture_instance names it ignoring
	// case are compared.
	CaptureInstance string

	// Tiles is how many tiles to cut the key into; zero means 16.
	Tiles int

	// From, when not zero, merges only the target rows whose _start_lsn is
	// at or above it: the rows downstream rebuilds from after a re-snapshot
	// at From.
	From lsn.LSN

	// MaxDifferences caps the differing keys reported (Report.Truncated
	// says when more were found); zero reports all.
	MaxDifferences int

	// Parallel is how many tiles are compared at once, each with its own
	// source read (a connection) and, for a TileReader target, its own
	// target read and latest image; zero means 4.
	Parallel int

	// Isolation and BatchRows are the source reads' options.
	Isolation source.Isolation
	BatchRows int

	// Logger receives decisions and progress. Nil is silent.
	Logger *slog.Logger

	// Progress, when set, is called after each tile is compared, one call
	// at a time, from the goroutines that compare tiles.
	Progress func(Progress)
}

// Progress reports how far a reconcile has come.
type Progress struct {
	// TilesDone of Tiles are compared.
	TilesDone, Tiles int
	// SourceRows is the source rows read so far.
	SourceRows int64
	// Elapsed is the time since the reconcile started.
	Elapsed time.Duration
}

// ErrInvalidOptions is wrapped by errors for options that cannot work.
var ErrInvalidOptions = errors.New("invalid reconcile options")

// Hash is an order-independent hash of a multiset of rows: the sum, as
// two 64-bit lanes modulo 2^64, of the first 16 bytes of each row's
// SHA-256 (a removed copy subtracts its row's).
type Hash [16]byte

// String returns the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

func (h *Hash) add(row [32]byte) { h.addSigned(row, false) }

// sub takes a row out of the set: a multiset's removed copy.
func (h *Hash) sub(row [32]byte) { h.addSigned(row, true) }

func (h *Hash) addSigned(row [32]byte, negate bool) {
	for lane := 0; lane < 2; lane++ {
		a := binary.LittleEndian.Uint64(h[lane*8:])
		b := binary.LittleEndian.Uint64(row[lane*8:])
		if negate {
			b = -b
		}
		binary.LittleEndian.PutUint64(h[lane*8:], a+b)
	}
}

// Tile is one tile's comparison.
type Tile struct {
	// Range is the tile's key range (Range.Index is its number).
	Range keyrange.Range
	// SourceRows and TargetRows count each side's rows in the tile.
	SourceRows, TargetRows int64
	// SourceHash and TargetHash hash each side's rows in the tile.
	SourceHash, TargetHash Hash
}

// Differs reports whether the two sides' counts or hashes differ.
func (t Tile) Differs() bool { return t.SourceRows != t.TargetRows || t.SourceHash != t.TargetHash }

// Kind is how a key differs.
type Kind int

const (
	// Missing: the key is in the source, not in the target. Without a
	// key: the source holds more copies of the row than the target (a
	// target whose changes remove a copy it never held counts as missing
	// one, though the source may hold none).
	Missing Kind = iota + 1
	// Extra: the key is in the target, not in the source. Without a key:
	// the target holds more copies of the row.
	Extra
	// Different: the key is in both, with other values.
	Different
)

// String returns "missing", "extra" or "different".
func (k Kind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Extra:
		return "extra"
	case Different:
		return "different"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Difference is one key that differs.
type Difference struct {
	// Tile is the number of the tile that holds the key.
	Tile int
	// Kind says how it differs.
	Kind Kind
	// Key is the key as the source spells it (as the target does for
	// Extra); nil for a capture instance without a unique index
	// (Report.Keyless), whose differences are rows, one per copy.
	Key keyrange.Tuple
	// Source and Target are the row's canonical values per captured
	// column (Report.Columns), nil on the side that lacks the key.
	Source, Target []string
}

// String describes the difference on one line.
func (d Difference) String() string {
	if d.Key == nil {
		return keylessString(d)
	}
	switch d.Kind {
	case Missing:
		return fmt.Sprintf("tile %d: key %v missing from the target (source %q)", d.Tile, []any(d.Key), d.Source)
	case Extra:
		return fmt.Sprintf("tile %d: key %v extra in the target (%q)", d.Tile, []any(d.Key), d.Target)
	}
	return fmt.Sprintf("tile %d: key %v differs: source %q, target %q", d.Tile, []any(d.Key), d.Source, d.Target)
}

// Report is the outcome of a reconcile.
type Report struct {
	// CaptureInstance is the name as the options gave it.
	CaptureInstance string
	// Columns are the captured columns compared, in order.
	Columns []string
	// Tiles are every tile's comparison, by number.
	Tiles []Tile
	// Differences are the keys that differ, by tile and then key order.
	Differences []Difference
	// Truncated is true when more differences were found than
	// Options.MaxDifferences.
	Truncated bool
	// SourceLSN is the source's max LSN when the reconcile started;
	// SourceChanged is true when it had moved by the end (differences may
	// then be changes in flight).
	SourceLSN     lsn.LSN
	SourceChanged bool
	// Keyless is true when the capture instance has no unique index: its
	// target was compared as a multiset of rows, in one tile, and its
	// differences are Missing or Extra rows, never Different keys.
	Keyless bool
	// Omitted are the captured columns a keyless comparison left out
	// because change rows do not carry their values (Columns lists the
	// rest); nil for a keyed one.
	Omitted []OmittedColumn
}

// OmittedColumn is a captured column left out of a comparison, and why.
type OmittedColumn struct {
	Name, Reason string
}

// Clean reports whether every tile matched.
func (r *Report) Clean() bool {
	for _, t := range r.Tiles {
		if t.Differs() {
			return false
		}
	}
	return true
}

// DifferingTiles returns the tiles whose counts or hashes differ.
func (r *Report) DifferingTiles() []Tile {
	var out []Tile
	for _, t := range r.Tiles {
		if t.Differs() {
			out = append(out, t)
		}
	}
	return out
}

const (
	defaultTiles    = 16
	defaultParallel = 4
)

// Run reconciles the capture instance's source table with dst's latest
// image of it: per tile a count and hash of each side, then the keys of
// every differing tile. Tiles are compared Options.Parallel at a time. A
// dst that is a TileReader is read one tile at a time; any other is read
// whole first.
func Run(ctx context.Context, src source.Source, dst RowReader, opts Options) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return run(ctx, src, dst, opts)
}

func (o Options) validate() error {
	if o.CaptureInstance == "" {
		return fmt.Errorf("%w: CaptureInstance is empty", ErrInvalidOptions)
	}
	if o.Tiles < 0 || o.MaxDifferences < 0 || o.BatchRows < 0 || o.Parallel < 0 {
		return fmt.Errorf("%w: Tiles (%d), MaxDifferences (%d), BatchRows (%d) and Parallel (%d) must not be negative",
			ErrInvalidOptions, o.Tiles, o.MaxDifferences, o.BatchRows, o.Parallel)
	}
	return nil
}

// run is Run after the options were validated.
func run(ctx context.Context, src source.Source, dst RowReader, opts Options) (*Report, error) {
	start := time.Now()
	if opts.Tiles == 0 {
		opts.Tiles = defaultTiles
	}
	if opts.Parallel == 0 {
		opts.Parallel = defaultParallel
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	where := fmt.Sprintf("reconcile %q", opts.CaptureInstance)
	ci, err := src.CaptureInstance(ctx, opts.CaptureInstance)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	key, err := ci.KeyColumns()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cmp := &comparer{ci: ci, key: key}
	for _, c := range ci.Columns {
		cmp.columns = append(cmp.columns, c.Name)
	}
	rep := &Report{CaptureInstance: opts.CaptureInstance, Columns: cmp.columns}
	if rep.SourceLSN, err = src.MaxLSN(ctx); err != nil {
		return nil, fmt.Errorf("%s: max LSN: %w", where, err)
	}
	if len(key) == 0 {
		if err := runKeyless(ctx, src, dst, ci, rep, opts, log, start); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return finish(ctx, src, rep, opts, log, where)
	}
	ranges, err := tiles(ctx, src, ci, key, opts, log)
	if err != nil {
		return nil, fmt.Errorf("%s: cutting tiles: %w", where, err)
	}
	// target returns the target's live rows of tile i.
	var target func(ctx context.Context, i int) ([]*keyedRow, error)
	if tr, ok := dst.(TileReader); ok {
		log.DebugContext(ctx, "reading the target tile by tile", "capture_instance", opts.CaptureInstance, "tiles", len(ranges))
		target = func(ctx context.Context, i int) ([]*keyedRow, error) {
			rr, err := tr.ReadKeyRange(ctx, opts.CaptureInstance, key, ranges[i])
			if err != nil {
				return nil, err
			}
			defer rr.Release()
			return cmp.mergeTarget(ctx, rr, opts, &ranges[i])
		}
	} else {
		rows, err := cmp.readTarget(ctx, dst, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: reading the target: %w", where, err)
		}
		byTile, err := cmp.assign(rows, ranges)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		target = func(_ context.Context, i int) ([]*keyedRow, error) {
			rows := byTile[i]
			byTile[i] = nil // compared once: let it go
			return rows, nil
		}
	}
	results := make([]tileResult, len(ranges))
	var (
		mu                   sync.Mutex
		done                 int
		sourceRows, targetRs int64
	)
	readOpts := source.ReadOptions{Isolation: opts.Isolation, BatchRows: opts.BatchRows}
	err = forEach(ctx, len(ranges), opts.Parallel, func(ctx context.Context, i int) error {
		r := ranges[i]
		rows, err := target(ctx, i)
		if err != nil {
			return fmt.Errorf("%s: reading tile %d (%s) from the target: %w", where, i, r, err)
		}
		res, err := cmp.compareTile(ctx, src, r, readOpts, rows, opts, log)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		results[i] = res
		mu.Lock()
		defer mu.Unlock()
		done++
		sourceRows += res.tile.SourceRows
		targetRs += res.tile.TargetRows
		if opts.Progress != nil {
			opts.Progress(Progress{TilesDone: done, Tiles: len(ranges), SourceRows: sourceRows, Elapsed: time.Since(start)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, res := range results {
		rep.Tiles = append(rep.Tiles, res.tile)
		rep.Truncated = rep.Truncated || res.truncated
		for _, d := range res.diffs {
			if opts.MaxDifferences > 0 && len(rep.Differences) >= opts.MaxDifferences {
				rep.Truncated = true
				break
			}
			rep.Differences = append(rep.Differences, d)
		}
	}
	return finish(ctx, src, rep, opts, log, where)
}

// finish notes whether the source moved while rep was made.
func finish(ctx context.Context, src source.Source, rep *Report, opts Options, log *slog.Logger, where string) (*Report, error) {
	end, err := src.MaxLSN(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: max LSN: %w", where, err)
	}
	rep.SourceChanged = end != rep.SourceLSN
	var sourceRows, targetRows int64
	for _, t := range rep.Tiles {
		sourceRows += t.SourceRows
		targetRows += t.TargetRows
	}
	log.InfoContext(ctx, "reconciled", "capture_instance", opts.CaptureInstance, "keyless", rep.Keyless, "tiles", len(rep.Tiles), "differing_tiles", len(rep.DifferingTiles()),
		"differences", len(rep.Differences), "source_rows", sourceRows, "target_rows", targetRows, "source_changed", rep.SourceChanged)
	return rep, nil
}

// tileResult is one tile's comparison and its differing keys, at most
// Options.MaxDifferences of them (truncated says when there were more).
type tileResult struct {
	tile      Tile
	diffs     []Difference
	truncated bool
}

// compareTile counts and hashes the source's rows of r against the
// target's, and narrows a tile that differs to its keys.
func (c *comparer) compareTile(ctx context.Context, src source.Source, r keyrange.Range, readOpts source.ReadOptions, target []*keyedRow, opts Options, log *slog.Logger) (tileResult, error) {
	res := tileResult{tile: Tile{Range: r}}
	t := &res.tile
	for _, row := range target {
		t.TargetRows++
		t.TargetHash.add(row.hash)
	}
	err := c.readSource(ctx, src, r, readOpts, func(row *keyedRow) error {
		t.SourceRows++
		t.SourceHash.add(row.hash)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("reading tile %d (%s) from the source: %w", r.Index, r, err)
	}
	if !t.Differs() {
		return res, nil
	}
	log.InfoContext(ctx, "tile differs; narrowing it to keys", "capture_instance", opts.CaptureInstance, "tile", r.Index,
		"source_rows", t.SourceRows, "target_rows", t.TargetRows)
	diffs, err := c.narrow(ctx, src, r, readOpts, target)
	if err != nil {
		return res, fmt.Errorf("narrowing tile %d (%s): %w", r.Index, r, err)
	}
	if opts.MaxDifferences > 0 && len(diffs) > opts.MaxDifferences {
		diffs, res.truncated = diffs[:opts.MaxDifferences], true
	}
	res.diffs = diffs
	return res, nil
}

// forEach calls f for 0..n-1, at most parallel at once; the first error
// cancels the calls still running and is returned once all have ended.
func forEach(ctx context.Context, n, parallel int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// tiles cuts the key into NTILE-compatible ranges from the metadata row
// count; a count the seeks prove too high falls back to NTile's ranges.
func tiles(ctx context.Context, src source.Source, ci *source.CaptureInstance, key []keyrange.Column, opts Options, log *slog.Logger) ([]keyrange.Range, error) {
	if reason := keyrange.Ineligible(key); reason != "" || opts.Tiles == 1 {
		if reason != "" {
			log.InfoContext(ctx, "comparing the table as one tile", "capture_instance", opts.CaptureInstance, "reason", reason)
		}
		return keyrange.Whole(), nil
	}
	rows, err := src.RowCount(ctx, ci)
	if err != nil {
		return nil, fmt.Errorf("row count: %w", err)
	}
	sk := seeker{src, ci, opts.Isolation}
	ranges, err := keyrange.Tiles(ctx, sk, rows, opts.Tiles)
	if errors.Is(err, keyrange.ErrRowCount) {
		log.InfoContext(ctx, "the row count is stale; tiles are NTILE-equal to it", "capture_instance", opts.CaptureInstance, "err", err)
		return keyrange.NTile(ctx, sk, rows, opts.Tiles)
	}
	return ranges, err
}

type seeker struct {
	src source.Source
	ci  *source.CaptureInstance
	iso source.Isolation
}

func (s seeker) SeekKey(ctx context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	return s.src.SeekKey(ctx, s.ci, s.iso, from, k)
}

// keyedRow is one row's key, its stored-value key (rowKey), canonical
// values and hash.
type keyedRow struct {
	key    keyrange.Tuple
	rowKey string
	values []string
	hash   [32]byte
}

type comparer struct {
	ci      *source.CaptureInstance
	key     []keyrange.Column
	columns []string
}

// columnsOf finds the captured columns and key columns in schema.
func (c *comparer) columnsOf(schema *arrow.Schema) (cols, keyCols []int, err error) {
	at := func(name string) (int, error) {
		j := schema.FieldIndices(name)
		if len(j) != 1 {
			return 0, fmt.Errorf("the rows have no column %q", name)
		}
		return j[0], nil
	}
	for _, n := range c.columns {
		j, err := at(n)
		if err != nil {
			return nil, nil, err
		}
		cols = append(cols, j)
	}
	for _, k := range c.key {
		j, err := at(k.Name)
		if err != nil {
			return nil, nil, err
		}
		keyCols = append(keyCols, j)
	}
	return cols, keyCols, nil
}

// bronzeLayout is where a comparison finds what it reads in a bronze
// schema: the captured and key columns (columnsOf), the merge order and
// _capture_instance.
type bronzeLayout struct {
	cols, keyCols []int
	order         snapshot.OrderColumns
	instance      int
}

// layout locates them in schema; ok is false for an empty table that has
// no captured columns yet.
func (c *comparer) layout(schema *arrow.Schema) (b bronzeLayout, ok bool, err error) {
	if schema.NumFields() == len(sink.MetadataFields()) && len(schema.FieldIndices(c.columns[0])) == 0 {
		return b, false, nil
	}
	if b.cols, b.keyCols, err = c.columnsOf(schema); err != nil {
		return b, false, err
	}
	if b.order, err = snapshot.FindOrderColumns(schema); err != nil {
		return b, false, err
	}
	j := schema.FieldIndices(sink.ColCaptureInstance)
	if len(j) != 1 {
		return b, false, fmt.Errorf("the rows have no column %q: not a bronze table", sink.ColCaptureInstance)
	}
	b.instance = j[0]
	return b, true, nil
}

// stringColumn returns column j of rec as strings.
func stringColumn(rec arrow.RecordBatch, j int) (*array.String, error) {
	s, ok := rec.Column(j).(*array.String)
	if !ok {
		return nil, fmt.Errorf("column %q is %s, not a string", rec.Schema().Field(j).Name, rec.Column(j).DataType())
	}
	return s, nil
}

// row builds the keyed row r of rec.
func (c *comparer) row(rec arrow.RecordBatch, r int, cols, keyCols []int) (*keyedRow, error) {
	k, rk, err := c.keyOf(rec, r, keyCols)
	if err != nil {
		return nil, err
	}
	out := &keyedRow{key: k, rowKey: rk}
	return out, c.fill(out, rec, r, cols)
}

// fill sets out's canonical values and hash from row r of rec.
func (c *comparer) fill(out *keyedRow, rec arrow.RecordBatch, r int, cols []int) error {
	out.values = make([]string, len(cols))
	h := sha256.New()
	var n [8]byte
	for i, j := range cols {
		v, err := canonical(rec.Column(j), r)
		if err != nil {
			return fmt.Errorf("column %q: %w", c.columns[i], err)
		}
		out.values[i] = v
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	h.Sum(out.hash[:0])
	return nil
}

// keyOf returns row r's key and its stored-value key.
func (c *comparer) keyOf(rec arrow.RecordBatch, r int, keyCols []int) (keyrange.Tuple, string, error) {
	key, err := c.keyValues(rec, r, keyCols)
	if err != nil {
		return nil, "", err
	}
	rk, err := c.rowKey(key, keyrange.RowKey)
	return key, rk, err
}

// keyValues returns row r's key.
func (c *comparer) keyValues(rec arrow.RecordBatch, r int, keyCols []int) (keyrange.Tuple, error) {
	key := make(keyrange.Tuple, len(keyCols))
	for i, j := range keyCols {
		v, err := keyValue(c.key[i], rec.Column(j), r)
		if err != nil {
			return nil, err
		}
		key[i] = v
	}
	return key, nil
}

// rowKey joins the keys of key's columns by of: keyrange.RowKey, equal
// for two keys exactly when they are one stored value, or
// keyrange.CertainKey.
func (c *comparer) rowKey(key keyrange.Tuple, of func(keyrange.Column, any) (string, error)) (string, error) {
	var ck strings.Builder
	for i, v := range key {
		s, err := of(c.key[i], v)
		if err != nil {
			return "", err
		}
		ck.WriteString(s)
		ck.WriteByte(0)
	}
	return ck.String(), nil
}

// readSource calls f with every source row of r.
func (c *comparer) readSource(ctx context.Context, src source.Source, r keyrange.Range, opts source.ReadOptions, f func(*keyedRow) error) error {
	rr, err := src.ReadRange(ctx, c.ci, r, opts)
	if err != nil {
		return err
	}
	defer rr.Release()
	cols, keyCols, err := c.columnsOf(rr.Schema())
	if err != nil {
		return err
	}
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := rr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row, err := c.row(rec, i, cols, keyCols)
			if err != nil {
				return err
			}
			if err := f(row); err != nil {
				return err
			}
		}
	}
	return rr.Err()
}

type targetRow struct {
	*keyedRow
	order  snapshot.Order
	delete bool
}

// readTarget merges the target's rows of the capture instance into their
// latest image and returns the live rows.
func (c *comparer) readTarget(ctx context.Context, dst RowReader, opts Options) ([]*keyedRow, error) {
	rr, err := dst.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	return c.mergeTarget(ctx, rr, opts, nil)
}

// mergeTarget merges rr's rows of the capture instance whose key lies in
// tile (every key when tile is nil) into their latest image per stored key
// (keyrange.RowKey, as snapshot.Image groups them: Go's case folding would
// take two rows a collation keeps apart, Danish "aa" and "aA", for one)
// by snapshot.CompareOrder, and returns the live rows. Only the tile's
// keys are held.
func (c *comparer) mergeTarget(ctx context.Context, rr array.RecordReader, opts Options, tile *keyrange.Range) ([]*keyedRow, error) {
	b, ok, err := c.layout(rr.Schema())
	if err != nil || !ok {
		return nil, err
	}
	cols, keyCols, orderCols := b.cols, b.keyCols, b.order
	from := ""
	if !opts.From.IsZero() {
		from = opts.From.String()
	}
	image := map[string]*targetRow{}
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec := rr.RecordBatch()
		ciCol, err := stringColumn(rec, b.instance)
		if err != nil {
			return nil, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			if ciCol.IsNull(i) || !sink.SameInstance(ciCol.Value(i), opts.CaptureInstance) {
				continue
			}
			k, err := c.keyValues(rec, i, keyCols)
			if err != nil {
				return nil, err
			}
			if tile != nil {
				if in, err := tile.Contains(c.key, k); err != nil || !in {
					if err != nil {
						return nil, fmt.Errorf("placing target keys in tiles: %w", err)
					}
					continue // another tile's row: a TileReader's reads are supersets
				}
			}
			o := orderCols.Order(rec, i)
			if from != "" && (o.StartLSN == nil || *o.StartLSN < from) {
				continue // rows before From are not rebuilt from
			}
			rk, err := c.rowKey(k, keyrange.RowKey)
			if err != nil {
				return nil, err
			}
			if old, ok := image[rk]; ok && snapshot.CompareOrder(old.order, o) > 0 {
				continue
			}
			// A delete (1) and an update-before (3) remove their key: under
			// trace flag 8207 an update of the key is logged as 3 and 4, the
			// before image holding the old key (FACTS.md F14; the after
			// image of an update that keeps its key follows and wins).
			gone := o.Operation == 1 || o.Operation == 3
			row := &keyedRow{key: k, rowKey: rk}
			if !gone { // a removed row's values are never compared
				if err := c.fill(row, rec, i, cols); err != nil {
					return nil, err
				}
			}
			image[rk] = &targetRow{keyedRow: row, order: o, delete: gone}
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	out := make([]*keyedRow, 0, len(image))
	for _, r := range image {
		if !r.delete {
			out = append(out, r.keyedRow)
		}
	}
	return out, nil
}

// assign puts each target row in the tile that holds its key.
func (c *comparer) assign(rows []*keyedRow, ranges []keyrange.Range) ([][]*keyedRow, error) {
	out := make([][]*keyedRow, len(ranges))
	var cmpErr error
	for _, row := range rows {
		i := sort.Search(len(ranges)-1, func(i int) bool {
			n, err := keyrange.CompareTuples(c.key, row.key, ranges[i].Upper)
			if err != nil && cmpErr == nil {
				cmpErr = err
			}
			return n < 0
		})
		out[i] = append(out[i], row)
	}
	if cmpErr != nil {
		return nil, fmt.Errorf("placing target keys in tiles: %w", cmpErr)
	}
	return out, nil
}

// narrow compares one tile key by key: by stored value first, then the
// keys left on both sides by keyrange.CertainKey (see the package doc).
func (c *comparer) narrow(ctx context.Context, src source.Source, r keyrange.Range, opts source.ReadOptions, target []*keyedRow) ([]Difference, error) {
	tgt := make(map[string]*keyedRow, len(target))
	for _, row := range target {
		tgt[row.rowKey] = row
	}
	var out []Difference
	var sorted []*keyedRow // the keys of out, to sort them
	var missing []*keyedRow
	different := func(s, t *keyedRow) {
		if t.hash != s.hash {
			out = append(out, Difference{Tile: r.Index, Kind: Different, Key: s.key, Source: s.values, Target: t.values})
			sorted = append(sorted, s)
		}
	}
	err := c.readSource(ctx, src, r, opts, func(s *keyedRow) error {
		t, ok := tgt[s.rowKey]
		if !ok {
			missing = append(missing, s)
			return nil
		}
		different(s, t)
		delete(tgt, s.rowKey)
		return nil
	})
	if err != nil {
		return nil, err
	}
	extra := map[string][]*keyedRow{}
	for _, t := range tgt {
		k, err := c.rowKey(t.key, keyrange.CertainKey)
		if err != nil {
			return nil, err
		}
		extra[k] = append(extra[k], t)
	}
	for k, ts := range extra { // one order whatever the map's
		slices.SortFunc(ts, func(a, b *keyedRow) int { return strings.Compare(a.rowKey, b.rowKey) })
		extra[k] = ts
	}
	for _, s := range missing {
		k, err := c.rowKey(s.key, keyrange.CertainKey)
		if err != nil {
			return nil, err
		}
		if ts := extra[k]; len(ts) > 0 {
			different(s, ts[0])
			extra[k] = ts[1:]
			continue
		}
		out = append(out, Difference{Tile: r.Index, Kind: Missing, Key: s.key, Source: s.values})
		sorted = append(sorted, s)
	}
	for _, ts := range extra {
		for _, t := range ts {
			out = append(out, Difference{Tile: r.Index, Kind: Extra, Key: t.key, Target: t.values})
			sorted = append(sorted, t)
		}
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	slices.SortFunc(idx, func(a, b int) int {
		n, err := keyrange.CompareTuples(c.key, sorted[a].key, sorted[b].key)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if n == 0 {
			return strings.Compare(sorted[a].rowKey, sorted[b].rowKey)
		}
		return n
	})
	if cmpErr != nil {
		return nil, fmt.Errorf("ordering keys: %w", cmpErr)
	}
	res := make([]Difference, len(out))
	for i, j := range idx {
		res[i] = out[j]
	}
	return res, nil
}
