package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The tests in this file hold a real server to the facts of a table that
// changes under its capture instance (../FACTS.md F59-F67), each on a table
// of its own (named by the clock, so a kept database reruns them), and
// leave what SQL Server answers where the documentation is silent in the
// test log.

// ddlTable creates dbo.<prefix>_<n> with the columns cols (after "id")
// and a capture instance of the same name capturing every column, and
// drops both when the test ends.
func ddlTable(t *testing.T, c context.Context, db *sql.DB, prefix, key, cols string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
	exec(t, c, db, fmt.Sprintf("CREATE TABLE dbo.%s (id %s PRIMARY KEY, %s)", name, key, cols))
	enable(t, c, db, name, "dbo_"+name)
	t.Cleanup(func() {
		c := context.Background()
		_, _ = db.ExecContext(c, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = @p1, @capture_instance = N'all'", name)
		_, _ = db.ExecContext(c, "DROP TABLE dbo."+name)
	})
	return name
}

func exec(t *testing.T, c context.Context, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(c, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// enable creates capture instance ci on dbo.table, capturing every column.
func enable(t *testing.T, c context.Context, db *sql.DB, table, ci string) {
	t.Helper()
	exec(t, c, db, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = @p1, @capture_instance = @p2, @role_name = NULL, @supports_net_changes = 0", table, ci)
}

// ready waits until the capture job has reached ci (its minimum LSN is
// set), committing a row now and then so it has something to reach.
func ready(t *testing.T, c context.Context, s *sqlserver.Source, ci string, poke func()) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, ok, err := s.MinLSN(c, ci); err != nil {
			t.Fatal(err)
		} else if ok {
			return
		}
		poke()
	}
	t.Fatalf("the capture job did not reach %s in two minutes", ci)
}

// describe describes ci once the capture job has applied every DDL on its
// table (the captured types follow a retype then: F62).
func describe(t *testing.T, c context.Context, s *sqlserver.Source, ci string) *source.CaptureInstance {
	t.Helper()
	d, err := s.CaptureInstance(c, ci)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// readAll reads a whole table of ci, as Go values per column name.
func readAll(t *testing.T, c context.Context, s *sqlserver.Source, ci *source.CaptureInstance) []map[string]any {
	t.Helper()
	return recordMaps(t, tt{t}.must(s.ReadRange(c, ci, keyrange.Range{}, source.ReadOptions{})))
}

// recordMaps reads (and releases) rr as Go values per column name.
func recordMaps(t *testing.T, rr array.RecordReader) []map[string]any {
	t.Helper()
	defer rr.Release()
	var out []map[string]any
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			m := map[string]any{}
			for j, f := range rec.Schema().Fields() {
				v, err := fake.ArrowValue(rec.Column(j), i)
				if err != nil {
					t.Fatal(err)
				}
				m[f.Name] = v
			}
			out = append(out, m)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// history waits until the DDL history of ci holds n rows, and logs them.
func history(t *testing.T, c context.Context, s *sqlserver.Source, ci string, n int) []source.DDL {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		h, err := s.DDLHistory(c, ci)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) >= n || time.Now().After(deadline) {
			for _, d := range h {
				t.Logf("DDL history of %s: %+v", ci, d)
			}
			if len(h) < n {
				t.Fatalf("%d DDL history rows of %s after two minutes, want %d", len(h), ci, n)
			}
			return h
		}
	}
}

// TestDDLDropColumn: a dropped captured column stays captured with its
// column_id (F59), a snapshot reads it as NULL instead of failing with
// error 207, and change rows after the drop carry NULL (F60); the DDL
// history records the drop (F65), whose LSN maps to no commit time (the
// seed implementation's observation, logged).
func TestDDLDropColumn(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_drop", "int", "a varchar(10) NULL, b int NULL")
	ci := "dbo_" + name
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, a, b) VALUES (1, 'x', 10)")
	ready(t, c, s, ci, func() { exec(t, c, db, "UPDATE dbo."+name+" SET a = a WHERE id = 1") })
	before := describe(t, c, s, ci)
	b0, _ := before.Column("b")
	from, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, c, db, "ALTER TABLE dbo."+name+" DROP COLUMN b")
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, a) VALUES (2, 'y')")
	after := describe(t, c, s, ci)
	b, ok := after.Column("b")
	if !ok || !b.Dropped || b.ID != b0.ID || b0.ID == 0 {
		t.Fatalf("b after the drop: %+v (before %+v)", b, b0)
	}
	for _, r := range readAll(t, c, s, after) {
		if r["b"] != nil {
			t.Errorf("the snapshot read the dropped column as %v", r["b"])
		}
	}
	changes := rawChanges(t, c, s, after, from, 1)
	if last := changes[len(changes)-1]; last["id"] != int64(2) || last["b"] != nil {
		t.Errorf("the change row after the drop: %v", last)
	}
	h := history(t, c, s, ci, 1)
	var mapped sql.NullTime
	if err := db.QueryRowContext(c, "SELECT sys.fn_cdc_map_lsn_to_time(@p1)", h[0].LSN.Bytes()).Scan(&mapped); err != nil {
		t.Fatal(err)
	}
	t.Logf("F65: fn_cdc_map_lsn_to_time(ddl_lsn %s) = %v (valid %v); the peer saw NULL", h[0].LSN, mapped.Time, mapped.Valid)
}

// TestDDLReaddedColumn: a column dropped and added again under its name is
// another column (F61): the instance keeps the old column_id, so the
// snapshot reads NULL for it although the table's new column holds values.
func TestDDLReaddedColumn(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_readd", "int", "b int NULL")
	ci := "dbo_" + name
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, b) VALUES (1, 10)")
	ready(t, c, s, ci, func() { exec(t, c, db, "UPDATE dbo."+name+" SET b = b WHERE id = 1") })
	exec(t, c, db, "ALTER TABLE dbo."+name+" DROP COLUMN b")
	exec(t, c, db, "ALTER TABLE dbo."+name+" ADD b int NULL")
	exec(t, c, db, "UPDATE dbo."+name+" SET b = 99")
	var tableID int
	if err := db.QueryRowContext(c, "SELECT column_id FROM sys.columns WHERE object_id = OBJECT_ID(@p1) AND name = 'b'", "dbo."+name).Scan(&tableID); err != nil {
		t.Fatal(err)
	}
	d := describe(t, c, s, ci)
	b, _ := d.Column("b")
	t.Logf("F61: the instance's b has column_id %d, sys.columns' b %d", b.ID, tableID)
	if b.ID == tableID || !b.Dropped {
		t.Fatalf("the re-added column is matched as the captured one: %+v, table id %d", b, tableID)
	}
	for _, r := range readAll(t, c, s, d) {
		if r["b"] != nil {
			t.Errorf("the snapshot read the new column's %v for the instance's dropped one", r["b"])
		}
	}
}

// TestDDLRetype: ALTER COLUMN of a captured column's type reaches the
// captured type and the change table (F62): changes read in the new type,
// and the DDL history says required_column_update (F65).
func TestDDLRetype(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_retype", "int", "b int NULL")
	ci := "dbo_" + name
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, b) VALUES (1, 10)")
	ready(t, c, s, ci, func() { exec(t, c, db, "UPDATE dbo."+name+" SET b = b WHERE id = 1") })
	from, err := s.MaxLSN(c)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, c, db, "ALTER TABLE dbo."+name+" ALTER COLUMN b bigint NULL")
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, b) VALUES (2, 1099511627776)")
	h := history(t, c, s, ci, 1)
	if !h[0].RequiredColumnUpdate {
		t.Errorf("the retype's DDL history row has required_column_update 0: %+v", h[0])
	}
	d := describe(t, c, s, ci)
	if b, _ := d.Column("b"); b.Type != "bigint" {
		t.Errorf("the captured type after ALTER COLUMN is %s, want bigint", b.Declared())
	}
	changes := rawChanges(t, c, s, d, from, 1)
	if last := changes[len(changes)-1]; last["b"] != int64(1099511627776) {
		t.Errorf("the change row after the retype: %v", last)
	}
}

// bootstrapAndPoll bootstraps ci into a memory sink, polls its changes, and
// returns the table's Arrow schema; the snapshot's and the changes' types
// must agree, or the sink refuses the changes.
func bootstrapAndPoll(t *testing.T, c context.Context, s *sqlserver.Source, ci string) (*fake.MemSink, *arrow.Schema) {
	t.Helper()
	dst := fake.NewMemSink()
	t.Cleanup(func() { dst.Close() })
	from, _, err := snapshot.Bootstrap(c, s, dst, snapshot.Options{CaptureInstance: ci})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Poll(c, s, testworld.MemAppender{MemSink: dst}, ci, from, snapshot.PollOptions{BatchID: 1}); err != nil {
		t.Fatal(err)
	}
	schema, err := dst.ArrowSchema(c)
	if err != nil {
		t.Fatal(err)
	}
	return dst, schema
}

// TestDDLIdentityNumericKey: a numeric(18,0) IDENTITY key is int or bigint
// in the change table (F64); the table read and the change read cast it to
// the captured type, so a snapshot and its stream land in one bronze type.
// What sys.sp_cdc_get_captured_columns reports for it is logged.
func TestDDLIdentityNumericKey(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_ident", "numeric(18,0) IDENTITY(1,1)", "v varchar(10) NULL")
	ci := "dbo_" + name
	exec(t, c, db, "INSERT INTO dbo."+name+" (v) VALUES ('a'), ('b')")
	ready(t, c, s, ci, func() { exec(t, c, db, "UPDATE dbo."+name+" SET v = v") })
	d := describe(t, c, s, ci)
	id, _ := d.Column("id")
	t.Logf("F64: sp_cdc_get_captured_columns reports the identity key as %s (cast on read: %v)", id.Declared(), id.CastOnRead)
	var ctType string
	if err := db.QueryRowContext(c, "SELECT TYPE_NAME(system_type_id) FROM sys.columns WHERE object_id = OBJECT_ID(@p1) AND name = 'id'", "cdc."+ci+"_CT").Scan(&ctType); err != nil {
		t.Fatal(err)
	}
	t.Logf("F64: the change table's id is %s", ctType)
	exec(t, c, db, "INSERT INTO dbo."+name+" (v) VALUES ('c')")
	dst, schema := bootstrapAndPoll(t, c, s, ci)
	want, _ := id.ArrowType()
	if f, _ := schema.FieldsByName("id"); len(f) != 1 || !arrow.TypeEqual(f[0].Type, want) {
		t.Errorf("the bronze id is %v, want %s", f, want)
	}
	if n := len(dst.Commits()); n < 2 {
		t.Errorf("%d commits: the snapshot and the changes should both land", n)
	}
}

// TestDDLRowversion: a rowversion column is binary(8) in the change table
// (F64); the snapshot and the stream carry it as one binary type.
func TestDDLRowversion(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_rv", "int", "v varchar(10) NULL, rv rowversion")
	ci := "dbo_" + name
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, v) VALUES (1, 'a')")
	ready(t, c, s, ci, func() { exec(t, c, db, "UPDATE dbo."+name+" SET v = v") })
	d := describe(t, c, s, ci)
	rv, _ := d.Column("rv")
	t.Logf("F64: sp_cdc_get_captured_columns reports the rowversion as %s (cast on read: %v)", rv.Declared(), rv.CastOnRead)
	exec(t, c, db, "UPDATE dbo."+name+" SET v = 'b' WHERE id = 1")
	_, schema := bootstrapAndPoll(t, c, s, ci)
	if f, _ := schema.FieldsByName("rv"); len(f) != 1 || f[0].Type.ID() != arrow.BINARY {
		t.Errorf("the bronze rowversion is %v, want binary", f)
	}
}

// TestDDLSecondInstanceSwitch: a column added, a second capture instance
// enabled, the stream switched to it at its start_lsn (F66): the new
// column reaches the bronze table from the switch on, every change once;
// after the old instance is disabled its reads fail as F67 says.
func TestDDLSecondInstanceSwitch(t *testing.T) {
	db, s := open(t, "CDCSNAP_MSSQL_DSN")
	c := ctx(t)
	name := ddlTable(t, c, db, "ddl_switch", "int", "a varchar(10) NULL")
	a := "dbo_" + name
	b := a + "_v2"
	exec(t, c, db, "INSERT INTO dbo."+name+" (id, a) VALUES (1, 'x'), (2, 'y')")
	ready(t, c, s, a, func() { exec(t, c, db, "UPDATE dbo."+name+" SET a = a WHERE id = 1") })
	dst := fake.NewMemSink()
	t.Cleanup(func() { dst.Close() })
	from, _, err := snapshot.Bootstrap(c, s, dst, snapshot.Options{CaptureInstance: a})
	if err != nil {
		t.Fatal(err)
	}
	exec(t, c, db, "ALTER TABLE dbo."+name+" ADD c int NULL")
	exec(t, c, db, "UPDATE dbo."+name+" SET c = 5 WHERE id = 1")
	enable(t, c, db, name, b)
	ready(t, c, s, b, func() { exec(t, c, db, "UPDATE dbo."+name+" SET c = 6 WHERE id = 2") })
	if pick, err := snapshot.PickInstance(c, s, dst, a); err != nil || pick != a {
		t.Errorf("PickInstance with a's snapshot in the sink: %q, %v", pick, err)
	}
	app := testworld.MemAppender{MemSink: dst}
	res, err := snapshot.Switch(c, s, app, from, snapshot.SwitchOptions{From: a, To: b, BatchID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("F66: switched %s -> %s at %s (%d rows of %s)", a, b, res.At, res.Last.Rows, a)
	exec(t, c, db, "UPDATE dbo."+name+" SET c = 7 WHERE id = 2")
	next, batch := res.Next, int64(0)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		batch++
		polled, err := snapshot.Poll(c, s, app, b, next, snapshot.PollOptions{BatchID: batch})
		if err != nil {
			t.Fatal(err)
		}
		next = polled.Next
		if polled.Rows > 0 {
			break
		}
	}
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if op, _ := r["_operation"].(int64); op != 0 {
			k := fmt.Sprint(r["_start_lsn"], r["_seqval"], op)
			if seen[k] {
				t.Errorf("change %s twice", k)
			}
			seen[k] = true
			at, _ := lsn.Parse(fmt.Sprint(r["_start_lsn"]))
			if want := map[bool]string{true: a, false: b}[at.Less(res.At)]; r["_capture_instance"] != want {
				t.Errorf("change at %s stamped %v, want %s", at, r["_capture_instance"], want)
			}
		}
	}
	exec(t, c, db, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = @p1, @capture_instance = @p2", name, a)
	if _, err := s.ReadChanges(c, &source.CaptureInstance{Name: a, SourceSchema: "dbo", SourceTable: name, Columns: []source.Column{{Name: "id", Type: "int"}}}, res.At, res.At); !errors.Is(err, source.ErrNotFound) {
		t.Logf("F67: reading the disabled instance: %v", err)
	}
	if _, err := s.DDLHistory(c, a); err == nil {
		t.Errorf("the DDL history of a disabled instance was read")
	}
}
