package pqfile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A nested column (structs, lists and maps) is written leaf by leaf, each
// with its definition and repetition levels (the format's "Nested
// Encoding", after Dremel): a NULL or an empty list ends a path early at
// the level of the last node present; a list's first element repeats at
// the level of the list above it, the others at its own. The leaf's
// values are those of the elements the innermost list's present entries
// span, NULLs included: arrow-go's writer matches values to the levels
// that reach the leaf's repeated ancestor. pqarrow computes the same
// (arrow-go v18.9.0 parquet/pqarrow/path_builder.go); the tests compare
// the files.

// leafLevels is what writing one leaf of a nested column takes.
type leafLevels struct {
	values   arrow.Array // the leaf's values, sliced to the visited elements
	def, rep []int16     // nil when the leaf has none
	nullable bool        // the leaf's field is nullable and holds NULLs
}

func (l *leafLevels) release() {
	if l.values != nil {
		l.values.Release()
	}
}

// step is one node on the path from a column to one of its leaves.
type step struct {
	arr      arrow.Array
	nullable bool // the node's field is nullable: Parquet optional
	child    int  // struct: the field the path takes; map: 0 key, 1 value
}

// shred returns the levels of every leaf of column arr (field f), in the
// order of the Parquet schema's leaves.
func shred(f arrow.Field, arr arrow.Array, mem memory.Allocator) ([]leafLevels, error) {
	var out []leafLevels
	var walk func(path []step, t arrow.DataType) error
	walk = func(path []step, t arrow.DataType) error {
		last := path[len(path)-1]
		switch t := t.(type) {
		case *arrow.StructType:
			st := last.arr.(*array.Struct)
			for i, cf := range t.Fields() {
				path[len(path)-1].child = i
				if err := walk(append(path, step{arr: st.Field(i), nullable: cf.Nullable}), cf.Type); err != nil {
					return err
				}
			}
			return nil
		case *arrow.MapType:
			entries := last.arr.(*array.Map).ListValues().(*array.Struct)
			for i, cf := range []arrow.Field{t.KeyField(), t.ItemField()} {
				path[len(path)-1].child = i
				if err := walk(append(path, step{arr: entries.Field(i), nullable: cf.Nullable}), cf.Type); err != nil {
					return err
				}
			}
			return nil
		case *arrow.ListType:
			l := last.arr.(*array.List)
			return walk(append(path, step{arr: l.ListValues(), nullable: t.ElemField().Nullable}), t.Elem())
		case *arrow.DictionaryType:
			if d := last.arr.(*array.Dictionary); d.Dictionary().NullN() > 0 {
				return fmt.Errorf("%w: a dictionary array with a null in its dictionary", arrow.ErrNotImplemented)
			}
		case arrow.NestedType:
			return fmt.Errorf("%w: nested type %s", arrow.ErrNotImplemented, t)
		}
		l, err := levelsOf(path, mem)
		if err != nil {
			return err
		}
		out = append(out, l)
		return nil
	}
	if err := walk([]step{{arr: arr, nullable: f.Nullable}}, f.Type); err != nil {
		for i := range out {
			out[i].release()
		}
		return nil, err
	}
	return out, nil
}

// levelsOf computes one leaf's levels over every row of path[0].
func levelsOf(path []step, mem memory.Allocator) (leafLevels, error) {
	leaf := path[len(path)-1]
	var maxDef int16
	lists, lastList := 0, -1
	for i, s := range path {
		if s.nullable {
			maxDef++
		}
		if isList(s.arr) {
			maxDef++
			lists++
			lastList = i
		}
	}
	ll := leafLevels{nullable: leaf.nullable && leaf.arr.NullN() > 0}
	if maxDef == 0 {
		leaf.arr.Retain()
		ll.values = leaf.arr
		return ll, nil
	}
	w := levelWriter{path: path, lastList: lastList}
	rows := path[0].arr.Len()
	w.def = make([]int16, 0, rows)
	if lists > 0 {
		w.rep = make([]int16, 0, rows)
	}
	for i := range rows {
		w.visit(0, i, 0, 0, 0)
	}
	ll.def, ll.rep = w.def, w.rep
	if lists == 0 {
		leaf.arr.Retain()
		ll.values = leaf.arr
		return ll, nil
	}
	switch len(w.visited) {
	case 0:
		ll.values = array.NewSlice(leaf.arr, 0, 0)
	case 1:
		ll.values = array.NewSlice(leaf.arr, int64(w.visited[0][0]), int64(w.visited[0][1]))
	default:
		parts := make([]arrow.Array, len(w.visited))
		for i, r := range w.visited {
			parts[i] = array.NewSlice(leaf.arr, int64(r[0]), int64(r[1]))
		}
		v, err := array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return leafLevels{}, err
		}
		ll.values = v
	}
	return ll, nil
}

func isList(arr arrow.Array) bool {
	switch arr.(type) {
	case *array.List, *array.Map:
		return true
	}
	return false
}

// levelWriter walks one leaf's path row by row.
type levelWriter struct {
	path     []step
	lastList int // index in path of the innermost list, -1 for none
	def, rep []int16
	visited  [][2]int // the innermost list's present element ranges
}

func (w *levelWriter) emit(def, rep int16) {
	w.def = append(w.def, def)
	if w.rep != nil {
		w.rep = append(w.rep, rep)
	}
}

// visit writes the levels of entry i of path[k]'s array, reached at
// definition level def with repetition level rep for its first value;
// depth is the number of lists above path[k].
func (w *levelWriter) visit(k, i int, def, rep, depth int16) {
	s := w.path[int(k)]
	if s.nullable {
		if s.arr.IsNull(i) {
			w.emit(def, rep)
			return
		}
		def++
	}
	if k == len(w.path)-1 {
		w.emit(def, rep)
		return
	}
	switch a := s.arr.(type) {
	case *array.List:
		w.visitList(k, a.ValueOffsets, i, def, rep, depth)
	case *array.Map:
		w.visitList(k, a.ValueOffsets, i, def, rep, depth)
	default: // a struct: its fields line up with it
		w.visit(k+1, i, def, rep, depth)
	}
}

func (w *levelWriter) visitList(k int, offsets func(int) (int64, int64), i int, def, rep, depth int16) {
	start, end := offsets(i)
	if start == end {
		w.emit(def, rep) // present and empty
		return
	}
	if k == w.lastList {
		if n := len(w.visited); n > 0 && w.visited[n-1][1] == int(start) {
			w.visited[n-1][1] = int(end)
		} else {
			w.visited = append(w.visited, [2]int{int(start), int(end)})
		}
	}
	for j := start; j < end; j++ {
		r := rep
		if j > start {
			r = depth + 1
		}
		w.visit(k+1, int(j), def+1, r, depth+1)
	}
}
