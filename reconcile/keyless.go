package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// A capture instance without a unique index has no key to take a latest
// image by, so its target is compared as a multiset of rows. Its image is
// the rows of its latest snapshot (the newer of the newest the target
// records and the greatest coalesce(_snapshot, _start_lsn) among its
// _operation 0 rows) plus every change row stamped
// after that snapshot's rows: an insert (2) or update-after (4) adds a
// copy of its row, a delete (1) or update-before (3) removes one. The
// change feed carries both images of an update (N'all update old',
// source/sqlserver/FACTS.md F09) and a delete's values, so every change
// names the row it adds or removes. Changes at or below the snapshot's
// stamp are already in the snapshot's rows and are skipped, as the keyed
// merge overwrites them.
//
// Change rows do not always carry a removed row's values: CDC writes NULL
// for text, ntext and image in deletes and update-before rows, and for
// the (max) types and xml in update-before rows of updates that left them
// alone (source/sqlserver/FACTS.md F13); a peer saw deletes carry NULL in
// NOT NULL columns (F52). Such a row would remove a copy that is not
// there, so the multiset leaves those columns out: the large-object
// types always, and a NOT NULL column whenever a delete or update-before
// row in the target carries NULL in it. Report.Omitted names them. A
// NULL lost from a nullable column cannot be told from a real one: that
// row then shows as a Missing and an Extra copy.
//
// Both sides are counted and hashed while streaming (the order-independent
// Hash subtracts as it adds), so a matching table costs two reads of the
// target (one for the snapshot, one for the sums) and one of the source,
// and memory does not grow with the table. A table that differs is read
// once more from each side and narrowed to the rows whose copies differ;
// that holds the distinct rows of both sides in memory.

// keylessTarget reads the target rows of one keyless capture instance.
type keylessTarget struct {
	c    *comparer
	dst  RowReader
	opts Options
	from string // Options.From as text, or ""
}

// each calls f with every row of the capture instance in dst whose
// _start_lsn is at or above Options.From, its Order and its
// coalesce(_snapshot, _start_lsn); cols locate the captured columns.
func (k *keylessTarget) each(ctx context.Context, f func(rec arrow.RecordBatch, i int, cols []int, o snapshot.Order, snap string) error) error {
	rr, err := k.dst.ReadAll(ctx)
	if err != nil {
		return err
	}
	defer rr.Release()
	b, ok, err := k.c.layout(rr.Schema())
	if err != nil || !ok {
		return err
	}
	cols, orderCols := b.cols, b.order
	snapIdx := rr.Schema().FieldIndices(sink.ColSnapshot) // absent in tables written before it existed
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := rr.RecordBatch()
		ciCol, err := stringColumn(rec, b.instance)
		if err != nil {
			return err
		}
		var snapCol *array.String
		if len(snapIdx) == 1 {
			if snapCol, err = stringColumn(rec, snapIdx[0]); err != nil {
				return err
			}
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			if ciCol.IsNull(i) || !sink.SameInstance(ciCol.Value(i), k.opts.CaptureInstance) {
				continue
			}
			o := orderCols.Order(rec, i)
			start := ""
			if o.StartLSN != nil {
				start = *o.StartLSN
			}
			if k.from != "" && start < k.from {
				continue
			}
			snap := start
			if snapCol != nil && !snapCol.IsNull(i) {
				snap = snapCol.Value(i)
			}
			if err := f(rec, i, cols, o, snap); err != nil {
				return err
			}
		}
	}
	return rr.Err()
}

// cut is what the target's image is made of: the snapshot whose rows
// count, and the stamp above which changes count.
type cut struct {
	found bool
	snap  string // the latest snapshot's coalesce(_snapshot, _start_lsn)
	stamp string // the _start_lsn of its rows
}

// snapshotFinder and chunkedFinder are targets that record their
// snapshots, even one that wrote no rows: sinks do (sink.Sink,
// sink.ChunkSink).
type snapshotFinder interface {
	FindSnapshot(ctx context.Context, captureInstance string) (sink.Snapshot, error)
}

type chunkedFinder interface {
	FindChunked(ctx context.Context, captureInstance string) (sink.Chunked, error)
}

// recorded returns the LSN of the newest whole or complete chunked
// snapshot the target records, and whether it is chunked ("" when it
// records none or cannot tell). A chunked one still open is left to its
// rows: until its chunk is committed it holds none.
func (k *keylessTarget) recorded(ctx context.Context) (newest string, chunked bool, err error) {
	if f, ok := k.dst.(snapshotFinder); ok {
		s, err := f.FindSnapshot(ctx, k.opts.CaptureInstance)
		switch {
		case err == nil:
			newest = s.LSN.String()
		case !errors.Is(err, sink.ErrNotFound):
			return "", false, fmt.Errorf("finding its snapshot: %w", err)
		}
	}
	if f, ok := k.dst.(chunkedFinder); ok {
		s, err := f.FindChunked(ctx, k.opts.CaptureInstance)
		switch {
		case err == nil && s.Complete && s.LSN.String() > newest:
			newest, chunked = s.LSN.String(), true
		case err != nil && !errors.Is(err, sink.ErrNotFound):
			return "", false, fmt.Errorf("finding its chunked snapshot: %w", err)
		}
	}
	return newest, chunked, nil
}

// lostInChanges says why a keyless comparison leaves c out, or "" when
// change rows carry its values.
func lostInChanges(c source.Column) string {
	switch {
	case c.Type == "text" || c.Type == "ntext" || c.Type == "image":
		return "CDC writes NULL for it in delete and update-before rows (FACTS.md F13)"
	case c.Type == "xml" || c.Length < 0 && (c.Type == "varchar" || c.Type == "nvarchar" || c.Type == "varbinary"):
		return "CDC writes NULL for it in update-before rows of updates that leave it alone (FACTS.md F13)"
	case c.Type == "geometry" || c.Type == "geography":
		// Large CLR types are stored as large objects; CDC keeps a large
		// object's before image only when the update changes it
		// (track-data-changes-sql-server, "BLOB data types"). Whether
		// these count is not documented: leaving a column out can hide a
		// difference, never invent one.
		return "a large CLR type: CDC may write NULL for it in update-before rows, as for other large objects (FACTS.md F13)"
	}
	return ""
}

// findCut finds the target's latest snapshot: the newer of the one the
// target records and the newest whose rows it holds. Its rows must share
// one stamp: a chunked snapshot of a table without a key is one chunk. A
// snapshot with no rows is taken as stamped at its LSN, as a whole
// snapshot's rows are. It also returns the compared columns that the
// source declares NOT NULL and that a delete or update-before row holds
// NULL in (by index into k.c.columns).
func (k *keylessTarget) findCut(ctx context.Context, notNull []int) (cut, map[int]bool, error) {
	var (
		c      cut
		stamps = map[string]bool{}
		nulled = map[int]bool{}
	)
	known, chunked, err := k.recorded(ctx)
	if err != nil {
		return c, nil, err
	}
	if known != "" && known >= k.from {
		c = cut{found: true, snap: known}
	}
	err = k.each(ctx, func(rec arrow.RecordBatch, i int, cols []int, o snapshot.Order, snap string) error {
		if o.Operation == 1 || o.Operation == 3 {
			for _, j := range notNull {
				if rec.Column(cols[j]).IsNull(i) {
					nulled[j] = true
				}
			}
		}
		if o.Operation != 0 {
			return nil
		}
		if !c.found || snap > c.snap {
			c.found, c.snap = true, snap
			clear(stamps)
		}
		if snap == c.snap && o.StartLSN != nil {
			stamps[*o.StartLSN] = true
		}
		return nil
	})
	if err != nil {
		return c, nil, err
	}
	if len(stamps) > 1 {
		return c, nil, fmt.Errorf("the target's latest snapshot (%s) has rows stamped at %d different LSNs: a table without a key is verified as a multiset, which needs its snapshot read in one wave, at one stamp", c.snap, len(stamps))
	}
	if len(stamps) == 0 && chunked && c.snap == known {
		return c, nil, fmt.Errorf("the target's latest snapshot is chunked (at %s) and wrote no rows: the LSN its chunk was read at is not recorded, so the changes the chunk already holds cannot be told from those after it, and a table without a key cannot be verified from it (take a whole snapshot of it instead)", known)
	}
	c.stamp = c.snap
	for s := range stamps {
		c.stamp = s
	}
	return c, nulled, nil
}

// sign is +1 when row i of the target adds a copy to the image, -1 when
// it removes one, 0 when it is not part of the image.
func (c cut) sign(o snapshot.Order, snap string) int {
	if o.Operation == 0 {
		if c.found && snap == c.snap {
			return 1
		}
		return 0
	}
	if c.found && (o.StartLSN == nil || *o.StartLSN <= c.stamp) {
		return 0 // already in the snapshot's rows
	}
	switch o.Operation {
	case 2, 4:
		return 1
	case 1, 3:
		return -1
	}
	return 0
}

// runKeyless is run for a capture instance without a unique index.
func runKeyless(ctx context.Context, src source.Source, dst RowReader, ci *source.CaptureInstance, rep *Report, opts Options, log *slog.Logger, start time.Time) error {
	rep.Keyless = true
	log.InfoContext(ctx, "the capture instance has no unique index: comparing its rows as a multiset in one tile", "capture_instance", opts.CaptureInstance)
	c := &comparer{ci: ci}
	var notNull []int
	for _, col := range ci.Columns {
		if why := lostInChanges(col); why != "" {
			rep.Omitted = append(rep.Omitted, OmittedColumn{Name: col.Name, Reason: why})
			continue
		}
		if !col.Nullable && !col.Computed {
			notNull = append(notNull, len(c.columns))
		}
		c.columns = append(c.columns, col.Name)
	}
	if len(c.columns) == 0 {
		return fmt.Errorf("every captured column is a large-object type whose values change rows lose (%s): a table without a key has nothing to compare rows by", omittedNames(rep.Omitted))
	}
	k := &keylessTarget{c: c, dst: dst, opts: opts}
	if !opts.From.IsZero() {
		k.from = opts.From.String()
	}
	whole := keyrange.Whole()[0]
	tile := Tile{Range: whole}
	readOpts := source.ReadOptions{Isolation: opts.Isolation, BatchRows: opts.BatchRows}
	ct, nulled, err := k.findCut(ctx, notNull)
	if err != nil {
		return fmt.Errorf("reading the target: %w", err)
	}
	if len(nulled) > 0 {
		var kept []string
		for j, name := range c.columns {
			if nulled[j] {
				rep.Omitted = append(rep.Omitted, OmittedColumn{Name: name, Reason: "the source declares it NOT NULL, and a delete or update-before row in the target holds NULL in it (FACTS.md F52)"})
				log.WarnContext(ctx, "a removal row lost a NOT NULL column's value: leaving the column out", "capture_instance", opts.CaptureInstance, "column", name)
				continue
			}
			kept = append(kept, name)
		}
		if len(kept) == 0 {
			return fmt.Errorf("change rows lost the values of every comparable column (%s): a table without a key has nothing to compare rows by", omittedNames(rep.Omitted))
		}
		c.columns = kept
	}
	rep.Columns = c.columns
	var row keyedRow
	err = k.each(ctx, func(rec arrow.RecordBatch, i int, cols []int, o snapshot.Order, snap string) error {
		s := ct.sign(o, snap)
		if s == 0 {
			return nil
		}
		if err := c.fill(&row, rec, i, cols); err != nil {
			return err
		}
		tile.TargetRows += int64(s)
		if s > 0 {
			tile.TargetHash.add(row.hash)
		} else {
			tile.TargetHash.sub(row.hash)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the target: %w", err)
	}
	err = c.readSource(ctx, src, whole, readOpts, func(row *keyedRow) error {
		tile.SourceRows++
		tile.SourceHash.add(row.hash)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the source: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(Progress{TilesDone: 1, Tiles: 1, SourceRows: tile.SourceRows, Elapsed: time.Since(start)})
	}
	rep.Tiles = []Tile{tile}
	if !tile.Differs() {
		return nil
	}
	log.InfoContext(ctx, "the rows differ; narrowing them", "capture_instance", opts.CaptureInstance,
		"source_rows", tile.SourceRows, "target_rows", tile.TargetRows)
	if rep.Differences, rep.Truncated, err = k.narrow(ctx, src, ct, readOpts, opts.MaxDifferences); err != nil {
		return fmt.Errorf("narrowing: %w", err)
	}
	return nil
}

// copies is one distinct row: its values and how many copies the target
// holds less those the source holds.
type copies struct {
	values []string
	n      int64
}

// narrow returns one Difference per copy of a row that one side holds
// more often than the other, ordered by the rows' values, at most limit
// of them (zero: all; truncated says when there were more): Missing when
// the source holds more copies (a target that removed a copy it never
// held is missing one), Extra when the target does. It holds every
// distinct row of both sides, and the differences it returns.
func (k *keylessTarget) narrow(ctx context.Context, src source.Source, ct cut, readOpts source.ReadOptions, limit int) (diffs []Difference, truncated bool, err error) {
	rows := map[[32]byte]*copies{}
	at := func(row *keyedRow) *copies {
		cp, ok := rows[row.hash]
		if !ok {
			cp = &copies{values: row.values}
			rows[row.hash] = cp
		}
		return cp
	}
	err = k.each(ctx, func(rec arrow.RecordBatch, i int, cols []int, o snapshot.Order, snap string) error {
		s := ct.sign(o, snap)
		if s == 0 {
			return nil
		}
		row := &keyedRow{}
		if err := k.c.fill(row, rec, i, cols); err != nil {
			return err
		}
		at(row).n += int64(s)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the target: %w", err)
	}
	err = k.c.readSource(ctx, src, keyrange.Whole()[0], readOpts, func(row *keyedRow) error {
		at(row).n--
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the source: %w", err)
	}
	var differ []*copies
	for _, cp := range rows {
		if cp.n != 0 {
			differ = append(differ, cp)
		}
	}
	slices.SortFunc(differ, func(a, b *copies) int { return slices.Compare(a.values, b.values) })
	var out []Difference
	for _, cp := range differ {
		for ; cp.n != 0; cp.n -= signum(cp.n) {
			if limit > 0 && len(out) == limit {
				return out, true, nil
			}
			if cp.n > 0 {
				out = append(out, Difference{Kind: Extra, Target: cp.values})
			} else {
				out = append(out, Difference{Kind: Missing, Source: cp.values})
			}
		}
	}
	return out, false, nil
}

func signum(n int64) int64 {
	if n < 0 {
		return -1
	}
	return 1
}

func omittedNames(cols []OmittedColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// keylessString describes a difference of a table without a key.
func keylessString(d Difference) string {
	if d.Kind == Missing {
		return fmt.Sprintf("a row missing from the target (source %q)", d.Source)
	}
	if d.Kind == Extra {
		return fmt.Sprintf("a row extra in the target (%q)", d.Target)
	}
	return fmt.Sprintf("a row that differs: source %q, target %q", d.Source, d.Target)
}
