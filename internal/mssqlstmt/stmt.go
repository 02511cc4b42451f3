package mssqlstmt

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-sql/civil"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// Stmt is one T-SQL statement and the values of its parameters, @p1 being
// Args[0]: the form database/sql and go-mssqldb take. Every value the
// package sends is a parameter; the text holds only bracket-quoted names,
// types from the allowlist (InlineType) and collation names checked by
// ValidCollation.
type Stmt struct {
	SQL  string
	Args []any
}

// params numbers the parameters of one statement, reusing one parameter for
// the same value of the same column.
type params struct {
	args []any
	seen map[string]string
}

func (p *params) add(v any) string {
	p.args = append(p.args, v)
	return "@p" + strconv.Itoa(len(p.args))
}

// bound returns the CAST expression of a bound of column c.
func (p *params) bound(c source.Column, v any) (string, error) {
	key := fmt.Sprintf("%s\x00%T\x00%v", c.Name, v, v)
	if e, ok := p.seen[key]; ok {
		return e, nil
	}
	arg, expr, err := boundExpr(c, v, "@p"+strconv.Itoa(len(p.args)+1))
	if err != nil {
		return "", err
	}
	p.args = append(p.args, arg)
	if p.seen == nil {
		p.seen = map[string]string{}
	}
	p.seen[key] = expr
	return expr, nil
}

// table is what statements need of a capture instance's source table.
type table struct {
	name string // [schema].[table]
	cols []source.Column
	qcol []string // quoted column names
	cast []string // readType of each column a read casts (Dropped, CastOnRead); "" for the others
	key  []source.Column
	qkey []string
}

func newTable(ci *source.CaptureInstance) (*table, error) {
	if ci == nil {
		return nil, fmt.Errorf("sqlserver: nil capture instance")
	}
	name, err := quoteTwo(ci.SourceSchema, ci.SourceTable)
	if err != nil {
		return nil, fmt.Errorf("sqlserver: capture instance %q: source table: %w", ci.Name, err)
	}
	t := &table{name: name, cols: ci.Columns}
	if len(ci.Columns) == 0 {
		return nil, fmt.Errorf("sqlserver: capture instance %q has no captured columns", ci.Name)
	}
	for _, c := range ci.Columns {
		q, err := QuoteName(c.Name)
		if err != nil {
			return nil, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
		}
		t.qcol = append(t.qcol, q)
		cast := ""
		if c.Dropped || c.CastOnRead {
			if cast, err = readType(c); err != nil {
				return nil, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
			}
		}
		t.cast = append(t.cast, cast)
	}
	for _, k := range ci.Key {
		c, ok := ci.Column(k)
		if !ok {
			return nil, fmt.Errorf("sqlserver: capture instance %q: key column %q is not captured", ci.Name, k)
		}
		if c.Computed {
			return nil, fmt.Errorf("sqlserver: capture instance %q: key column %q is computed: CDC writes NULL for it in change rows, so changes cannot be matched to rows", ci.Name, k)
		}
		q, _ := QuoteName(c.Name)
		t.key = append(t.key, c)
		t.qkey = append(t.qkey, q)
	}
	if all := slices.IndexFunc(ci.Columns, func(c source.Column) bool { return !c.Computed }); all < 0 {
		return nil, fmt.Errorf("sqlserver: capture instance %q captures only computed columns, which CDC always writes as NULL", ci.Name)
	}
	return t, nil
}

// keyCast is the cast type of key column i (see readExpr).
func (t *table) keyCast(i int) string {
	return t.cast[slices.IndexFunc(t.cols, func(c source.Column) bool { return c.Name == t.key[i].Name })]
}

func (t *table) keyColumns() []keyrange.Column {
	out := make([]keyrange.Column, len(t.key))
	for i, c := range t.key {
		out[i] = c.KeyColumn()
	}
	return out
}

// ListCaptureInstancesStatement lists every capture instance the login can
// see (sys.sp_cdc_help_change_data_capture with no arguments); see
// source/sqlserver's parseCaptureInstances.
func ListCaptureInstancesStatement() Stmt {
	return Stmt{SQL: "EXEC sys.sp_cdc_help_change_data_capture"}
}

// TableCaptureInstancesStatement lists the capture instances of one source
// table (sys.sp_cdc_help_change_data_capture with @source_schema and
// @source_name, both required together; the table must exist): the same
// result as ListCaptureInstancesStatement, narrowed to at most two rows.
func TableCaptureInstancesStatement(schema, table string) Stmt {
	return Stmt{SQL: "EXEC sys.sp_cdc_help_change_data_capture @source_schema = @p1, @source_name = @p2", Args: []any{schema, table}}
}

// CapturedColumnsStatement describes the captured columns of a capture
// instance (sys.sp_cdc_get_captured_columns).
func CapturedColumnsStatement(captureInstance string) Stmt {
	return Stmt{SQL: "EXEC sys.sp_cdc_get_captured_columns @capture_instance = @p1", Args: []any{captureInstance}}
}

// DDLHistoryStatement reads the DDL history of a capture instance
// (sys.sp_cdc_get_ddl_history, FACTS.md F65): one row per change of its
// table's column structure since the instance was enabled.
func DDLHistoryStatement(captureInstance string) Stmt {
	return Stmt{SQL: "EXEC sys.sp_cdc_get_ddl_history @capture_instance = @p1", Args: []any{captureInstance}}
}

// ColumnsStatement reads, from sys.columns, what the CDC procedures do not
// say of a table's columns: collation (and its code page, from
// COLLATIONPROPERTY), nullability, whether the column is computed, and its
// length in bytes (max_length: -1 for max, two per character for nchar and
// nvarchar), by the table's object id (source_object_id of
// sys.sp_cdc_help_change_data_capture). sys.columns shows the columns of
// tables the login has some permission on; for others it returns no rows
// (FACTS.md F35).
//
// It also reads each column's column_id (captured columns are matched by
// it: a column dropped and added again has another, FACTS.md F61),
// is_identity, and its type (TYPE_NAME of system_type_id, precision,
// scale), which tells a column the reads must cast to its captured type
// (F62, F64).
//
// In the same statement it reads the columns of the capture instance's
// change table, changeTableID (object_id of
// sys.sp_cdc_help_change_data_capture, "ID of the change table"), each
// row saying by [object_id] which table it is of: the change table's
// captured columns have the types a change read returns, a column the
// source table dropped included, in base types where the procedure names
// an alias type (F64, F85).
func ColumnsStatement(objectID, changeTableID int64) Stmt {
	return Stmt{
		SQL: "SELECT [c].[name], [c].[collation_name], [c].[is_nullable], [c].[is_computed], [c].[max_length], " +
			"CAST(COLLATIONPROPERTY([c].[collation_name], @p2) AS int) AS [code_page], [c].[column_id], [c].[is_identity], " +
			"TYPE_NAME([c].[system_type_id]) AS [type_name], [c].[precision], [c].[scale], [c].[object_id] " +
			"FROM [sys].[columns] AS [c] WHERE [c].[object_id] IN (@p1, @p3) ORDER BY [c].[object_id], [c].[column_id]",
		Args: []any{objectID, "CodePage", changeTableID},
	}
}

// IndexesStatement lists the indexes of the table whose object id is
// objectID (source_object_id of sys.sp_cdc_help_change_data_capture) that
// a range read can seek on, with their key columns in key order, from the
// catalog views sys.indexes, sys.index_columns and sys.columns (FACTS.md
// F36, F55): rowstore B-trees (type 1 clustered, 2 nonclustered) that are
// neither disabled, hypothetical nor filtered, and the table's heap row
// (type 0, index_id 0, no name) when it has no clustered index. Included
// columns have key_ordinal 0 and are left out. The constants are
// parameters, as every value the package sends. See source/sqlserver's
// parseIndexes.
func IndexesStatement(objectID int64) Stmt {
	return Stmt{
		SQL: "SELECT [i].[index_id], [i].[name], [i].[type], [i].[is_unique], [ic].[key_ordinal], [c].[name] AS [column_name] " +
			"FROM [sys].[indexes] AS [i] " +
			"LEFT JOIN [sys].[index_columns] AS [ic] ON [ic].[object_id] = [i].[object_id] AND [ic].[index_id] = [i].[index_id] AND [ic].[key_ordinal] > @p4 " +
			"LEFT JOIN [sys].[columns] AS [c] ON [c].[object_id] = [ic].[object_id] AND [c].[column_id] = [ic].[column_id] " +
			"WHERE [i].[object_id] = @p1 AND [i].[type] <= @p2 AND [i].[is_disabled] = @p3 AND [i].[is_hypothetical] = @p3 AND [i].[has_filter] = @p3 " +
			"ORDER BY [i].[index_id], [ic].[key_ordinal]",
		// Types 0 heap, 1 clustered, 2 nonclustered; key_ordinal 0 is an
		// included column.
		Args: []any{objectID, int64(2), false, int64(0)},
	}
}

// GUIDProbe is the uniqueidentifier GUIDProbeStatement sends as text.
const GUIDProbe = "6f9619ff-8b86-d011-b42d-00c04fc964ff"

// GUIDProbeStatement returns a known uniqueidentifier: the bytes the
// driver gives for it say whether its DSN setting "guid conversion" is on
// (source/sqlserver's parseGUIDProbe). The value is text, which no driver
// setting converts on the way in.
func GUIDProbeStatement() Stmt {
	return Stmt{SQL: "SELECT CAST(@p1 AS uniqueidentifier) AS [probe]", Args: []any{GUIDProbe}}
}

// ServerNowStatement reads the server's clock with its UTC offset
// (SYSDATETIMEOFFSET: the offset of the machine SQL Server runs on,
// FACTS.md F37): the offset commit times are read in when neither
// source/sqlserver's Options.ServerTimeZone nor the server (before SQL
// Server 2022) names a zone.
func ServerNowStatement() Stmt {
	return Stmt{SQL: "SELECT SYSDATETIMEOFFSET() AS [now]"}
}

// ServerVersionStatement reads the server's major version and engine
// edition (SERVERPROPERTY 'ProductMajorVersion', 'EngineEdition'): 16 and
// later, and editions 5 (Azure SQL Database) and 8 (Azure SQL Managed
// Instance), have CURRENT_TIMEZONE_ID() (FACTS.md F37), whose name does not
// compile on older servers, so TimeZoneIDStatement is sent only to them.
func ServerVersionStatement() Stmt {
	return Stmt{SQL: "SELECT CAST(SERVERPROPERTY(@p1) AS int) AS [major], CAST(SERVERPROPERTY(@p2) AS int) AS [edition]",
		Args: []any{"ProductMajorVersion", "EngineEdition"}}
}

// TimeZoneIDStatement reads the Windows name of the time zone the server
// observes (CURRENT_TIMEZONE_ID(), SQL Server 2022 and Azure SQL; FACTS.md
// F37).
func TimeZoneIDStatement() Stmt { return Stmt{SQL: "SELECT CURRENT_TIMEZONE_ID() AS [zone]"} }

// ClockBackStatement finds, in cdc.lsn_time_mapping, the first commit at
// or below upTo whose tran_end_time, inside [start, end) (the wall clocks
// of an hour a fall-back repeats), reads more than a minute before the
// commit before it: the server's clock went back there, and from that
// commit on the hour is read the second time (FACTS.md F84). Only rows of
// transactions count (tran_id <> 0x00, as Debezium's max transaction LSN
// reads them): the rows the capture job writes to mark its progress in a
// quiet period have no transaction, and no page says what their time is
// (F08). It scans the mapping by its key, start_lsn, up to upTo, from the
// last transaction that reads more than a minute before start, found by a
// seek on the mapping's tran_end_time index (lsn_time_mapping_nonunique_idx,
// as the seed implementation's _before seeks it): with the clock's jitter
// under a minute, that one precedes every commit of the hour in LSN order.
// The lower bound is a column of a derived table joined by CROSS APPLY, the
// form the seed implementation found seeks the key (a subquery in the WHERE
// scanned). One row, or none.
func ClockBackStatement(upTo lsn.LSN, start, end time.Time) Stmt {
	return Stmt{
		SQL: "SELECT TOP (@p5) [d].[start_lsn] FROM (SELECT ISNULL((SELECT TOP (@p5) [b].[start_lsn] FROM [cdc].[lsn_time_mapping] AS [b] " +
			"WHERE [b].[tran_end_time] < DATEADD(minute, @p6, @p2) AND [b].[tran_id] <> @p7 ORDER BY [b].[tran_end_time] DESC), @p4) AS [lo]) AS [s] " +
			"CROSS APPLY (SELECT [m].[start_lsn], [m].[tran_end_time], LAG([m].[tran_end_time]) OVER (ORDER BY [m].[start_lsn]) AS [prev] " +
			"FROM [cdc].[lsn_time_mapping] AS [m] WHERE [m].[start_lsn] >= [s].[lo] AND [m].[start_lsn] <= @p1 AND [m].[tran_id] <> @p7) AS [d] " +
			"WHERE [d].[tran_end_time] >= @p2 AND [d].[tran_end_time] < @p3 AND [d].[tran_end_time] < DATEADD(minute, @p6, [d].[prev]) " +
			"ORDER BY [d].[start_lsn]",
		Args: []any{upTo.Bytes(), civil.DateTimeOf(start), civil.DateTimeOf(end), lsn.LSN{}.Bytes(), int64(1), int64(-1), []byte{0}},
	}
}

// MaxLSNStatement reads sys.fn_cdc_get_max_lsn().
func MaxLSNStatement() Stmt { return Stmt{SQL: "SELECT sys.fn_cdc_get_max_lsn()"} }

// MinLSNStatement reads sys.fn_cdc_get_min_lsn(capture instance).
func MinLSNStatement(captureInstance string) Stmt {
	return Stmt{SQL: "SELECT sys.fn_cdc_get_min_lsn(@p1)", Args: []any{captureInstance}}
}

// ChangeAccessStatement asks SQL Server whether the login may SELECT from
// what ChangeTableStatement reads: the capture instance's change table,
// cdc.[<capture instance>_CT] (FACTS.md F11), and cdc.lsn_time_mapping,
// which it joins. HAS_PERMS_BY_NAME evaluates the caller's effective
// permission on a securable without reading it: 1, 0, or NULL (F86).
func ChangeAccessStatement(captureInstance string) (Stmt, error) {
	ct, err := QuoteName(captureInstance + "_CT")
	if err != nil {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: %w", captureInstance, err)
	}
	return Stmt{
		SQL:  "SELECT HAS_PERMS_BY_NAME(@p1, @p3, @p4) AS [change_table], HAS_PERMS_BY_NAME(@p2, @p3, @p4) AS [lsn_time_mapping]",
		Args: []any{"[cdc]." + ct, "[cdc].[lsn_time_mapping]", "OBJECT", "SELECT"},
	}, nil
}

// LSNTimeStatement reads sys.fn_cdc_map_lsn_to_time(l): the tran_end_time
// of cdc.lsn_time_mapping's row of l, a datetime in the server's local
// time, and NULL when l is no commit's LSN (FACTS.md F08).
func LSNTimeStatement(l lsn.LSN) Stmt {
	return Stmt{SQL: "SELECT sys.fn_cdc_map_lsn_to_time(@p1)", Args: []any{l.Bytes()}}
}

// IsolationStatement sets the session's isolation level (FACTS.md F32,
// F48). It must run as a batch of its own, without parameters (go-mssqldb then sends it as a SQL
// batch, not through sp_executesql, whose scope would undo it), and it
// sticks to the connection until reset with ResetIsolationStatement.
func IsolationStatement(iso source.Isolation) Stmt {
	if iso == source.Snapshot {
		return Stmt{SQL: "SET TRANSACTION ISOLATION LEVEL SNAPSHOT"}
	}
	return Stmt{SQL: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"}
}

// ResetIsolationStatement restores SQL Server's default level before a
// connection returns to the pool.
func ResetIsolationStatement() Stmt { return IsolationStatement(source.ReadCommitted) }

// LockTimeoutStatement sets how long the session's statements wait for a
// lock before SQL Server ends them with error 1222 (FACTS.md F83): d
// rounded up to whole milliseconds, at most 2^31-1 ms; a negative d is -1,
// SQL Server's default (wait as long as the lock is held). Like
// IsolationStatement it runs as a batch of its own, without parameters (the
// number is in the text: SET takes no variable here), and sticks to the
// connection until ResetLockTimeoutStatement.
func LockTimeoutStatement(d time.Duration) Stmt {
	ms := int64(-1)
	if d >= 0 {
		ms = int64(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	return Stmt{SQL: "SET LOCK_TIMEOUT " + strconv.FormatInt(ms, 10)}
}

// ResetLockTimeoutStatement restores SQL Server's default lock time-out
// (-1, no time-out) before a connection returns to the pool.
func ResetLockTimeoutStatement() Stmt { return LockTimeoutStatement(-1) }

// IntKeyBoundsStatement reads MIN and MAX of the single integer key column:
// two index seeks (TOP 1 each way).
func IntKeyBoundsStatement(ci *source.CaptureInstance) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	if len(t.key) != 1 || t.key[0].KeyColumn().Kind != keyrange.KindInt {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: MIN/MAX needs one integer key column, have %v", ci.Name, ci.Key)
	}
	k := t.qkey[0]
	lo, hi := "(SELECT MIN("+k+") FROM "+t.name+")", "(SELECT MAX("+k+") FROM "+t.name+")"
	if cast := t.keyCast(0); cast != "" {
		// A key read cast to its captured type (a numeric identity read as
		// its change table's bigint, FACTS.md F64): the bounds too, after
		// the aggregate, which still seeks the index's ends.
		lo, hi = "CAST("+lo+" AS "+cast+")", "CAST("+hi+" AS "+cast+")"
	}
	return Stmt{SQL: "SELECT " + lo + " AS [min], " + hi + " AS [max]"}, nil
}

// RowCountStatement reads the table's row count from metadata
// (sys.sp_spaceused); the name is passed quoted, as a parameter.
func RowCountStatement(ci *source.CaptureInstance) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	return Stmt{SQL: "EXEC sys.sp_spaceused @objname = @p1", Args: []any{t.name}}, nil
}

// where renders a piece's predicates joined by AND ("" when it has none).
// Comparisons follow keyrange's order, NULL first: "c < v" includes NULL
// rows of a nullable column, "c > NULL" is IS NOT NULL, "c = NULL" IS NULL.
func (t *table) where(p keyrange.Piece, ps *params) (string, error) {
	var preds []string
	eq := func(i int, v any) error {
		if v == nil {
			preds = append(preds, t.qkey[i]+" IS NULL")
			return nil
		}
		e, err := ps.bound(t.key[i], v)
		if err != nil {
			return err
		}
		preds = append(preds, t.qkey[i]+" = "+e)
		return nil
	}
	// below renders key[i] < v (or <=), NULL first.
	below := func(i int, v any, inclusive bool) (string, error) {
		op := " < "
		if inclusive {
			op = " <= "
		}
		if v == nil {
			if inclusive {
				return t.qkey[i] + " IS NULL", nil
			}
			return "", nil // nothing is below NULL
		}
		e, err := ps.bound(t.key[i], v)
		if err != nil {
			return "", err
		}
		if t.key[i].Nullable {
			return "(" + t.qkey[i] + " IS NULL OR " + t.qkey[i] + op + e + ")", nil
		}
		return t.qkey[i] + op + e, nil
	}
	above := func(i int, v any, inclusive bool) (string, bool, error) {
		if v == nil {
			if inclusive {
				return "", true, nil // >= NULL: every row
			}
			return t.qkey[i] + " IS NOT NULL", true, nil
		}
		e, err := ps.bound(t.key[i], v)
		if err != nil {
			return "", false, err
		}
		op := " > "
		if inclusive {
			op = " >= "
		}
		return t.qkey[i] + op + e, true, nil
	}
	if len(p.Eq) > len(t.key) || (len(p.Eq) == len(t.key) && (p.Lower != nil || p.Upper != nil)) {
		return "", fmt.Errorf("sqlserver: piece has more bounds than the %d key columns", len(t.key))
	}
	for i, v := range p.Eq {
		if err := eq(i, v); err != nil {
			return "", err
		}
	}
	j := len(p.Eq)
	if p.Lower != nil {
		s, _, err := above(j, p.Lower.Value, p.Lower.Inclusive)
		if err != nil {
			return "", err
		}
		if s != "" {
			preds = append(preds, s)
		}
	}
	if p.Upper != nil {
		s, err := below(j, p.Upper.Value, p.Upper.Inclusive)
		if err != nil {
			return "", err
		}
		if s == "" {
			s = "1 = 0"
		}
		preds = append(preds, s)
	}
	if g := p.Guard; g != nil {
		if g.From < 0 || g.From+len(g.Below) > len(t.key) || (g.Above != nil && g.From >= len(t.key)) {
			return "", fmt.Errorf("sqlserver: guard from column %d does not fit the %d key columns", g.From, len(t.key))
		}
		if g.Below != nil {
			// key[From:] < Below as a row value: the first column below,
			// or equal and the next below, and so on.
			var ors []string
			for n := range g.Below {
				var and []string
				ok := true
				for m := 0; m < n; m++ {
					i := g.From + m
					if g.Below[m] == nil {
						and = append(and, t.qkey[i]+" IS NULL")
						continue
					}
					e, err := ps.bound(t.key[i], g.Below[m])
					if err != nil {
						return "", err
					}
					and = append(and, t.qkey[i]+" = "+e)
				}
				s, err := below(g.From+n, g.Below[n], false)
				if err != nil {
					return "", err
				}
				if s == "" {
					ok = false
				}
				if ok {
					and = append(and, s)
					ors = append(ors, "("+strings.Join(and, " AND ")+")")
				}
			}
			if len(ors) == 0 {
				preds = append(preds, "1 = 0")
			} else {
				preds = append(preds, "("+strings.Join(ors, " OR ")+")")
			}
		}
		if g.Above != nil {
			s, _, err := above(g.From, g.Above.Value, false)
			if err != nil {
				return "", err
			}
			preds = append(preds, s)
		}
	}
	return strings.Join(preds, " AND "), nil
}

func selectList(prefix string, q []string) string {
	out := make([]string, len(q))
	for i, c := range q {
		out[i] = prefix + c
	}
	return strings.Join(out, ", ")
}

// readAsUnicode reports whether column c is read converted to nvarchar on
// the server: every char, varchar and text column. SQL Server converts with
// its own code page tables, which is the only exact reading of what it
// stores (FACTS.md F82): go-mssqldb's tables turn bytes a code page leaves
// undefined (1252's 0x81, 0x8D, 0x8F, 0x90, 0x9D, which UTF-8 text written
// through a Latin1 column holds) and double-byte pairs it lacks into U+FFFD,
// without an error, and decode no UTF-8 (F45, F46), so values would come out
// changed and a key bound holding U+FFFD would be converted back to another
// key. The cost is two bytes a character on the wire where the column
// stores one: the reads take the text as its UTF-16 bytes (utf16Read),
// which the decoder turns into UTF-8 cheaper than go-mssqldb decodes a code
// page (F90).
func readAsUnicode(c source.Column) bool {
	switch c.Type {
	case "char", "varchar", "text":
		return true
	}
	return false
}

// unicodeType is the nvarchar type that holds every value of c: n bytes of
// any code page, UTF-8 included, are at most n UTF-16 code units.
func unicodeType(c source.Column) string {
	if c.Type == "text" || c.Length < 1 || c.Length > 4000 {
		return "nvarchar(max)"
	}
	return "nvarchar(" + strconv.Itoa(c.Length) + ")"
}

// readExpr is the select-list expression that reads captured column c,
// quoted q, qualified by prefix ("" for the table, "[c]." for a change
// read), under its own name: the column itself; converted to nvarchar
// (readAsUnicode); cast to cast, its captured type (CastOnRead); or, in a
// table read of a column the table no longer has (Dropped), a NULL of that
// type, as CDC writes it in change rows (FACTS.md F60). ok is false for a
// computed column, which is not read: CDC writes NULL for it in every
// change row (F13), so snapshots carry NULL too.
func readExpr(c source.Column, q, prefix, cast string) (expr string, ok bool) {
	switch {
	case c.Computed:
		return "", false
	case c.Dropped && prefix == "":
		return "CAST(NULL AS " + cast + ") AS " + q, true
	case readAsUnicode(c):
		return "CAST(" + prefix + q + " AS " + unicodeType(c) + ") AS " + q, true
	case c.CastOnRead:
		return "CAST(" + prefix + q + " AS " + cast + ") AS " + q, true
	}
	return prefix + q, true
}

// readType is the type a read casts captured column c to (readExpr):
// InlineType's for the types it allows, the name of the types that take
// no arguments, binary(8) for a rowversion (its change-table type, FACTS.md
// F64).
func readType(c source.Column) (string, error) {
	switch c.Type {
	case "rowversion", "timestamp":
		return "binary(8)", nil
	case "text", "ntext", "image", "xml", "hierarchyid", "geometry", "geography":
		return c.Type, nil
	}
	return InlineType(c)
}

// IsRead reports whether the statements read captured column c (readExpr):
// a computed column is not read, and its value is NULL.
func IsRead(c source.Column) bool {
	_, ok := readExpr(c, "", "", "")
	return ok
}

// readList is the select list of t's captured columns (readExpr), and for
// each captured column its position in that list, or -1 when it is not
// read. For the decoder's speed, nchar and nvarchar columns are read as
// their UTF-16 bytes (utf16Read) and, with ps set, decimals of precision
// 18 or less as their unscaled integers, the power of ten a parameter
// (scaledDecimal).
func (t *table) readList(prefix string, ps *params) (string, []int) {
	var exprs []string
	src := make([]int, len(t.cols))
	for i, c := range t.cols {
		e, ok := readExpr(c, t.qcol[i], prefix, t.cast[i])
		if !ok {
			src[i] = -1
			continue
		}
		switch {
		case c.Dropped && prefix == "", c.CastOnRead:
			// A NULL of its type, or the cast to its captured type, which
			// both reads must give alike (FACTS.md F60, F64).
		case t.utf16Read(c):
			text := prefix + t.qcol[i]
			if readAsUnicode(c) {
				text = "CAST(" + text + " AS " + unicodeType(c) + ")"
			}
			e = "CAST(" + text + " AS " + utf16BinaryType(c) + ") AS " + t.qcol[i]
		case ps != nil && t.scaledDecimal(c):
			e = "CAST(" + prefix + t.qcol[i] + " * " + ps.add(pow10(c.Scale)) + " AS bigint) AS " + t.qcol[i]
		}
		src[i] = len(exprs)
		exprs = append(exprs, e)
	}
	return strings.Join(exprs, ", "), src
}

// ReadRangeStatement reads the captured columns of the rows whose key lies
// in r: one SELECT per seekable piece of r (keyrange.Pieces), joined by
// UNION ALL, every bound a parameter cast to its column's declared type.
//
// When ci has the captured table's object id (ObjectID), every SELECT is
// guarded by OBJECT_ID(<its name>) = that id: a table renamed with
// sp_rename keeps its id and its capture instances, and another table can
// take its name (FACTS.md F93), whose rows the statement then does not
// return as the captured table's. The name is resolved while the
// statement runs, under the schema lock its read of the table holds.
func ReadRangeStatement(ci *source.CaptureInstance, r keyrange.Range) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	var ps params
	cols, _ := t.readList("", &ps)
	guard := ""
	if ci.ObjectID != 0 {
		guard = "OBJECT_ID(" + ps.add(t.name) + ") = " + ps.add(ci.ObjectID)
	}
	if r.Lower == nil && r.Upper == nil {
		sql := "SELECT " + cols + " FROM " + t.name
		if guard != "" {
			sql += " WHERE " + guard
		}
		if OrderedRange(ci) {
			sql += "\nORDER BY " + selectList("", t.qkey)
		}
		return Stmt{SQL: sql, Args: ps.args}, nil
	}
	if len(t.key) == 0 {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q has no key: only the whole range can be read", ci.Name)
	}
	pieces, err := keyrange.Pieces(t.keyColumns(), r)
	if err != nil {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	var parts []string
	for _, p := range pieces {
		w, err := t.where(p, &ps)
		if err != nil {
			return Stmt{}, fmt.Errorf("sqlserver: capture instance %q, %s: %w", ci.Name, r, err)
		}
		s := "SELECT " + cols + " FROM " + t.name
		switch {
		case guard != "" && w != "":
			s += " WHERE " + guard + " AND " + w
		case guard != "":
			s += " WHERE " + guard
		case w != "":
			s += " WHERE " + w
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return Stmt{SQL: "SELECT " + cols + " FROM " + t.name + " WHERE 1 = 0", Args: ps.args}, nil
	}
	sql := strings.Join(parts, "\nUNION ALL\n")
	if OrderedRange(ci) {
		sql += "\nORDER BY " + selectList("", t.qkey)
	}
	return Stmt{SQL: sql, Args: ps.args}, nil
}

// OrderedRange reports whether ReadRangeStatement orders a keyed range by
// its key, so that a read cut by a transient error can go on after the
// last key it returned: the key is unique, its index is known to be the
// clustered one, and no key column is read converted (readExpr), so the
// ORDER BY names the column itself. Without ORDER BY no order is
// guaranteed (FACTS.md F95). The pieces of a range are joined by
// UNION ALL, whose Concatenation keeps no order: SQL Server orders the
// union by merging inputs that come sorted (a Merge Join's union), which
// each piece's seek on the clustered index is, or by an explicit Sort,
// which a heap, a nonclustered index or one not known (sys.indexes not
// visible) may need on a whole range ("Concatenation Showplan Operator",
// "Merge Join Showplan Operator"). Any other range restarts while it has
// handed out no rows, else fails as source.ErrTransient and package
// snapshot reads the partition again.
func OrderedRange(ci *source.CaptureInstance) bool {
	if len(ci.Key) == 0 || !ci.UniqueKey() || ci.KeyIndex == nil || !ci.KeyIndex.Clustered {
		return false
	}
	for _, k := range ci.Key {
		c, ok := ci.Column(k)
		if !ok || readAsUnicode(c) {
			return false
		}
	}
	return true
}

// SeekKeyStatement finds the key k rows after from (keyrange.Seeker): a
// TOP (k + 1) per seekable piece of [from, +inf), each ordered by the key
// so an index seek stops after k + 1 rows, merged in key order, of which
// OFFSET k returns the last. It returns one row, or none when fewer than
// k + 1 keys remain.
//
// A key that is not unique (ci.UniqueKey false: one column of an index
// that allows duplicates, source.CaptureInstance.SplitOn) can give back
// from itself, which would plan an empty range and never move on. Its
// statement takes that (k+1)-th key v and, with CROSS APPLY, one more TOP
// (1) seek for the smallest key at or above v and above from (IS NOT NULL
// when from is nil or NULL): the bound is then above from, never NULL, and
// every duplicate of a value falls in one range (see source.Source.SeekKey).
// Such a key must be one column.
func SeekKeyStatement(ci *source.CaptureInstance, from keyrange.Tuple, k int64) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	if len(t.key) == 0 {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q has no key to seek on", ci.Name)
	}
	if k < 0 {
		return Stmt{}, fmt.Errorf("sqlserver: seek of %d rows", k)
	}
	unique := ci.UniqueKey()
	if !unique && len(t.key) != 1 {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: a key that is not unique must be one column, have %v", ci.Name, ci.Key)
	}
	pieces, err := keyrange.Pieces(t.keyColumns(), keyrange.Range{Lower: from})
	if err != nil {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	var ps params
	top := ps.add(k + 1)
	keys := selectList("", t.qkey)
	var parts []string
	for i, p := range pieces {
		w, err := t.where(p, &ps)
		if err != nil {
			return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: seek from %v: %w", ci.Name, []any(from), err)
		}
		alias := "[q" + strconv.Itoa(i) + "]"
		inner := "SELECT TOP (" + top + ") " + keys + " FROM " + t.name
		if w != "" {
			inner += " WHERE " + w
		}
		inner += " ORDER BY " + keys
		parts = append(parts, "SELECT "+selectList(alias+".", t.qkey)+" FROM ("+inner+") AS "+alias)
	}
	off := ps.add(k)
	body := " FROM (\n" + strings.Join(parts, "\nUNION ALL\n") +
		"\n) AS [s] ORDER BY " + selectList("[s].", t.qkey) + " OFFSET " + off + " ROWS FETCH NEXT 1 ROWS ONLY"
	if unique {
		outer := make([]string, len(t.key))
		for i, c := range t.key {
			outer[i], _ = readExpr(c, t.qkey[i], "[s].", t.keyCast(i))
		}
		return Stmt{SQL: "SELECT " + strings.Join(outer, ", ") + body, Args: ps.args}, nil
	}
	c, q := t.key[0], t.qkey[0]
	tq := "[t]." + q // qualified: [v] has a column of the same name
	above := tq + " IS NOT NULL"
	if len(from) == 1 && from[0] != nil {
		e, err := ps.bound(c, from[0])
		if err != nil {
			return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: seek from %v: %w", ci.Name, []any(from), err)
		}
		above = tq + " > " + e
	}
	atOrAbove := tq + " >= [v]." + q
	if c.Nullable {
		// v is NULL only when from is nil or NULL: above then says IS
		// NOT NULL, and every key is at or above NULL.
		atOrAbove = "([v]." + q + " IS NULL OR " + atOrAbove + ")"
	}
	one := ps.add(int64(1))
	outer, _ := readExpr(c, q, "[n].", t.keyCast(0))
	sql := "SELECT " + outer + " FROM (SELECT [s]." + q + body + ") AS [v]" +
		"\nCROSS APPLY (SELECT TOP (" + one + ") " + tq + " FROM " + t.name + " AS [t] WHERE " + above + " AND " + atOrAbove + " ORDER BY " + tq + ") AS [n]"
	return Stmt{SQL: sql, Args: ps.args}, nil
}

// changeOrder is the order of change rows: by LSN, then __$command_id
// where it can be read (the documented order within a transaction:
// __$seqval alone can put an update's insert before its delete, FACTS.md
// F10), then __$seqval, then __$operation (an update's before image, 3,
// before its after image, 4: they share __$seqval).
func changeOrder(commandID bool) string {
	if commandID {
		return "[c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation]"
	}
	return "[c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]"
}

// changeSelect is the select list of a change read: __$start_lsn,
// __$seqval, __$operation, __$command_id (when read), the captured columns
// (readExpr), and the commit time of each row's LSN as [__$commit_ts].
// From the change table (commandID) the commit time is tran_end_time of
// the row of cdc.lsn_time_mapping joined as [m], as Debezium reads it
// (FACTS.md F08, F42). Through the change function, for a login that may
// not read the cdc schema's tables, it is sys.fn_cdc_map_lsn_to_time, run
// on the first row of each LSN only: the rows after it in the same LSN
// carry NULL, which the decoder fills from the first (a scalar function in
// a select list would otherwise run once per row, F41, F42).
func (t *table) changeSelect(commandID bool) (string, []int) {
	lead := "[c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]"
	if commandID {
		lead += ", [c].[__$command_id]"
	}
	cols, src := t.readList("[c].", nil)
	ts := "[m].[tran_end_time] AS [__$commit_ts]"
	if !commandID {
		ts = "CASE WHEN [c].[__$start_lsn] = LAG([c].[__$start_lsn]) OVER (ORDER BY " + changeOrder(commandID) +
			") THEN NULL ELSE sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) END AS [__$commit_ts]"
	}
	return lead + ", " + cols + ", " + ts, src
}

// ChangeTableStatement reads the changes from <= __$start_lsn <= to from
// the capture instance's change table, cdc.[<capture instance>_CT]
// (FACTS.md F11), ordered by __$command_id within each LSN (changeOrder),
// as Debezium's SQL Server connector does, with each row's commit time from
// cdc.lsn_time_mapping joined on its LSN (changeSelect). Reading the tables
// needs SELECT on them (on schema cdc), which the change functions do not;
// ChangesStatement is the fallback. Both hold updates as before (3) and
// after (4) images.
func ChangeTableStatement(ci *source.CaptureInstance, from, to lsn.LSN) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	ct, err := QuoteName(ci.Name + "_CT")
	if err != nil {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	sel, _ := t.changeSelect(true)
	sql := "SELECT " + sel + " FROM [cdc]." + ct + " AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn]" +
		" WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY " + changeOrder(true)
	return Stmt{SQL: sql, Args: []any{from.Bytes(), to.Bytes()}}, nil
}

// ChangesStatement reads the changes from <= __$start_lsn <= to through
// cdc.fn_cdc_get_all_changes_<capture instance> with N'all update old'
// (updates as before and after images; FACTS.md F09), for a login that may
// not read the change table. The function returns no __$command_id, so
// rows within an LSN are ordered by __$seqval and __$operation only.
func ChangesStatement(ci *source.CaptureInstance, from, to lsn.LSN) (Stmt, error) {
	t, err := newTable(ci)
	if err != nil {
		return Stmt{}, err
	}
	fn, err := QuoteName("fn_cdc_get_all_changes_" + ci.Name)
	if err != nil {
		return Stmt{}, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	sel, _ := t.changeSelect(false)
	sql := "SELECT " + sel + " FROM [cdc]." + fn + "(@p1, @p2, N'all update old') AS [c] ORDER BY " + changeOrder(false)
	return Stmt{SQL: sql, Args: []any{from.Bytes(), to.Bytes()}}, nil
}
