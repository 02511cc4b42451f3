package pqfile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// JSONColumns reads top-level columns of a Parquet file, nested or not, as
// one JSON value per row (nil for a NULL), the value arrow-go's MarshalJSON
// gives for the row of the column pqarrow reads: a struct as an object of
// its fields by name, a list as an array, a map as an array of
// {"key": ..., "value": ...} objects, a string as a string, a binary as
// base64, an integer as a number, a boolean as true or false.
//
// Rows are rebuilt from each leaf's definition and repetition levels (the
// format's "Nested Encoding"): lists are three-level LIST groups, two-level
// ones, or bare repeated fields (the format's LogicalTypes.md, "Lists" and
// its backward-compatibility rules); maps are MAP groups of a repeated
// key_value group.
//
// columns names the top-level columns; a name the file lacks gets nil.
// skip names fields (at any depth) left out of the values, as if the
// schema had none; a leaf of any other type than those above is an error.
// Delta checkpoints are the use: their actions are structs of strings,
// integers, booleans, string maps and string lists, beside typed copies of
// the statistics that a reader skips (Delta PROTOCOL, "Checkpoint Schema":
// stats_parsed, partitionValues_parsed).
// A panic of arrow-go's decoders on a corrupt page becomes the error.
func JSONColumns(pf *file.Reader, columns []string, skip []string) (out [][]json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, corrupt(p)
		}
	}()
	sc := pf.MetaData().Schema
	root := sc.Root()
	out = make([][]json.RawMessage, len(columns))
	rows := int(pf.NumRows())
	for ci, name := range columns {
		idx := root.FieldIndexByName(name)
		if idx < 0 {
			continue
		}
		top, err := buildNode(sc, root.Field(idx), 0, 0, skip)
		if err != nil {
			return nil, fmt.Errorf("pqfile: column %s: %w", name, err)
		}
		vals := make([]any, rows)
		var leaves [][]*jnode
		top.leafPaths(nil, &leaves)
		base := 0
		for g := range pf.NumRowGroups() {
			rg := pf.RowGroup(g)
			n := int(rg.NumRows())
			if base+n > rows {
				return nil, fmt.Errorf("pqfile: row group %d runs past the file's %d rows", g, rows)
			}
			for _, path := range leaves {
				if err := assembleLeaf(rg, path, vals[base:base+n]); err != nil {
					return nil, fmt.Errorf("pqfile: column %s, row group %d: %w", leafName(path), g, err)
				}
			}
			base += n
		}
		out[ci] = make([]json.RawMessage, rows)
		var buf bytes.Buffer
		for r, v := range vals {
			switch v.(type) {
			case nil, jnull:
				continue
			}
			buf.Reset()
			if err := writeJSON(&buf, top, v); err != nil {
				return nil, fmt.Errorf("pqfile: column %s: %w", name, err)
			}
			out[ci][r] = bytes.Clone(buf.Bytes())
		}
	}
	return out, nil
}

type nodeKind int8

const (
	leafKind nodeKind = iota
	structKind
	listKind
	mapKind
)

// jnode is a field of the column being rebuilt, with the levels that
// tell where its values end.
type jnode struct {
	name     string
	kind     nodeKind
	optional bool     // NULL when a value's level is below def
	def      int16    // the definition level of a present (non-NULL) value
	elemDef  int16    // list, map: the level of a present element
	rep      int16    // list, map: the repetition level of its elements
	children []*jnode // struct: its fields (nil: skipped); list: the element; map: key, value
	col      int      // leaf: its column
	leaf     *schema.Column
	index    int // its position among its parent's children (set by leafPaths)
}

// buildNode describes n, reached at definition level def and repetition
// level rep.
func buildNode(sc *schema.Schema, n schema.Node, def, rep int16, skip []string) (*jnode, error) {
	j := &jnode{name: n.Name()}
	switch n.RepetitionType() {
	case parquet.Repetitions.Optional:
		j.optional = true
		def++
	case parquet.Repetitions.Repeated:
		// A bare repeated field is a list of that field, required.
		j.kind, j.def, j.elemDef, j.rep = listKind, def, def+1, rep+1
		elem, err := buildElement(sc, n, def+1, rep+1, skip)
		if err != nil {
			return nil, err
		}
		j.children = []*jnode{elem}
		return j, nil
	}
	j.def = def
	g, ok := n.(*schema.GroupNode)
	if !ok {
		return leafNode(sc, j, n)
	}
	switch {
	case isListGroup(g):
		if g.NumFields() != 1 || g.Field(0).RepetitionType() != parquet.Repetitions.Repeated {
			return nil, fmt.Errorf("LIST group %s does not hold one repeated field", g.Name())
		}
		j.kind, j.elemDef, j.rep = listKind, def+1, rep+1
		r := g.Field(0)
		var elem *jnode
		var err error
		if rg, ok := r.(*schema.GroupNode); ok && rg.NumFields() == 1 && rg.Field(0).RepetitionType() != parquet.Repetitions.Repeated &&
			rg.Name() != "array" && rg.Name() != g.Name()+"_tuple" {
			// Three levels: the repeated group holds the element.
			elem, err = buildNode(sc, rg.Field(0), def+1, rep+1, skip)
		} else {
			// Two levels: the repeated field is the element.
			elem, err = buildElement(sc, r, def+1, rep+1, skip)
		}
		if err != nil {
			return nil, err
		}
		j.children = []*jnode{elem}
	case isMapGroup(g):
		kv, ok := g.Field(0).(*schema.GroupNode)
		if g.NumFields() != 1 || !ok || kv.RepetitionType() != parquet.Repetitions.Repeated || kv.NumFields() != 2 {
			return nil, fmt.Errorf("MAP group %s does not hold a repeated group of a key and a value", g.Name())
		}
		j.kind, j.elemDef, j.rep = mapKind, def+1, rep+1
		for i, name := range [2]string{"key", "value"} {
			c, err := buildNode(sc, kv.Field(i), def+1, rep+1, skip)
			if err != nil {
				return nil, err
			}
			if c != nil {
				// By position, whatever the file calls them: "these names
				// may not be used in existing data" (parquet-format
				// LogicalTypes.md, Maps, backward-compatibility rules);
				// delta-rs wrote keys/values into checkpoints before
				// delta-io/delta-rs#2182.
				c.name = name
			}
			j.children = append(j.children, c)
		}
	default:
		j.kind = structKind
		var err error
		if j.children, err = structFields(sc, g, def, rep, skip); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// buildElement describes a repeated field as the element of its list:
// the field itself, present once the list has an element.
func buildElement(sc *schema.Schema, n schema.Node, def, rep int16, skip []string) (*jnode, error) {
	j := &jnode{name: n.Name(), def: def}
	g, ok := n.(*schema.GroupNode)
	if !ok {
		return leafNode(sc, j, n)
	}
	if isListGroup(g) && g.NumFields() == 1 && g.Field(0).RepetitionType() == parquet.Repetitions.Repeated {
		// A repeated LIST group of one repeated field is itself the list
		// (LogicalTypes.md, Lists, backward-compatibility rule 3).
		j.kind, j.elemDef, j.rep = listKind, def+1, rep+1
		elem, err := buildElement(sc, g.Field(0), def+1, rep+1, skip)
		if err != nil {
			return nil, err
		}
		j.children = []*jnode{elem}
		return j, nil
	}
	j.kind = structKind
	var err error
	if j.children, err = structFields(sc, g, def, rep, skip); err != nil {
		return nil, err
	}
	return j, nil
}

// structFields describes the fields of struct g (nil for a skipped one).
func structFields(sc *schema.Schema, g *schema.GroupNode, def, rep int16, skip []string) ([]*jnode, error) {
	var out []*jnode
	for i := range g.NumFields() {
		f := g.Field(i)
		if contains(skip, f.Name()) {
			out = append(out, nil)
			continue
		}
		c, err := buildNode(sc, f, def, rep, skip)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func leafNode(sc *schema.Schema, j *jnode, n schema.Node) (*jnode, error) {
	j.kind = leafKind
	j.col = sc.ColumnIndexByNode(n)
	if j.col < 0 {
		return nil, fmt.Errorf("no column for %s", n.Name())
	}
	j.leaf = sc.Column(j.col)
	if _, err := leafJSON(j.leaf); err != nil {
		return nil, fmt.Errorf("%s: %w", j.leaf.Path(), err)
	}
	return j, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func isListGroup(g *schema.GroupNode) bool {
	_, ok := g.LogicalType().(schema.ListLogicalType)
	return ok || g.ConvertedType() == schema.ConvertedTypes.List
}

func isMapGroup(g *schema.GroupNode) bool {
	_, ok := g.LogicalType().(schema.MapLogicalType)
	return ok || g.ConvertedType() == schema.ConvertedTypes.Map || g.ConvertedType() == schema.ConvertedTypes.MapKeyValue
}

// leafPaths lists the paths from n to each of its leaves.
func (n *jnode) leafPaths(prefix []*jnode, out *[][]*jnode) {
	path := append(prefix[:len(prefix):len(prefix)], n)
	if n.kind == leafKind {
		*out = append(*out, path)
		return
	}
	for i, c := range n.children {
		if c != nil {
			c.index = i
			c.leafPaths(path, out)
		}
	}
}

func leafName(path []*jnode) string {
	return path[len(path)-1].leaf.Path()
}

// Values being rebuilt: a struct's fields or a map entry's key and value
// by position (nil: not set yet, or skipped), a list's elements.
type (
	jobj  struct{ fields []any }
	jlist struct{ elems []any }
	jnull struct{}
)

// errConflict: two leaves of one column disagree on a row's shape.
var errConflict = errors.New("the leaves of the column disagree on where a value is NULL")

// assembleLeaf reads one leaf's levels and values in a row group and
// puts them into rows, which the column's other leaves share.
func assembleLeaf(rg *file.RowGroupReader, path []*jnode, rows []any) error {
	leaf := path[len(path)-1]
	def, rep, vals, err := readLeaf(rg, leaf)
	if err != nil {
		return err
	}
	// cursor[k] is, for the list or map at path[k], the instance the last
	// level reached and the index of its element.
	type cursor struct {
		list *jlist
		idx  int
	}
	cursors := make([]cursor, len(path))
	row, vi := -1, 0
	for e := range def {
		d, r := def[e], int16(0)
		if rep != nil {
			r = rep[e]
		}
		if r == 0 {
			row++
			if row >= len(rows) {
				return fmt.Errorf("more rows than the row group's %d", len(rows))
			}
		}
		slot := &rows[row]
	walk:
		for k, n := range path {
			if n.optional && d < n.def {
				if err := setNull(slot); err != nil {
					return err
				}
				break
			}
			switch n.kind {
			case leafKind:
				if vi >= len(vals) {
					return errors.New("fewer values than levels say")
				}
				*slot = vals[vi]
				vi++
				break walk
			case structKind:
				obj, err := ensureObj(slot, len(n.children))
				if err != nil {
					return err
				}
				slot = &obj.fields[path[k+1].index]
			case listKind, mapKind:
				l, err := ensureList(slot)
				if err != nil {
					return err
				}
				if d < n.elemDef {
					break walk // present and empty
				}
				c := &cursors[k]
				switch {
				case c.list != l:
					c.list, c.idx = l, 0
				case r <= n.rep:
					c.idx++
				}
				for len(l.elems) <= c.idx {
					l.elems = append(l.elems, nil)
				}
				slot = &l.elems[c.idx]
				if n.kind == mapKind {
					entry, err := ensureObj(slot, 2)
					if err != nil {
						return err
					}
					slot = &entry.fields[path[k+1].index]
				}
			}
		}
	}
	if row != len(rows)-1 {
		return fmt.Errorf("%d rows, the row group has %d", row+1, len(rows))
	}
	return nil
}

func setNull(slot *any) error {
	switch (*slot).(type) {
	case nil:
		*slot = jnull{}
	case jnull:
	default:
		return errConflict
	}
	return nil
}

func ensureObj(slot *any, n int) (*jobj, error) {
	switch v := (*slot).(type) {
	case nil:
		o := &jobj{fields: make([]any, n)}
		*slot = o
		return o, nil
	case *jobj:
		return v, nil
	}
	return nil, errConflict
}

func ensureList(slot *any) (*jlist, error) {
	switch v := (*slot).(type) {
	case nil:
		l := &jlist{}
		*slot = l
		return l, nil
	case *jlist:
		return v, nil
	}
	return nil, errConflict
}

// readLeaf reads a leaf column's levels and its present values, each as
// the JSON it becomes.
func readLeaf(rg *file.RowGroupReader, leaf *jnode) (def, rep []int16, vals []json.RawMessage, err error) {
	cr, err := rg.Column(leaf.col)
	if err != nil {
		return nil, nil, nil, err
	}
	md, err := rg.MetaData().ColumnChunk(leaf.col)
	if err != nil {
		return nil, nil, nil, err
	}
	total := md.NumValues()
	if total < 0 || total > 1<<31 {
		return nil, nil, nil, fmt.Errorf("%d values", total)
	}
	conv, err := leafJSON(leaf.leaf)
	if err != nil {
		return nil, nil, nil, err
	}
	const batch = 4096
	d, r := make([]int16, batch), make([]int16, batch)
	// read reads one batch: its levels, and its values as JSON.
	var read func() (int64, error)
	switch c := cr.(type) {
	case *file.BooleanColumnChunkReader:
		v := make([]bool, batch)
		read = func() (int64, error) {
			levels, n, err := c.ReadBatch(batch, v, d, r)
			for _, x := range v[:n] {
				vals = append(vals, json.RawMessage(strconv.FormatBool(x)))
			}
			return levels, err
		}
	case *file.Int32ColumnChunkReader:
		v := make([]int32, batch)
		read = func() (int64, error) {
			levels, n, err := c.ReadBatch(batch, v, d, r)
			for _, x := range v[:n] {
				vals = append(vals, conv(int64(x), nil))
			}
			return levels, err
		}
	case *file.Int64ColumnChunkReader:
		v := make([]int64, batch)
		read = func() (int64, error) {
			levels, n, err := c.ReadBatch(batch, v, d, r)
			for _, x := range v[:n] {
				vals = append(vals, conv(x, nil))
			}
			return levels, err
		}
	case *file.ByteArrayColumnChunkReader:
		v := make([]parquet.ByteArray, batch)
		read = func() (int64, error) {
			levels, n, err := c.ReadBatch(batch, v, d, r)
			for _, x := range v[:n] {
				vals = append(vals, conv(0, x)) // conv copies: x is the page's memory
			}
			return levels, err
		}
	default:
		return nil, nil, nil, fmt.Errorf("cannot read %s values", cr.Type())
	}
	def = make([]int16, 0, total)
	if leaf.leaf.MaxRepetitionLevel() > 0 {
		rep = make([]int16, 0, total)
	}
	for cr.HasNext() {
		levels, err := read()
		if err != nil {
			return nil, nil, nil, err
		}
		if levels == 0 {
			break
		}
		if leaf.leaf.MaxDefinitionLevel() == 0 {
			// No levels are stored: every value is present.
			def = append(def, make([]int16, levels)...)
		} else {
			def = append(def, d[:levels]...)
		}
		if rep != nil {
			rep = append(rep, r[:levels]...)
		}
	}
	if int64(len(def)) != total {
		return nil, nil, nil, fmt.Errorf("read %d levels of %d", len(def), total)
	}
	return def, rep, vals, nil
}

// leafJSON returns how a leaf's values become JSON: integers as numbers
// (unsigned ones as such), strings as strings, other byte arrays as
// base64 (pqarrow reads them as binary); booleans need none. Other types
// are refused.
func leafJSON(c *schema.Column) (func(i int64, b []byte) json.RawMessage, error) {
	lt := c.LogicalType()
	switch c.PhysicalType() {
	case parquet.Types.Boolean:
		return nil, nil
	case parquet.Types.Int32, parquet.Types.Int64:
		unsigned := false
		switch lt := lt.(type) {
		case schema.NoLogicalType:
		case schema.IntLogicalType:
			unsigned = !lt.IsSigned()
		default:
			return nil, fmt.Errorf("%s values are not read", lt)
		}
		int32s := c.PhysicalType() == parquet.Types.Int32
		return func(i int64, _ []byte) json.RawMessage {
			switch {
			case unsigned && int32s:
				return json.RawMessage(strconv.FormatUint(uint64(uint32(i)), 10))
			case unsigned:
				return json.RawMessage(strconv.FormatUint(uint64(i), 10))
			}
			return json.RawMessage(strconv.FormatInt(i, 10))
		}, nil
	case parquet.Types.ByteArray:
		switch lt.(type) {
		case schema.StringLogicalType:
			return func(_ int64, b []byte) json.RawMessage {
				s, _ := json.Marshal(string(b))
				return s
			}, nil
		case schema.NoLogicalType, schema.EnumLogicalType, schema.JSONLogicalType, schema.BSONLogicalType:
			return func(_ int64, b []byte) json.RawMessage {
				return json.RawMessage(strconv.Quote(base64.StdEncoding.EncodeToString(b)))
			}, nil
		}
		return nil, fmt.Errorf("%s values are not read", lt)
	}
	return nil, fmt.Errorf("%s values are not read", c.PhysicalType())
}

// writeJSON writes v, a value of n.
func writeJSON(buf *bytes.Buffer, n *jnode, v any) error {
	switch v := v.(type) {
	case nil, jnull:
		buf.WriteString("null")
	case json.RawMessage:
		buf.Write(v)
	case *jobj:
		// Fields in name order: arrow-go marshals a struct row as a Go map.
		order := make([]int, 0, len(n.children))
		for i, c := range n.children {
			if c != nil { // else skipped
				order = append(order, i)
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return n.children[order[a]].name < n.children[order[b]].name })
		buf.WriteByte('{')
		for k, i := range order {
			if k > 0 {
				buf.WriteByte(',')
			}
			name, _ := json.Marshal(n.children[i].name)
			buf.Write(name)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.children[i], v.fields[i]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case *jlist:
		buf.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			var err error
			if n.kind == mapKind {
				err = writeJSON(buf, &jnode{kind: structKind, children: n.children}, e)
			} else {
				err = writeJSON(buf, n.children[0], e)
			}
			if err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}
