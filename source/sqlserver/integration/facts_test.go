package integration

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqldocs"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The tests in this file hold the real server to the facts of ../FACTS.md
// that the unit tests can only take from documentation.

// freshID returns an id above every id in table (a trusted constant name),
// so a test that inserts can rerun against a kept database.
func freshID(t *testing.T, c context.Context, db *sql.DB, table string) int32 {
	t.Helper()
	var top sql.NullInt32
	if err := db.QueryRowContext(c, "SELECT MAX(id) FROM "+table).Scan(&top); err != nil {
		t.Fatal(err)
	}
	return top.Int32 + 1 + int32(time.Now().Unix()%1000)
}

// waitForChanges reads the changes of ci after the LSN after (at its
// start_lsn at the earliest) until at least n have arrived (the capture
// job polls every second) or two minutes pass.
func waitForChanges(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance, after lsn.LSN, n int) []change {
	t.Helper()
	from, err := after.Next()
	if err != nil {
		t.Fatal(err)
	}
	if from.Less(ci.StartLSN) {
		from = ci.StartLSN
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		max, err := s.MaxLSN(c)
		if err != nil {
			t.Fatal(err)
		}
		if !max.Less(from) {
			if got := readChanges(t, c, s, ci, from, max); len(got) >= n || time.Now().After(deadline) {
				if len(got) < n {
					t.Fatalf("%d changes of %s after two minutes, want %d", len(got), ci.Name, n)
				}
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no changes of %s after two minutes", ci.Name)
		}
		time.Sleep(time.Second)
	}
}

// rawChanges reads every change of ci after from as Go values per column
// name, as ReadChanges returns them, once n have arrived.
func rawChanges(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance, after lsn.LSN, n int) []map[string]any {
	t.Helper()
	waitForChanges(t, c, s, ci, after, n)
	from, _ := after.Next()
	if from.Less(ci.StartLSN) {
		from = ci.StartLSN
	}
	return recordMaps(t, tt{t}.must(s.ReadChanges(c, ci, from, lsn.Max)))
}

// TestDocumentedResultSets: the procedures return the columns, in the
// order and of the types, that Microsoft documents and the unit fixtures
// use (FACTS.md F01, F04, F16): column_ordinal, not ordinal_position, on
// SQL Server 2022; what character_maximum_length holds for binary columns
// is logged (F05: documented NULL for non-character types, which may or
// may not cover them); sys.fn_cdc_get_min_lsn is 0x00… for an instance
// that does not exist (F07).
func TestDocumentedResultSets(t *testing.T) {
	db, _ := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	for _, tc := range []struct {
		sql  string
		want []mssqldocs.Column
	}{
		{"EXEC sys.sp_cdc_help_change_data_capture", mssqldocs.HelpChangeDataCapture},
		{"EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_kinds'", mssqldocs.CapturedColumns},
		{"EXEC sys.sp_spaceused @objname = N'[dbo].[snap_int]'", mssqldocs.SpaceUsed},
	} {
		rows, err := db.QueryContext(c, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		types, err := rows.ColumnTypes()
		if err != nil {
			t.Fatal(err)
		}
		var lengths []string
		for rows.Next() {
			vals := make([]any, len(types))
			ptrs := make([]any, len(types))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if len(types) > 7 && types[3].Name() == "column_name" && (vals[6] == "binary" || vals[6] == "varbinary") {
				lengths = append(lengths, fmt.Sprintf("%v %v", vals[6], vals[7]))
			}
		}
		rows.Close()
		var got, want []string
		for _, ct := range types {
			got = append(got, ct.Name()+" "+ct.DatabaseTypeName())
		}
		for _, col := range tc.want {
			want = append(want, col.Name+" "+col.DriverType())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got  %q\n want %q", tc.sql, got, want)
		}
		// "NULL otherwise" may or may not cover binary types (FACTS.md
		// F05); the source takes either. Say which this server gives.
		for _, l := range lengths {
			t.Logf("sp_cdc_get_captured_columns: data_type and character_maximum_length of a binary column: %s", l)
		}
	}
	var zero []byte
	if err := db.QueryRowContext(c, "SELECT sys.fn_cdc_get_min_lsn(N'dbo_no_such_instance')").Scan(&zero); err != nil {
		t.Fatal(err)
	}
	if len(zero) != 10 || !slices.Equal(zero, make([]byte, 10)) {
		t.Errorf("fn_cdc_get_min_lsn of an instance that does not exist: %x, documented 0x00000000000000000000", zero)
	}
}

// TestDatetime2SplitsAt100ns: ten keys 100 ns apart under one leading
// value, cut into ten ranges: each reads its one row, which only bounds at
// datetime2(7)'s full precision can do (FACTS.md F31).
func TestDatetime2SplitsAt100ns(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_dt2")
	if err != nil {
		t.Fatal(err)
	}
	ranges := plan(t, c, s, ci, 10)
	if len(ranges) != 10 {
		t.Fatalf("%d ranges, want 10", len(ranges))
	}
	for _, r := range ranges {
		if n := countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))); n != 1 {
			t.Errorf("%s: %d rows, want 1", r, n)
		}
	}
}

// TestUTF8Varchar: a varchar column in a _UTF8 collation is read with
// every character it holds (FACTS.md F30, F45, F46: the source reads it as
// nvarchar), and its key splits into ranges that read every row once,
// bounds converted in the column's collation.
func TestUTF8Varchar(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_utf8")
	if err != nil {
		t.Fatal(err)
	}
	if col, _ := ci.Column("name"); col.CodePage != 65001 {
		t.Errorf("code page of a _UTF8 column: %d, want 65001", col.CodePage)
	}
	want := map[string]any{"abc": nil, "Kraków": "Łódź", "Zürich": "😀 emoji", "Łódź": "Polska", "Ωmega": "ключ", "東京": "日本"}
	got := map[string]any{}
	var sizes []int64
	for _, r := range plan(t, c, s, ci, 3) {
		rr := tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))
		var n int64
		for rr.Next() {
			rec := rr.RecordBatch()
			for i := range int(rec.NumRows()) {
				k, _ := fake.ArrowValue(rec.Column(0), i)
				v, _ := fake.ArrowValue(rec.Column(1), i)
				got[k.(string)] = v
				n++
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		sizes = append(sizes, n)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if fmt.Sprint(sizes) != "[2 2 2]" {
		t.Errorf("ranges hold %v rows, want [2 2 2]", sizes)
	}
}

// TestTurkishI: under Turkish_CI_AS 'I' and 'i' are two keys and 'I' and
// 'ı' one (FACTS.md F23), and a range from ('I', 5) to ('i', 3) holds
// I5..I8, i1 and i2: bounds that a case-insensitive fold would call equal
// must not share an equality.
func TestTurkishI(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	var iEqual, dotlessEqual int
	if err := db.QueryRowContext(c, "SELECT CASE WHEN N'I' = N'i' COLLATE Turkish_CI_AS THEN 1 ELSE 0 END, CASE WHEN N'I' = N'ı' COLLATE Turkish_CI_AS THEN 1 ELSE 0 END").Scan(&iEqual, &dotlessEqual); err != nil {
		t.Fatal(err)
	}
	if iEqual != 0 || dotlessEqual != 1 {
		t.Errorf("Turkish_CI_AS: 'I' = 'i' is %d (want 0), 'I' = 'ı' is %d (want 1)", iEqual, dotlessEqual)
	}
	ci, err := s.CaptureInstance(c, "dbo_snap_turkish")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, r := range keyrange.FromBounds([]keyrange.Tuple{{"I", int64(5)}, {"i", int64(3)}}) {
		sizes = append(sizes, countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))))
	}
	if fmt.Sprint(sizes) != "[5 6 7]" {
		t.Errorf("ranges cut at ('I', 5) and ('i', 3) hold %v rows, want [5 6 7]", sizes)
	}
	var total int64
	for _, r := range plan(t, c, s, ci, 4) {
		total += countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{})))
	}
	if total != 18 {
		t.Errorf("four keyset ranges read %d rows, want 18", total)
	}
}

// TestComputedAndLargeObjectNulls: a computed column is NULL in the
// snapshot and in every change row; text is NULL in deletes and
// update-before images; nvarchar(max) is NULL in an update-before image
// when the update left it alone, and holds its value in a delete (FACTS.md
// F13). Every change column is nullable though the table's are NOT NULL.
func TestComputedAndLargeObjectNulls(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_lob")
	if err != nil {
		t.Fatal(err)
	}
	if col, _ := ci.Column("total"); !col.Computed {
		t.Fatal("the computed column is not described as computed")
	}
	from, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	id := freshID(t, c, db, "dbo.snap_lob")
	for _, q := range []string{
		"INSERT INTO dbo.snap_lob (id, body, note) VALUES (@p1, N'body', 'note')",
		"UPDATE dbo.snap_lob SET note = 'note2' WHERE id = @p1",
		"DELETE FROM dbo.snap_lob WHERE id = @p1",
	} {
		if _, err := db.ExecContext(c, q, id); err != nil {
			t.Fatal(err)
		}
	}
	changes := rawChanges(t, c, s, ci, from, 4)
	var got []string
	for _, ch := range changes {
		if ch["id"] != int64(id) {
			continue
		}
		got = append(got, fmt.Sprintf("%v body=%v note=%v total=%v", ch[source.ColOperation], ch["body"], ch["note"], ch["total"]))
	}
	want := []string{
		"2 body=body note=note total=<nil>",
		"3 body=<nil> note=<nil> total=<nil>",
		"4 body=body note=note2 total=<nil>",
		"1 body=body note=<nil> total=<nil>",
	}
	if !slices.Equal(got, want) {
		t.Errorf("change rows:\n got  %q\n want %q", got, want)
	}
	if _, err := db.ExecContext(c, "INSERT INTO dbo.snap_lob (id, body, note) VALUES (@p1, N'kept', 'kept')", id+1); err != nil {
		t.Fatal(err)
	}
	rr := tt{t}.must(s.ReadRange(c, ci, keyrange.Range{Lower: keyrange.Tuple{int64(id + 1)}, Upper: keyrange.Tuple{int64(id + 2)}}, source.ReadOptions{}))
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		if i := rec.Schema().FieldIndices("total")[0]; !rec.Column(i).IsNull(0) {
			t.Errorf("the snapshot read the computed column as %s, want NULL as the stream has it", rec.Column(i).ValueStr(0))
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestKeyUpdateIsDeleteThenInsert: an UPDATE of the unique key is logged
// as a delete and an insert (FACTS.md F14), and the change table's
// __$command_id puts the delete first (F10).
func TestKeyUpdateIsDeleteThenInsert(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_keyupd")
	if err != nil {
		t.Fatal(err)
	}
	id := freshID(t, c, db, "dbo.snap_keyupd")
	before, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(c, "INSERT INTO dbo.snap_keyupd (id, v) VALUES (@p1, 1)", id); err != nil {
		t.Fatal(err)
	}
	waitForChanges(t, c, s, ci, before, 1)
	from, err := s.MaxLSN(c) // past the insert, which the capture job has processed
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(c, "UPDATE dbo.snap_keyupd SET id = @p2 WHERE id = @p1", id, id+1); err != nil {
		t.Fatal(err)
	}
	changes := waitForChanges(t, c, s, ci, from, 2)
	var got []string
	for _, ch := range changes {
		got = append(got, fmt.Sprintf("%d:%d:%v", ch.op, ch.id, ch.commandID))
	}
	want := []string{fmt.Sprintf("1:%d:true", id), fmt.Sprintf("2:%d:true", id+1)}
	if !slices.Equal(got, want) {
		t.Errorf("an update of the key: changes %q, want %q", got, want)
	}
}

// TestNonclusteredKeyIndex: an instance whose unique index is not the
// clustered one is described so (FACTS.md F36); a clustered one too.
func TestNonclusteredKeyIndex(t *testing.T) {
	_, s, logs := openWith(t, "CDCSNAP_MSSQL_DSN", nil)
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_nc")
	if err != nil {
		t.Fatal(err)
	}
	if ci.KeyIndex == nil || ci.KeyIndex.Name != "PK_snap_nc" || ci.KeyIndex.Clustered {
		t.Errorf("key index %+v, want the nonclustered PK_snap_nc", ci.KeyIndex)
	}
	if !strings.Contains(logs.String(), "nonclustered") {
		t.Errorf("not logged:\n%s", logs)
	}
	// F55: the table's indexes, with their key columns, clustered first;
	// a clustered index means no heap. A split on the clustered index's
	// column picks it.
	want := []source.Index{
		{Name: "CX_snap_nc_code", Columns: []string{"code"}, Clustered: true},
		{Name: "PK_snap_nc", Columns: []string{"id"}, Unique: true},
	}
	if !reflect.DeepEqual(ci.Indexes, want) || ci.Heap {
		t.Errorf("dbo_snap_nc: indexes %+v, heap %v; want %+v and no heap", ci.Indexes, ci.Heap, want)
	}
	if split, err := ci.SplitOn("code"); err != nil || split.KeyIndex.Name != "CX_snap_nc_code" || split.UniqueKey() {
		t.Errorf("SplitOn(code): %v, %+v", err, split)
	}
	if ci, err = s.CaptureInstance(c, "dbo_snap_int"); err != nil || ci.KeyIndex == nil || !ci.KeyIndex.Clustered {
		t.Errorf("dbo_snap_int: %v, key index %+v, want clustered", err, ci.KeyIndex)
	}
}

// TestGUIDConversionSetting: with the DSN's "guid conversion" on or off,
// uniqueidentifier keys read as the same text and bound back the same way
// (FACTS.md F44: the source probes the driver's byte order).
func TestGUIDConversionSetting(t *testing.T) {
	var texts []string
	for _, conv := range []string{"false", "true"} {
		_, s, _ := openWith(t, "CDCSNAP_MSSQL_DSN", func(u *url.URL) {
			q := u.Query()
			q.Set("guid conversion", conv)
			u.RawQuery = q.Encode()
		})
		c := ctx(t)
		ci, err := s.CaptureInstance(c, "dbo_kinds")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		ranges := plan(t, c, s, ci, 2)
		for _, r := range ranges {
			rr := tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))
			for rr.Next() {
				rec := rr.RecordBatch()
				for i := range int(rec.NumRows()) {
					ids = append(ids, rec.Column(0).ValueStr(i))
				}
			}
			if err := rr.Err(); err != nil {
				t.Fatal(err)
			}
			rr.Release()
		}
		texts = append(texts, strings.Join(ids, ","))
	}
	want := "6f9619ff-8b86-d011-b42d-00c04fc964ff,a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	sorted := func(s string) string { p := strings.Split(s, ","); slices.Sort(p); return strings.Join(p, ",") }
	for i, got := range texts {
		if sorted(got) != want {
			t.Errorf("guid conversion %v: ids %s, want %s, one per range", i == 1, got, want)
		}
	}
}

// TestCommitTimesAreInstants: the commit time of a change just made, read
// in the server's own zone (detected: the container runs on UTC), is
// within a minute or two of the server's UTC clock (FACTS.md F08, F37).
func TestCommitTimesAreInstants(t *testing.T) {
	db, s, logs := openWith(t, "CDCSNAP_MSSQL_DSN", nil)
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_keyupd")
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := db.QueryRowContext(c, "SELECT SYSUTCDATETIME()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	id := freshID(t, c, db, "dbo.snap_keyupd")
	if _, err := db.ExecContext(c, "INSERT INTO dbo.snap_keyupd (id, v) VALUES (@p1, 2)", id); err != nil {
		t.Fatal(err)
	}
	changes := rawChanges(t, c, s, ci, before, 1)
	var got time.Time
	for _, ch := range changes {
		if ch["id"] == int64(id) {
			got, _ = ch[source.ColCommitTS].(time.Time)
		}
	}
	if d := got.Sub(now); d < -time.Minute || d > 3*time.Minute {
		t.Errorf("commit time of the insert: %v, the server's UTC clock just before it %v", got, now)
	}
	if !strings.Contains(logs.String(), "ServerTimeZone is not set") {
		t.Errorf("the detected offset was not logged:\n%s", logs)
	}
}

// TestFastReadCasts: the two conversions the read statements ask of the
// server for the decoder's speed give what go-mssqldb's own decoding of
// the plain columns gives (FACTS.md F90, F91): an nvarchar and an nchar
// cast to varbinary are their UTF-16LE units (a supplementary character as
// a surrogate pair), and a decimal(18,4) times 10000 cast to bigint is its
// unscaled integer, at both ends of its range.
func TestFastReadCasts(t *testing.T) {
	db, _ := open(t, "CDCSNAP_MSSQL_DSN")
	var text string
	var units []byte
	var padded []byte
	var scaled, lo, hi int64
	err := db.QueryRowContext(ctx(t), "SELECT CAST(@p1 AS nvarchar(20)), CAST(CAST(@p1 AS nvarchar(20)) AS varbinary(40)), "+
		"CAST(CAST(@p2 AS nchar(3)) AS varbinary(6)), "+
		"CAST(CAST(@p3 AS decimal(18,4)) * @p4 AS bigint), CAST(CAST(@p5 AS decimal(18,4)) * @p4 AS bigint), CAST(CAST(@p6 AS decimal(18,4)) * @p4 AS bigint)",
		"Kraków 東京 😀", "ж", "-1234.5678", int64(10000), "-99999999999999.9999", "99999999999999.9999").Scan(&text, &units, &padded, &scaled, &lo, &hi)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, u := range utf16.Encode([]rune(text)) {
		want = append(want, byte(u), byte(u>>8))
	}
	if text != "Kraków 東京 😀" || !bytes.Equal(units, want) {
		t.Errorf("nvarchar %q as varbinary %x, want %x", text, units, want)
	}
	if !bytes.Equal(padded, []byte{0x36, 0x04, ' ', 0, ' ', 0}) {
		t.Errorf("nchar(3) 'ж' as varbinary %x, want 360420002000", padded)
	}
	if scaled != -12345678 || lo != -999999999999999999 || hi != 999999999999999999 {
		t.Errorf("scaled decimals %d %d %d", scaled, lo, hi)
	}
}

// TestStoredBytesConvertExactly: bytes code page 1252 leaves undefined, in
// a Latin1 varchar (UTF-8 "Á" written byte for byte: 0xC3 0x81), convert
// to nvarchar as the C1 control of the same number and back to the same
// bytes (FACTS.md F82: the reads take every char/varchar column through
// nvarchar, and bind keys back with CAST(@p COLLATE ... AS varchar)).
func TestStoredBytesConvertExactly(t *testing.T) {
	db, _ := open(t, "CDCSNAP_MSSQL_DSN")
	var text string
	var back []byte
	err := db.QueryRowContext(ctx(t), "SELECT CAST(CAST(@p1 AS varchar(10)) COLLATE Latin1_General_CI_AS AS nvarchar(10)), "+
		"CAST(CAST(CAST(CAST(@p1 AS varchar(10)) COLLATE Latin1_General_CI_AS AS nvarchar(10)) COLLATE Latin1_General_CI_AS AS varchar(10)) AS varbinary(10))",
		[]byte{0xC3, 0x81, 0x8D, 0x8F, 0x90, 0x9D}).Scan(&text, &back)
	if err != nil {
		t.Fatal(err)
	}
	if text != "Ã\u0081\u008D\u008F\u0090\u009D" || !bytes.Equal(back, []byte{0xC3, 0x81, 0x8D, 0x8F, 0x90, 0x9D}) {
		t.Errorf("1252 bytes as nvarchar %q and back %x; want %q and c3818d8f909d", text, back, "Ã\u0081\u008D\u008F\u0090\u009D")
	}
}
