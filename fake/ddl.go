package fake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// layout is a table's column structure at one version: the columns its
// rows' values are in, and their column_ids. DDL makes a new layout and
// rewrites the rows into it; a rowset's rows always follow its layout, so
// a reader holding an older rowset still reads it right.
type layout struct {
	cols []source.Column
	ids  []int
}

// position returns the position of the column with column_id id, or -1.
func (l *layout) position(id int) int { return slices.Index(l.ids, id) }

// generated reports whether column j's values come from the database: an
// identity column (when a statement leaves it NULL) or a rowversion.
func (t *table) generated(j int) bool { return j == t.identity || isRowversion(t.cols[j]) }

func isRowversion(c source.Column) bool { return c.Type == "rowversion" || c.Type == "timestamp" }

// identityTypes are the types an identity column may have.
func identityType(c source.Column) bool {
	switch c.Type {
	case "tinyint", "smallint", "int", "bigint":
		return true
	case "decimal", "numeric":
		return c.Scale == 0
	}
	return false
}

// changeTableType is the type CDC gives column c in the change table:
// "Timestamp columns are defined as binary(8)" and "Identity columns are
// defined as either int or bigint" (FACTS.md F64). Which identity types
// become int is not documented; the fake takes int for the types int
// holds and bigint for the others.
func changeTableType(c source.Column, identity bool) source.Column {
	out := c
	switch {
	case isRowversion(c):
		out.Type, out.Length = "binary", 8
	case identity:
		out.Precision, out.Scale = 0, 0
		switch c.Type {
		case "tinyint", "smallint", "int":
			out.Type = "int"
		default:
			out.Type = "bigint"
		}
	}
	return out
}

// nextRowversion returns the database's next rowversion value (@@DBTS
// plus one), 8 bytes big-endian as SQL Server shows it; db.mu must be held
// for writing.
func (db *DB) nextRowversion() []byte {
	db.dbts++
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, db.dbts)
	return b
}

// fillGenerated sets the values the database makes for a row being
// inserted (old nil) or updated: an identity left NULL gets the table's
// next identity value (an update keeps the old one), an explicit identity
// value above the last raises it, as SET IDENTITY_INSERT ON does; a
// rowversion gets the next @@DBTS. vals is the row in t's layout, owned by
// the caller. db.mu must be held for writing.
func (db *DB) fillGenerated(t *table, vals, old []any) error {
	if j := t.identity; j >= 0 {
		switch {
		case vals[j] == nil && old != nil:
			vals[j] = old[j]
		case vals[j] == nil:
			t.identNext++
			v, err := convertValue(t, int64(t.identNext), source.Column{Type: "bigint"}, t.cols[j])
			if err != nil {
				return err
			}
			vals[j] = v
		case old != nil && !sameValue(vals[j], old[j]):
			return fmt.Errorf("fake: table %s: cannot update identity column %q (SQL Server error 8102)", t, t.cols[j].Name)
		default:
			n, err := identityNumber(vals[j])
			if err != nil {
				return fmt.Errorf("fake: table %s, identity column %q: %w", t, t.cols[j].Name, err)
			}
			t.identNext = max(t.identNext, n)
		}
	}
	for j, c := range t.cols {
		if isRowversion(c) {
			vals[j] = db.nextRowversion()
		}
	}
	return nil
}

func identityNumber(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case keyrange.Decimal:
		return strconv.ParseInt(strings.TrimSuffix(strings.TrimSuffix(string(x), "0"), "."), 10, 64)
	}
	return 0, fmt.Errorf("value %v is not a number", v)
}

// convertValue converts v, a value of column from as the table stores it,
// to column to, as ALTER TABLE ALTER COLUMN (or a CAST) converts it:
// integers, decimals, floats and strings among themselves where the value
// fits, byte strings to byte strings, times to times; anything else, and a
// value that does not fit, is an error naming it. The result is checked
// and normalized for to (checkValue).
func convertValue(t *table, v any, from, to source.Column) (any, error) {
	if v == nil {
		return nil, nil
	}
	fail := func(why string) error {
		return fmt.Errorf("fake: table %s, column %q: value %s of %s does not convert to %s: %s", t, to.Name, describe(v), from.Declared(), to.Declared(), why)
	}
	kind := func(c source.Column) string {
		switch c.Type {
		case "tinyint", "smallint", "int", "bigint":
			return "int"
		case "decimal", "numeric", "money", "smallmoney":
			return "decimal"
		case "float", "real":
			return "float"
		case "char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml":
			return "string"
		case "binary", "varbinary", "image", "rowversion", "timestamp":
			return "bytes"
		case "date", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset":
			return "time"
		}
		return c.Type
	}
	fk, tk := kind(from), kind(to)
	i, isInt := v.(int64)
	d, isDec := v.(keyrange.Decimal)
	str, isStr := v.(string)
	switch {
	case fk == "int" && !isInt, fk == "decimal" && !isDec, fk == "string" && !isStr:
		return nil, fail("not a value of the type")
	}
	out := v
	switch {
	case fk == tk:
	case fk == "int" && tk == "decimal":
		out = keyrange.Decimal(strconv.FormatInt(i, 10))
	case fk == "int" && tk == "float":
		out = float64(i)
	case fk == "int" && tk == "string":
		out = strconv.FormatInt(i, 10)
	case fk == "decimal" && tk == "int":
		r, ok := new(big.Rat).SetString(string(d))
		if !ok || !r.IsInt() || !r.Num().IsInt64() {
			return nil, fail("not an integer in range")
		}
		out = r.Num().Int64()
	case fk == "decimal" && tk == "string":
		out = string(d)
	case fk == "string" && (tk == "int" || tk == "decimal"):
		s := strings.TrimSpace(str)
		if tk == "int" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fail("not an integer")
			}
			out = n
		} else {
			if _, ok := new(big.Rat).SetString(s); !ok {
				return nil, fail("not a number")
			}
			out = keyrange.Decimal(s)
		}
	default:
		return nil, fail("the fake converts only among numbers and text, byte strings and times")
	}
	if o, ok := out.(string); ok && fk == "string" && (from.Type == "char" || from.Type == "nchar") && to.Type != "char" && to.Type != "nchar" {
		out = strings.TrimRight(o, " ")
	}
	to.Nullable = true // NULL is not converted; NOT NULL is the table's business
	return checkValue(t, -1, &to, out)
}

// ConvertValue converts v, a value of type from as the fake stores it, to
// type to, as a CAST does (see AlterColumn): for a front end that serves
// the fake's values to a statement that casts them (internal/tdsfake).
func ConvertValue(v any, from, to source.Column) (any, error) {
	return convertValue(&table{schema: "(cast)", name: to.Name}, v, from, to)
}

// Column-changing DDL. SQL Server refuses a DDL on a column an index or
// the primary key depends on (error 5074); the fake too.

// RenameTable renames a table within its schema, as sp_rename
// 'schema.name', 'newName' does: the object keeps its object id, and its
// capture instances keep capturing it, sys.sp_cdc_help_change_data_capture
// showing the new name (FACTS.md F93); the old name is free for another
// table (CreateTable), and a statement that names it reads that one, or
// fails as SQL Server's error 208 when there is none. A name another
// table has is an error, and nothing changes.
func (db *DB) RenameTable(schema, name, newName string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return err
	}
	if newName == "" {
		return fmt.Errorf("fake: sp_rename %s: no new name", t)
	}
	if o, ok := db.tables[tableKey(t.schema, newName)]; ok && o != t {
		return fmt.Errorf("fake: sp_rename %s to %q: table %s exists", t, newName, o)
	}
	delete(db.tables, tableKey(t.schema, t.name))
	t.name = newName
	db.tables[tableKey(t.schema, t.name)] = t
	db.gen++
	return nil
}

// AddColumn appends a column to a table, as ALTER TABLE ADD does: it gets
// the next column_id (never one a dropped column had, FACTS.md F61),
// existing rows get NULL, so the column must be nullable. Capture
// instances enabled before keep capturing the columns they had (F59);
// enable a second instance to capture it. It returns the DDL's LSN, which
// each capture instance of the table records in its DDL history (F65).
func (db *DB) AddColumn(schema, name string, cd ColumnDef) (lsn.LSN, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return lsn.LSN{}, err
	}
	c, err := db.column(t.String(), cd)
	if err != nil {
		return lsn.LSN{}, err
	}
	if !c.Nullable {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s add %q: existing rows would be NULL in a NOT NULL column", t, c.Name)
	}
	if cd.Identity || isRowversion(c) {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s add %q: the fake adds no identity or rowversion column", t, c.Name)
	}
	if j := t.columnIndex(c.Name); j >= 0 {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s add %q: column %q exists", t, c.Name, t.cols[j].Name)
	}
	t.nextID++
	cols := append(slices.Clone(t.cols), c)
	ids := append(slices.Clone(t.ids), t.nextID)
	t.hidden = append(slices.Clone(t.hidden), cd.HideCollation)
	db.relayout(t, cols, ids, func(vals []any) ([]any, error) { return append(slices.Clone(vals), nil), nil })
	return db.recordDDL(t, fmt.Sprintf("ALTER TABLE %s ADD %s %s NULL", t.quoted(), quote(c.Name), c.Declared()), -1), nil
}

// DropColumn drops a column, as ALTER TABLE DROP COLUMN does. Capture
// instances that capture it keep it (FACTS.md F59), with NULL in every
// change row from now on (F60); a snapshot reads it as NULL, as
// source/sqlserver does. A column of the key or of an index cannot be
// dropped (SQL Server error 5074). It returns the DDL's LSN.
func (db *DB) DropColumn(schema, name, column string) (lsn.LSN, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return lsn.LSN{}, err
	}
	j, err := t.alterable(column, "drop")
	if err != nil {
		return lsn.LSN{}, err
	}
	cmd := fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", t.quoted(), quote(t.cols[j].Name))
	cols := slices.Delete(slices.Clone(t.cols), j, j+1)
	ids := slices.Delete(slices.Clone(t.ids), j, j+1)
	t.hidden = slices.Delete(slices.Clone(t.hidden), j, j+1)
	switch {
	case t.identity == j:
		t.identity = -1
	case t.identity > j:
		t.identity--
	}
	keyIdx := slices.Clone(t.keyIdx)
	for i, p := range keyIdx {
		if p > j {
			keyIdx[i] = p - 1
		}
	}
	t.keyIdx = keyIdx
	db.relayout(t, cols, ids, func(vals []any) ([]any, error) { return slices.Delete(slices.Clone(vals), j, j+1), nil })
	return db.recordDDL(t, cmd, -1), nil
}

// AlterColumn changes a column's type (with its length, precision or
// scale) and nullability, as ALTER TABLE ALTER COLUMN does, keeping its
// column_id; def.Name must name it (def.Collation and def.HideCollation
// apply as in CreateTable). Every row's value is converted (convertValue),
// and the DDL fails, changing nothing, when one does not fit or is NULL in
// a column made NOT NULL. A capture instance capturing the column reports
// the new type and its change table's column takes it, every stored change
// row converted (FACTS.md F62); the DDL history records
// required_column_update for it (F65). The key's and indexes' columns,
// identity and rowversion columns cannot be altered here. It returns the
// DDL's LSN.
func (db *DB) AlterColumn(schema, name string, def ColumnDef) (lsn.LSN, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return lsn.LSN{}, err
	}
	j := t.columnIndex(def.Name)
	if j < 0 {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s alter column %q: no such column", t, def.Name)
	}
	old := t.cols[j]
	if def.Identity || t.identity == j || isRowversion(old) {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s alter column %q: the fake alters no identity or rowversion column", t, old.Name)
	}
	def.Computed = old.Computed
	c, err := db.column(t.String(), def)
	if err != nil {
		return lsn.LSN{}, err
	}
	c.Name = old.Name
	if isRowversion(c) {
		return lsn.LSN{}, fmt.Errorf("fake: alter table %s alter column %q: a column cannot become a rowversion", t, old.Name)
	}
	if _, err := t.alterable(old.Name, "alter"); err != nil && !indexWidening(old, c) || slices.Contains(t.keyIdx, j) {
		// ALTER TABLE: "The data type of columns included in an index
		// can't be changed unless the column is a varchar, nvarchar, or
		// varbinary data type, and the new size is equal to or larger
		// than the old size", and a PRIMARY KEY's column can't be
		// modified (FACTS.md F94).
		if err == nil {
			err = fmt.Errorf("fake: alter table %s alter column %q: the primary key depends on it (SQL Server error 5074)", t, old.Name)
		}
		return lsn.LSN{}, err
	}
	conv := func(v any) (any, error) {
		if v == nil && !c.Nullable && !c.Computed {
			return nil, fmt.Errorf("fake: alter table %s alter column %q: a row holds NULL and the column would be NOT NULL (SQL Server error 515)", t, c.Name)
		}
		return convertValue(t, v, old, c)
	}
	// Convert everything first: a value that does not fit changes nothing.
	var rewrite [][]any
	var failed error
	t.rows.Load().all(func(r *row) bool {
		v, err := conv(r.vals[j])
		if err != nil {
			failed = err
			return false
		}
		rewrite = append(rewrite, []any{v})
		return true
	})
	if failed != nil {
		return lsn.LSN{}, failed
	}
	cmd := fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s %s %s", t.quoted(), quote(c.Name), c.Declared(), map[bool]string{true: "NULL", false: "NOT NULL"}[c.Nullable])
	cols := slices.Clone(t.cols)
	cols[j] = c
	t.hidden = slices.Clone(t.hidden)
	t.hidden[j] = def.HideCollation
	n := 0
	db.relayout(t, cols, t.ids, func(vals []any) ([]any, error) {
		out := slices.Clone(vals)
		out[j] = rewrite[n][0]
		n++
		return out, nil
	})
	retyped := -1
	if old.Declared() != c.Declared() {
		retyped = j
	}
	at := db.next
	for _, in := range t.instances {
		i := slices.Index(in.ids, t.ids[j])
		if i < 0 || old.Declared() == c.Declared() {
			continue
		}
		// The change table's column takes the new type when the capture
		// job reaches the DDL, not now (FACTS.md F62): see
		// runCaptureJobLocked.
		rep := c
		if t.hidden[j] {
			rep.Collation = ""
		}
		in.pending = append(in.pending, retype{lsn: at, i: i, ct: changeTableType(c, false), rep: rep, cmd: cmd})
	}
	return db.recordDDL(t, cmd, retyped), nil
}

// indexWidening reports whether changing column old to c is what ALTER
// TABLE allows on a column an index depends on: a varchar, nvarchar or
// varbinary made no shorter (FACTS.md F94).
func indexWidening(old, c source.Column) bool {
	switch old.Type {
	case "varchar", "nvarchar", "varbinary":
	default:
		return false
	}
	return c.Type == old.Type && old.Length > 0 && c.Length >= old.Length && c.Collation == old.Collation
}

// alterable returns the position of the column a DDL names, refusing one
// the key or an index depends on.
func (t *table) alterable(column, verb string) (int, error) {
	j := t.columnIndex(column)
	if j < 0 {
		return -1, fmt.Errorf("fake: alter table %s %s column %q: no such column", t, verb, column)
	}
	for _, ix := range t.indexes {
		if slices.Contains(ix.ids, t.ids[j]) {
			return -1, fmt.Errorf("fake: alter table %s %s column %q: the index %s depends on it (SQL Server error 5074)", t, verb, t.cols[j].Name, ix.name)
		}
	}
	if slices.Contains(t.keyIdx, j) {
		return -1, fmt.Errorf("fake: alter table %s %s column %q: the key depends on it (SQL Server error 5074)", t, verb, t.cols[j].Name)
	}
	return j, nil
}

// columnIndex returns the position of the column called name (exactly,
// else ignoring case), or -1.
func (t *table) columnIndex(name string) int {
	if j := slices.IndexFunc(t.cols, func(c source.Column) bool { return c.Name == name }); j >= 0 {
		return j
	}
	return slices.IndexFunc(t.cols, func(c source.Column) bool { return strings.EqualFold(c.Name, name) })
}

// relayout gives t the columns cols with ids and rewrites every row with
// f, in one new rowset (a DDL: readers holding the old one keep reading
// it). db.mu must be held for writing; f must not fail.
func (db *DB) relayout(t *table, cols []source.Column, ids []int, f func([]any) ([]any, error)) {
	db.gen++
	lay := &layout{cols: cols, ids: slices.Clone(ids)}
	w := &rowsetWriter{gen: db.gen, s: rowset{lay: lay}}
	t.rows.Load().all(func(r *row) bool {
		vals, _ := f(r.vals)
		w.insertAt(w.s.end(), &row{key: r.key, vals: vals})
		return true
	})
	t.cols, t.ids, t.lay = cols, lay.ids, lay
	t.rows.Store(w.done())
}

// recordDDL gives a DDL on t the next LSN and records it in the DDL
// history of every capture instance of t (FACTS.md F65); retyped is the
// position of a column whose type changed, or -1. The DDL maps to no
// commit time and moves no max LSN; the capture job counts it as it
// counts a commit. db.mu must be held for writing.
func (db *DB) recordDDL(t *table, cmd string, retyped int) lsn.LSN {
	at := db.next
	if next, err := at.Next(); err == nil {
		db.next = next
	}
	db.lastLSN = at
	ts := db.now()
	for _, in := range t.instances {
		required := retyped >= 0 && slices.Contains(in.ids, t.ids[retyped])
		in.ddl = append(in.ddl, source.DDL{CaptureInstance: in.name, SourceSchema: t.schema, SourceTable: t.name,
			Command: cmd, LSN: at, Time: ts, RequiredColumnUpdate: required})
	}
	db.sinceJob++
	if !db.opts.ManualCapture && db.sinceJob >= db.opts.CaptureEvery {
		db.runCaptureJobLocked()
	}
	return at
}

// DDLHistory implements source.DDLHistorian as
// sys.sp_cdc_get_ddl_history answers (FACTS.md F65): the DDL on the
// instance's table since the instance was enabled, in LSN order, each once
// the capture job has passed it. An instance that is gone or that the
// login may not read is a *source.AccessError.
func (db *DB) DDLHistory(ctx context.Context, captureInstance string) ([]source.DDL, error) {
	if err := db.enter(ctx, OpDDLHistory); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.readableLocked(captureInstance)
	if err != nil {
		return nil, err
	}
	var out []source.DDL
	for _, d := range in.ddl {
		if !db.captured.Less(d.LSN) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (t *table) quoted() string { return quote(t.schema) + "." + quote(t.name) }

func quote(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }

// projection maps the values of a row in one layout to a capture
// instance's captured columns in target types: for each captured column
// its position in the layout (-1 when the table no longer has it, or it is
// computed: NULL, FACTS.md F13, F60) and its conversion (nil: none).
type projection struct {
	pos  []int
	from []source.Column
	to   []source.Column
	same bool // the values are the captured ones as they are
	cast bool // convert as CAST does (castValue), not as ALTER COLUMN does
}

// ErrInvalidColumn is wrapped by a read that names a column the table
// does not have: SQL Server's error 207, "Invalid column name" (FACTS.md
// F21, F60).
var ErrInvalidColumn = errors.New("invalid column name (SQL Server error 207)")

// readProjection is the projection of lay's rows onto the columns a read
// names, cols (a capture instance as the caller described it): each by
// its column_id (by name when it has none), cast to its type as the
// read's statement casts it (castValue: a value wider than a stale
// description is truncated or rounded, FACTS.md F92), a computed column
// and one marked Dropped NULL. A column the layout lacks that is not
// marked Dropped is what SQL Server answers with error 207: an error
// wrapping ErrInvalidColumn.
func (t *table) readProjection(lay *layout, cols []source.Column) (projection, error) {
	n := len(cols)
	p := projection{pos: make([]int, n), from: make([]source.Column, n), to: slices.Clone(cols), cast: true}
	p.same = n == len(lay.cols)
	for i, c := range cols {
		j := -1
		switch {
		case c.Dropped:
		case c.ID != 0:
			j = lay.position(c.ID)
		default:
			if j = slices.IndexFunc(lay.cols, func(x source.Column) bool { return x.Name == c.Name }); j < 0 {
				j = slices.IndexFunc(lay.cols, func(x source.Column) bool { return strings.EqualFold(x.Name, c.Name) })
			}
		}
		if j < 0 && !c.Dropped {
			return projection{}, fmt.Errorf("fake: table %s: column %q (column_id %d): %w", t, c.Name, c.ID, ErrInvalidColumn)
		}
		if j >= 0 && lay.cols[j].Computed {
			j = -1
		}
		p.pos[i] = j
		if j >= 0 {
			p.from[i] = lay.cols[j]
		}
		if j != i || j >= 0 && lay.cols[j].Declared() != c.Declared() {
			p.same = false
		}
	}
	return p, nil
}

// project returns the projection of lay's rows onto in's captured
// columns as target types them (in.cols for reads, in.ct for change rows).
// A nil target keeps each column in the table's type.
func (in *instance) project(lay *layout, target []source.Column) projection {
	n := len(in.ids)
	p := projection{pos: make([]int, n), from: make([]source.Column, n), to: make([]source.Column, n)}
	p.same = n == len(lay.ids)
	for i, id := range in.ids {
		j := lay.position(id)
		if j >= 0 && lay.cols[j].Computed {
			j = -1
		}
		p.pos[i] = j
		if j >= 0 {
			p.from[i], p.to[i] = lay.cols[j], lay.cols[j]
		}
		if target != nil {
			p.to[i] = target[i]
		}
		if j != i || j >= 0 && lay.cols[j].Declared() != p.to[i].Declared() {
			p.same = false
		}
	}
	return p
}

// apply returns a row's captured values.
func (p projection) apply(t *table, vals []any) ([]any, error) {
	if p.same {
		return vals, nil
	}
	out := make([]any, len(p.pos))
	for i, j := range p.pos {
		if j < 0 || vals[j] == nil {
			continue
		}
		v := vals[j]
		if p.from[i].Declared() != p.to[i].Declared() {
			conv := convertValue
			if p.cast {
				conv = castValue
			}
			var err error
			if v, err = conv(t, v, p.from[i], p.to[i]); err != nil {
				return nil, err
			}
		}
		out[i] = v
	}
	return out, nil
}

// converter returns the conversion of change-table values (in.ct, in the
// instance's column order) to the columns cols a change read names (a
// capture instance as its caller described it): each by column_id (by
// name without one), cast to its type as the read's statement casts it
// (castValue). A column the instance does not capture is an error
// wrapping ErrInvalidColumn. db.mu must be held.
func (in *instance) converter(cols []source.Column) (func([]any) ([]any, error), error) {
	pos := make([]int, len(cols))
	same := len(cols) == len(in.ids)
	for k, c := range cols {
		i := -1
		if c.ID != 0 {
			i = slices.Index(in.ids, c.ID)
		} else if i = slices.IndexFunc(in.cols, func(x source.Column) bool { return x.Name == c.Name }); i < 0 {
			i = slices.IndexFunc(in.cols, func(x source.Column) bool { return strings.EqualFold(x.Name, c.Name) })
		}
		if i < 0 {
			return nil, fmt.Errorf("fake: change table %s_CT: column %q (column_id %d): %w", in.name, c.Name, c.ID, ErrInvalidColumn)
		}
		pos[k] = i
		if i != k || in.ct[i].Declared() != c.Declared() {
			same = false
		}
	}
	if same {
		return nil, nil
	}
	ct, t := in.ct, in.t
	return func(vals []any) ([]any, error) {
		out := make([]any, len(cols))
		for k, i := range pos {
			v := vals[i]
			if v != nil && ct[i].Declared() != cols[k].Declared() {
				var err error
				if v, err = castValue(t, v, ct[i], cols[k]); err != nil {
					return nil, err
				}
			}
			out[k] = v
		}
		return out, nil
	}, nil
}

// remap moves a statement's values, checked against layout from, into the
// table's current layout: by column_id, an added column NULL, a retyped
// one converted (an error when the value no longer fits). db.mu must be
// held.
func (t *table) remap(from *layout, vals []any) ([]any, error) {
	out := make([]any, len(t.cols))
	for j, id := range t.ids {
		k := from.position(id)
		if k < 0 {
			continue
		}
		v, err := convertValue(t, vals[k], from.cols[k], t.cols[j])
		if err != nil {
			return nil, err
		}
		out[j] = v
	}
	return out, nil
}
