// Package mssqldocs holds the result sets of the SQL Server procedures and
// catalog views cdcsnap reads, as Microsoft documents them (the pages are
// cited in source/sqlserver/FACTS.md): column names, order and SQL types.
// source/sqlserver builds its unit-test fixtures from them, never from the
// fake, and its integration tests hold a real server to them.
package mssqldocs

import (
	"strings"

	"github.com/cdcsnap/cdcsnap/source"
)

// Column is one documented result column.
type Column struct {
	Name string
	// Type is the SQL type as the documentation gives it ("sysname",
	// "binary(10)", "nvarchar(max)").
	Type string
}

// DriverType is the type name go-mssqldb reports for the column
// (sql.ColumnType.DatabaseTypeName): the base type in upper case, sysname
// being nvarchar(128).
func (c Column) DriverType() string {
	t, _, _ := strings.Cut(c.Type, "(")
	if t == "sysname" {
		t = "nvarchar"
	}
	return strings.ToUpper(t)
}

// Names returns the columns' names in order.
func Names(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// HelpChangeDataCapture is the result of sys.sp_cdc_help_change_data_capture
// (FACTS.md F01).
var HelpChangeDataCapture = []Column{
	{"source_schema", "sysname"}, {"source_table", "sysname"}, {"capture_instance", "sysname"},
	{"object_id", "int"}, {"source_object_id", "int"}, {"start_lsn", "binary(10)"}, {"end_lsn", "binary(10)"},
	{"supports_net_changes", "bit"}, {"has_drop_pending", "bit"}, {"role_name", "sysname"}, {"index_name", "sysname"},
	{"filegroup_name", "sysname"}, {"create_date", "datetime"}, {"index_column_list", "nvarchar(max)"},
	{"captured_column_list", "nvarchar(max)"},
}

// CapturedColumns is the result of sys.sp_cdc_get_captured_columns on SQL
// Server 2017 and later (FACTS.md F04): the sixth column is column_ordinal.
var CapturedColumns = []Column{
	{"source_schema", "sysname"}, {"source_table", "sysname"}, {"capture_instance", "sysname"},
	{"column_name", "sysname"}, {"column_id", "int"}, {"column_ordinal", "int"}, {"data_type", "sysname"},
	{"character_maximum_length", "int"}, {"numeric_precision", "tinyint"}, {"numeric_precision_radix", "smallint"},
	{"numeric_scale", "int"}, {"datetime_precision", "smallint"},
}

// CapturedColumnsBefore2017 is CapturedColumns as the SQL Server 2008-2014
// documentation gives it: the sixth column is ordinal_position (FACTS.md
// F04).
var CapturedColumnsBefore2017 = func() []Column {
	c := append([]Column(nil), CapturedColumns...)
	c[5] = Column{"ordinal_position", "int"}
	return c
}()

// ChangeAccess is the result of source/sqlserver's ChangeAccessStatement:
// HAS_PERMS_BY_NAME returns int, 1 or 0, and NULL when the query fails or
// the class or permission is not valid (FACTS.md F86), once for the
// capture instance's change table and once for cdc.lsn_time_mapping.
var ChangeAccess = []Column{{Name: "change_table", Type: "int"}, {Name: "lsn_time_mapping", Type: "int"}}

// Indexes is the result of source/sqlserver's IndexesStatement over the
// catalog views (FACTS.md F36, F55): sys.indexes index_id int, name sysname
// (NULL for the heap's row), type tinyint, is_unique bit;
// sys.index_columns key_ordinal tinyint; sys.columns name sysname, as
// column_name.
var Indexes = []Column{
	{Name: "index_id", Type: "int"}, {Name: "name", Type: "sysname"}, {Name: "type", Type: "tinyint"},
	{Name: "is_unique", Type: "bit"}, {Name: "key_ordinal", Type: "tinyint"}, {Name: "column_name", Type: "sysname"},
}

// DDLHistory is the result of sys.sp_cdc_get_ddl_history (FACTS.md F65).
var DDLHistory = []Column{
	{"source_schema", "sysname"}, {"source_table", "sysname"}, {"capture_instance", "sysname"},
	{"required_column_update", "bit"}, {"ddl_command", "nvarchar(max)"}, {"ddl_lsn", "binary(10)"}, {"ddl_time", "datetime"},
}

// SpaceUsed is the result of sp_spaceused @objname (FACTS.md F16).
var SpaceUsed = []Column{
	{"name", "nvarchar(128)"}, {"rows", "char(20)"}, {"reserved", "varchar(18)"},
	{"data", "varchar(18)"}, {"index_size", "varchar(18)"}, {"unused", "varchar(18)"},
}

// CapturedColumnMetadata returns the character_maximum_length (the character
// types' length, NULL otherwise: binary types included, FACTS.md F05),
// numeric_precision, numeric_precision_radix, numeric_scale and
// datetime_precision of sys.sp_cdc_get_captured_columns's row for column
// c, as INFORMATION_SCHEMA.COLUMNS, whose names the procedure's columns
// copy, gives them (int64 values, nil for NULL).
func CapturedColumnMetadata(c source.Column) (length, prec, radix, scale, dt any) {
	n := func(v int) any { return int64(v) }
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar":
		length = n(c.Length)
	case "text":
		length = n(2147483647)
	case "ntext":
		length = n(1073741823)
	case "xml":
		length = n(-1)
	case "decimal", "numeric":
		prec, radix, scale = n(c.Precision), n(10), n(c.Scale)
	case "tinyint":
		prec, radix, scale = n(3), n(10), n(0)
	case "smallint":
		prec, radix, scale = n(5), n(10), n(0)
	case "int":
		prec, radix, scale = n(10), n(10), n(0)
	case "bigint":
		prec, radix, scale = n(19), n(10), n(0)
	case "money":
		prec, radix, scale = n(19), n(10), n(4)
	case "smallmoney":
		prec, radix, scale = n(10), n(10), n(4)
	case "float":
		prec, radix = n(53), n(2)
	case "real":
		prec, radix = n(24), n(2)
	case "time", "datetime2", "datetimeoffset":
		dt = n(c.Scale)
	case "datetime":
		dt = n(3)
	case "date", "smalldatetime":
		dt = n(0)
	}
	return
}
