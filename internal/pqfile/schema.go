package pqfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// The Parquet schema of an Arrow schema, and the Arrow types of a Parquet
// file's columns, are the ones arrow-go's pqarrow gives with its default
// properties (arrow-go v18.9.0 parquet/pqarrow/schema.go: fieldToNode and
// getParquetType one way, getArrowType and applyOriginalMetadata the
// other), so files and batches stay what they were when pqarrow wrote and
// read them. The tests compare the two on every type.

// FieldIDKey is the Arrow field metadata key holding a column's Parquet
// field id, as pqarrow names it.
const FieldIDKey = "PARQUET:field_id"

// arrowSchemaKey is the footer key under which Arrow writers store the
// Arrow schema of the file: the base64 of an Arrow IPC stream holding
// only the schema message (pqarrow's getOriginSchema; arrow-go v18.9.0
// arrow/flight/record_batch_reader.go, DeserializeSchema, reads it as a
// stream of no batches).
const arrowSchemaKey = "ARROW:schema"

// parquetSchema converts s to the Parquet schema pqarrow.ToParquet makes of
// it with its default Arrow properties.
func parquetSchema(s *arrow.Schema, props *parquet.WriterProperties) (*schema.Schema, error) {
	nodes := make(schema.FieldList, 0, s.NumFields())
	for _, f := range s.Fields() {
		n, err := parquetNode(f, props)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		nodes = append(nodes, n)
	}
	root, err := schema.NewGroupNode(props.RootName(), props.RootRepetition(), nodes, -1)
	if err != nil {
		return nil, err
	}
	return schema.NewSchema(root), nil
}

func repetition(nullable bool) parquet.Repetition {
	if nullable {
		return parquet.Repetitions.Optional
	}
	return parquet.Repetitions.Required
}

// fieldID is the field id in an Arrow field's metadata, -1 for none (or
// one that is not a non-negative 32-bit integer).
func fieldID(md arrow.Metadata) int32 {
	v, ok := md.GetValue(FieldIDKey)
	if !ok {
		return -1
	}
	id, err := strconv.ParseInt(v, 10, 32)
	if err != nil || id < 0 {
		return -1
	}
	return int32(id)
}

// parquetNode is the Parquet node of field f: a group for a struct, a
// three-level LIST or MAP group for a list or map, a primitive otherwise.
// List and map children are renamed element, key and value by the schema
// package's ListOfWithName and MapOf.
func parquetNode(f arrow.Field, props *parquet.WriterProperties) (schema.Node, error) {
	rep, id := repetition(f.Nullable), fieldID(f.Metadata)
	switch t := f.Type.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return nil, errors.New("a struct with no fields has no Parquet form")
		}
		children := make(schema.FieldList, t.NumFields())
		for i, c := range t.Fields() {
			n, err := parquetNode(c, props)
			if err != nil {
				return nil, err
			}
			children[i] = n
		}
		return schema.NewGroupNode(f.Name, rep, children, id)
	case *arrow.ListType:
		elem, err := parquetNode(t.ElemField(), props)
		if err != nil {
			return nil, err
		}
		return schema.ListOfWithName(f.Name, elem, rep, id)
	case *arrow.MapType:
		key, err := parquetNode(t.KeyField(), props)
		if err != nil {
			return nil, err
		}
		value, err := parquetNode(t.ItemField(), props)
		if err != nil {
			return nil, err
		}
		return schema.MapOf(f.Name, key, value, rep, id)
	case *arrow.DictionaryType:
		// A dictionary is an encoding in Parquet, not a type.
		if _, ok := t.ValueType.(arrow.NestedType); ok {
			return nil, fmt.Errorf("dictionary of nested type %s is not supported", t.ValueType)
		}
		return parquetNode(arrow.Field{Name: f.Name, Type: t.ValueType, Nullable: f.Nullable, Metadata: f.Metadata}, props)
	}
	physical, logical, length, err := parquetType(f.Type, props)
	if err != nil {
		return nil, err
	}
	return schema.NewPrimitiveNodeLogical(f.Name, rep, logical, physical, length, id)
}

// parquetType is the physical type, logical type and fixed length (-1:
// none) of a primitive Arrow type.
func parquetType(t arrow.DataType, props *parquet.WriterProperties) (parquet.Type, schema.LogicalType, int, error) {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return parquet.Types.Boolean, schema.NoLogicalType{}, -1, nil
	case *arrow.Int8Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(8, true), -1, nil
	case *arrow.Int16Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(16, true), -1, nil
	case *arrow.Int32Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(32, true), -1, nil
	case *arrow.Int64Type:
		return parquet.Types.Int64, schema.NewIntLogicalType(64, true), -1, nil
	case *arrow.Uint8Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(8, false), -1, nil
	case *arrow.Uint16Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(16, false), -1, nil
	case *arrow.Uint32Type:
		return parquet.Types.Int32, schema.NewIntLogicalType(32, false), -1, nil
	case *arrow.Uint64Type:
		return parquet.Types.Int64, schema.NewIntLogicalType(64, false), -1, nil
	case *arrow.Float32Type:
		return parquet.Types.Float, schema.NoLogicalType{}, -1, nil
	case *arrow.Float64Type:
		return parquet.Types.Double, schema.NoLogicalType{}, -1, nil
	case *arrow.StringType, *arrow.LargeStringType:
		return parquet.Types.ByteArray, schema.StringLogicalType{}, -1, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return parquet.Types.ByteArray, schema.NoLogicalType{}, -1, nil
	case *arrow.FixedSizeBinaryType:
		return parquet.Types.FixedLenByteArray, schema.NoLogicalType{}, t.ByteWidth, nil
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 {
			return 0, nil, 0, fmt.Errorf("decimal precision %d is outside 1..38", t.Precision)
		}
		logical := schema.NewDecimalLogicalType(t.Precision, t.Scale)
		switch {
		case !props.StoreDecimalAsInteger() || t.Precision > 18:
			return parquet.Types.FixedLenByteArray, logical, int(decimalSize(t.Precision)), nil
		case t.Precision > 9:
			return parquet.Types.Int64, logical, -1, nil
		default:
			return parquet.Types.Int32, logical, -1, nil
		}
	case *arrow.Date32Type:
		return parquet.Types.Int32, schema.DateLogicalType{}, -1, nil
	case *arrow.TimestampType:
		unit, err := timestampUnit(t, props)
		if err != nil {
			return 0, nil, 0, err
		}
		// The converted type TIMESTAMP_* is set too, for readers that know
		// only converted types (pqarrow's arrowTimestampToLogical).
		return parquet.Types.Int64, schema.NewTimestampLogicalTypeForce(t.TimeZone != "", unit), -1, nil
	case *arrow.Time32Type:
		if t.Unit != arrow.Millisecond {
			return 0, nil, 0, fmt.Errorf("%s is not supported (only time32[ms])", t)
		}
		return parquet.Types.Int32, schema.NewTimeLogicalType(false, schema.TimeUnitMillis), -1, nil
	case *arrow.Time64Type:
		unit := schema.TimeUnitMicros
		if t.Unit == arrow.Nanosecond {
			unit = schema.TimeUnitNanos
		}
		return parquet.Types.Int64, schema.NewTimeLogicalType(false, unit), -1, nil
	}
	return 0, nil, 0, fmt.Errorf("%w: type %s", arrow.ErrNotImplemented, t)
}

// timestampUnit is the Parquet unit of an Arrow timestamp written without
// conversion. pqarrow converts seconds to milliseconds, and nanoseconds to
// microseconds in files of format 1.0 or 2.4; pqfile writes neither.
func timestampUnit(t *arrow.TimestampType, props *parquet.WriterProperties) (schema.TimeUnitType, error) {
	switch t.Unit {
	case arrow.Millisecond:
		return schema.TimeUnitMillis, nil
	case arrow.Microsecond:
		return schema.TimeUnitMicros, nil
	case arrow.Nanosecond:
		if v := props.Version(); v == parquet.V1_0 || v == parquet.V2_4 {
			return 0, fmt.Errorf("%s needs Parquet format 2.6 (this file is %s)", t, v)
		}
		return schema.TimeUnitNanos, nil
	}
	return 0, fmt.Errorf("%s is not supported (Parquet has no seconds)", t)
}

// decimalSize is the fewest bytes holding every decimal of precision p in
// two's complement: the smallest n with 10^p <= 2^(8n-1), the table
// pqarrow's DecimalSize lists (it comes from Apache Impala).
func decimalSize(p int32) int32 {
	ten := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	for n := int32(1); ; n++ {
		if ten.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(8*n-1))) <= 0 {
			return n
		}
	}
}

// fileField is one top-level column of a file as a Reader sees it.
type fileField struct {
	field arrow.Field
	// col is the Parquet leaf column of a primitive top-level field, -1
	// for a group or a repeated field.
	col int
	// why, when set, says why Reader cannot read the column.
	why string
}

// fileFields converts a file's top-level columns to Arrow fields as
// pqarrow.FromParquet does: types from the Parquet types, refined by the
// Arrow schema the writer stored in the footer, if any; every field's
// metadata names its field id (-1 when it has none).
func fileFields(sc *schema.Schema, kv metadata.KeyValueMetadata) ([]fileField, *arrow.Schema, error) {
	origin, err := storedArrowSchema(kv)
	if err != nil {
		return nil, nil, fmt.Errorf("the footer's %s: %w", arrowSchemaKey, err)
	}
	root := sc.Root()
	if origin != nil && origin.NumFields() != root.NumFields() {
		origin = nil // not this file's schema: pqarrow ignores it too
	}
	out := make([]fileField, root.NumFields())
	for i := range out {
		n := root.Field(i)
		ff := fileField{col: -1, why: "a nested or repeated column", field: arrow.Field{Name: n.Name(), Nullable: n.RepetitionType() == parquet.Repetitions.Optional,
			Metadata: arrow.NewMetadata([]string{FieldIDKey}, []string{strconv.Itoa(int(n.FieldID()))})}}
		if p, ok := n.(*schema.PrimitiveNode); ok && n.RepetitionType() != parquet.Repetitions.Repeated {
			ff.col = sc.ColumnIndexByNode(p)
			if t, err := arrowType(p); err != nil {
				ff.why = err.Error()
			} else {
				ff.field.Type, ff.why = t, ""
			}
		}
		if origin != nil {
			applyOrigin(origin.Field(i), &ff)
		}
		out[i] = ff
	}
	return out, origin, nil
}

// storedArrowSchema decodes the Arrow schema in a file's footer, nil when
// there is none. The value is base64, padded or not (pqarrow accepts
// both: getOriginSchema).
func storedArrowSchema(kv metadata.KeyValueMetadata) (*arrow.Schema, error) {
	v := kv.FindValue(arrowSchemaKey)
	if v == nil {
		return nil, nil
	}
	var raw []byte
	var err error
	if len(*v)%4 == 0 {
		raw, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(raw) == 0 || err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err != nil {
		return nil, err
	}
	if err := checkSchemaMessage(raw); err != nil {
		return nil, err
	}
	rdr, err := ipc.NewReader(bytes.NewReader(raw), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	return rdr.Schema(), nil
}

// applyOrigin refines a primitive field's type with the type the writer's
// Arrow schema gave it, where Parquet cannot tell (pqarrow's
// applyOriginalStorageMetadata, the cases a flat column meets): a
// timestamp's own zone, large strings and binaries, dictionaries of
// strings and binaries. It merges the stored field metadata under the
// field id.
func applyOrigin(origin arrow.Field, ff *fileField) {
	inferred := ff.field.Type
	if ff.why == "" {
		switch ot := origin.Type.(type) {
		case *arrow.TimestampType:
			if it, ok := inferred.(*arrow.TimestampType); ok && it.Unit == ot.Unit && it.TimeZone == "UTC" && ot.TimeZone != "" {
				ff.field.Type = ot
			}
		case *arrow.LargeStringType, *arrow.LargeBinaryType:
			ff.field.Type = ot
		case *arrow.DictionaryType:
			if _, dict := inferred.(*arrow.DictionaryType); !dict && arrow.IsBinaryLike(inferred.ID()) {
				ff.field.Type = &arrow.DictionaryType{IndexType: ot.IndexType, ValueType: inferred, Ordered: ot.Ordered}
			}
		case *arrow.Decimal256Type, *arrow.DurationType, arrow.ExtensionType:
			// pqarrow reads these as the stored type; pqfile reads none
			// of them.
			if _, isDec := ot.(*arrow.Decimal256Type); !isDec || inferred.ID() == arrow.DECIMAL128 {
				ff.why = fmt.Sprintf("the writer's Arrow type %s", ot)
			}
		}
	}
	if origin.HasMetadata() {
		merged := make(map[string]string)
		for i, k := range origin.Metadata.Keys() {
			merged[k] = origin.Metadata.Values()[i]
		}
		for i, k := range ff.field.Metadata.Keys() {
			merged[k] = ff.field.Metadata.Values()[i]
		}
		ff.field.Metadata = arrow.MetadataFrom(merged)
	}
}

// arrowType is the Arrow type pqarrow reads a primitive column as
// (getArrowType). Geometry, geography, UUID and float16 columns, which
// pqarrow reads as extension or float16 arrays, are refused.
func arrowType(n *schema.PrimitiveNode) (arrow.DataType, error) {
	logical := n.LogicalType()
	if !logical.IsValid() || logical.Equals(schema.NullLogicalType{}) {
		return arrow.Null, nil
	}
	cannot := func() (arrow.DataType, error) {
		return nil, fmt.Errorf("%w: %s cannot annotate %s", arrow.ErrNotImplemented, logical, n.PhysicalType())
	}
	switch n.PhysicalType() {
	case parquet.Types.Boolean:
		return arrow.FixedWidthTypes.Boolean, nil
	case parquet.Types.Int32:
		switch lt := logical.(type) {
		case schema.NoLogicalType:
			return arrow.PrimitiveTypes.Int32, nil
		case schema.IntLogicalType:
			return arrowInt(lt)
		case schema.DecimalLogicalType:
			return arrowDecimal(lt)
		case schema.DateLogicalType:
			return arrow.FixedWidthTypes.Date32, nil
		case schema.TimeLogicalType:
			if lt.TimeUnit() == schema.TimeUnitMillis {
				return arrow.FixedWidthTypes.Time32ms, nil
			}
		}
		return cannot()
	case parquet.Types.Int64:
		switch lt := logical.(type) {
		case schema.NoLogicalType:
			return arrow.PrimitiveTypes.Int64, nil
		case schema.IntLogicalType:
			return arrowInt(lt)
		case schema.DecimalLogicalType:
			return arrowDecimal(lt)
		case schema.TimeLogicalType:
			switch lt.TimeUnit() {
			case schema.TimeUnitMicros:
				return arrow.FixedWidthTypes.Time64us, nil
			case schema.TimeUnitNanos:
				return arrow.FixedWidthTypes.Time64ns, nil
			}
		case schema.TimestampLogicalType:
			// Converted types are taken as UTC-normalized (the format's
			// LogicalTypes.md, backward compatibility of TIMESTAMP).
			tz := ""
			if lt.IsAdjustedToUTC() || lt.IsFromConvertedType() {
				tz = "UTC"
			}
			switch lt.TimeUnit() {
			case schema.TimeUnitMillis:
				return &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: tz}, nil
			case schema.TimeUnitMicros:
				return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz}, nil
			case schema.TimeUnitNanos:
				return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: tz}, nil
			}
		}
		return cannot()
	case parquet.Types.Int96:
		// Impala's timestamps (Spark's default), read as microseconds: Delta's
		// timestamp is microseconds (PROTOCOL.md, "Primitive Types"), and a
		// nanosecond one cannot hold 0001-01-01 or 9999-12-31, which Spark
		// writes (parquet-format LogicalTypes.md, TIMESTAMP: NANOS spans
		// 1677-2262). pqarrow reads nanoseconds and fails on those.
		return arrow.FixedWidthTypes.Timestamp_us, nil
	case parquet.Types.Float:
		return arrow.PrimitiveTypes.Float32, nil
	case parquet.Types.Double:
		return arrow.PrimitiveTypes.Float64, nil
	case parquet.Types.ByteArray:
		switch lt := logical.(type) {
		case schema.StringLogicalType:
			return arrow.BinaryTypes.String, nil
		case schema.DecimalLogicalType:
			return arrowDecimal(lt)
		case schema.NoLogicalType, schema.EnumLogicalType, schema.JSONLogicalType, schema.BSONLogicalType:
			return arrow.BinaryTypes.Binary, nil
		}
		return cannot()
	case parquet.Types.FixedLenByteArray:
		switch lt := logical.(type) {
		case schema.DecimalLogicalType:
			return arrowDecimal(lt)
		case schema.NoLogicalType, schema.IntervalLogicalType:
			return &arrow.FixedSizeBinaryType{ByteWidth: n.TypeLength()}, nil
		}
		return cannot()
	}
	return cannot()
}

func arrowInt(lt schema.IntLogicalType) (arrow.DataType, error) {
	signed := lt.IsSigned()
	switch lt.BitWidth() {
	case 8:
		if signed {
			return arrow.PrimitiveTypes.Int8, nil
		}
		return arrow.PrimitiveTypes.Uint8, nil
	case 16:
		if signed {
			return arrow.PrimitiveTypes.Int16, nil
		}
		return arrow.PrimitiveTypes.Uint16, nil
	case 32:
		if signed {
			return arrow.PrimitiveTypes.Int32, nil
		}
		return arrow.PrimitiveTypes.Uint32, nil
	case 64:
		if signed {
			return arrow.PrimitiveTypes.Int64, nil
		}
		return arrow.PrimitiveTypes.Uint64, nil
	}
	return nil, fmt.Errorf("integer width %d", lt.BitWidth())
}

// arrowDecimal is decimal128 up to precision 38; wider decimals, which
// pqarrow reads as decimal256, are refused.
func arrowDecimal(lt schema.DecimalLogicalType) (arrow.DataType, error) {
	if lt.Precision() > 38 {
		return nil, fmt.Errorf("%w: decimal precision %d (at most 38)", arrow.ErrNotImplemented, lt.Precision())
	}
	return &arrow.Decimal128Type{Precision: lt.Precision(), Scale: lt.Scale()}, nil
}
