package fake

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// index is one index of a table: the primary key's or one of
// TableDef.Indexes.
type index struct {
	name      string
	colNames  []string
	ids       []int // the columns' column_ids: no DDL drops or alters an indexed column
	unique    bool
	clustered bool

	mu    sync.Mutex
	base  *rowset // the table version view was built from
	view  *rowset // base's rows in this index's order
	order keyOrder
}

// defineIndexes checks def's key and indexes against t's columns and sets
// t's indexes; t's key columns are set.
func (t *table) defineIndexes(def TableDef) error {
	name := t.String()
	t.keyless = def.Keyless
	if !def.Keyless {
		n := def.KeyIndexName
		if n == "" {
			n = "PK_" + t.name
		}
		t.pk = &index{name: n, colNames: slices.Clone(t.keyNames), unique: true, clustered: !def.KeyNonclustered, order: t.order}
		for _, j := range t.keyIdx {
			t.pk.ids = append(t.pk.ids, t.ids[j])
		}
		t.indexes = append(t.indexes, t.pk)
	}
	for _, d := range def.Indexes {
		if d.Name == "" || len(d.Columns) == 0 {
			return fmt.Errorf("fake: create table %s: an index needs a name and columns", name)
		}
		ix := &index{name: d.Name, colNames: slices.Clone(d.Columns), unique: d.Unique, clustered: d.Clustered}
		for _, c := range d.Columns {
			j := slices.IndexFunc(t.cols, func(tc source.Column) bool { return tc.Name == c })
			if j < 0 {
				return fmt.Errorf("fake: create table %s: index %s: column %q is not a column", name, d.Name, c)
			}
			kc := t.cols[j].KeyColumn()
			if kc.Kind == keyrange.KindUnsupported {
				return fmt.Errorf("fake: create table %s: index %s: column %q has type %s, which cannot be an index key", name, d.Name, c, t.cols[j].Declared())
			}
			ix.ids = append(ix.ids, t.ids[j])
			ix.order = append(ix.order, newKeyPart(kc))
		}
		// A nonclustered index's rows carry the row's locator (the
		// clustering key; the fake's Key stands for it), which makes
		// every entry distinct and orders rows of equal index keys.
		ix.order = append(ix.order, t.order...)
		t.indexes = append(t.indexes, ix)
	}
	clustered := 0
	for i, ix := range t.indexes {
		if ix.clustered {
			clustered++
		}
		for _, o := range t.indexes[:i] {
			if strings.EqualFold(o.name, ix.name) {
				return fmt.Errorf("fake: create table %s: two indexes are called %s", name, ix.name)
			}
		}
	}
	if clustered > 1 {
		return fmt.Errorf("fake: create table %s: more than one clustered index (make the primary key KeyNonclustered)", name)
	}
	return nil
}

// describeIndexes returns the table's indexes as source describes them,
// clustered first, then by name, and whether the table is a heap.
func (t *table) describeIndexes() ([]source.Index, bool) {
	heap := true
	var out []source.Index
	for _, ix := range t.indexes {
		heap = heap && !ix.clustered
		out = append(out, ix.describe())
	}
	slices.SortFunc(out, func(a, b source.Index) int {
		if a.Clustered != b.Clustered {
			if a.Clustered {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, heap
}

func (ix *index) describe() source.Index {
	return source.Index{Name: ix.name, Columns: slices.Clone(ix.colNames), Unique: ix.unique, Clustered: ix.clustered}
}

// rowsOf returns the rows of rs (a version of the table) in ix's order:
// each row's key is its index key followed by its primary key, so a
// keyset continuation after the last entry read is exact even where index
// keys repeat. The view is built once per version.
func (ix *index) rowsOf(t *table, rs *rowset) *rowset {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.base == rs {
		return ix.view
	}
	pos := make([]int, len(ix.ids))
	for i, id := range ix.ids {
		pos[i] = rs.lay.position(id)
	}
	rows := make([]*row, 0, rs.n)
	rs.all(func(r *row) bool {
		key := make([]any, 0, len(pos)+len(r.key))
		for i, j := range pos {
			key = append(key, ix.order[i].normalize(r.vals[j]))
		}
		rows = append(rows, &row{key: append(key, r.key...), vals: r.vals})
		return true
	})
	slices.SortFunc(rows, func(a, b *row) int { return ix.order.compare(a.key, b.key) })
	view := &rowset{n: len(rows), lay: rs.lay}
	for len(rows) > 0 {
		n := min(chunkSize, len(rows))
		view.chunks = append(view.chunks, &chunk{rows: rows[:n:n]})
		rows = rows[n:]
	}
	ix.base, ix.view = rs, view
	return view
}

// access is how a read reaches a table's rows by the key a capture
// instance (or a SplitOn copy of one) names: through the index whose
// leading columns are that key, as SQL Server's seek would.
type access struct {
	t       *table
	ix      *index            // the rows' order; nil: the table's own (its Key)
	scan    bool              // no index leads with the key: every piece reads the whole table
	keyIDs  []int             // the key's columns' column_ids
	keyCols []keyrange.Column // the key's columns: the first of order's
	order   keyOrder          // the order of the rows' keys
	unique  bool              // the key identifies one row (ci.UniqueKey)
	// unusable says why the key cannot order rows (a column that is not
	// one, or of a type that has no order): only the whole table reads.
	unusable string
	// rep and tab are the key's columns as the capture instance reports
	// them and as the table has them: they differ for an identity column
	// reported with its change table's type (FACTS.md F64), and key
	// values cross between them (in, out).
	rep, tab []source.Column
}

// in converts a key value of column i from the reported type to the
// table's, as SQL Server compares a bound cast to the reported type with
// the column.
func (a *access) in(i int, v any) any {
	if v == nil || i >= len(a.rep) || a.rep[i].Declared() == a.tab[i].Declared() {
		return v
	}
	if x, err := convertValue(a.t, v, a.rep[i], a.tab[i]); err == nil {
		return x
	}
	return v
}

// out converts a key value of column i from the table's type to the
// reported one.
func (a *access) out(i int, v any) any {
	if v == nil || i >= len(a.rep) || a.rep[i].Declared() == a.tab[i].Declared() {
		return v
	}
	if x, err := convertValue(a.t, v, a.tab[i], a.rep[i]); err == nil {
		return x
	}
	return v
}

// inPieces converts the values of pieces (see in).
func (a *access) inPieces(ps []keyrange.Piece) []keyrange.Piece {
	out := make([]keyrange.Piece, len(ps))
	for k, p := range ps {
		p.Eq = a.inTuple(p.Eq)
		j := len(p.Eq)
		if p.Lower != nil {
			b := *p.Lower
			b.Value = a.in(j, b.Value)
			p.Lower = &b
		}
		if p.Upper != nil {
			b := *p.Upper
			b.Value = a.in(j, b.Value)
			p.Upper = &b
		}
		if g := p.Guard; g != nil {
			gg := *g
			if gg.Below != nil {
				below := make(keyrange.Tuple, len(gg.Below))
				for i, v := range gg.Below {
					below[i] = a.in(gg.From+i, v)
				}
				gg.Below = below
			}
			if gg.Above != nil {
				b := *gg.Above
				b.Value = a.in(gg.From, b.Value)
				gg.Above = &b
			}
			p.Guard = &gg
		}
		out[k] = p
	}
	return out
}

// inTuple converts a tuple of key values (from the first key column on).
func (a *access) inTuple(t keyrange.Tuple) keyrange.Tuple {
	if t == nil {
		return nil
	}
	out := make(keyrange.Tuple, len(t))
	for i, v := range t {
		out[i] = a.in(i, v)
	}
	return out
}

// accessFor returns the access by ci's key: the table's own order when the
// key is its Key or a prefix of it, else the index leading with the key
// (in source.CaptureInstance.SplitOn's order). With no index leading with
// it (none declared, or a Keyless table's own order, which SQL Server would
// not have), each piece scans: it counts every row of the table as
// examined. A key the fake cannot order reads only as the whole table.
// db.mu must be held.
func (t *table) accessFor(ci *source.CaptureInstance) *access {
	a := &access{t: t, unique: ci.UniqueKey()}
	for _, k := range ci.Key {
		j := slices.IndexFunc(t.cols, func(c source.Column) bool { return c.Name == k })
		if j < 0 {
			a.unusable = fmt.Sprintf("key column %q is not a column of %s", k, t)
			break
		}
		kc := t.cols[j].KeyColumn()
		if kc.Kind == keyrange.KindUnsupported {
			a.unusable = fmt.Sprintf("key column %q has type %s, which cannot be ordered", k, t.cols[j].Declared())
			break
		}
		a.keyIDs = append(a.keyIDs, t.ids[j])
		a.keyCols = append(a.keyCols, kc)
		rep, ok := ci.Column(k)
		if !ok {
			rep = t.cols[j]
		}
		a.rep, a.tab = append(a.rep, rep), append(a.tab, t.cols[j])
	}
	if a.unusable != "" {
		// Only the whole table can be read, in any order.
		a.keyIDs, a.keyCols, a.order = nil, nil, t.order
		return a
	}
	leads := func(ids []int) bool {
		return len(ids) >= len(a.keyIDs) && slices.Equal(ids[:len(a.keyIDs)], a.keyIDs)
	}
	var keyIDs []int
	for _, j := range t.keyIdx {
		keyIDs = append(keyIDs, t.ids[j])
	}
	var best *index
	better := func(a, b *index) bool { // source.CaptureInstance.SplitOn's order
		switch {
		case a.clustered != b.clustered:
			return a.clustered
		case len(a.ids) != len(b.ids):
			return len(a.ids) < len(b.ids)
		case a.unique != b.unique:
			return a.unique
		}
		return a.name < b.name
	}
	for _, ix := range t.indexes {
		if leads(ix.ids) && (best == nil || better(ix, best)) {
			best = ix
		}
	}
	a.scan = len(a.keyIDs) > 0 && best == nil
	switch {
	case leads(keyIDs):
		a.order = t.order
	case best != nil:
		a.ix, a.order = best, best.order
	default:
		// An order for the read's sake, as a sort would give.
		a.ix = &index{ids: a.keyIDs}
		for _, kc := range a.keyCols {
			a.ix.order = append(a.ix.order, newKeyPart(kc))
		}
		a.ix.order = append(a.ix.order, t.order...)
		a.order = a.ix.order
	}
	return a
}

// rows returns rs, a version of the table, in the access's order.
func (a *access) rows(rs *rowset) *rowset {
	if a.ix == nil {
		return rs
	}
	return a.ix.rowsOf(a.t, rs)
}

// keyOf returns the access key's values of a row's values in lay.
func (a *access) keyOf(lay *layout, vals []any) keyrange.Tuple {
	k := make(keyrange.Tuple, len(a.keyIDs))
	for i, id := range a.keyIDs {
		k[i] = a.out(i, vals[lay.position(id)])
	}
	return k
}
