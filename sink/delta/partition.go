package delta

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// Partitioned tables (PROTOCOL.md, "Partition Value Serialization" and
// the add action's partitionValues). A partition column is not stored in
// the data files: each add action carries its value as a string (an empty
// string or null is NULL), keyed by the column's physical name, and the
// file lives under <column>=<value>/ (Hive's escaping; NULL is
// __HIVE_DEFAULT_PARTITION__), as Spark writes. The values this package
// writes and reads: string, the integer types, date, timestamp (ISO 8601
// in UTC, as the protocol recommends), timestamp_ntz, boolean and
// decimal. A string partition column turns an empty string into NULL, as
// it does in Spark.

// hiveNull is the directory value Spark and Hive give a NULL partition.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// partitionColumn is one partition column of a table.
type partitionColumn struct {
	name     string // display name
	key      string // partitionValues key (the physical name when mapped)
	typ      string // Delta type
	arrowTyp arrow.DataType
}

// withoutPartitionColumns returns schema without the fields of cols (by
// their partitionValues key): what a data file of the table holds.
func withoutPartitionColumns(schema *arrow.Schema, cols []partitionColumn) *arrow.Schema {
	var keep []arrow.Field
	for _, f := range schema.Fields() {
		if !slices.ContainsFunc(cols, func(c partitionColumn) bool { return c.key == f.Name }) {
			keep = append(keep, f)
		}
	}
	md := schema.Metadata()
	return arrow.NewSchema(keep, &md)
}

// partitionColumns returns s's partition columns, refusing types this
// package does not serialize.
func partitionColumns(s *deltalog.State) ([]partitionColumn, error) {
	if s.Meta == nil || len(s.Meta.PartitionColumns) == 0 {
		return nil, nil
	}
	cm, err := s.Mapping()
	if err != nil {
		return nil, err
	}
	var out []partitionColumn
	for _, name := range s.Meta.PartitionColumns {
		var f *deltalog.Field
		for i := range s.Schema.Fields {
			if s.Schema.Fields[i].Name == name {
				f = &s.Schema.Fields[i]
			}
		}
		if f == nil {
			return nil, fmt.Errorf("partition column %q is not in the schema", name)
		}
		typ := f.TypeName()
		at, err := deltalog.ArrowType(typ)
		if err != nil || typ == "float" || typ == "double" || typ == "binary" {
			return nil, fmt.Errorf("partition column %q has type %s, which this package does not serialize", name, typ)
		}
		out = append(out, partitionColumn{name: name, key: cm.FileName(name), typ: typ, arrowTyp: at})
	}
	return out, nil
}

// partitionValue serializes row i of a (a column of type c.typ, or a UTC
// timestamp going into a timestamp_ntz column); ok is false for NULL.
func (c partitionColumn) value(a arrow.Array, i int) (string, bool) {
	if a.IsNull(i) {
		return "", false
	}
	switch v := a.(type) {
	case *array.String:
		return v.Value(i), v.Value(i) != ""
	case *array.Int8:
		return strconv.FormatInt(int64(v.Value(i)), 10), true
	case *array.Int16:
		return strconv.FormatInt(int64(v.Value(i)), 10), true
	case *array.Int32:
		return strconv.FormatInt(int64(v.Value(i)), 10), true
	case *array.Int64:
		return strconv.FormatInt(v.Value(i), 10), true
	case *array.Boolean:
		return strconv.FormatBool(v.Value(i)), true
	case *array.Date32:
		return v.Value(i).FormattedString(), true
	case *array.Timestamp:
		t := time.UnixMicro(int64(v.Value(i))).UTC()
		if c.typ == "timestamp_ntz" {
			return t.Format("2006-01-02 15:04:05.000000"), true
		}
		return t.Format("2006-01-02T15:04:05.000000Z"), true
	case *array.Decimal128:
		return v.Value(i).ToString(v.DataType().(*arrow.Decimal128Type).Scale), true
	}
	return a.ValueStr(i), true
}

// column builds n rows of the value s (ok false: NULL) in c's type.
func (c partitionColumn) column(s string, ok bool, n int) (arrow.Array, error) {
	if !ok || s == "" {
		return array.MakeArrayOfNull(memory.DefaultAllocator, c.arrowTyp, n), nil
	}
	b := array.NewBuilder(memory.DefaultAllocator, c.arrowTyp)
	defer b.Release()
	bad := func(err error) (arrow.Array, error) {
		return nil, fmt.Errorf("partition column %s: value %q is not a %s: %v", c.name, s, c.typ, err)
	}
	for range n {
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(s)
		case *array.Int8Builder, *array.Int16Builder, *array.Int32Builder, *array.Int64Builder:
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return bad(err)
			}
			switch bb := bb.(type) {
			case *array.Int8Builder:
				bb.Append(int8(v))
			case *array.Int16Builder:
				bb.Append(int16(v))
			case *array.Int32Builder:
				bb.Append(int32(v))
			case *array.Int64Builder:
				bb.Append(v)
			}
		case *array.BooleanBuilder:
			v, err := strconv.ParseBool(s)
			if err != nil {
				return bad(err)
			}
			bb.Append(v)
		case *array.Date32Builder:
			t, err := time.Parse("2006-01-02", s)
			if err != nil {
				return bad(err)
			}
			bb.Append(arrow.Date32FromTime(t))
		case *array.TimestampBuilder:
			t, err := parsePartitionTime(s)
			if err != nil {
				return bad(err)
			}
			bb.Append(arrow.Timestamp(t.UnixMicro()))
		case *array.Decimal128Builder:
			dt := c.arrowTyp.(*arrow.Decimal128Type)
			v, err := decimal128.FromString(s, dt.Precision, dt.Scale)
			if err != nil {
				return bad(err)
			}
			bb.Append(v)
		default:
			return bad(fmt.Errorf("unsupported"))
		}
	}
	return b.NewArray(), nil
}

// parsePartitionTime reads the protocol's timestamp forms: ISO 8601 in
// UTC, or "yyyy-MM-dd HH:mm:ss[.ffffff]" (taken as UTC).
func parsePartitionTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp")
}

// hiveEscape escapes a partition directory's name or value as Hive and
// Spark do (FileUtils.escapePathName): control characters and
// "#%'*/:=?\{[]^ become %XX.
func hiveEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// partitionDir is the folder of a file with these values, ending in "/".
func partitionDir(cols []partitionColumn, values deltalog.StringMap) string {
	var b strings.Builder
	for _, c := range cols {
		v, ok := values[c.key]
		if !ok || v == "" {
			v = hiveNull
		} else {
			v = hiveEscape(v)
		}
		b.WriteString(hiveEscape(c.key) + "=" + v + "/")
	}
	return b.String()
}

// logPath is an object key as an add action's path: a URI path (RFC
// 2396), so "%" and spaces are escaped and "/" is not.
func logPath(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}

// splitByPartition groups rec's rows by their partition values (in the
// order each group first appears) and returns each group's values and its
// rows without the partition columns, in schema (rec's schema less them).
func splitByPartition(ctx context.Context, rec arrow.RecordBatch, cols []partitionColumn, schema *arrow.Schema) ([]deltalog.StringMap, []arrow.RecordBatch, error) {
	idx := make([]int, len(cols))
	for i, c := range cols {
		f := rec.Schema().FieldIndices(c.key) // records in the files' names
		if len(f) != 1 {
			return nil, nil, fmt.Errorf("the records lack partition column %s", c.name)
		}
		idx[i] = f[0]
	}
	groups := map[string]int{}
	var values []deltalog.StringMap
	var rows [][]int64
	var key strings.Builder
	for r := 0; r < int(rec.NumRows()); r++ {
		key.Reset()
		vals := deltalog.StringMap{}
		for i, c := range cols {
			// NULL is "" (PROTOCOL.md: "An empty string for any type
			// translates to a null partition value"): every file names every
			// partition column, as the protocol's consistency rule asks.
			v, ok := c.value(rec.Column(idx[i]), r)
			vals[c.key] = v
			if ok {
				key.WriteString(strconv.Quote(v))
			}
			key.WriteByte(0)
		}
		g, ok := groups[key.String()]
		if !ok {
			g = len(values)
			groups[key.String()] = g
			values = append(values, vals)
			rows = append(rows, nil)
		}
		rows[g] = append(rows[g], int64(r))
	}
	keep := make([]int, 0, rec.NumCols())
	for j := 0; j < int(rec.NumCols()); j++ {
		part := false
		for _, i := range idx {
			part = part || i == j
		}
		if !part {
			keep = append(keep, j)
		}
	}
	out := make([]arrow.RecordBatch, 0, len(values))
	release := func() {
		for _, r := range out {
			r.Release()
		}
	}
	for _, rs := range rows {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		ib.AppendValues(rs, nil)
		take := ib.NewInt64Array()
		ib.Release()
		cols := make([]arrow.Array, len(keep))
		for k, j := range keep {
			c, err := compute.TakeArray(ctx, rec.Column(j), take)
			if err != nil {
				take.Release()
				for _, c := range cols[:k] {
					c.Release()
				}
				release()
				return nil, nil, err
			}
			cols[k] = c
		}
		take.Release()
		out = append(out, array.NewRecordBatch(schema, cols, int64(len(rs))))
		for _, c := range cols {
			c.Release()
		}
	}
	return values, out, nil
}
