package fake

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
)

// ErrTxDone is returned by a Tx that was already committed or rolled back.
var ErrTxDone = errors.New("fake: transaction already committed or rolled back")

// The CDC operation codes (__$operation) of change rows.
const (
	OperationDelete       = 1
	OperationInsert       = 2
	OperationUpdateBefore = 3
	OperationUpdateAfter  = 4
)

type opKind int

const (
	opInsert opKind = iota
	opUpdate
	opDelete
)

// stmt is one statement of a transaction: a single-row insert, update or
// delete.
type stmt struct {
	kind opKind
	t    *table
	lay  *layout // the layout vals were checked against
	key  []any   // normalized key of the row updated or deleted
	raw  keyrange.Tuple
	vals []any // the new row of an insert or update
}

// Tx is a transaction. Its statements are checked for types when they are
// added and applied at Commit, in order, against the rows committed then; a
// statement that fails there (a duplicate key, a missing row) fails the
// whole commit, which then changes nothing, as a statement error followed
// by a rollback. A Tx is not safe for concurrent use.
type Tx struct {
	db    *DB
	stmts []stmt
	done  bool
	// the table of the last statement, to skip the lookup for the next
	lastSchema, lastName string
	last                 *table
}

// Begin starts a transaction.
func (db *DB) Begin() *Tx { return &Tx{db: db} }

func (tx *Tx) table(schema, name string) (*table, error) {
	if tx.done {
		return nil, ErrTxDone
	}
	tx.db.mu.RLock()
	defer tx.db.mu.RUnlock()
	return tx.tableLocked(schema, name)
}

func (tx *Tx) tableLocked(schema, name string) (*table, error) {
	if tx.last != nil && schema == tx.lastSchema && name == tx.lastName {
		return tx.last, nil
	}
	t, err := tx.db.tableLocked(schema, name)
	if err != nil {
		return nil, err
	}
	tx.last, tx.lastSchema, tx.lastName = t, schema, name
	return t, nil
}

// checkRow validates a full row for t; it must be called with db.mu held.
func (t *table) checkRow(r Row) ([]any, error) { return t.checkRowAt(r, -1) }

// checkRowAt is checkRow for a row whose errors defRow names (see
// rowPrefix).
func (t *table) checkRowAt(r Row, defRow int) ([]any, error) {
	if len(r) != len(t.cols) {
		return nil, fmt.Errorf("%s: row has %d values for %d columns", t.rowPrefix(defRow), len(r), len(t.cols))
	}
	vals := make([]any, len(r))
	for i, v := range r {
		if t.generated(i) {
			if v != nil && isRowversion(t.cols[i]) {
				return nil, badValue(t, defRow, &t.cols[i], v, "a rowversion takes its value from the database: give nil (SQL Server error 273)")
			}
			if v == nil {
				continue // the commit gives it one
			}
		}
		x, err := checkValue(t, defRow, &t.cols[i], v)
		if err != nil {
			return nil, err
		}
		vals[i] = x
	}
	return vals, nil
}

// rowPrefix is how errors name a row of t: a statement's row ("fake: table
// dbo.t") when defRow is negative, else Rows[defRow] of the TableDef that
// creates t ("fake: create table dbo.t: Rows[2]").
func (t *table) rowPrefix(defRow int) string {
	if defRow < 0 {
		return "fake: table " + t.String()
	}
	return fmt.Sprintf("fake: create table %s: Rows[%d]", t, defRow)
}

// checked checks r against the table's columns now, and returns the
// layout it was checked against.
func (tx *Tx) checked(schema, name string, r Row) (*table, *layout, []any, error) {
	if tx.done {
		return nil, nil, nil, ErrTxDone
	}
	tx.db.mu.RLock()
	defer tx.db.mu.RUnlock()
	t, err := tx.tableLocked(schema, name)
	if err != nil {
		return nil, nil, nil, err
	}
	vals, err := t.checkRow(r)
	return t, t.lay, vals, err
}

// Insert adds a row (one value per column, in column order).
func (tx *Tx) Insert(schema, name string, r Row) error {
	t, lay, vals, err := tx.checked(schema, name, r)
	if err != nil {
		return err
	}
	tx.stmts = append(tx.stmts, stmt{kind: opInsert, t: t, lay: lay, vals: vals})
	return nil
}

// Update replaces the row whose key equals key (under the key columns'
// collations) with r, a full row. If r's key differs from the old row's
// (in any byte: 'a' to 'A' too), the change is logged as a delete and an
// insert, as SQL Server logs updates of unique-index columns; otherwise as
// an update's before (3) and after (4) images.
func (tx *Tx) Update(schema, name string, key []any, r Row) error {
	t, lay, vals, err := tx.checked(schema, name, r)
	if err != nil {
		return err
	}
	nk, err := t.normalizeKey(key)
	if err != nil {
		return err
	}
	tx.stmts = append(tx.stmts, stmt{kind: opUpdate, t: t, lay: lay, key: nk, raw: key, vals: vals})
	return nil
}

// Delete removes the row whose key equals key.
func (tx *Tx) Delete(schema, name string, key []any) error {
	t, err := tx.table(schema, name)
	if err != nil {
		return err
	}
	nk, err := t.normalizeKey(key)
	if err != nil {
		return err
	}
	tx.stmts = append(tx.stmts, stmt{kind: opDelete, t: t, key: nk, raw: key})
	return nil
}

// Rollback discards the transaction.
func (tx *Tx) Rollback() {
	tx.done = true
	tx.stmts = nil
}

// change is one row of a change table.
type change struct {
	lsn, seqval lsn.LSN
	op          int32
	cmd         int32
	ts          time.Time
	vals        []any // the table row's values (all columns at the time)
}

// Commit applies the transaction and returns its LSN. A transaction with no
// statements commits nothing and returns the zero LSN. On error nothing is
// applied.
func (tx *Tx) Commit() (lsn.LSN, error) {
	if tx.done {
		return lsn.LSN{}, ErrTxDone
	}
	tx.done = true
	stmts := tx.stmts
	tx.stmts = nil
	db := tx.db
	if err := db.fault(OpCommit); err != nil {
		return lsn.LSN{}, err
	}
	if len(stmts) == 0 {
		return lsn.LSN{}, nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.commitLocked(stmts)
}

// commitLocked applies stmts as one commit and returns its LSN; db.mu must
// be held for writing. On error nothing is applied.
func (db *DB) commitLocked(stmts []stmt) (lsn.LSN, error) {
	db.gen++
	commit := db.next
	seq := commit
	writers := map[*table]*rowsetWriter{}
	type tableChange struct {
		t *table
		c *change
	}
	changes := make([]tableChange, 0, len(stmts))
	add := func(t *table, op int32, cmd int32, vals []any, newSeq bool) error {
		if newSeq {
			var err error
			if seq, err = seq.Next(); err != nil {
				return err
			}
		}
		changes = append(changes, tableChange{t, &change{seqval: seq, op: op, cmd: cmd, vals: vals}})
		return nil
	}
	for i, s := range stmts {
		cmd := int32(i + 1)
		t := s.t
		w := writers[t]
		if w == nil {
			w = newRowsetWriter(t.rows.Load(), db.gen)
			writers[t] = w
		}
		vals := s.vals
		if vals != nil && s.lay != t.lay {
			// A DDL since the statement was checked: its values move to
			// the columns now, by column_id.
			var err error
			if vals, err = t.remap(s.lay, vals); err != nil {
				return lsn.LSN{}, fmt.Errorf("fake: commit: statement %d: %w", cmd, err)
			}
		}
		generate := func(old []any) error {
			if t.identity < 0 && !slices.ContainsFunc(t.cols, isRowversion) {
				return nil
			}
			vals = slices.Clone(vals)
			if err := db.fillGenerated(t, vals, old); err != nil {
				return fmt.Errorf("fake: commit: statement %d: %w", cmd, err)
			}
			return nil
		}
		find := func(nk []any) (pos, bool) { return w.find(t.order, nk) }
		insert := func(r *row) error {
			p, dup := find(r.key)
			if dup {
				return fmt.Errorf("fake: commit: statement %d: insert into %s: key %v violates the primary key: it equals the existing key %v under %s",
					cmd, t, describeKey(t.keyOf(r.vals)), describeKey(t.keyOf(w.s.at(p).vals)), t.describeOrder())
			}
			w.insertAt(p, r)
			return nil
		}
		var err error
		switch s.kind {
		case opInsert:
			if err = generate(nil); err != nil {
				break
			}
			r := t.newRow(vals)
			if err = insert(r); err == nil {
				err = add(t, OperationInsert, cmd, r.vals, true)
			}
		case opDelete, opUpdate:
			p, ok := find(s.key)
			if !ok {
				verb := map[opKind]string{opDelete: "delete from", opUpdate: "update"}[s.kind]
				err = fmt.Errorf("fake: commit: statement %d: %s %s: no row has key %v", cmd, verb, t, describeKey(s.raw))
				break
			}
			old := w.s.at(p)
			if s.kind == opDelete {
				w.deleteAt(p)
				err = add(t, OperationDelete, cmd, t.changeImage(OperationDelete, old.vals, nil), true)
				break
			}
			if err = generate(old.vals); err != nil {
				break
			}
			nr := t.newRow(vals)
			if sameKey(t.keyOf(old.vals), t.keyOf(nr.vals)) {
				w.replaceAt(p, nr)
				if err = add(t, OperationUpdateBefore, cmd, t.changeImage(OperationUpdateBefore, old.vals, nr.vals), true); err == nil {
					err = add(t, OperationUpdateAfter, cmd, nr.vals, false)
				}
				break
			}
			w.deleteAt(p)
			if err = insert(nr); err != nil {
				break
			}
			if db.opts.SingletonKeyUpdates {
				// Trace flag 8207: the key update is logged as an update,
				// the before image holding the old key (FACTS.md F14).
				if err = add(t, OperationUpdateBefore, cmd, t.changeImage(OperationUpdateBefore, old.vals, nr.vals), true); err == nil {
					err = add(t, OperationUpdateAfter, cmd, nr.vals, false)
				}
				break
			}
			if err = add(t, OperationDelete, cmd, t.changeImage(OperationDelete, old.vals, nil), true); err == nil {
				err = add(t, OperationInsert, cmd, nr.vals, true)
			}
		}
		if err != nil {
			return lsn.LSN{}, err
		}
	}
	next, err := seq.Next()
	if err != nil {
		return lsn.LSN{}, fmt.Errorf("fake: commit: %w", err)
	}
	// Each instance keeps its own captured columns, in its change table's
	// types (FACTS.md F59, F60, F64).
	type captured struct {
		in *instance
		c  *change
	}
	var capture []captured
	projections := map[*instance]projection{}
	for _, tc := range changes {
		for _, in := range tc.t.instances {
			p, ok := projections[in]
			if !ok {
				p = in.project(tc.t.lay, in.ctNow())
				projections[in] = p
			}
			vals, err := p.apply(tc.t, tc.c.vals)
			if err != nil {
				return lsn.LSN{}, fmt.Errorf("fake: commit: capturing a change of %s in %s: %w", tc.t, in.name, err)
			}
			c := *tc.c
			c.vals = vals
			capture = append(capture, captured{in, &c})
		}
	}
	for t, w := range writers {
		t.rows.Store(w.done())
	}
	ts := db.now()
	for _, x := range capture {
		x.c.lsn, x.c.ts = commit, ts
		x.in.changes = append(x.in.changes, x.c)
	}
	if len(capture) > 0 {
		db.mapping = append(db.mapping, lsnTime{lsn: commit, ts: ts})
	}
	db.lastLSN, db.next = seq, next
	db.commits++
	db.sinceJob++
	if !db.opts.ManualCapture && db.sinceJob >= db.opts.CaptureEvery {
		db.runCaptureJobLocked()
	}
	return commit, nil
}

// changeImage returns the values CDC records for a delete (1) or an
// update's before image (3) of a row that held vals (FACTS.md F13): text,
// ntext and image are NULL in both; varchar(max), nvarchar(max),
// varbinary(max) and xml are NULL in a before image unless the update
// (after) changed them. xml follows the (max) types: no documentation says
// what CDC writes for it, and NULL is what a reader must be ready for.
// Computed columns are NULL in every change row; the encoder writes them
// NULL. vals itself is not changed.
func (t *table) changeImage(op int32, vals, after []any) []any {
	var out []any
	for j, c := range t.cols {
		if j >= len(vals) || vals[j] == nil {
			continue
		}
		null := false
		switch {
		case c.Type == "text" || c.Type == "ntext" || c.Type == "image":
			null = true
		case op == OperationUpdateBefore && (c.Type == "xml" || c.Length < 0 && (c.Type == "varchar" || c.Type == "nvarchar" || c.Type == "varbinary")):
			null = j < len(after) && sameValue(vals[j], after[j])
		}
		if null {
			if out == nil {
				out = append([]any(nil), vals...)
			}
			out[j] = nil
		}
	}
	if out == nil {
		return vals
	}
	return out
}

// sameValue reports whether two stored values are the same: an update
// that leaves a (max) column so did not change it.
func sameValue(a, b any) bool {
	if x, ok := a.([]byte); ok {
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return a == b
}

func (db *DB) now() time.Time {
	var t time.Time
	if db.opts.Now != nil {
		t = db.opts.Now()
	} else {
		t = db.clock
		db.clock = db.clock.Add(db.opts.Tick)
	}
	return t.UTC().Truncate(time.Microsecond)
}

func (t *table) describeOrder() string {
	var s string
	for i, c := range t.keyCols {
		if i > 0 {
			s += ", "
		}
		s += c.Name + " " + c.SQLType
		if c.Kind == keyrange.KindString {
			s += " COLLATE " + c.Collation.Name
		}
	}
	return "(" + s + ")"
}

func describeKey(k keyrange.Tuple) string {
	s := "("
	for i, v := range k {
		if i > 0 {
			s += ", "
		}
		s += describeShort(v)
	}
	return s + ")"
}

func describeShort(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return fmt.Sprintf("%q", x)
	case []byte:
		return fmt.Sprintf("0x%X", x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// sameKey reports whether two keys hold the same Go values, byte for byte.
func sameKey(a, b keyrange.Tuple) bool {
	for i := range a {
		switch x := a[i].(type) {
		case nil:
			if b[i] != nil {
				return false
			}
		case []byte:
			y, ok := b[i].([]byte)
			if !ok || !bytes.Equal(x, y) {
				return false
			}
		case time.Time:
			y, ok := b[i].(time.Time)
			if !ok || !x.Equal(y) {
				return false
			}
			_, ox := x.Zone()
			_, oy := y.Zone()
			if ox != oy {
				return false
			}
		default:
			if a[i] != b[i] {
				return false
			}
		}
	}
	return true
}
