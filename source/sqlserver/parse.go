package sqlserver

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// resultSet is one result of a statement as driver values: column names
// and rows, each row one value per column as go-mssqldb returns it.
// Parsing functions take a resultSet so they run without a server.
type resultSet struct {
	Columns []string
	Rows    [][]any
}

// col returns the index of the named column (case-insensitive), or an
// error naming the statement.
func (rs resultSet) col(what, name string) (int, error) {
	for i, c := range rs.Columns {
		if strings.EqualFold(c, name) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("sqlserver: %s: result has no column %q (has %s)", what, name, strings.Join(rs.Columns, ", "))
}

// colAny returns the index of the first of names the result has: one
// fact with two documented names (FACTS.md F04).
func (rs resultSet) colAny(what string, names ...string) (int, error) {
	for _, n := range names {
		if i, err := rs.col(what, n); err == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("sqlserver: %s: result has none of the columns %s (has %s)", what, strings.Join(names, ", "), strings.Join(rs.Columns, ", "))
}

func asString(what string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("sqlserver: %s: want text, have %T", what, v)
}

func asInt(what string, v any) (int64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case int32:
		return int64(x), true, nil
	case int:
		return int64(x), true, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("sqlserver: %s: %w", what, err)
		}
		return n, true, nil
	}
	return 0, false, fmt.Errorf("sqlserver: %s: want an integer, have %T", what, v)
}

// captureRow is one row of sys.sp_cdc_help_change_data_capture.
type captureRow struct {
	Instance       source.CaptureInstance
	SourceObjectID int64
	// IndexName is the unique index the key comes from; empty when none.
	IndexName string
	// ChangeTableID (object_id, the change table's) and CapturedList
	// (captured_column_list) tell one instance from another of the same
	// name: a re-created instance has a new change table.
	ChangeTableID int64
	CapturedList  string
}

// sameInstance reports whether two listings show one capture instance as
// it was described: the same change table, source table, unique index, key
// and captured columns. Its start_lsn may have moved (cleanup).
func (r captureRow) sameInstance(o captureRow) bool {
	return r.Instance.Name == o.Instance.Name && r.ChangeTableID == o.ChangeTableID && r.SourceObjectID == o.SourceObjectID &&
		r.IndexName == o.IndexName && slices.Equal(r.Instance.Key, o.Instance.Key) && r.CapturedList == o.CapturedList
}

// parseCaptureInstances reads the result of ListCaptureInstancesStatement:
// name, source table, start_lsn (NULL until the instance has a low
// endpoint: the zero LSN then), source_object_id and the key from
// index_column_list.
func parseCaptureInstances(rs resultSet) ([]captureRow, error) {
	const what = "sp_cdc_help_change_data_capture"
	idx := map[string]int{}
	for _, n := range []string{"source_schema", "source_table", "capture_instance", "object_id", "source_object_id", "start_lsn", "index_name", "index_column_list", "captured_column_list"} {
		i, err := rs.col(what, n)
		if err != nil {
			return nil, err
		}
		idx[n] = i
	}
	var out []captureRow
	for r, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return nil, fmt.Errorf("sqlserver: %s: row %d has %d values for %d columns", what, r, len(row), len(rs.Columns))
		}
		var c captureRow
		var err error
		if c.Instance.SourceSchema, err = asString(what+" source_schema", row[idx["source_schema"]]); err != nil {
			return nil, err
		}
		if c.Instance.SourceTable, err = asString(what+" source_table", row[idx["source_table"]]); err != nil {
			return nil, err
		}
		if c.Instance.Name, err = asString(what+" capture_instance", row[idx["capture_instance"]]); err != nil {
			return nil, err
		}
		if c.SourceObjectID, _, err = asInt(what+" source_object_id", row[idx["source_object_id"]]); err != nil {
			return nil, err
		}
		if c.ChangeTableID, _, err = asInt(what+" object_id", row[idx["object_id"]]); err != nil {
			return nil, err
		}
		if c.CapturedList, err = asString(what+" captured_column_list", row[idx["captured_column_list"]]); err != nil {
			return nil, err
		}
		var start lsn.NullLSN
		if err := start.Scan(row[idx["start_lsn"]]); err != nil {
			return nil, fmt.Errorf("sqlserver: %s: start_lsn of %q: %w", what, c.Instance.Name, err)
		}
		c.Instance.StartLSN = start.LSN
		c.Instance.ObjectID = c.SourceObjectID
		if i, err := rs.col(what, "create_date"); err == nil {
			// datetime: the server's wall clock, only compared with the
			// other instances' (FACTS.md F66).
			if t, ok := row[i].(time.Time); ok {
				c.Instance.CreateDate = t
			}
		}
		if c.IndexName, err = asString(what+" index_name", row[idx["index_name"]]); err != nil {
			return nil, err
		}
		list, err := asString(what+" index_column_list", row[idx["index_column_list"]])
		if err != nil {
			return nil, err
		}
		if c.Instance.Key, err = parseQuotedList(list); err != nil {
			return nil, fmt.Errorf("sqlserver: %s: index_column_list of %q: %w", what, c.Instance.Name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseListedInstances reads the result of ListCaptureInstancesStatement
// as Source.ListCaptureInstances returns it: per row, the name, source
// table, start LSN and key (parseCaptureInstances), in the server's order.
// Columns stay empty: the procedure names the captured columns
// (captured_column_list) but not their types.
func parseListedInstances(rs resultSet) ([]source.CaptureInstance, error) {
	rows, err := parseCaptureInstances(rs)
	if err != nil {
		return nil, err
	}
	out := make([]source.CaptureInstance, len(rows))
	for i, r := range rows {
		out[i] = r.Instance
	}
	return out, nil
}

// parseCapturedColumns reads the result of CapturedColumnsStatement into
// columns in ordinal order, their types rebuilt from data_type,
// character_maximum_length, numeric_precision, numeric_scale and
// datetime_precision. The ordinal column is column_ordinal on SQL Server
// 2017 and later and ordinal_position in older documentation: either is
// taken (FACTS.md F04). character_maximum_length is NULL for types that
// are not character types (F05): such a length stays 0, unknown, until
// applyColumnInfo takes it from sys.columns. Every column is nullable
// until sys.columns says otherwise.
func parseCapturedColumns(rs resultSet) ([]source.Column, error) {
	const what = "sp_cdc_get_captured_columns"
	idx := map[string]int{}
	for _, n := range []string{"column_name", "data_type", "character_maximum_length", "numeric_precision", "numeric_scale", "datetime_precision"} {
		i, err := rs.col(what, n)
		if err != nil {
			return nil, err
		}
		idx[n] = i
	}
	ord, err := rs.colAny(what, "column_ordinal", "ordinal_position")
	if err != nil {
		return nil, err
	}
	idCol, idErr := rs.col(what, "column_id") // documented (F04); a fixture may lack it
	type ordered struct {
		pos int64
		col source.Column
	}
	var cols []ordered
	for r, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return nil, fmt.Errorf("sqlserver: %s: row %d has %d values for %d columns", what, r, len(row), len(rs.Columns))
		}
		name, err := asString(what, row[idx["column_name"]])
		if err != nil {
			return nil, err
		}
		typ, err := asString(what, row[idx["data_type"]])
		if err != nil {
			return nil, err
		}
		pos, hasPos, err := asInt(what+" "+rs.Columns[ord], row[ord])
		if err != nil {
			return nil, err
		}
		if !hasPos {
			return nil, fmt.Errorf("sqlserver: %s: column %q has no %s", what, name, rs.Columns[ord])
		}
		length, hasLen, err := asInt(what+" character_maximum_length", row[idx["character_maximum_length"]])
		if err != nil {
			return nil, err
		}
		prec, _, err := asInt(what+" numeric_precision", row[idx["numeric_precision"]])
		if err != nil {
			return nil, err
		}
		scale, _, err := asInt(what+" numeric_scale", row[idx["numeric_scale"]])
		if err != nil {
			return nil, err
		}
		dtPrec, hasDT, err := asInt(what+" datetime_precision", row[idx["datetime_precision"]])
		if err != nil {
			return nil, err
		}
		c, err := columnFromMetadata(name, typ, length, hasLen, prec, scale, dtPrec, hasDT)
		if err != nil {
			return nil, fmt.Errorf("sqlserver: %s: %w", what, err)
		}
		if idErr == nil {
			// The column_id the instance recorded: it stays for the
			// instance's life (FACTS.md F59).
			id, _, err := asInt(what+" column_id", row[idCol])
			if err != nil {
				return nil, err
			}
			c.ID = int(id)
		}
		cols = append(cols, ordered{pos, c})
	}
	slices.SortStableFunc(cols, func(a, b ordered) int { return cmp.Compare(a.pos, b.pos) })
	out := make([]source.Column, len(cols))
	for i, c := range cols {
		if i > 0 && cols[i-1].pos == c.pos {
			return nil, fmt.Errorf("sqlserver: %s: columns %q and %q have the same ordinal %d", what, cols[i-1].col.Name, c.col.Name, c.pos)
		}
		out[i] = c.col
	}
	return out, nil
}

// columnFromMetadata builds a column's type fields from the captured
// column metadata. A type cdcsnap does not know is kept by name (its
// ArrowType then reports source.ErrUnsupportedType when it is read). A
// length type without a length keeps Length 0, unknown.
func columnFromMetadata(name, typ string, length int64, hasLen bool, prec, scale, dtPrec int64, hasDT bool) (source.Column, error) {
	c := source.Column{Name: name, Type: strings.ToLower(strings.TrimSpace(typ)), Nullable: true}
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "binary", "varbinary":
		if !hasLen {
			break
		}
		if length < -1 || length == 0 || length > 8000 {
			return c, fmt.Errorf("column %q (%s): length %d out of range", name, c.Type, length)
		}
		c.Length = int(length)
	case "decimal", "numeric":
		if prec < 1 || prec > 38 || scale < 0 || scale > prec {
			return c, fmt.Errorf("column %q: %s(%d,%d) out of range", name, c.Type, prec, scale)
		}
		c.Precision, c.Scale = int(prec), int(scale)
	case "time", "datetime2", "datetimeoffset":
		s := int64(7)
		if hasDT {
			s = dtPrec
		}
		if s < 0 || s > 7 {
			return c, fmt.Errorf("column %q: %s scale %d out of range", name, c.Type, s)
		}
		c.Scale = int(s)
	case "rowversion":
		c.Type = "timestamp"
	}
	return c, nil
}

// applyColumnInfo sets what ColumnsStatement reads of cols: collation and
// its code page, nullability, computed, and the length of a length type
// the captured-column metadata left unknown (binary and varbinary, whose
// character_maximum_length is NULL: FACTS.md F05), from max_length in bytes
// (-1 for max; nchar and nvarchar take two bytes a character, F35).
// Columns it does not list (the login cannot see the table's columns) keep
// no collation and code page, which keeps a char/varchar key in one
// partition and reads char/varchar columns as nvarchar, and stay nullable.
//
// A captured column is matched by its column_id, not its name: one
// dropped and added again under the same name is another column (F61).
// When sys.columns lists the table but not the column, the table no longer
// has it: Dropped, read as NULL (F60). An identity column, and one whose
// type in the table differs from the captured one, is CastOnRead (F62,
// F64). A result without column_id (older fixtures) matches by name.
func applyColumnInfo(cols []source.Column, rs resultSet) ([]source.Column, error) {
	const what = "sys.columns"
	idx := map[string]int{}
	for _, n := range []string{"name", "collation_name", "is_nullable", "is_computed", "max_length", "code_page"} {
		i, err := rs.col(what, n)
		if err != nil {
			return nil, err
		}
		idx[n] = i
	}
	for _, n := range []string{"column_id", "is_identity", "type_name", "precision", "scale"} {
		if i, err := rs.col(what, n); err == nil {
			idx[n] = i
		}
	}
	_, byID := idx["column_id"]
	type info struct {
		collation                    string
		codePage                     int64
		nullable, computed, identity bool
		maxLength, precision, scale  int64
		typeName                     string
	}
	found := map[any]info{}
	for _, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return nil, fmt.Errorf("sqlserver: %s: row has %d values for %d columns", what, len(row), len(rs.Columns))
		}
		var in info
		n, err := asString(what, row[idx["name"]])
		if err != nil {
			return nil, err
		}
		if in.collation, err = asString(what, row[idx["collation_name"]]); err != nil {
			return nil, err
		}
		if in.collation != "" && !mssqlstmt.ValidCollation(in.collation) {
			return nil, fmt.Errorf("sqlserver: %s: column %q: collation %q is not a collation name", what, n, in.collation)
		}
		bits := []struct {
			col string
			to  *bool
		}{{"is_nullable", &in.nullable}, {"is_computed", &in.computed}, {"is_identity", &in.identity}}
		for _, b := range bits {
			j, ok := idx[b.col]
			if !ok {
				continue
			}
			v, ok := row[j].(bool)
			if !ok {
				return nil, fmt.Errorf("sqlserver: %s: %s of %q: want bit, have %T", what, b.col, n, row[j])
			}
			*b.to = v
		}
		if in.maxLength, _, err = asInt(what+" max_length of "+n, row[idx["max_length"]]); err != nil {
			return nil, err
		}
		if in.codePage, _, err = asInt(what+" code_page of "+n, row[idx["code_page"]]); err != nil {
			return nil, err
		}
		for _, x := range []struct {
			col string
			to  *int64
		}{{"precision", &in.precision}, {"scale", &in.scale}} {
			if j, ok := idx[x.col]; ok {
				if *x.to, _, err = asInt(what+" "+x.col+" of "+n, row[j]); err != nil {
					return nil, err
				}
			}
		}
		if j, ok := idx["type_name"]; ok {
			if in.typeName, err = asString(what+" type_name of "+n, row[j]); err != nil {
				return nil, err
			}
		}
		key := any(n)
		if byID {
			id, _, err := asInt(what+" column_id of "+n, row[idx["column_id"]])
			if err != nil {
				return nil, err
			}
			key = int(id)
		}
		found[key] = in
	}
	out := append([]source.Column(nil), cols...)
	for i := range out {
		c := &out[i]
		key := any(c.Name)
		if byID && c.ID != 0 {
			key = c.ID
		}
		in, ok := found[key]
		if !ok {
			if len(rs.Rows) > 0 && byID && c.ID != 0 {
				// sys.columns lists the table, without this column_id:
				// dropped (F60), or dropped and added again (F61).
				c.Dropped, c.Nullable = true, true
			}
			continue
		}
		c.Collation, c.CodePage, c.Nullable, c.Computed = in.collation, int(in.codePage), in.nullable, in.computed
		if in.typeName != "" && aliasType(c.Type) {
			// An alias type (sysname, CREATE TYPE ... FROM): the base type
			// and its length in bytes from sys.columns (FACTS.md F85).
			base := tableType(in.typeName, in.maxLength, in.precision, in.scale)
			c.Type, c.Length, c.Precision, c.Scale = base.Type, base.Length, base.Precision, base.Scale
		}
		if c.Length == 0 {
			switch c.Type {
			case "char", "varchar", "binary", "varbinary":
				c.Length = int(in.maxLength)
			case "nchar", "nvarchar":
				c.Length = int(in.maxLength)
				if c.Length > 0 {
					c.Length /= 2
				}
			}
			switch c.Type {
			case "char", "varchar", "binary", "varbinary", "nchar", "nvarchar":
				if c.Length == 0 || c.Length < -1 || c.Length > 8000 {
					return nil, fmt.Errorf("sqlserver: %s: column %q (%s): max_length %d is not a length", what, c.Name, c.Type, in.maxLength)
				}
			}
		}
		if in.typeName != "" {
			table := tableType(in.typeName, in.maxLength, in.precision, in.scale)
			same := sameType(table, *c)
			c.CastOnRead = in.identity || !same
			if !same && !in.identity && !(table.Type == "timestamp" && c.Type == "binary") {
				// An ALTER COLUMN the capture job has not reached (F62).
				c.PendingType = table.Declared()
			}
		}
	}
	return out, nil
}

// splitColumns splits the result of ColumnsStatement into the source
// table's rows and the change table's (changeTableID), by [object_id]; a
// result without that column (an older statement's fixture) is the source
// table's alone.
func splitColumns(rs resultSet, changeTableID int64) (table, change resultSet, err error) {
	const what = "sys.columns"
	i, colErr := rs.col(what, "object_id")
	table, change = resultSet{Columns: rs.Columns}, resultSet{Columns: rs.Columns}
	if colErr != nil {
		table.Rows = rs.Rows
		return table, change, nil
	}
	for _, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return table, change, fmt.Errorf("sqlserver: %s: row has %d values for %d columns", what, len(row), len(rs.Columns))
		}
		id, _, err := asInt(what+" object_id", row[i])
		if err != nil {
			return table, change, err
		}
		if id == changeTableID && changeTableID != 0 {
			change.Rows = append(change.Rows, row)
		} else {
			table.Rows = append(table.Rows, row)
		}
	}
	return table, change, nil
}

// applyChangeTableTypes gives each captured column the type its column of
// the change table has (the rows of ColumnsStatement for the change table,
// matched by name: a change table's captured columns keep the captured
// columns' names, FACTS.md F59): the type a change read returns, which is
// what the instance captures. It answers what
// sys.sp_cdc_get_captured_columns leaves open: an alias type's base type,
// also for a column the source table no longer has (F85, F60), and the
// int or bigint of an identity column and the binary(8) of a rowversion
// (F64). Without such rows (a login that may not see the change table's
// metadata) cols are returned as they are.
func applyChangeTableTypes(cols []source.Column, change resultSet) ([]source.Column, error) {
	if len(change.Rows) == 0 {
		return cols, nil
	}
	const what = "sys.columns of the change table"
	var idx [5]int
	for k, n := range []string{"name", "type_name", "max_length", "precision", "scale"} {
		i, err := change.col(what, n)
		if err != nil {
			return nil, err
		}
		idx[k] = i
	}
	types := map[string]source.Column{}
	for _, row := range change.Rows {
		name, err := asString(what, row[idx[0]])
		if err != nil {
			return nil, err
		}
		typ, err := asString(what+" type_name of "+name, row[idx[1]])
		if err != nil {
			return nil, err
		}
		var n [3]int64
		for k := range n {
			if n[k], _, err = asInt(what+" of "+name, row[idx[2+k]]); err != nil {
				return nil, err
			}
		}
		types[name] = tableType(typ, n[0], n[1], n[2])
	}
	out := slices.Clone(cols)
	for i := range out {
		ct, ok := types[out[i].Name]
		if !ok || ct.Type == "" {
			continue
		}
		out[i].Type, out[i].Length, out[i].Precision, out[i].Scale = ct.Type, ct.Length, ct.Precision, ct.Scale
	}
	return out, nil
}

// tableType is the declared type sys.columns gives a column.
func tableType(name string, maxLength, precision, scale int64) source.Column {
	c := source.Column{Type: strings.ToLower(name)}
	switch c.Type {
	case "char", "varchar", "binary", "varbinary":
		c.Length = int(maxLength)
	case "nchar", "nvarchar":
		c.Length = int(maxLength)
		if c.Length > 0 {
			c.Length /= 2
		}
	case "decimal", "numeric":
		c.Precision, c.Scale = int(precision), int(scale)
	case "time", "datetime2", "datetimeoffset":
		c.Scale = int(scale)
	case "rowversion":
		c.Type = "timestamp"
	}
	return c
}

// aliasType reports whether t, a captured column's data_type, names no
// SQL Server system type: an alias type, sysname or one made with CREATE
// TYPE ... FROM (FACTS.md F85).
func aliasType(t string) bool {
	_, err := (source.Column{Type: t}).ArrowType()
	return err != nil && t != "sql_variant"
}

// sameType reports whether a table column's type is a captured column's.
func sameType(table, captured source.Column) bool {
	if captured.Type == "rowversion" {
		captured.Type = "timestamp"
	}
	return table.Type == captured.Type && table.Declared() == captured.Declared()
}

// asBit reads a bit column, which go-mssqldb returns as bool (FACTS.md
// F43).
func asBit(what string, v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("sqlserver: %s: want a bit, have %T", what, v)
	}
	return b, nil
}

// parseIndexes reads the result of IndexesStatement: the indexes in the
// order source.CaptureInstance.Indexes keeps (clustered first, then by
// name), each with its key columns by key_ordinal, and whether the table
// is a heap (a row of type 0, FACTS.md F36). ok is false when sys.indexes
// shows no row at all: a login without permission on the table sees none
// (F35), so neither the indexes nor the heap are known.
func parseIndexes(rs resultSet) (indexes []source.Index, heap, ok bool, err error) {
	const what = "sys.indexes"
	if len(rs.Rows) == 0 {
		return nil, false, false, nil
	}
	var at [6]int
	for i, name := range []string{"index_id", "name", "type", "is_unique", "key_ordinal", "column_name"} {
		if at[i], err = rs.col(what, name); err != nil {
			return nil, false, false, err
		}
	}
	byID := map[int64]int{}
	lastOrdinal := map[int64]int64{}
	for n, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return nil, false, false, fmt.Errorf("sqlserver: %s: row %d has %d values for %d columns", what, n+1, len(row), len(rs.Columns))
		}
		id, has, err := asInt(what+" index_id", row[at[0]])
		if err != nil || !has {
			return nil, false, false, fmt.Errorf("sqlserver: %s: row %d: index_id %v: %v", what, n+1, row[at[0]], err)
		}
		typ, has, err := asInt(what+" type", row[at[2]])
		if err != nil || !has {
			return nil, false, false, fmt.Errorf("sqlserver: %s: row %d: type %v: %v", what, n+1, row[at[2]], err)
		}
		switch typ {
		case 0:
			heap = true
			continue
		case 1, 2:
		default:
			return nil, false, false, fmt.Errorf("sqlserver: %s: row %d: index type %d is not a B-tree (the statement asks for types 0, 1 and 2)", what, n+1, typ)
		}
		name, err := asString(what+" name", row[at[1]])
		if err != nil || name == "" {
			return nil, false, false, fmt.Errorf("sqlserver: %s: row %d: an index of type %d without a name: %v", what, n+1, typ, err)
		}
		unique, err := asBit(what+" is_unique", row[at[3]])
		if err != nil {
			return nil, false, false, err
		}
		i, seen := byID[id]
		if !seen {
			i = len(indexes)
			byID[id] = i
			indexes = append(indexes, source.Index{Name: name, Unique: unique, Clustered: typ == 1})
		} else if indexes[i].Name != name {
			return nil, false, false, fmt.Errorf("sqlserver: %s: index_id %d is called both %q and %q", what, id, indexes[i].Name, name)
		}
		ord, has, err := asInt(what+" key_ordinal", row[at[4]])
		if err != nil {
			return nil, false, false, err
		}
		if !has {
			continue // an index whose key columns the login may not see
		}
		col, err := asString(what+" column_name", row[at[5]])
		if err != nil || col == "" {
			return nil, false, false, fmt.Errorf("sqlserver: %s: index %q: key column %d has no name: %v", what, name, ord, err)
		}
		if ord != lastOrdinal[id]+1 {
			return nil, false, false, fmt.Errorf("sqlserver: %s: index %q: key_ordinal %d follows %d", what, name, ord, lastOrdinal[id])
		}
		lastOrdinal[id] = ord
		indexes[i].Columns = append(indexes[i].Columns, col)
	}
	clustered := 0
	for _, ix := range indexes {
		if ix.Clustered {
			clustered++
		}
	}
	if clustered > 1 || clustered == 1 && heap {
		return nil, false, false, fmt.Errorf("sqlserver: %s: %d clustered indexes and heap %v: a table has one or the other", what, clustered, heap)
	}
	slices.SortStableFunc(indexes, func(a, b source.Index) int {
		if a.Clustered != b.Clustered {
			if a.Clustered {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return indexes, heap, true, nil
}

// parseGUIDProbe reads the result of GUIDProbeStatement: true when the
// driver returned the probe's bytes in RFC order ("guid conversion" on),
// false for SQL Server's mixed-endian layout (the default; FACTS.md F44).
func parseGUIDProbe(rs resultSet) (bool, error) {
	const what = "uniqueidentifier probe"
	v, err := single(what, rs)
	if err != nil {
		return false, err
	}
	b, ok := v.([]byte)
	if !ok || len(b) != 16 {
		return false, fmt.Errorf("sqlserver: %s: want 16 bytes, have %T %v", what, v, v)
	}
	want, _ := keyrange.ParseUUID(mssqlstmt.GUIDProbe)
	switch {
	case bytes.Equal(b, want[:]):
		return true, nil
	case bytes.Equal(b, want.SQLServerBytes()):
		return false, nil
	}
	return false, fmt.Errorf("sqlserver: %s: %s came back as %x, in neither byte order", what, mssqlstmt.GUIDProbe, b)
}

// parseServerNow reads the result of ServerNowStatement as the server's
// UTC offset now.
func parseServerNow(rs resultSet) (*time.Location, error) {
	v, err := single("SYSDATETIMEOFFSET", rs)
	if err != nil {
		return nil, err
	}
	t, ok := v.(time.Time)
	if !ok {
		return nil, fmt.Errorf("sqlserver: SYSDATETIMEOFFSET: want datetimeoffset, have %T", v)
	}
	_, off := t.Zone()
	return time.FixedZone(formatOffset(off), off), nil
}

// formatOffset renders a UTC offset in seconds as "UTC+02:00".
func formatOffset(sec int) string {
	sign := '+'
	if sec < 0 {
		sign, sec = '-', -sec
	}
	return fmt.Sprintf("UTC%c%02d:%02d", sign, sec/3600, sec%3600/60)
}

// single returns the only value of a one-row, one-column result.
func single(what string, rs resultSet) (any, error) {
	if len(rs.Rows) != 1 || len(rs.Rows[0]) != 1 {
		return nil, fmt.Errorf("sqlserver: %s: want one value, have %d rows", what, len(rs.Rows))
	}
	return rs.Rows[0][0], nil
}

// parseLSN reads the result of MaxLSNStatement or MinLSNStatement: NULL
// and the zero LSN are not Valid.
func parseLSN(what string, rs resultSet) (lsn.NullLSN, error) {
	v, err := single(what, rs)
	if err != nil {
		return lsn.NullLSN{}, err
	}
	var n lsn.NullLSN
	if err := n.Scan(v); err != nil {
		return lsn.NullLSN{}, fmt.Errorf("sqlserver: %s: %w", what, err)
	}
	return n, nil
}

// parseMinLSN reads the result of MinLSNStatement: NULL is a new instance
// the capture job has not reached (ok false); the zero LSN is what SQL
// Server returns for an instance that does not exist or that the caller
// may not read (FACTS.md F07), a *source.AccessError.
func parseMinLSN(ci string, rs resultSet) (lsn.LSN, bool, error) {
	n, err := parseLSN("fn_cdc_get_min_lsn", rs)
	if err != nil {
		return lsn.LSN{}, false, err
	}
	v, _ := single("fn_cdc_get_min_lsn", rs)
	if v == nil {
		return lsn.LSN{}, false, nil
	}
	if !n.Valid {
		return lsn.LSN{}, false, &source.AccessError{CaptureInstance: ci, Reason: "sys.fn_cdc_get_min_lsn returned 0x00000000000000000000"}
	}
	return n.LSN, true, nil
}

// parseChangeAccess reads ChangeAccessStatement's row: the objects of the
// change read (the change table, then cdc.lsn_time_mapping) that
// HAS_PERMS_BY_NAME does not answer with 1. 0 is no effective SELECT; NULL
// is a failed check, which for an object the login cannot see is a
// refusal too (FACTS.md F86).
func parseChangeAccess(changeTable string, rs resultSet) ([]string, error) {
	const what = "HAS_PERMS_BY_NAME"
	if len(rs.Rows) != 1 {
		return nil, fmt.Errorf("sqlserver: %s: want one row, have %d", what, len(rs.Rows))
	}
	var missing []string
	for _, c := range []struct{ col, object string }{{"change_table", changeTable}, {"lsn_time_mapping", "cdc.lsn_time_mapping"}} {
		j, err := rs.col(what, c.col)
		if err != nil {
			return nil, err
		}
		v, ok, err := asInt(what+" "+c.col, rs.Rows[0][j])
		if err != nil {
			return nil, err
		}
		if !ok || v != 1 {
			missing = append(missing, c.object)
		}
	}
	return missing, nil
}

// serverVersion is what ServerVersionStatement tells of a server's zone.
type serverVersion struct {
	// namesZone: the server has CURRENT_TIMEZONE_ID() (major version 16
	// or later, or engine edition 5 or 8: Azure SQL Database, Managed
	// Instance; FACTS.md F37).
	namesZone bool
	// azureSQLDatabase: engine edition 5, whose instance runs on UTC while
	// a database-scoped TIME_ZONE or SET TIME ZONE can make
	// CURRENT_TIMEZONE_ID() name another zone (F37).
	azureSQLDatabase bool
}

// parseServerVersion reads ServerVersionStatement's row.
func parseServerVersion(rs resultSet) (serverVersion, error) {
	const what = "SERVERPROPERTY"
	if len(rs.Rows) != 1 {
		return serverVersion{}, fmt.Errorf("sqlserver: %s: want one row, have %d", what, len(rs.Rows))
	}
	var v [2]int64
	for i, n := range []string{"major", "edition"} {
		j, err := rs.col(what, n)
		if err != nil {
			return serverVersion{}, err
		}
		if v[i], _, err = asInt(what+" "+n, rs.Rows[0][j]); err != nil {
			return serverVersion{}, err
		}
	}
	return serverVersion{namesZone: v[0] >= 16 || v[1] == 5 || v[1] == 8, azureSQLDatabase: v[1] == 5}, nil
}

// parseTimeZoneID reads TimeZoneIDStatement's row: a Windows time zone name.
func parseTimeZoneID(rs resultSet) (string, error) {
	v, err := single("CURRENT_TIMEZONE_ID", rs)
	if err != nil {
		return "", err
	}
	z, err := asString("CURRENT_TIMEZONE_ID", v)
	if err == nil && z == "" {
		err = fmt.Errorf("sqlserver: CURRENT_TIMEZONE_ID returned no name")
	}
	return z, err
}

// parseLSNTime reads the result of LSNTimeStatement: the datetime
// sys.fn_cdc_map_lsn_to_time returns, a wall clock in the server's zone
// (go-mssqldb labels it UTC, FACTS.md F51), and false for NULL: l is no
// commit's LSN (F08).
func parseLSNTime(rs resultSet) (time.Time, bool, error) {
	v, err := single("fn_cdc_map_lsn_to_time", rs)
	if err != nil {
		return time.Time{}, false, err
	}
	switch x := v.(type) {
	case nil:
		return time.Time{}, false, nil
	case time.Time:
		return x, true, nil
	}
	return time.Time{}, false, fmt.Errorf("sqlserver: fn_cdc_map_lsn_to_time: want datetime, have %T", v)
}

// parseIntKeyBounds reads the result of IntKeyBoundsStatement.
func parseIntKeyBounds(rs resultSet) (min, max int64, ok bool, err error) {
	if len(rs.Rows) != 1 || len(rs.Rows[0]) != 2 {
		return 0, 0, false, fmt.Errorf("sqlserver: MIN/MAX: want one row of two values")
	}
	min, okMin, err := asInt("MIN", rs.Rows[0][0])
	if err != nil {
		return 0, 0, false, err
	}
	max, okMax, err := asInt("MAX", rs.Rows[0][1])
	if err != nil {
		return 0, 0, false, err
	}
	return min, max, okMin && okMax, nil
}

// parseSpaceUsed reads the rows column of sp_spaceused ("10000   ": char(20)
// text, FACTS.md F16).
func parseSpaceUsed(rs resultSet) (int64, error) {
	i, err := rs.col("sp_spaceused", "rows")
	if err != nil {
		return 0, err
	}
	if len(rs.Rows) != 1 {
		return 0, fmt.Errorf("sqlserver: sp_spaceused: want one row, have %d", len(rs.Rows))
	}
	s, err := asString("sp_spaceused rows", rs.Rows[0][i])
	if err != nil {
		if n, ok, err2 := asInt("sp_spaceused rows", rs.Rows[0][i]); err2 == nil && ok {
			return n, nil
		}
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("sqlserver: sp_spaceused: rows %q is not a count", s)
	}
	return n, nil
}

// parseSeekKey reads the result of SeekKeyStatement: one row of key values,
// or none when fewer keys remain.
func parseSeekKey(ci *source.CaptureInstance, rs resultSet, guidConversion bool) (keyrange.Tuple, bool, error) {
	if len(rs.Rows) == 0 {
		return nil, false, nil
	}
	if len(rs.Rows) > 1 {
		return nil, false, fmt.Errorf("sqlserver: seek: want at most one row, have %d", len(rs.Rows))
	}
	row := rs.Rows[0]
	if len(row) != len(ci.Key) {
		return nil, false, fmt.Errorf("sqlserver: seek: row has %d values for %d key columns", len(row), len(ci.Key))
	}
	out := make(keyrange.Tuple, len(row))
	for i, name := range ci.Key {
		c, ok := ci.Column(name)
		if !ok {
			return nil, false, fmt.Errorf("sqlserver: key column %q is not captured", name)
		}
		v, err := keyValue(c, row[i], guidConversion)
		if err != nil {
			return nil, false, err
		}
		out[i] = v
	}
	return out, true, nil
}

// isServerError reports whether err carries SQL Server error number n:
// mssql.Error.Number is the last error of a response, All every one
// (FACTS.md F21).
func isServerError(err error, n int32) bool {
	var me mssql.Error
	if !errors.As(err, &me) {
		return false
	}
	if me.Number == n {
		return true
	}
	for _, e := range me.All {
		if e.Number == n {
			return true
		}
	}
	return false
}

// parseQuotedList splits a comma-separated list of bracket-quoted names, as
// sys.sp_cdc_help_change_data_capture returns index_column_list and
// captured_column_list ("[id], [a]]b], [c,d]"). Unquoted names are accepted
// too (trimmed of spaces). An empty or blank list is no names.
func parseQuotedList(s string) ([]string, error) {
	var out []string
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
	}
	skipSpace()
	if i == len(s) {
		return nil, nil
	}
	for {
		skipSpace()
		if i == len(s) {
			return nil, fmt.Errorf("sqlserver: column list %q: missing name after ','", s)
		}
		var name strings.Builder
		if s[i] == '[' {
			i++
			closed := false
			for i < len(s) {
				if s[i] == ']' {
					if i+1 < len(s) && s[i+1] == ']' {
						name.WriteByte(']')
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				name.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, fmt.Errorf("sqlserver: column list %q: unterminated [", s)
			}
		} else {
			start := i
			for i < len(s) && s[i] != ',' {
				if s[i] == '[' || s[i] == ']' {
					return nil, fmt.Errorf("sqlserver: column list %q: bracket inside an unquoted name", s)
				}
				i++
			}
			name.WriteString(strings.TrimRight(s[start:i], " \t\r\n"))
		}
		if name.Len() == 0 {
			return nil, fmt.Errorf("sqlserver: column list %q: empty name", s)
		}
		out = append(out, name.String())
		skipSpace()
		if i == len(s) {
			return out, nil
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("sqlserver: column list %q: want ',' at byte %d", s, i)
		}
		i++
	}
}
