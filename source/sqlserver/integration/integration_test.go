// Package integration tests source/sqlserver against a real SQL Server 2022
// with CDC. The tests run only when CDCSNAP_MSSQL_DSN is set; run.sh beside
// this file starts SQL Server in Docker, creates the database of setup.sql
// and runs them:
//
//	source/sqlserver/integration/run.sh
//
// CDCSNAP_MSSQL_READER_DSN, when set, is a least-privilege login (SELECT on
// the source tables only) for TestLeastPrivilege.
//
// The suite reruns against a kept database (run.sh with CDCSNAP_KEEP=1):
// tests that write use their own tables and fresh keys per run, and every
// other test only reads. Each test of a fact of ../FACTS.md names it.
package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

func open(t *testing.T, env string) (*sql.DB, *sqlserver.Source) {
	t.Helper()
	db, s, _ := openWith(t, env, nil)
	return db, s
}

// openWith opens the DSN in env, edited by edit when set, with a source
// whose log the test can read.
func openWith(t *testing.T, env string, edit func(*url.URL)) (*sql.DB, *sqlserver.Source, *logBuffer) {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		testenv.Skip(t, "SQL Server integration", env+" is not set",
			"source/sqlserver/integration/run.sh (starts SQL Server 2022 in Docker), or "+env+"=<DSN of a database made by integration/setup.sql> go test ./source/sqlserver/integration")
	}
	if edit != nil {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s is not a sqlserver:// URL: %s", env, sqlserver.RedactDSN(dsn))
		}
		edit(u)
		dsn = u.String()
	}
	db, err := sqlserver.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs := &logBuffer{}
	s, err := sqlserver.New(db, sqlserver.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return db, s, logs
}

// logBuffer collects a source's log, safe for its goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// seeker adapts the source to keyrange.Seeker.
type seeker struct {
	s  *sqlserver.Source
	ci *source.CaptureInstance
}

func (k seeker) SeekKey(ctx context.Context, from keyrange.Tuple, n int64) (keyrange.Tuple, bool, error) {
	return k.s.SeekKey(ctx, k.ci, source.ReadCommitted, from, n)
}

// plan cuts ci's table into n ranges as a snapshot does.
func plan(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance, n int) []keyrange.Range {
	t.Helper()
	cols, err := ci.KeyColumns()
	if err != nil {
		t.Fatal(err)
	}
	strategy, why := keyrange.Choose(cols, n)
	switch strategy {
	case keyrange.Uniform:
		min, max, ok, err := s.IntKeyBounds(c, ci)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return keyrange.Whole()
		}
		return keyrange.UniformRanges(min, max, n)
	case keyrange.Keyset:
		rows, err := s.RowCount(c, ci)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := keyrange.NTile(c, seeker{s, ci}, rows, n)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	t.Fatalf("%s: one partition: %s", ci.Name, why)
	return nil
}

func countRows(t *testing.T, rr array.RecordReader) int64 {
	t.Helper()
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

var rowsReadRE = regexp.MustCompile(`<RunTimeCountersPerThread [^>]*?ActualRowsRead="(\d+)"`)

// withPlan runs st on its own connection under SET STATISTICS XML ON and
// returns the rows it returned and, per seek or scan operator and thread,
// the rows it read (ActualRowsRead of the actual plan).
func withPlan(t *testing.T, c context.Context, db *sql.DB, st mssqlstmt.Stmt) (int64, []int64) {
	t.Helper()
	conn, err := db.Conn(c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(c, "SET STATISTICS XML ON"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "SET STATISTICS XML OFF") //nolint:errcheck
	rows, err := conn.QueryContext(c, st.SQL, st.Args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, st.SQL)
	}
	defer rows.Close()
	var n int64
	var read []int64
	first := true
	for {
		cols, _ := rows.Columns()
		isPlan := len(cols) == 1 && regexp.MustCompile(`(?i)showplan`).MatchString(cols[0])
		for rows.Next() {
			if isPlan {
				var xml string
				if err := rows.Scan(&xml); err != nil {
					t.Fatal(err)
				}
				for _, m := range rowsReadRE.FindAllStringSubmatch(xml, -1) {
					v, _ := strconv.ParseInt(m[1], 10, 64)
					read = append(read, v)
				}
			} else if first {
				n++
			}
		}
		if !isPlan {
			first = false
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n, read
}

func sum(v []int64) (s int64) {
	for _, x := range v {
		s += x
	}
	return s
}

// TestEachRangeReadsExactlyItsRows: uniform ranges over an integer key and
// keyset ranges over (company, id) with one, three and twenty companies;
// every range's pieces read exactly the rows it returns.
func TestEachRangeReadsExactlyItsRows(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	for _, tc := range []struct {
		ci    string
		parts int
		total int64
	}{{"dbo_snap_int", 4, 10000}, {"dbo_snap_comp1", 8, 40000}, {"dbo_snap_comp3", 8, 40000}, {"dbo_snap_comp20", 8, 40000}} {
		ci, err := s.CaptureInstance(c, tc.ci)
		if err != nil {
			t.Fatal(err)
		}
		ranges := plan(t, c, s, ci, tc.parts)
		if len(ranges) != tc.parts {
			t.Fatalf("%s: %d ranges, want %d", tc.ci, len(ranges), tc.parts)
		}
		var total int64
		for _, r := range ranges {
			st, err := mssqlstmt.ReadRangeStatement(ci, r)
			if err != nil {
				t.Fatal(err)
			}
			n, read := withPlan(t, c, db, st)
			if sum(read) != n {
				t.Errorf("%s %s: returned %d rows but read %d (%v)\n%s", tc.ci, r, n, sum(read), read, st.SQL)
			}
			got := countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{})))
			if got != n {
				t.Errorf("%s %s: ReadRange %d rows, plan run %d", tc.ci, r, got, n)
			}
			if want := tc.total / int64(tc.parts); got != want {
				t.Errorf("%s %s: %d rows, want %d", tc.ci, r, got, want)
			}
			total += got
		}
		if total != tc.total {
			t.Errorf("%s: ranges hold %d rows, table %d", tc.ci, total, tc.total)
		}
	}
}

// tt lets a call returning (reader, error) be passed whole: tt{t}.must(f()).
type tt struct{ *testing.T }

func (x tt) must(rr array.RecordReader, err error) array.RecordReader {
	x.Helper()
	if err != nil {
		x.Fatal(err)
	}
	return rr
}

// TestKeysetSeeksReadAtMostKPlusOne: a seek's every piece reads at most
// k + 1 keys.
func TestKeysetSeeksReadAtMostKPlusOne(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_comp20")
	if err != nil {
		t.Fatal(err)
	}
	const k = 10000
	from := keyrange.Tuple{int64(3), int64(503)}
	st, err := mssqlstmt.SeekKeyStatement(ci, from, k)
	if err != nil {
		t.Fatal(err)
	}
	n, read := withPlan(t, c, db, st)
	if n != 1 {
		t.Fatalf("seek returned %d rows", n)
	}
	for _, r := range read {
		if r > k+1 {
			t.Errorf("a piece read %d keys, more than k+1 = %d (%v)\n%s", r, k+1, read, st.SQL)
		}
	}
	key, ok, err := s.SeekKey(c, ci, source.Snapshot, from, k)
	if err != nil || !ok {
		t.Fatalf("SeekKey: %v %v", ok, err)
	}
	t.Logf("key %d rows after %v: %v", k, []any(from), []any(key))
}

// TestGreekPartitions: a Greek_CI_AS varchar key in a CP1252 database comes
// out 4/3/3. The negative control runs the same statements without the
// COLLATE on the bounds: the bounds then convert in the database's code
// page, every Greek letter becomes '?' (FACTS.md F29), and the sizes are
// not 4/3/3, so the test can fail.
func TestGreekPartitions(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	ranges := greekPartitions(t, s)
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_greek")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, r := range ranges {
		st, err := mssqlstmt.ReadRangeStatement(ci, r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Lower != nil || r.Upper != nil {
			if !strings.Contains(st.SQL, " COLLATE Greek_CI_AS AS varchar(20)") {
				t.Fatalf("no COLLATE to remove in\n%s", st.SQL)
			}
			st.SQL = strings.ReplaceAll(st.SQL, " COLLATE Greek_CI_AS AS varchar(20)", " AS varchar(20)")
		}
		n, _ := withPlan(t, c, db, st)
		sizes = append(sizes, n)
	}
	if fmt.Sprint(sizes) == "[4 3 3]" {
		t.Errorf("without COLLATE the ranges still hold %v: the test cannot tell the COLLATE matters", sizes)
	}
	t.Logf("without COLLATE on the bounds: %v", sizes)
}

func greekPartitions(t *testing.T, s *sqlserver.Source) []keyrange.Range {
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_greek")
	if err != nil {
		t.Fatal(err)
	}
	if col, _ := ci.Column("name"); col.Collation != "Greek_CI_AS" || col.CodePage != 1253 {
		t.Fatalf("collation %q, code page %d: want Greek_CI_AS, 1253", col.Collation, col.CodePage)
	}
	ranges := plan(t, c, s, ci, 3)
	var sizes []int64
	for _, r := range ranges {
		sizes = append(sizes, countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{Isolation: source.Snapshot}))))
	}
	if fmt.Sprint(sizes) != "[4 3 3]" {
		t.Fatalf("Greek partitions %v, want [4 3 3] (ranges %v)", sizes, ranges)
	}
	return ranges
}

// TestMixedCaseKeys: 'n' and 'N' compare equal under Latin1_General_CI_AS;
// the instance name matches ignoring case; every row is read exactly once
// whatever the cut.
func TestMixedCaseKeys(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "DBO_SNAP_CASE")
	if err != nil {
		t.Fatal(err)
	}
	if ci.Name != "dbo_Snap_Case" {
		t.Fatalf("resolved %q", ci.Name)
	}
	for parts := 2; parts <= 10; parts++ {
		var total int64
		for _, r := range plan(t, c, s, ci, parts) {
			total += countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{})))
		}
		if total != 10 {
			t.Errorf("%d partitions read %d rows, want 10", parts, total)
		}
	}
	// Bounds that differ only in case are one value under _CI: one
	// equality piece reads the middle range.
	var sizes []int64
	for _, r := range keyrange.FromBounds([]keyrange.Tuple{{"n", int64(4)}, {"N", int64(7)}}) {
		sizes = append(sizes, countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))))
	}
	if fmt.Sprint(sizes) != "[3 3 4]" {
		t.Errorf("ranges cut at (n,4) and (N,7) hold %v rows, want [3 3 4]", sizes)
	}
}

// TestAccentInsensitiveGuards: bounds 'e' and 'é' differ in Go but are
// equal under Latin1_General_CI_AI; the guards make the first group of
// pieces read the middle range and the last group nothing.
func TestAccentInsensitiveGuards(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_accent")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, r := range keyrange.FromBounds([]keyrange.Tuple{{"e", int64(3)}, {"é", int64(5)}}) {
		sizes = append(sizes, countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))))
	}
	if fmt.Sprint(sizes) != "[2 2 2]" {
		t.Errorf("ranges cut at (e,3) and (é,5) hold %v rows, want [2 2 2]", sizes)
	}
}

// TestEveryTypeRoundTrips reads the table with every type, keyed by
// (uniqueidentifier, datetime2(7)) with names that need quoting, and checks
// every value of both rows against what setup.sql inserted, as
// source.Column.ArrowType maps it (FACTS.md F43 for what the driver
// returns). The second row is NULL but for its key and rowversion.
func TestEveryTypeRoundTrips(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_kinds")
	if err != nil {
		t.Fatal(err)
	}
	// Lengths of binary types come from sys.columns (FACTS.md F05).
	for name, decl := range map[string]string{"bin": "binary(4)", "vb": "varbinary(max)", "c": "char(3)", "nc": "nchar(2)", "dto": "datetimeoffset(7)", "t0": "time(0)"} {
		if col, ok := ci.Column(name); !ok || col.Declared() != decl {
			t.Errorf("column %s declared %s, want %s", name, col.Declared(), decl)
		}
	}
	utc := func(y int, mo time.Month, d, h, mi, sec, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, sec, ns, time.UTC)
	}
	want := map[string]any{
		"id ]x": "6f9619ff-8b86-d011-b42d-00c04fc964ff", "at": utc(2024, 3, 1, 12, 0, 0, 123456000),
		"b": true, "ti": int64(255), "si": int64(-32768), "bi": int64(-9223372036854775808),
		"dec": keyrange.Decimal("-1234567890123456789012345678.0123456789"), "num": keyrange.Decimal("123.45"),
		"m": keyrange.Decimal("922337203685477.5807"), "sm": keyrange.Decimal("-214748.3648"),
		"f": 0.1, "r": 0.5, "d": utc(2024, 2, 29, 0, 0, 0, 0), "t0": "23:59:59", "t7": "00:00:00.0000001",
		"dt": utc(2024, 1, 2, 3, 4, 5, 997000000), "sdt": utc(2079, 6, 6, 23, 59, 0, 0),
		"dto": utc(2024, 3, 1, 10, 0, 0, 0), // 12:00:00.0000001+02:00, to µs
		"c":   "ab ", "vc": "x", "nc": "ü ", "nv": "ключ", "bin": []byte{0, 1, 2, 0xff}, "vb": []byte{},
	}
	rr := tt{t}.must(s.ReadRange(c, ci, keyrange.Range{}, source.ReadOptions{}))
	defer rr.Release()
	rows := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			rows++
			first := rec.Column(0).ValueStr(i) == want["id ]x"]
			for j, f := range rec.Schema().Fields() {
				got, err := fake.ArrowValue(rec.Column(j), i)
				if err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
				switch {
				case f.Name == "rv":
					if b, ok := got.([]byte); !ok || len(b) != 8 {
						t.Errorf("rowversion %v, want 8 bytes", got)
					}
				case f.Name == "h" || f.Name == "geo":
					if b, ok := got.([]byte); first && (!ok || len(b) == 0) || !first && got != nil {
						t.Errorf("row %d %s: %v", i, f.Name, got)
					}
				case f.Name == "id ]x":
					if got != "6f9619ff-8b86-d011-b42d-00c04fc964ff" && got != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" {
						t.Errorf("uniqueidentifier %v", got)
					}
				case f.Name == "x" && first:
					// SQL Server stores xml parsed and may write it back with
					// other spacing ("<a b=\"1\" />").
					if x, ok := got.(string); !ok || !strings.HasPrefix(x, "<a b=\"1\"") || !strings.HasSuffix(x, "/>") {
						t.Errorf("xml: %#v, want <a b=\"1\"/>", got)
					}
				case f.Name == "at" && !first:
					if got != utc(2024, 3, 1, 12, 0, 0, 123456000) { // ...1234568 to µs
						t.Errorf("at of the second row: %v", got)
					}
				case first:
					if !reflect.DeepEqual(got, want[f.Name]) {
						t.Errorf("%s: %#v, want %#v", f.Name, got, want[f.Name])
					}
				default:
					if got != nil {
						t.Errorf("second row %s: %#v, want NULL", f.Name, got)
					}
				}
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d rows, want 2", rows)
	}
}

// TestConnectionsGoBackReset: after a SNAPSHOT read the pooled connection
// is at READ COMMITTED again.
func TestConnectionsGoBackReset(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	db.SetMaxOpenConns(1)
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_greek")
	if err != nil {
		t.Fatal(err)
	}
	countRows(t, tt{t}.must(s.ReadRange(c, ci, keyrange.Range{}, source.ReadOptions{Isolation: source.Snapshot})))
	var level int
	if err := db.QueryRowContext(c, "SELECT transaction_isolation_level FROM sys.dm_exec_sessions WHERE session_id = @@SPID").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != 2 {
		t.Fatalf("pooled connection left at isolation level %d, want 2 (READ COMMITTED)", level)
	}
}

// TestBootstrapMeetsTheStream: L0 recorded before the read, the snapshot,
// then the changes after L0 (read from the change table, ordered by
// __$command_id) bring it to the table's current state. It writes only
// dbo.snap_stream, with keys fresh on every run.
func TestBootstrapMeetsTheStream(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "DBO_SNAP_STREAM")
	if err != nil {
		t.Fatal(err)
	}
	l0, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	if l0.Less(ci.StartLSN) {
		if l0, err = ci.StartLSN.Prev(); err != nil {
			t.Fatal(err)
		}
	}
	snap := readTable(t, c, s, ci)
	var top int32
	for id := range snap {
		top = max(top, id)
	}
	var low []int32 // the ten lowest live ids
	for id := int32(1); len(low) < 20 && id <= top; id++ {
		if _, ok := snap[id]; ok {
			low = append(low, id)
		}
	}
	if len(low) < 20 {
		t.Fatalf("dbo.snap_stream holds %d rows: rerun setup.sql", len(snap))
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"UPDATE dbo.snap_stream SET v = 'changed' WHERE id BETWEEN @p1 AND @p2", []any{low[0], low[9]}},
		{"DELETE FROM dbo.snap_stream WHERE id BETWEEN @p1 AND @p2", []any{low[10], low[19]}},
		{"INSERT INTO dbo.snap_stream (id, v) VALUES (@p1, 'new1'), (@p2, 'new2')", []any{top + 1, top + 2}},
	} {
		if _, err := db.ExecContext(c, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	from, _ := l0.Next()
	// Wait for the capture job (polling every second) to reach the changes.
	deadline := time.Now().Add(2 * time.Minute)
	var changes []change
	for {
		max, err := s.MaxLSN(c)
		if err != nil {
			t.Fatal(err)
		}
		changes = readChanges(t, c, s, ci, from, max)
		if len(changes) >= 10*2+10+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, ch := range changes {
		if !ch.commandID {
			t.Fatal("a change from the change table has no __$command_id: the db_owner login should read cdc.<instance>_CT")
		}
		switch ch.op {
		case 1:
			delete(snap, ch.id)
		case 2, 4:
			snap[ch.id] = ch.v
		}
	}
	now := readTable(t, c, s, ci)
	if len(now) != len(snap) {
		t.Fatalf("after the stream: %d rows, table has %d", len(snap), len(now))
	}
	for id, v := range now {
		if snap[id] != v {
			t.Fatalf("id %d: bootstrap+stream %q, table %q", id, snap[id], v)
		}
	}
	// Below the minimum LSN is data loss, never an empty result.
	_, err = s.ReadChanges(c, ci, lsn.LSN{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, l0)
	if !errors.Is(err, source.ErrDataLoss) {
		t.Fatalf("read below min LSN: %v", err)
	}
}

func readTable(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance) map[int32]string {
	t.Helper()
	rr := tt{t}.must(s.ReadRange(c, ci, keyrange.Range{}, source.ReadOptions{}))
	defer rr.Release()
	out := map[int32]string{}
	for rr.Next() {
		rec := rr.RecordBatch()
		ids := rec.Column(0).(*array.Int32)
		vs := rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			out[ids.Value(i)] = vs.Value(i)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type change struct {
	op        int32
	id        int32
	v         string
	commandID bool // _command_id is set
}

func readChanges(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance, from, to lsn.LSN) []change {
	t.Helper()
	rr, err := s.ReadChanges(c, ci, from, to)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var out []change
	for rr.Next() {
		rec := rr.RecordBatch()
		idx := rec.Schema().FieldIndices(source.ColOperation)[0]
		cmd := rec.Schema().FieldIndices(source.ColCommandID)[0]
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, change{
				op:        rec.Column(idx).(*array.Int32).Value(i),
				id:        rec.Column(0).(*array.Int32).Value(i),
				v:         rec.Column(1).(*array.String).Value(i),
				commandID: !rec.Column(cmd).IsNull(i),
			})
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLeastPrivilege: a login with SELECT on the source tables only can
// describe the instance, plan, read, and read changes: it may not read the
// change tables, so changes come through the change function, without
// __$command_id, with a warning (FACTS.md F11, F19, F54). An instance
// gated by a role the login is not in is not listed, and its minimum LSN
// is 0x00…: an *source.AccessError, never "no changes" (F01, F07).
func TestLeastPrivilege(t *testing.T) {
	admin, owner := open(t, "CDCSNAP_MSSQL_DSN")
	rdb, strict, _ := openWith(t, "CDCSNAP_MSSQL_READER_DSN", nil)
	logs := &logBuffer{}
	s, err := sqlserver.New(rdb, sqlserver.Options{AllowChangeFunction: true, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	greekPartitions(t, s)
	ci, err := s.CaptureInstance(c, "dbo_snap_keyupd")
	if err != nil {
		t.Fatal(err)
	}
	from, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	id := freshID(t, c, admin, "dbo.snap_keyupd")
	if _, err := admin.ExecContext(c, "INSERT INTO dbo.snap_keyupd (id, v) VALUES (@p1, 1)", id); err != nil {
		t.Fatal(err)
	}
	// The plan's check says so before any change is read: HAS_PERMS_BY_NAME
	// answers for the change table (FACTS.md F86); db_owner may read it,
	// and a source that may fall back to the change function is not
	// refused.
	if denied, err := strict.ChangeAccess(c, ci); err != nil || !errors.Is(denied, sqlserver.ErrChangeTableDenied) || !strings.Contains(denied.Error(), "cdc.[dbo_snap_keyupd_CT]") {
		t.Errorf("ChangeAccess of the least-privilege login: %v, %v; want ErrChangeTableDenied naming cdc.[dbo_snap_keyupd_CT]", denied, err)
	}
	if denied, err := s.ChangeAccess(c, ci); denied != nil || err != nil {
		t.Errorf("ChangeAccess with AllowChangeFunction: %v, %v; want neither", denied, err)
	}
	if denied, err := owner.ChangeAccess(c, ci); denied != nil || err != nil {
		t.Errorf("ChangeAccess of db_owner: %v, %v; want neither", denied, err)
	}
	// By default the change function is refused, naming the grant
	// (FACTS.md F54).
	// Up to the max LSN: a read above it is refused before the change
	// table is tried (a *source.ReplicaBehindError).
	to, err := strict.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	if rr, err := strict.ReadChanges(c, ci, from, to); err == nil {
		rr.Release()
		t.Error("the default source read changes without SELECT on the change table")
	} else if !errors.Is(err, sqlserver.ErrChangeTableDenied) || !strings.Contains(err.Error(), "GRANT SELECT ON cdc.[dbo_snap_keyupd_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>") {
		t.Errorf("default source: %v, want sqlserver.ErrChangeTableDenied naming both grants", err)
	}
	changes := waitForChanges(t, c, s, ci, from, 1)
	if changes[0].op != 2 || changes[0].id != id || changes[0].commandID {
		t.Errorf("changes %+v: want the insert of %d, with no command id (the change function)", changes, id)
	}
	if !strings.Contains(logs.String(), "may not read the change table") {
		t.Errorf("the fallback to the change function was not logged:\n%s", logs)
	}
	max, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LSNTime(c, max); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RowCount(c, ci); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dbo_snap_comp3", "dbo_Snap_Case", "dbo_kinds"} {
		if _, err := s.CaptureInstance(c, n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	var nf *source.NotFoundError
	if _, err := s.CaptureInstance(c, "dbo_snap_gated"); !errors.As(err, &nf) {
		t.Errorf("an instance gated by a role the login is not in: %v, want a *source.NotFoundError", err)
	}
	var ae *source.AccessError
	if _, _, err := s.MinLSN(c, "dbo_snap_gated"); !errors.As(err, &ae) {
		t.Errorf("MinLSN of an instance the login may not read: %v, want a *source.AccessError", err)
	}
	if _, _, err := s.MinLSN(c, "dbo_no_such_instance"); !errors.As(err, &ae) {
		t.Errorf("MinLSN of an instance that does not exist: %v, want a *source.AccessError", err)
	}
}
