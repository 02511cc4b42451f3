package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// seekPiece is a keyrange.Piece compiled against a table's key order: the
// bounds of its index seek as normalized key prefixes, and its guard.
type seekPiece struct {
	lo       []any // the seek starts at the first key whose prefix is >= lo (> when loStrict)
	loStrict bool
	hi       []any // and ends before the first key whose prefix is >= hi (> when hiStrict)
	hiStrict bool
	guard    bool
	from     int   // guard: first column compared
	below    []any // guard: key[from:] < below, when not nil
	above    any   // guard: key[from] > above, when hasAbove
	hasAbove bool
}

func (a *access) compilePieces(r keyrange.Range) ([]seekPiece, error) {
	if len(a.keyCols) == 0 {
		if r.Lower == nil && r.Upper == nil {
			return []seekPiece{{}}, nil
		}
		why := a.unusable
		if why == "" {
			why = "the capture instance has no key"
		}
		return nil, fmt.Errorf("fake: table %s: %s: only the whole range can be read", a.t, why)
	}
	var lo, hi keyrange.Tuple
	if r.Lower != nil {
		lo = a.inTuple(r.Lower)
	}
	if r.Upper != nil {
		hi = a.inTuple(r.Upper)
	}
	r.Lower, r.Upper = lo, hi
	ps, err := keyrange.Pieces(a.keyCols, r)
	if err != nil {
		return nil, fmt.Errorf("fake: table %s: %w", a.t, err)
	}
	return a.compile(ps)
}

// compile compiles pieces against the access's key order.
func (a *access) compile(ps []keyrange.Piece) ([]seekPiece, error) {
	t, order := a.t, a.order
	out := make([]seekPiece, len(ps))
	for i, p := range ps {
		if len(p.Eq) > len(a.keyCols) || len(p.Eq) == len(a.keyCols) && (p.Lower != nil || p.Upper != nil) {
			return nil, fmt.Errorf("fake: table %s: a piece bounds more than the %d key columns", t, len(a.keyCols))
		}
		eq, err := normalizeTuple(a.keyCols, order, 0, p.Eq)
		if err != nil {
			return nil, fmt.Errorf("fake: table %s: %w", t, err)
		}
		j := len(eq)
		sp := seekPiece{lo: eq, hi: eq, hiStrict: true}
		if p.Lower != nil {
			sp.lo = append(append([]any(nil), eq...), order[j].normalize(p.Lower.Value))
			sp.loStrict = !p.Lower.Inclusive
		}
		if p.Upper != nil {
			sp.hi = append(append([]any(nil), eq...), order[j].normalize(p.Upper.Value))
			sp.hiStrict = p.Upper.Inclusive
		}
		if g := p.Guard; g != nil {
			if g.From < 0 || g.From+len(g.Below) > len(a.keyCols) || g.Above != nil && g.From >= len(a.keyCols) {
				return nil, fmt.Errorf("fake: table %s: a guard from column %d does not fit the %d key columns", t, g.From, len(a.keyCols))
			}
			sp.guard, sp.from = true, g.From
			if g.Below != nil {
				if sp.below, err = normalizeTuple(a.keyCols, order, g.From, g.Below); err != nil {
					return nil, fmt.Errorf("fake: table %s: %w", t, err)
				}
			}
			if g.Above != nil {
				sp.above, sp.hasAbove = order[g.From].normalize(g.Above.Value), true
			}
		}
		out[i] = sp
	}
	return out, nil
}

// bounds returns the positions of the piece's seek range in rs.
func (p *seekPiece) bounds(o keyOrder, rs *rowset) (start, end pos) {
	start = firstWhere(o, rs, p.lo, p.loStrict)
	if len(p.hi) == 0 {
		return start, rs.end()
	}
	return start, firstWhere(o, rs, p.hi, p.hiStrict)
}

// firstWhere returns the first position whose key prefix is above bound
// (strict) or at or above it.
func firstWhere(o keyOrder, rs *rowset, bound []any, strict bool) pos {
	if len(bound) == 0 {
		if strict {
			return rs.end()
		}
		return pos{}
	}
	return rs.search(func(r *row) bool {
		c := o.compare(r.key, bound)
		return c > 0 || c == 0 && !strict
	})
}

// keep applies the piece's guard.
func (p *seekPiece) keep(o keyOrder, key []any) bool {
	if !p.guard {
		return true
	}
	if p.below != nil && o.compareFrom(p.from, key, p.below) >= 0 {
		return false
	}
	if p.hasAbove && o[p.from].compare(key[p.from], p.above) <= 0 {
		return false
	}
	return true
}

// pieceScan reads the rows of compiled pieces in key order, page by page,
// each page continuing after the last key read: under READ COMMITTED a page
// reads the rows committed when it starts, under SNAPSHOT (snap set) the
// rows as of the start.
type pieceScan struct {
	t      *table
	a      *access
	pieces []seekPiece
	snap   *rowset
	pi     int
	last   []any // the key of the last row read in piece pi
}

// page passes up to limit rows, as the table stores them, to emit; it
// returns how many it passed (0 at the end) and counts the rows examined.
func (s *pieceScan) page(limit int, emit func(lay *layout, vals []any) error) (int, error) {
	t, order := s.t, s.a.order
	rs := s.snap
	if rs == nil {
		rs = t.rows.Load()
	}
	table := rs
	rs = s.a.rows(rs)
	n, examined := 0, 0
	for s.pi < len(s.pieces) && n < limit {
		p := &s.pieces[s.pi]
		start, end := p.bounds(order, rs)
		if s.a.scan && s.last == nil {
			// No index leads with the key: the piece scans the table.
			examined += table.n
		}
		if s.last != nil {
			after := rs.search(func(r *row) bool { return order.compare(r.key, s.last) > 0 })
			if start.less(after) {
				start = after
			}
		}
		q := start
		for ; q.less(end) && n < limit; q = rs.next(q) {
			row := rs.at(q)
			if !s.a.scan {
				examined++
			}
			s.last = row.key
			if !p.keep(order, row.key) {
				continue
			}
			if err := emit(table.lay, row.vals); err != nil {
				return n, err
			}
			n++
		}
		if !q.less(end) {
			s.pi++
			s.last = nil
		}
	}
	t.stats.rowsExamined.Add(int64(examined))
	t.stats.rowsReturned.Add(int64(n))
	return n, nil
}

// startScan opens the read of pieces of in's table under opts.
func (db *DB) startScan(in *instance, a *access, pieces []seekPiece, opts source.ReadOptions) *pieceScan {
	s := &pieceScan{t: in.t, a: a, pieces: pieces}
	if opts.Isolation == source.Snapshot {
		s.snap = in.t.rows.Load()
	}
	in.t.stats.rangeReads.Add(1)
	return s
}

// afterPage counts a page and runs the page hook.
func (db *DB) afterPage(ctx context.Context, in *instance, rangeIndex, page, rows int, what string) error {
	in.t.stats.pages.Add(1)
	if h := db.hook(); h != nil {
		if err := h(ctx, Page{Schema: in.t.schema, Table: in.t.name, CaptureInstance: in.name, Range: rangeIndex, Number: page, Rows: rows}); err != nil {
			return fmt.Errorf("fake: %s %s: page hook after page %d: %w", what, in.name, page, err)
		}
	}
	return nil
}

// SetReplicaMaxLSN makes ReadRange answer its source.ReadOptions.NotBefore
// check as a read that landed on a readable secondary whose redo has
// reached only l would: sys.fn_cdc_get_max_lsn() there is l (or the
// primary's, when lower), so a NotBefore above l is refused with a
// *source.ReplicaBehindError, as source/sqlserver refuses it (FACTS.md
// F56), and so is a ReadChanges whose upper bound is above l. It models
// the checks only: a read it lets through reads the primary's rows, and
// MaxLSN and every other call still answer for the primary. The zero LSN
// removes it (the replica caught up).
func (db *DB) SetReplicaMaxLSN(l lsn.LSN) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.replica = l
}

// ReadRange implements source.Source. The range's pieces are read in key
// order, page by page (opts.BatchRows rows, DefaultBatchRows when zero),
// each page continuing after the last key read. Under READ COMMITTED a page
// reads the rows committed when it starts; under SNAPSHOT every page reads
// the rows as of this call. Each row of a piece's seek range counts as
// examined (Stats.RowsExamined). After each page the page hook runs (see
// SetPageHook); between pages the reader checks ctx. opts.NotBefore above
// the max LSN (or above SetReplicaMaxLSN's) is a *source.ReplicaBehindError,
// as source/sqlserver answers on a replica that has not caught up.
func (db *DB) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	if err := db.enter(ctx, OpReadRange); err != nil {
		return nil, err
	}
	in, a, err := db.instanceAccess(ci)
	if err != nil {
		return nil, err
	}
	empty, err := db.byName(ci, in)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
	}
	if !opts.NotBefore.IsZero() {
		// One server: only an LSN the capture job has not reached is
		// refused, unless SetReplicaMaxLSN stands for a lagging replica.
		db.mu.RLock()
		have := db.maxLSNLocked()
		if !db.replica.IsZero() && db.replica.Less(have) {
			have = db.replica
		}
		db.mu.RUnlock()
		if have.Less(opts.NotBefore) {
			return nil, &source.ReplicaBehindError{CaptureInstance: in.name, Need: opts.NotBefore, Have: have}
		}
	}
	// The columns the caller named, in the types it described them with
	// (FACTS.md F59-F61, F64): SQL Server runs the statement the caller's
	// description makes, whatever the instance reports now.
	cols := ci.Columns
	db.mu.RLock()
	proj, err := in.t.readProjection(in.t.lay, cols)
	projLay := in.t.lay
	db.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
	}
	schema, err := source.ArrowSchema(cols)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
	}
	enc, err := newEncoder(cols)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
	}
	pieces, err := a.compilePieces(r)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadRange %s %s: %w", in.name, r, err)
	}
	if empty {
		pieces = nil
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = DefaultBatchRows
	}
	scan := db.startScan(in, a, pieces, opts)
	page := 0
	rd := newReader(ctx, schema, func(rd *reader) (int, error) {
		limit, err := db.reserveRows(batch)
		if err != nil {
			return 0, err
		}
		n, err := scan.page(limit, func(lay *layout, vals []any) error {
			// A later page after a DDL (SQL Server's schema lock would
			// hold the DDL until the statement ends).
			if projLay != lay {
				p, err := in.t.readProjection(lay, cols)
				if err != nil {
					return fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
				}
				proj, projLay = p, lay
			}
			row, err := proj.apply(in.t, vals)
			if err == nil {
				err = enc.appendRow(rd.rb, row)
			}
			if err != nil {
				return fmt.Errorf("fake: ReadRange %s: %w", in.name, err)
			}
			return nil
		})
		db.unreserveRows(limit - n)
		return n, err
	})
	rd.after = func(rows int) error {
		page++
		return db.afterPage(ctx, in, r.Index, page, rows, "ReadRange")
	}
	return rd, nil
}

// RowCursor yields rows one at a time (see ScanPieces).
type RowCursor struct {
	ctx   context.Context
	db    *DB
	in    *instance
	lay   *layout    // the layout proj maps
	proj  projection // the captured columns of lay's rows
	scan  *pieceScan
	rows  [][]any // the current page
	batch int
	page  int
	err   error
	done  bool
}

// ScanPieces reads the rows of ci's table that the UNION ALL of pieces
// holds, as SQL Server runs the statement ReadRange's pieces make: pieces
// in the order given, each in key order, page by page (batch rows,
// DefaultBatchRows when zero) under opts.Isolation as ReadRange reads, the
// page hook between pages. Each row is the captured columns' values as the
// table stores them (full precision: datetime2 keeps its 100 ns,
// uniqueidentifier is a keyrange.UUID, each column in the table's type
// now), a computed column and one the table no longer has nil. It is for a
// front end that serves the fake to a SQL Server client (internal/tdsfake).
func (db *DB) ScanPieces(ctx context.Context, ci *source.CaptureInstance, pieces []keyrange.Piece, opts source.ReadOptions) (*RowCursor, error) {
	if err := db.enter(ctx, OpReadRange); err != nil {
		return nil, err
	}
	in, a, err := db.instanceAccess(ci)
	if err != nil {
		return nil, err
	}
	compiled, err := a.compile(a.inPieces(pieces))
	if err != nil {
		return nil, fmt.Errorf("fake: ScanPieces %s: %w", in.name, err)
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = DefaultBatchRows
	}
	return &RowCursor{ctx: ctx, db: db, in: in, scan: db.startScan(in, a, compiled, opts), batch: batch}, nil
}

// ErrInvalidObject is wrapped by a read of a table name no table has:
// SQL Server's error 208, "Invalid object name" (FACTS.md F21).
var ErrInvalidObject = errors.New("invalid object name (SQL Server error 208)")

// byName says whether a read of ci, which names its table
// ci.SourceSchema.ci.SourceTable as the statement's FROM does, reaches
// in's table: a name no table has is an error wrapping ErrInvalidObject;
// a name another table has (the captured one renamed, and another given
// its name: FACTS.md F93) reads no row when ci carries the captured
// table's object id, as the statement's guard OBJECT_ID(name) =
// source_object_id makes it, and is an error without one (the fake reads
// no other table through an instance).
func (db *DB) byName(ci *source.CaptureInstance, in *instance) (empty bool, err error) {
	if ci.SourceSchema == "" && ci.SourceTable == "" {
		return false, nil
	}
	db.mu.RLock()
	t, ok := db.tables[tableKey(ci.SourceSchema, ci.SourceTable)]
	db.mu.RUnlock()
	switch {
	case !ok:
		return false, fmt.Errorf("fake: [%s].[%s]: %w", ci.SourceSchema, ci.SourceTable, ErrInvalidObject)
	case t == in.t:
		return false, nil
	case ci.ObjectID != 0:
		return true, nil
	}
	return false, fmt.Errorf("fake: [%s].[%s] is another table than %s, which capture instance %s captures (renamed)", ci.SourceSchema, ci.SourceTable, in.t, in.name)
}

// instanceAccess resolves ci and how a read reaches its table's rows by
// ci's key, both under one read lock (a DDL changes the table's columns).
func (db *DB) instanceAccess(ci *source.CaptureInstance) (*instance, *access, error) {
	if ci == nil {
		return nil, nil, fmt.Errorf("fake: nil capture instance")
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.instanceLocked(ci.Name)
	if err != nil {
		return nil, nil, err
	}
	return in, in.t.accessFor(ci), nil
}

// Next returns the next row, or false at the end or on an error (Err).
func (c *RowCursor) Next() ([]any, bool) {
	for len(c.rows) == 0 {
		if c.done || c.err != nil {
			return nil, false
		}
		if err := c.ctx.Err(); err != nil {
			c.err = fmt.Errorf("fake: read cancelled: %w", err)
			return nil, false
		}
		limit, err := c.db.reserveRows(c.batch)
		if err != nil {
			c.err = err
			return nil, false
		}
		n, err := c.scan.page(limit, func(lay *layout, vals []any) error {
			if c.proj.pos == nil || c.lay != lay {
				c.db.mu.RLock()
				c.proj, c.lay = c.in.project(lay, nil), lay
				c.db.mu.RUnlock()
			}
			row, err := c.proj.apply(c.in.t, vals)
			if err != nil {
				return err
			}
			if c.proj.same {
				row = slices.Clone(row)
			}
			c.rows = append(c.rows, row)
			return nil
		})
		c.db.unreserveRows(limit - n)
		if err != nil {
			c.err = err
			return nil, false
		}
		if n == 0 {
			c.done = true
			return nil, false
		}
		c.page++
		if err := c.db.afterPage(c.ctx, c.in, -1, c.page, n, "ScanPieces"); err != nil {
			c.err = err
			c.rows = nil
			return nil, false
		}
	}
	row := c.rows[0]
	c.rows = c.rows[1:]
	return row, true
}

// Err is the error that ended the scan, if any.
func (c *RowCursor) Err() error { return c.err }

// SeekKey implements source.Source and keyrange.Seeker's contract: the
// (k+1)-th key at or after from (from nil: of the table), found as SQL
// Server's TOP (k + 1) over the UNION ALL of the pieces of [from, +inf)
// merged in key order. The merge reads the first row of every non-empty
// piece and then rows in key order until it has k + 1; every row read counts
// in Stats.KeysExamined. iso makes no difference to one statement here.
//
// A key that is not unique (ci.UniqueKey false, a SplitOn copy) seeks as
// source/sqlserver's statement does: the smallest key at or above that
// (k+1)-th key v and above from (a nil from counts as NULL), found by one
// more seek that reads one row, so a bound never equals from and a run of
// duplicates stays in one range.
func (db *DB) SeekKey(ctx context.Context, ci *source.CaptureInstance, iso source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	if err := db.enter(ctx, OpSeekKey); err != nil {
		return nil, false, err
	}
	if k < 0 {
		return nil, false, fmt.Errorf("fake: SeekKey: k = %d, want >= 0", k)
	}
	in, a, err := db.instanceAccess(ci)
	if err != nil {
		return nil, false, err
	}
	t := in.t
	if len(a.keyCols) == 0 {
		return nil, false, fmt.Errorf("fake: SeekKey %s: no key to seek on %s", in.name, a.unusable)
	}
	pieces, err := a.compilePieces(keyrange.Range{Lower: from})
	if err != nil {
		return nil, false, fmt.Errorf("fake: SeekKey %s: %w", in.name, err)
	}
	table := t.rows.Load()
	rs := a.rows(table)
	want := k + 1
	var got, examined int64
	var found *row
	for i := range pieces {
		p := &pieces[i]
		start, end := p.bounds(a.order, rs)
		if a.scan {
			examined += int64(table.n)
		}
		if found != nil {
			if start.less(end) && !a.scan {
				examined++ // the merge read this piece's first row
			}
			continue
		}
		for q := start; q.less(end); q = rs.next(q) {
			row := rs.at(q)
			if !a.scan {
				examined++
			}
			if !p.keep(a.order, row.key) {
				continue
			}
			if got++; got == want {
				found = row
				break
			}
		}
	}
	if found != nil && !a.unique {
		found, examined = a.beyond(rs, found, a.inTuple(from), examined)
	}
	t.stats.seeks.Add(1)
	t.stats.keysExamined.Add(examined)
	if found == nil {
		return nil, false, nil
	}
	return a.keyOf(table.lay, found.vals), true, nil
}

// beyond returns the first row of rs whose key is at or above v's and
// above from (nil from: above NULL), or nil; examined counts the row the
// seek reads (all of the table's when the access scans).
func (a *access) beyond(rs *rowset, v *row, from keyrange.Tuple, examined int64) (*row, int64) {
	n := len(a.keyCols)
	lower := make([]any, n)
	for i := range lower {
		if i < len(from) {
			lower[i] = a.order[i].normalize(from[i])
		}
	}
	vkey := v.key[:n]
	p := rs.search(func(r *row) bool {
		return a.order.compare(r.key[:n], vkey) >= 0 && a.order.compare(r.key[:n], lower) > 0
	})
	if a.scan {
		examined += int64(a.t.rows.Load().n)
	} else if p != rs.end() {
		examined++
	}
	if p == rs.end() {
		return nil, examined
	}
	return rs.at(p), examined
}

// IntKeyBounds implements source.Source: MIN and MAX of ci's single integer
// key column, NULLs ignored. It is not counted in Stats.
func (db *DB) IntKeyBounds(ctx context.Context, ci *source.CaptureInstance) (int64, int64, bool, error) {
	if err := db.enter(ctx, OpIntKeyBounds); err != nil {
		return 0, 0, false, err
	}
	in, a, err := db.instanceAccess(ci)
	if err != nil {
		return 0, 0, false, err
	}
	if len(a.keyCols) != 1 || a.rep[0].KeyColumn().Kind != keyrange.KindInt {
		return 0, 0, false, fmt.Errorf("fake: IntKeyBounds %s: the key %v is not one integer column", in.name, ci.Key)
	}
	table := in.t.rows.Load()
	rs := a.rows(table)
	p := rs.search(func(r *row) bool { return r.key[0] != nil })
	if p == rs.end() {
		return 0, 0, false, nil
	}
	lastChunk := rs.chunks[len(rs.chunks)-1].rows
	lo, _ := a.keyOf(table.lay, rs.at(p).vals)[0].(int64)
	hi, _ := a.keyOf(table.lay, lastChunk[len(lastChunk)-1].vals)[0].(int64)
	return lo, hi, true, nil
}

// RowCount implements source.Source like sp_spaceused: the table's row
// count plus the skew SetRowCountSkew set, never below zero.
func (db *DB) RowCount(ctx context.Context, ci *source.CaptureInstance) (int64, error) {
	if err := db.enter(ctx, OpRowCount); err != nil {
		return 0, err
	}
	in, err := db.lookup(ci)
	if err != nil {
		return 0, err
	}
	db.mu.RLock()
	skew := in.t.skew
	db.mu.RUnlock()
	return max(0, int64(in.t.rows.Load().n)+skew), nil
}
