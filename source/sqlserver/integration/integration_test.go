// Package integration tests source/sqlserver against a real SQL Server 2022
// with CDC. The tests run only when CDCSNAP_MSSQL_DSN is set; run.sh beside
// this file starts SQL Server in Docker, creates the database of setup.sql
// and runs them:
//
//	source/sqlserver/integration/run.sh
//
// CDCSNAP_MSSQL_READER_DSN, when set, is a least-privilege login (SELECT on
// the source tables only) for TestLeastPrivilege.
package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

func open(t *testing.T, env string) (*sql.DB, *sqlserver.Source) {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		testenv.Skip(t, "SQL Server integration", env+" is not set",
			"source/sqlserver/integration/run.sh (starts SQL Server 2022 in Docker), or "+env+"=<DSN of a database made by integration/setup.sql> go test ./source/sqlserver/integration")
	}
	db, err := sqlserver.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqlserver.New(db, sqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, s
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
func withPlan(t *testing.T, c context.Context, db *sql.DB, st sqlserver.Stmt) (int64, []int64) {
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
			st, err := sqlserver.ReadRangeStatement(ci, r)
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
	st, err := sqlserver.SeekKeyStatement(ci, from, k)
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
// out 4/3/3 (without COLLATE on the bounds it came out 0/0/10).
func TestGreekPartitions(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	greekPartitions(t, s)
}

func greekPartitions(t *testing.T, s *sqlserver.Source) {
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_snap_greek")
	if err != nil {
		t.Fatal(err)
	}
	if col, _ := ci.Column("name"); col.Collation != "Greek_CI_AS" {
		t.Fatalf("collation %q not visible", col.Collation)
	}
	ranges := plan(t, c, s, ci, 3)
	var sizes []int64
	for _, r := range ranges {
		sizes = append(sizes, countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{Isolation: source.Snapshot}))))
	}
	if fmt.Sprint(sizes) != "[4 3 3]" {
		t.Fatalf("Greek partitions %v, want [4 3 3] (ranges %v)", sizes, ranges)
	}
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
// (uniqueidentifier, datetime2(7)) with names that need quoting.
func TestEveryTypeRoundTrips(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "dbo_kinds")
	if err != nil {
		t.Fatal(err)
	}
	rr := tt{t}.must(s.ReadRange(c, ci, keyrange.Range{}, source.ReadOptions{}))
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		for i, f := range rec.Schema().Fields() {
			t.Logf("%s %s: %s | %s", f.Name, f.Type, rec.Column(i).ValueStr(0), rec.Column(i).ValueStr(1))
		}
		id := rec.Column(0).ValueStr(0)
		if id != "6f9619ff-8b86-d011-b42d-00c04fc964ff" && id != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" {
			t.Errorf("uniqueidentifier %q", id)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	// Both keys differ only at 100 ns: a split between them must read one
	// row on each side.
	ranges := plan(t, c, s, ci, 2)
	if len(ranges) != 2 {
		t.Fatalf("ranges %v", ranges)
	}
	for _, r := range ranges {
		if n := countRows(t, tt{t}.must(s.ReadRange(c, ci, r, source.ReadOptions{}))); n != 1 {
			t.Errorf("%s: %d rows", r, n)
		}
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
// then changes after L0 bring it to the table's current state.
func TestBootstrapMeetsTheStream(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	ci, err := s.CaptureInstance(c, "DBO_SNAP_INT")
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
	for _, q := range []string{
		"UPDATE dbo.snap_int SET v = 'changed' WHERE id <= 10",
		"DELETE FROM dbo.snap_int WHERE id BETWEEN 11 AND 20",
		"INSERT INTO dbo.snap_int (id, v) VALUES (20001, 'new1'), (20002, 'new2')",
	} {
		if _, err := db.ExecContext(c, q); err != nil {
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
	for _, ch := range changes { // already in (start_lsn, seqval, operation) order
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
	op int32
	id int32
	v  string
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
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, change{
				op: rec.Column(idx).(*array.Int32).Value(i),
				id: rec.Column(0).(*array.Int32).Value(i),
				v:  rec.Column(1).(*array.String).Value(i),
			})
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLeastPrivilege: a login with SELECT on the source tables only can
// describe the instance, plan, read and read changes.
func TestLeastPrivilege(t *testing.T) {
	_, s := open(t, "CDCSNAP_MSSQL_READER_DSN")
	c := ctx(t)
	greekPartitions(t, s)
	ci, err := s.CaptureInstance(c, "dbo_snap_int")
	if err != nil {
		t.Fatal(err)
	}
	max, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	min, ok, err := s.MinLSN(c, ci.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		_ = readChanges(t, c, s, ci, min, max)
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
}
