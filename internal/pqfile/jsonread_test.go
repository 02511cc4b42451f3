package pqfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// jsonLeaves are the leaf types JSONColumns reads.
var jsonLeaves = []arrow.DataType{
	arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int16, arrow.BinaryTypes.Binary,
}

// pqarrowJSON reads columns of b with pqarrow and marshals each row of
// each to JSON with arrow-go, as internal/deltalog did: the reference.
func pqarrowJSON(t *testing.T, b []byte, columns []string) [][]json.RawMessage {
	t.Helper()
	tbl, err := pqarrow.ReadTable(t.Context(), bytes.NewReader(b), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	out := make([][]json.RawMessage, len(columns))
	for ci, name := range columns {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) == 0 {
			continue
		}
		for _, ch := range tbl.Column(idx[0]).Data().Chunks() {
			js, err := json.Marshal(ch)
			if err != nil {
				t.Fatal(err)
			}
			var rows []json.RawMessage
			if err := json.Unmarshal(js, &rows); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if string(r) == "null" {
					r = nil
				}
				out[ci] = append(out[ci], r)
			}
		}
	}
	return out
}

func decode(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// dropKeys removes keys from every object in v, at any depth.
func dropKeys(v any, keys []string) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range keys {
			delete(v, k)
		}
		for k, e := range v {
			v[k] = dropKeys(e, keys)
		}
	case []any:
		for i, e := range v {
			v[i] = dropKeys(e, keys)
		}
	}
	return v
}

// sameJSON checks JSONColumns reads columns of b as pqarrow and arrow-go's
// MarshalJSON give them: the same bytes, or with fields skipped the same
// values without them.
func sameJSON(t *testing.T, b []byte, columns, skip []string) {
	t.Helper()
	want := pqarrowJSON(t, b, columns)
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	got, err := JSONColumns(pf, columns, skip)
	if err != nil {
		t.Fatal(err)
	}
	for ci, name := range columns {
		if len(got[ci]) != len(want[ci]) {
			t.Fatalf("column %s: %d rows, pqarrow %d", name, len(got[ci]), len(want[ci]))
		}
		for r, raw := range got[ci] {
			if len(skip) == 0 && !bytes.Equal(raw, want[ci][r]) {
				t.Fatalf("column %s row %d: read %s, pqarrow %s", name, r, raw, want[ci][r])
			}
			g, w := decode(t, raw), dropKeys(decode(t, want[ci][r]), skip)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("column %s row %d: read %s, pqarrow %v", name, r, raw, w)
			}
		}
	}
}

// TestJSONColumnsAsPqarrow: random columns of structs, lists and maps of
// the types JSONColumns reads, with NULLs at every level, empty lists and
// maps, several row groups and pages, read as pqarrow reads them and
// arrow-go marshals them; with fields skipped, the same without them.
func TestJSONColumnsAsPqarrow(t *testing.T) {
	seeds := uint64(200)
	if raceEnabled {
		seeds = 40 // 200 take minutes under the race detector
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 50))
			sc := randomNestedScenarioOf(r, jsonLeaves)
			defer sc.release()
			b := writePqfile(t, sc, FastSnappy)
			var names []string
			for _, f := range sc.schema.Fields() {
				names = append(names, f.Name)
			}
			sameJSON(t, b, append(names, "absent"), nil)
			sameJSON(t, b, names, []string{"f1"})
		})
	}
}

// TestJSONColumnsListEncodings: the older list forms the format's
// backward-compatibility rules name (a two-level list, a bare repeated
// field, a repeated group named array) read as pqarrow reads them.
func TestJSONColumnsListEncodings(t *testing.T) {
	must := func(n schema.Node, err error) schema.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	i32 := func(name string, rep parquet.Repetition) schema.Node {
		return must(schema.NewPrimitiveNode(name, rep, parquet.Types.Int32, -1, -1))
	}
	// two: optional group two (LIST) { repeated int32 element; }
	two := must(schema.NewGroupNodeLogical("two", parquet.Repetitions.Optional, schema.FieldList{i32("element", parquet.Repetitions.Repeated)}, schema.ListLogicalType{}, -1))
	// bare: repeated int32 bare;
	bare := i32("bare", parquet.Repetitions.Repeated)
	// arr: optional group arr (LIST) { repeated group array { required int32 x; } }
	arrayGroup := must(schema.NewGroupNode("array", parquet.Repetitions.Repeated, schema.FieldList{i32("x", parquet.Repetitions.Required)}, -1))
	arr := must(schema.NewGroupNodeLogical("arr", parquet.Repetitions.Optional, schema.FieldList{arrayGroup}, schema.ListLogicalType{}, -1))
	// Columns by row: two [1 2], NULL, [3]; bare [], [], [4 5 6];
	// arr [{7}], [{8} {9}], NULL.
	cols := []struct {
		vals     []int32
		def, rep []int16
	}{
		{[]int32{1, 2, 3}, []int16{2, 2, 0, 2}, []int16{0, 1, 0, 0}},
		{[]int32{4, 5, 6}, []int16{0, 0, 1, 1, 1}, []int16{0, 0, 0, 1, 1}},
		{[]int32{7, 8, 9}, []int16{2, 2, 2, 0}, []int16{0, 0, 1, 0}},
	}
	b := writeColumns(t, schema.FieldList{two, bare, arr}, func(i int, cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch(cols[i].vals, cols[i].def, cols[i].rep)
		return err
	})
	sameJSON(t, b, []string{"two", "bare", "arr"}, nil)
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	got, err := JSONColumns(pf, []string{"two", "bare", "arr"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%s", got); s != `[[[1,2]  [3]] [[] [] [4,5,6]] [[{"x":7}] [{"x":8},{"x":9}] ]]` {
		t.Fatalf("read %s", s)
	}
}

// TestJSONColumnsRefuses: a leaf of a type JSONColumns does not read is
// an error naming it, unless skipped.
func TestJSONColumnsRefuses(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	s := arrow.NewSchema([]arrow.Field{{Name: "add", Type: arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "stats_parsed", Type: arrow.StructOf(arrow.Field{Name: "t", Type: ts, Nullable: true}), Nullable: true},
	), Nullable: true}}, nil)
	sc := &scenario{schema: s, props: func(extra ...parquet.WriterProperty) *parquet.WriterProperties {
		return parquet.NewWriterProperties(extra...)
	}}
	r := rand.New(rand.NewPCG(1, 2))
	sc.batches = []arrow.RecordBatch{randomNestedBatch(r, s, 20, 0.3)}
	sc.flushBefore = []bool{false}
	defer sc.release()
	b := writePqfile(t, sc, nil)
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if _, err := JSONColumns(pf, []string{"add"}, nil); err == nil || !strings.Contains(err.Error(), "add.stats_parsed.t") {
		t.Fatalf("reading a timestamp: %v, want an error naming add.stats_parsed.t", err)
	}
	sameJSON(t, b, []string{"add"}, []string{"stats_parsed"})
}

// TestJSONColumnsFixtures: the checkpoints and sidecars Spark and
// delta-rs wrote (testdata/delta) read as pqarrow reads them, with the
// typed statistics skipped.
func TestJSONColumnsFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "delta")
	actions := []string{"add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar", "checkpointMetadata", "commitInfo"}
	skip := []string{"stats_parsed", "partitionValues_parsed"}
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") || !strings.Contains(p, "_delta_log") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		t.Run(strings.TrimPrefix(p, root), func(t *testing.T) { sameJSON(t, b, actions, skip) })
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 15 {
		t.Fatalf("read %d fixture checkpoints; testdata/delta has more", n)
	}
}

// TestMapEntriesByPosition: a map's key and value are its key_value
// group's first and second fields, whatever the file names them
// (parquet-format LogicalTypes.md, Maps, backward-compatibility rules:
// "key and value can be identified by their position"). delta-rs named
// them keys and values in checkpoints before delta-io/delta-rs#2182;
// read by name, partitionValues came out as {"": ""}.
func TestMapEntriesByPosition(t *testing.T) {
	for _, names := range [][2]string{{"key", "value"}, {"keys", "values"}, {"str", "num"}} {
		kv, err := schema.NewGroupNode("entries", parquet.Repetitions.Repeated, schema.FieldList{
			schema.MustPrimitive(schema.NewPrimitiveNodeLogical(names[0], parquet.Repetitions.Required, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)),
			schema.MustPrimitive(schema.NewPrimitiveNodeLogical(names[1], parquet.Repetitions.Optional, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)),
		}, -1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.NewGroupNodeLogical("partitionValues", parquet.Repetitions.Optional, schema.FieldList{kv}, schema.MapLogicalType{}, -1)
		if err != nil {
			t.Fatal(err)
		}
		// Rows: {region: west, day: NULL}, NULL, {}.
		rep := []int16{0, 1, 0, 0}
		cols := []struct {
			vals []parquet.ByteArray
			def  []int16
		}{
			{[]parquet.ByteArray{parquet.ByteArray("region"), parquet.ByteArray("day")}, []int16{2, 2, 0, 1}},
			{[]parquet.ByteArray{parquet.ByteArray("west")}, []int16{3, 2, 0, 1}},
		}
		b := writeColumns(t, schema.FieldList{m}, func(i int, cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(cols[i].vals, cols[i].def, rep)
			return err
		})
		pf, err := Open(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		got, err := JSONColumns(pf, []string{"partitionValues"}, nil)
		pf.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`[{"key":"region","value":"west"},{"key":"day","value":null}]`, "", "[]"}
		for r, g := range got[0] {
			if string(g) != want[r] {
				t.Errorf("fields %v, row %d: read %s, want %s", names, r, g, want[r])
			}
		}
	}
}

// TestListOfListsRule3: a repeated LIST group whose one field is repeated
// is itself the element: List<List<Integer>> in LogicalTypes.md's example,
// optional group my_list (LIST) { repeated group array (LIST) { repeated
// int32 array; } } (Lists, backward-compatibility rule 3, which comes
// before the rule for a group named array).
func TestListOfListsRule3(t *testing.T) {
	leaf, err := schema.NewPrimitiveNode("array", parquet.Repetitions.Repeated, parquet.Types.Int32, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := schema.NewGroupNodeLogical("array", parquet.Repetitions.Repeated, schema.FieldList{leaf}, schema.ListLogicalType{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := schema.NewGroupNodeLogical("my_list", parquet.Repetitions.Optional, schema.FieldList{inner}, schema.ListLogicalType{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	// Rows: [[1, 2], [3]], NULL, [], [[]].
	b := writeLowLevel(t, outer, func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch([]int32{1, 2, 3}, []int16{3, 3, 3, 0, 1, 2}, []int16{0, 2, 1, 0, 0, 0})
		return err
	})
	pf, err := Open(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	got, err := JSONColumns(pf, []string{"my_list"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[[1,2],[3]]", "", "[]", "[[]]"}
	for r, g := range got[0] {
		if string(g) != want[r] {
			t.Errorf("row %d: read %s, want %s", r, g, want[r])
		}
	}
}
