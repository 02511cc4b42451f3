package deltalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Field is one column of a Delta table schema.
type Field struct {
	// Name is the column name.
	Name string `json:"name"`
	// Type is the Delta type: "string", "long", "integer", "short",
	// "byte", "double", "float", "boolean", "binary", "date",
	// "timestamp", "decimal(p,s)"; nested types keep their JSON text.
	Type json.RawMessage `json:"type"`
	// Nullable reports whether the column may hold NULL.
	Nullable bool `json:"nullable"`
	// Metadata is the column metadata, kept as written.
	Metadata map[string]any `json:"metadata"`
}

// TypeName returns the Delta type of a primitive column ("long",
// "decimal(18,4)"), or the JSON text of a nested one.
func (f Field) TypeName() string {
	var s string
	if json.Unmarshal(f.Type, &s) == nil {
		return s
	}
	return string(f.Type)
}

// Schema is a Delta table schema (metaData.schemaString).
type Schema struct {
	// Fields are the top-level columns in table order.
	Fields []Field `json:"fields"`
}

type schemaJSON struct {
	Type   string  `json:"type"`
	Fields []Field `json:"fields"`
}

func parseSchema(s string) (Schema, error) {
	var js schemaJSON
	if err := json.Unmarshal([]byte(s), &js); err != nil {
		return Schema{}, fmt.Errorf("delta: schemaString: %w", err)
	}
	return Schema{Fields: js.Fields}, nil
}

// String implements fmt.Stringer.
func (s Schema) String() string {
	fs := s.Fields
	if fs == nil {
		fs = []Field{}
	}
	for i := range fs {
		if fs[i].Metadata == nil {
			fs[i].Metadata = map[string]any{}
		}
	}
	b, _ := json.Marshal(schemaJSON{Type: "struct", Fields: fs})
	return string(b)
}

// Field returns the column named name (exactly) and its index.
func (s Schema) Field(name string) (Field, int, bool) {
	for i, f := range s.Fields {
		if f.Name == name {
			return f, i, true
		}
	}
	return Field{}, -1, false
}

// DeltaType returns the Delta type of an Arrow type, or an error for types
// a bronze table cannot hold.
func DeltaType(t arrow.DataType) (string, error) {
	switch tt := t.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return "string", nil
	case *arrow.Int8Type:
		return "byte", nil
	case *arrow.Int16Type:
		return "short", nil
	case *arrow.Int32Type:
		return "integer", nil
	case *arrow.Int64Type:
		return "long", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.BooleanType:
		return "boolean", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return "binary", nil
	case *arrow.Date32Type:
		return "date", nil
	case *arrow.TimestampType:
		if tt.Unit != arrow.Microsecond {
			return "", fmt.Errorf("timestamp unit %s: Delta timestamps are microseconds (cast to timestamp[us, tz=UTC])", tt.Unit)
		}
		if tt.TimeZone == "" {
			return "timestamp_ntz", nil // the timestampNtz feature
		}
		return "timestamp", nil
	case *arrow.Decimal128Type:
		if tt.Precision < 1 || tt.Precision > 38 || tt.Scale < 0 || tt.Scale > tt.Precision {
			return "", fmt.Errorf("decimal(%d,%d) is outside Delta's decimal range", tt.Precision, tt.Scale)
		}
		return fmt.Sprintf("decimal(%d,%d)", tt.Precision, tt.Scale), nil
	default:
		return "", fmt.Errorf("arrow type %s has no Delta mapping in a bronze table", t)
	}
}

// ArrowType returns the Arrow type a Delta primitive type reads back as.
func ArrowType(delta string) (arrow.DataType, error) {
	switch delta {
	case "string":
		return arrow.BinaryTypes.String, nil
	case "byte":
		return arrow.PrimitiveTypes.Int8, nil
	case "short":
		return arrow.PrimitiveTypes.Int16, nil
	case "integer":
		return arrow.PrimitiveTypes.Int32, nil
	case "long":
		return arrow.PrimitiveTypes.Int64, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil
	case "boolean":
		return arrow.FixedWidthTypes.Boolean, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil
	case "timestamp":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "timestamp_ntz":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	}
	if strings.HasPrefix(delta, "decimal(") && strings.HasSuffix(delta, ")") {
		ps := strings.Split(strings.TrimSuffix(strings.TrimPrefix(delta, "decimal("), ")"), ",")
		if len(ps) == 2 {
			p, err1 := strconv.Atoi(strings.TrimSpace(ps[0]))
			s, err2 := strconv.Atoi(strings.TrimSpace(ps[1]))
			if err1 == nil && err2 == nil {
				return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(s)}, nil
			}
		}
	}
	return nil, fmt.Errorf("delta type %s is not supported", delta)
}

// ArrowSchema returns the Arrow schema the table's rows read back in, as
// sink/delta's Table.ReadAll returns them.
func (s Schema) ArrowSchema() (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(s.Fields))
	for _, f := range s.Fields {
		t, err := ArrowType(f.TypeName())
		if err != nil {
			return nil, &SchemaError{Column: f.Name, Reason: err.Error()}
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable})
	}
	return arrow.NewSchema(fields, nil), nil
}

// SchemaFromArrow converts an Arrow schema to a Delta schema, naming the
// first column with no mapping.
func SchemaFromArrow(as *arrow.Schema) (Schema, error) {
	var s Schema
	seen := map[string]string{}
	for _, f := range as.Fields() {
		if prev, ok := seen[strings.ToLower(f.Name)]; ok {
			return Schema{}, &SchemaError{Column: f.Name, Reason: fmt.Sprintf("equals column %q ignoring case", prev)}
		}
		seen[strings.ToLower(f.Name)] = f.Name
		dt, err := DeltaType(f.Type)
		if err != nil {
			return Schema{}, &SchemaError{Column: f.Name, Reason: err.Error()}
		}
		tj, _ := json.Marshal(dt)
		s.Fields = append(s.Fields, Field{Name: f.Name, Type: tj, Nullable: f.Nullable, Metadata: map[string]any{}})
	}
	return s, nil
}

// Evolve checks that records in schema rec can be written to a table with
// schema table. It returns the table schema after the write: table itself
// when rec adds nothing (changed false), or table plus rec's extra columns,
// which must be nullable (changed true). Records may lack a nullable
// column that is not one of partitions: their files read it as NULL, as
// the files written before a column was added do. Anything else is a
// *SchemaError naming the column.
//
// With widen (the table's typeWidening feature is active: State.TypeWidening),
// a column the records bring wider than the table's, as Widens allows,
// widens the table's column instead: its new type, and the change
// recorded in the field's delta.typeChanges (PROTOCOL.md "Type Widening",
// "Type Change Metadata"); a partition column is not widened.
func Evolve(table Schema, rec *arrow.Schema, widen bool, partitions []string) (Schema, bool, error) {
	incoming, err := SchemaFromArrow(rec)
	if err != nil {
		return Schema{}, false, err
	}
	out := Schema{Fields: append([]Field(nil), table.Fields...)}
	changed := false
	partition := func(name string) bool {
		return slices.ContainsFunc(partitions, func(p string) bool { return strings.EqualFold(p, name) })
	}
	// Every problem is named, not only the first: a user fixes them all
	// at once. errors.As finds the first *SchemaError.
	var problems []error
	byLower := map[string]Field{}
	for _, f := range incoming.Fields {
		byLower[strings.ToLower(f.Name)] = f
	}
	tableLower := map[string]bool{}
	for i, tf := range table.Fields {
		tableLower[strings.ToLower(tf.Name)] = true
		inf, ok := byLower[strings.ToLower(tf.Name)]
		switch {
		case !ok && tf.Nullable && !partition(tf.Name):
			// Read as NULL: a capture instance that does not capture a
			// column of the table (a newer one, after the column was
			// dropped) writes none.
		case !ok:
			problems = append(problems, &SchemaError{Column: tf.Name, Reason: "the table has this column and the records do not (a partition column, or NOT NULL)"})
		case inf.Name != tf.Name:
			problems = append(problems, &SchemaError{Column: inf.Name, Reason: fmt.Sprintf("differs in case from the table's column %q", tf.Name)})
		case inf.TypeName() == tf.TypeName() || inf.TypeName() == "timestamp" && tf.TypeName() == "timestamp_ntz" || Widens(inf.TypeName(), tf.TypeName()):
		case widen && Widens(tf.TypeName(), inf.TypeName()) && !partition(tf.Name):
			out.Fields[i] = widened(tf, inf)
			changed = true
		case Widens(tf.TypeName(), inf.TypeName()):
			problems = append(problems, &SchemaError{Column: tf.Name, Reason: fmt.Sprintf("the table has type %s, the records the wider %s: the table widens columns only with type widening (ALTER TABLE ... SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')), and never a partition column", tf.TypeName(), inf.TypeName())})
		default:
			problems = append(problems, &SchemaError{Column: tf.Name, Reason: fmt.Sprintf("the table has type %s, the records %s", tf.TypeName(), inf.TypeName())})
		}
	}
	for _, f := range incoming.Fields {
		if tableLower[strings.ToLower(f.Name)] {
			continue
		}
		if !f.Nullable {
			problems = append(problems, &SchemaError{Column: f.Name, Reason: "is new to the table and not nullable (only nullable columns can be added)"})
			continue
		}
		out.Fields = append(out.Fields, f)
		changed = true
	}
	if len(problems) > 0 {
		return Schema{}, false, errors.Join(problems...)
	}
	return out, changed, nil
}

// widened is the table's field tf widened to the records' type: tf with
// inf's type and the change appended to its delta.typeChanges.
func widened(tf, inf Field) Field {
	md := make(map[string]any, len(tf.Metadata)+1)
	for k, v := range tf.Metadata {
		md[k] = v
	}
	changes, _ := md["delta.typeChanges"].([]any)
	md["delta.typeChanges"] = append(slices.Clone(changes), map[string]any{"fromType": tf.TypeName(), "toType": inf.TypeName()})
	tf.Type, tf.Metadata = inf.Type, md
	return tf
}

// Widens reports whether a column of Delta type from can be written into
// one of type to without loss, as the typeWidening feature Widens columns
// (PROTOCOL.md, "Type Widening"): integers to wider integers, byte, short
// and int to double, float to double, date to timestamp_ntz, an integer
// to a decimal with at least 10 integer digits (20 for long), a decimal
// to one with at least its integer digits and scale. The writer casts
// such columns.
func Widens(from, to string) bool {
	ints := []string{"byte", "short", "integer", "long"}
	fi, ti := slices.Index(ints, from), slices.Index(ints, to)
	var p2, s2 int
	toDecimal := false
	if _, err := fmt.Sscanf(to, "decimal(%d,%d)", &p2, &s2); err == nil {
		toDecimal = true
	}
	switch {
	case fi >= 0 && ti >= 0:
		return fi < ti
	case from == "float" && to == "double", from == "date" && to == "timestamp_ntz":
		return true
	case fi >= 0 && fi <= 2 && to == "double":
		return true
	case fi >= 0 && toDecimal:
		return p2-s2 >= map[bool]int{false: 10, true: 20}[from == "long"]
	}
	var p1, s1 int
	if _, err := fmt.Sscanf(from, "decimal(%d,%d)", &p1, &s1); err != nil || !toDecimal {
		return false
	}
	return s2 >= s1 && p2-s2 >= p1-s1 && (p2 != p1 || s2 != s1)
}
