package mssqlstmt

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// describeArg renders a parameter value with the SQL type go-mssqldb sends
// it as.
func describeArg(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprintf("bigint %d", x)
	case bool:
		return fmt.Sprintf("bit %t", x)
	case float64:
		return fmt.Sprintf("float %v", x)
	case string:
		return "nvarchar N'" + strings.ReplaceAll(x, "'", "''") + "'"
	case []byte:
		return "varbinary 0x" + strings.ToUpper(hex.EncodeToString(x))
	case civil.Date:
		return "date (civil.Date) " + x.String()
	case civil.Time:
		return "time(7) (civil.Time) " + x.String()
	case civil.DateTime:
		return "datetime2(7) (civil.DateTime) " + x.String()
	case mssql.DateTimeOffset:
		return "datetimeoffset(7) (mssql.DateTimeOffset) " + time.Time(x).Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%T %v", v, v)
}

type golden struct {
	t  *testing.T
	sb strings.Builder
}

func (g *golden) add(name string, st Stmt, err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	fmt.Fprintf(&g.sb, "-- name: %s\n", name)
	for i, a := range st.Args {
		fmt.Fprintf(&g.sb, "-- @p%d = %s\n", i+1, describeArg(a))
	}
	g.sb.WriteString(st.SQL)
	g.sb.WriteString(";\n\n")
}

func (g *golden) check(file string) {
	g.t.Helper()
	path := filepath.Join("testdata", file)
	got := g.sb.String()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		g.t.Errorf("%s differs from the statements built now; run go test ./internal/mssqlstmt -run Golden -update and review the diff.\n--- got ---\n%s", path, got)
	}
}

// codePages are COLLATIONPROPERTY(<collation>, 'CodePage') of the
// collations the fixtures use (FACTS.md F30: 65001 for a _UTF8 one).
var codePages = map[string]int{
	"SQL_Latin1_General_CP1_CI_AS": 1252, "Latin1_General_CI_AS": 1252, "Latin1_General_CI_AI": 1252,
	"Greek_CI_AS": 1253, "Cyrillic_General_CI_AS": 1251, "Turkish_CI_AS": 1254,
	"Latin1_General_100_CI_AS_SC_UTF8": 65001,
}

// col is a captured column as CaptureInstance describes it, the code page
// of a char/varchar/text column's collation included.
func col(name, decl string, nullable bool, collation string) source.Column {
	c, err := source.ParseType(decl)
	if err != nil {
		panic(err)
	}
	c.Name, c.Nullable, c.Collation = name, nullable, collation
	switch c.Type {
	case "char", "varchar", "text":
		c.CodePage = codePages[collation]
	}
	return c
}

func computed(c source.Column) source.Column { c.Computed = true; return c }

func ci(name, schema, table string, key []string, cols ...source.Column) *source.CaptureInstance {
	return &source.CaptureInstance{Name: name, SourceSchema: schema, SourceTable: table, Key: key, Columns: cols}
}

// Test fixtures shared by the golden and unit tests.
var (
	ciInt = ci("dbo_orders", "dbo", "orders", []string{"id"},
		col("id", "int", false, ""), col("amount", "decimal(18,4)", true, ""), col("note", "nvarchar(max)", true, "SQL_Latin1_General_CP1_CI_AS"))
	ciComposite = ci("dbo_lines", "dbo", "lines", []string{"company", "id"},
		col("company", "int", false, ""), col("id", "bigint", false, ""), col("qty", "int", true, ""))
	ciGreek = ci("dbo_snap_greek", "dbo", "snap_greek", []string{"name"},
		col("name", "varchar(20)", false, "Greek_CI_AS"), col("v", "int", true, ""))
	ciNVarchar = ci("dbo_people", "dbo", "people", []string{"name"},
		col("name", "nvarchar(50)", false, "Latin1_General_CI_AS"), col("v", "int", true, ""))
	ciUUID = ci("dbo_docs", "dbo", "docs", []string{"id"},
		col("id", "uniqueidentifier", false, ""), col("body", "xml", true, ""))
	ciDT2 = ci("dbo_events", "dbo", "events", []string{"at"},
		col("at", "datetime2(7)", false, ""), col("what", "varchar(100)", true, "Latin1_General_CI_AS"))
	ciCase = ci("dbo_snap_case", "dbo", "snap_case", []string{"name", "id"},
		col("name", "varchar(10)", false, "Latin1_General_CI_AS"), col("id", "int", false, ""))
	ciAccent = ci("dbo_snap_accent", "dbo", "snap_accent", []string{"name", "id"},
		col("name", "varchar(10)", false, "Latin1_General_CI_AI"), col("id", "int", false, ""))
	ciNullable = ci("dbo_nk", "dbo", "nk", []string{"a", "b"},
		col("a", "int", true, ""), col("b", "int", true, ""))
	ciWeird = ci("sales ]x_Ördersё", "sales ]x", "Ördersё 'q\"", []string{"id ]]", "ключ"},
		col("id ]]", "int", false, ""), col("ключ", "nchar(4)", false, "Cyrillic_General_CI_AS"), col("a b", "varchar(max)", true, "Latin1_General_CI_AS"))
	// A _UTF8 collation: go-mssqldb cannot decode its varchar, so it is
	// read as nvarchar; the bounds still convert in the column's collation.
	ciUTF8 = ci("dbo_cities", "dbo", "cities", []string{"name"},
		col("name", "varchar(40)", false, "Latin1_General_100_CI_AS_SC_UTF8"), col("notes", "varchar(max)", true, "Latin1_General_100_CI_AS_SC_UTF8"),
		col("legacy", "text", true, "Latin1_General_100_CI_AS_SC_UTF8"), col("code", "char(3)", true, ""), computed(col("upper_name", "varchar(40)", true, "Latin1_General_100_CI_AS_SC_UTF8")))
	// Names with ';', quotes and brackets, and a computed column.
	ciHostile = ci("dbo_a;b", "dbo;x", "t]; DROP TABLE t;--", []string{"k;1"},
		col("k;1", "int", false, ""), col("v AS varchar", "varchar(10)", true, "Latin1_General_CI_AS"), computed(col("c;2", "int", true, "")))
	ciKinds = ci("dbo_kinds", "dbo", "kinds", []string{"d", "m", "f", "r", "dt", "day", "tod", "dto", "bin", "bit", "sdt", "dtm"},
		col("d", "numeric(10,3)", false, ""), col("m", "money", false, ""), col("f", "float", false, ""), col("r", "real", false, ""),
		col("dt", "datetime2(3)", false, ""), col("day", "date", false, ""), col("tod", "time(7)", false, ""),
		col("dto", "datetimeoffset(7)", false, ""), col("bin", "binary(16)", false, ""), col("bit", "bit", false, ""),
		col("sdt", "smalldatetime", false, ""), col("dtm", "datetime", false, ""))
	// A table that changed under its capture instance (FACTS.md F59-F64):
	// a numeric identity key reported as bigint, cast in both reads; a
	// dropped varchar, a dropped xml and a dropped rowversion, read as
	// typed NULLs from the table and as they are from the change table.
	ciDDL = ci("dbo_ddl", "dbo", "ddl", []string{"id"},
		castOnRead(col("id", "bigint", false, "")), col("v", "nvarchar(20)", true, "Latin1_General_CI_AS"),
		dropped(col("gone", "varchar(10)", true, "Latin1_General_CI_AS")), dropped(col("doc", "xml", true, "")),
		dropped(col("rv", "timestamp", true, "")))
)

func dropped(c source.Column) source.Column    { c.Dropped = true; return c }
func castOnRead(c source.Column) source.Column { c.CastOnRead = true; return c }

func mustLSN(s string) lsn.LSN {
	l, err := lsn.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func TestGoldenMetadata(t *testing.T) {
	g := &golden{t: t}
	g.add("cdc/help_change_data_capture", ListCaptureInstancesStatement(), nil)
	g.add("cdc/help_change_data_capture_of_table", TableCaptureInstancesStatement("dbo", "orders"), nil)
	g.add("cdc/get_captured_columns", CapturedColumnsStatement("dbo_orders"), nil)
	g.add("sys.columns/column_info", ColumnsStatement(245575913, 261575970), nil)
	g.add("sys.indexes/indexes", IndexesStatement(245575913), nil)
	g.add("probe/uniqueidentifier", GUIDProbeStatement(), nil)
	g.add("probe/server_now", ServerNowStatement(), nil)
	g.add("cdc/max_lsn", MaxLSNStatement(), nil)
	g.add("cdc/min_lsn", MinLSNStatement("dbo_Orders"), nil)
	st, err := ChangeAccessStatement("dbo_Orders")
	g.add("cdc/change_access", st, err)
	st, err = ChangeAccessStatement("sales ]x_Ördersё")
	g.add("cdc/change_access_weird_name", st, err)
	g.add("cdc/map_lsn_to_time", LSNTimeStatement(mustLSN("0x0000002A00000F380003")), nil)
	g.add("cdc/clock_back", ClockBackStatement(mustLSN("0x0000002A00000F380003"), time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 3, 0, 0, 0, time.UTC)), nil)
	g.add("probe/server_version", ServerVersionStatement(), nil)
	g.add("probe/time_zone_id", TimeZoneIDStatement(), nil)
	g.add("isolation/read_committed", IsolationStatement(source.ReadCommitted), nil)
	g.add("isolation/snapshot", IsolationStatement(source.Snapshot), nil)
	g.add("isolation/reset", ResetIsolationStatement(), nil)
	g.add("lock_timeout/30s", LockTimeoutStatement(30*time.Second), nil)
	g.add("lock_timeout/rounded_up", LockTimeoutStatement(1500*time.Microsecond), nil)
	g.add("lock_timeout/reset", ResetLockTimeoutStatement(), nil)
	st, err = IntKeyBoundsStatement(ciInt)
	g.add("minmax/int", st, err)
	wk := ci("w", "we]ird", "t ab", []string{"ü]"}, col("ü]", "bigint", false, ""))
	st, err = IntKeyBoundsStatement(wk)
	g.add("minmax/weird_names", st, err)
	st, err = IntKeyBoundsStatement(ciDDL)
	g.add("minmax/identity_cast", st, err)
	st, err = RowCountStatement(ciInt)
	g.add("spaceused/int", st, err)
	st, err = RowCountStatement(ciWeird)
	g.add("spaceused/weird_names", st, err)
	st, err = ChangesStatement(ciInt, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("changes/orders", st, err)
	st, err = ChangesStatement(ciWeird, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("changes/weird_names", st, err)
	st, err = ChangesStatement(ciUTF8, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("changes/utf8_and_computed", st, err)
	st, err = ChangeTableStatement(ciInt, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("change_table/orders", st, err)
	st, err = ChangeTableStatement(ciWeird, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("change_table/weird_names", st, err)
	st, err = ChangeTableStatement(ciHostile, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("change_table/hostile_names", st, err)
	st, err = ChangeTableStatement(ciUTF8, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("change_table/utf8_and_computed", st, err)
	st, err = ChangeTableStatement(ciDDL, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("change_table/dropped_and_identity", st, err)
	st, err = ChangesStatement(ciDDL, mustLSN("0x0000002A00000F380003"), mustLSN("0x0000002A00000F400001"))
	g.add("changes/dropped_and_identity", st, err)
	g.add("cdc/get_ddl_history", DDLHistoryStatement("dbo_orders"), nil)
	g.check("metadata.sql")
}

func TestGoldenPieces(t *testing.T) {
	g := &golden{t: t}
	read := func(name string, c *source.CaptureInstance, lo, hi keyrange.Tuple) {
		t.Helper()
		st, err := ReadRangeStatement(c, keyrange.Range{Lower: lo, Upper: hi})
		g.add(name, st, err)
	}
	tup := func(v ...any) keyrange.Tuple { return keyrange.Tuple(v) }

	read("int/whole", ciInt, nil, nil)
	read("int/first", ciInt, nil, tup(int64(100)))
	read("int/middle", ciInt, tup(int64(100)), tup(int64(200)))
	read("int/last", ciInt, tup(int64(200)), nil)

	read("composite/only", ciComposite, nil, nil)
	read("composite/first", ciComposite, nil, tup(int64(3), int64(500)))
	read("composite/middle", ciComposite, tup(int64(3), int64(500)), tup(int64(7), int64(20)))
	read("composite/middle_one_company", ciComposite, tup(int64(3), int64(500)), tup(int64(3), int64(900)))
	read("composite/last", ciComposite, tup(int64(7), int64(20)), nil)
	// Its key the clustered primary key (OrderedRange): ORDER BY the key,
	// which a range read resumed after its last key relies on (FACTS.md
	// F95); SQL Server can merge the pieces' seeks in order, no Sort.
	clustered := *ciComposite
	clustered.KeyIndex = &source.Index{Name: "PK_lines", Columns: ciComposite.Key, Unique: true, Clustered: true}
	read("composite_clustered/whole", &clustered, nil, nil)
	read("composite_clustered/middle", &clustered, tup(int64(3), int64(500)), tup(int64(7), int64(20)))

	read("varchar_greek/first", ciGreek, nil, tup("Δέλτα"))
	read("varchar_greek/middle", ciGreek, tup("Δέλτα"), tup("Λάμδα"))
	read("varchar_greek/last", ciGreek, tup("Λάμδα"), nil)
	// The check that those bounds convert to code page 1253 and back
	// unchanged (FACTS.md F96), run before the range is read.
	st, vals, err := BoundCheckStatement(ciGreek, keyrange.Range{Lower: tup("Δέλτα"), Upper: tup("Λάμδα")})
	if len(vals) != 2 {
		t.Errorf("bound check of two varchar bounds checks %v", vals)
	}
	g.add("varchar_greek/bound_check", st, err)

	read("nvarchar/middle", ciNVarchar, tup("Ana"), tup("Zoë"))

	u1, _ := keyrange.ParseUUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
	u2, _ := keyrange.ParseUUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	read("uniqueidentifier/middle", ciUUID, tup(u1), tup(u2))

	t1 := time.Date(2024, 3, 1, 12, 0, 0, 123456700, time.UTC)
	t2 := time.Date(2024, 3, 1, 12, 0, 0, 123456800, time.UTC)
	read("datetime2_7/middle", ciDT2, tup(t1), tup(t2))

	// 'n' and 'N' are equal by keyrange.Compare under a _CI collation: one
	// equality, no guard.
	read("guard/case_insensitive_equal", ciCase, tup("n", int64(3)), tup("N", int64(5)))
	// 'e' and 'é' differ in Go and by Compare, but are equal under an
	// accent-insensitive collation: guards keep every row in one piece.
	read("guard/accent_insensitive", ciAccent, tup("e", int64(3)), tup("é", int64(5)))
	read("guard/three_groups", ciCase, tup("a", int64(5)), tup("m", int64(3)))

	read("null/lower_null_leading", ciNullable, tup(nil, int64(5)), tup(int64(2), int64(1)))
	read("null/both_null_trailing", ciNullable, tup(int64(1), nil), tup(int64(2), nil))
	read("null/upper_null_leading", ciNullable, nil, tup(nil, int64(7)))
	read("null/lower_all_null", ciNullable, tup(nil, nil), nil)

	read("weird_names/middle", ciWeird, tup(int64(1), "жж"), tup(int64(2), "аб"))
	read("dropped_and_identity/all", ciDDL, nil, nil)
	read("dropped_and_identity/middle", ciDDL, tup(int64(10)), tup(int64(20)))
	read("hostile_names/middle", ciHostile, tup(int64(1)), tup(int64(9)))
	// A range that holds no key: one statement that reads nothing.
	read("empty/equal_bounds", ciInt, tup(int64(7)), tup(int64(7)))
	// With the captured table's object id every SELECT is guarded: a table
	// that took a renamed one's name returns no row (FACTS.md F93).
	guarded := *ciComposite
	guarded.ObjectID = 245575913
	read("object_guard/whole", &guarded, nil, nil)
	read("object_guard/middle", &guarded, tup(int64(3), int64(500)), tup(int64(7), int64(20)))
	read("utf8/middle", ciUTF8, tup("Kraków"), tup("Łódź"))
	// Under Turkish_CI_AS 'I' and 'i' are two keys: no shared equality,
	// the guards keep every row in one piece (FACTS.md F23).
	read("guard/turkish_i", ci("dbo_tr", "dbo", "tr", []string{"name", "id"},
		col("name", "varchar(10)", false, "Turkish_CI_AS"), col("id", "int", false, "")), tup("I", int64(5)), tup("i", int64(3)))
	g.check("pieces.sql")
}

func TestGoldenSeeks(t *testing.T) {
	g := &golden{t: t}
	seek := func(name string, c *source.CaptureInstance, from keyrange.Tuple, k int64) {
		t.Helper()
		st, err := SeekKeyStatement(c, from, k)
		g.add(name, st, err)
	}
	tup := func(v ...any) keyrange.Tuple { return keyrange.Tuple(v) }
	seek("composite/from_start", ciComposite, nil, 10000)
	seek("composite/from_key", ciComposite, tup(int64(3), int64(500)), 10000)
	seek("varchar_greek/from_key", ciGreek, tup("Δέλτα"), 3)
	seek("nullable/from_null", ciNullable, tup(nil, int64(5)), 100)
	seek("weird_names/from_key", ciWeird, tup(int64(1), "жж"), 2)
	seek("utf8/from_key", ciUTF8, tup("Kraków"), 100)
	seek("identity/from_key", ciDDL, tup(int64(10)), 100)
	day := time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
	tod := time.Date(1, 1, 1, 23, 59, 59, 999999900, time.UTC)
	dto := time.Date(2024, 2, 29, 10, 0, 0, 100, time.FixedZone("", -3*3600))
	seek("kinds/from_key", ciKinds, tup(keyrange.Decimal("-12.345"), keyrange.Decimal("922337203685477.5807"), 1.5, float64(float32(0.1)),
		time.Date(2024, 2, 29, 10, 0, 0, 123000000, time.UTC), day, tod, dto,
		[]byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, true,
		time.Date(2024, 2, 29, 10, 1, 0, 0, time.UTC), time.Date(2024, 2, 29, 10, 0, 0, 3000000, time.UTC)), 50)
	// Split columns: one column of an index that allows duplicates
	// (source.CaptureInstance.SplitOn).
	splitOn := func(c *source.CaptureInstance, column string) *source.CaptureInstance {
		cp := *c
		cp.Key, cp.KeyIndex = []string{column}, &source.Index{Name: "IX_" + column, Columns: []string{column}}
		return &cp
	}
	seek("split_nullable/from_start", splitOn(ciNullable, "b"), nil, 1000)
	seek("split_nullable/from_null", splitOn(ciNullable, "b"), tup(nil), 1000)
	seek("split_nullable/from_key", splitOn(ciNullable, "b"), tup(int64(40)), 1000)
	seek("split_greek/from_key", splitOn(ciGreek, "name"), tup("Δέλτα"), 3)
	seek("split_utf8/from_key", splitOn(ciUTF8, "name"), tup("Kraków"), 100)
	g.check("seeks.sql")
}
