package sqlserver

import (
	"time"

	"github.com/cdcsnap/cdcsnap/internal/mssqldocs"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// The result sets of the procedures, functions and catalog views the
// source reads, as Microsoft documents them (column names, order and SQL
// types; FACTS.md gives the pages) with each value of the Go type
// go-mssqldb v1.11.2 returns for that SQL type (FACTS.md F43): sysname,
// nvarchar and char as string; int, smallint and tinyint as int64; bit as
// bool; binary(n) as []byte; datetime as time.Time in UTC; NULL as nil.
// Unit tests build their fixtures from these, never from the fake.

// docHelpColumns is sys.sp_cdc_help_change_data_capture's result
// (FACTS.md F01): source_schema sysname, source_table sysname,
// capture_instance sysname, object_id int, source_object_id int, start_lsn
// binary(10), end_lsn binary(10), supports_net_changes bit,
// has_drop_pending bit, role_name sysname, index_name sysname,
// filegroup_name sysname, create_date datetime, index_column_list
// nvarchar(max), captured_column_list nvarchar(max).
var docHelpColumns = mssqldocs.Names(mssqldocs.HelpChangeDataCapture)

// docHelpRow is one row of docHelpColumns. index is "" for an instance
// without a unique index (index_name and index_column_list NULL).
func docHelpRow(schema, table, instance string, sourceObjectID int64, start lsn.LSN, index, keyList, capturedList string) []any {
	var idx, keys any
	if index != "" {
		idx, keys = index, keyList
	}
	return []any{schema, table, instance, sourceObjectID + 1000, sourceObjectID, start.Bytes(), nil,
		index != "", nil, nil, idx, nil, time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC), keys, capturedList}
}

// docCapturedColumns is sys.sp_cdc_get_captured_columns's result on SQL
// Server 2017 and later (FACTS.md F04): source_schema sysname,
// source_table sysname, capture_instance sysname, column_name sysname,
// column_id int, column_ordinal int, data_type sysname,
// character_maximum_length int, numeric_precision tinyint,
// numeric_precision_radix smallint, numeric_scale int, datetime_precision
// smallint. Before the documentation was corrected (2018) the sixth
// column was called ordinal_position: docCapturedColumnsOld.
var (
	docCapturedColumns    = mssqldocs.Names(mssqldocs.CapturedColumns)
	docCapturedColumnsOld = mssqldocs.Names(mssqldocs.CapturedColumnsBefore2017)
)

// docCapturedColumn is one row of docCapturedColumns for a column declared
// decl (mssqldocs.CapturedColumnMetadata: character_maximum_length for the
// character types only, binary included in "otherwise, NULL", FACTS.md F05).
func docCapturedColumn(instance, name string, columnID, ordinal int64, decl string) []any {
	c, err := source.ParseType(decl)
	if err != nil {
		panic(err)
	}
	length, prec, radix, scale, dt := mssqldocs.CapturedColumnMetadata(c)
	return []any{"dbo", "t", instance, name, columnID, ordinal, c.Type, length, prec, radix, scale, dt}
}

// docSysColumns is what ColumnsStatement selects from sys.columns
// (FACTS.md F35): name sysname, collation_name sysname (NULL for
// non-character columns), is_nullable bit, is_computed bit, max_length
// smallint (bytes; -1 for max), and COLLATIONPROPERTY(collation_name,
// 'CodePage') cast to int (NULL without a collation).
var docSysColumns = []string{"name", "collation_name", "is_nullable", "is_computed", "max_length", "code_page"}

// docSysColumn is one row of docSysColumns.
func docSysColumn(name string, collation string, codePage int64, nullable, computed bool, maxLength int64) []any {
	var coll, cp any
	if collation != "" {
		coll, cp = collation, codePage
	}
	return []any{name, coll, nullable, computed, maxLength, cp}
}

// docSysIndexes is what IndexesStatement selects (FACTS.md F36, F55):
// sys.indexes index_id int, name sysname (NULL for a heap), type tinyint (0
// heap, 1 clustered, 2 nonclustered), is_unique bit;
// sys.index_columns key_ordinal tinyint; sys.columns name sysname.
var docSysIndexes = mssqldocs.Names(mssqldocs.Indexes)

// docSpaceUsed is sp_spaceused's result for one table (FACTS.md F16): name
// nvarchar(128), rows char(20) (text, padded), reserved, data, index_size
// and unused varchar(18).
var docSpaceUsed = mssqldocs.Names(mssqldocs.SpaceUsed)

// docScalar is the result of a SELECT of one unnamed expression
// (fn_cdc_get_max_lsn(), fn_cdc_get_min_lsn(...), fn_cdc_map_lsn_to_time(...)):
// one row, one column with no name.
func docScalar(v any) ([]string, [][]any) { return []string{""}, [][]any{{v}} }

// docProbeGUID is the bytes go-mssqldb returns for GUIDProbeStatement's
// uniqueidentifier: SQL Server's mixed-endian layout by default, RFC order
// with "guid conversion=true" (FACTS.md F44).
func docProbeGUID(guidConversion bool) []byte {
	u, _ := keyrange.ParseUUID(mssqlstmt.GUIDProbe)
	if guidConversion {
		return u[:]
	}
	return u.SQLServerBytes()
}
