package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// evolvedReaders is run by TestEvolvedTableReaders with the interop
// Python: delta-rs reads the table and computes each key's latest image by
// the bronze order (DESIGN.md: _start_lsn, _command_id, _seqval,
// _operation, NULLs first; a delete or an update-before removes the key,
// an update's after image following its before image); DuckDB's delta_scan counts the rows and the new column's
// values.
const evolvedReaders = `
import glob, json, os, sys
import pyarrow as pa
from deltalake import DeltaTable
path = sys.argv[1]
t = DeltaTable(path).to_pyarrow_table()
rows = t.to_pylist()
def order(r):
    n = lambda v: (0, 0) if v is None else (1, v)
    return (r["_start_lsn"], n(r["_command_id"]), n(r["_seqval"]), r["_operation"])
latest = {}
for r in sorted(rows, key=order):
    if r["_operation"] in (1, 3):
        latest.pop(r["id"], None)
    else:
        latest[r["id"]] = {"a": r["a"], "d": r["d"], "ci": r["_capture_instance"]}
import duckdb, duckdb_extension_delta
ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions", "*", "delta.duckdb_extension"))
con = duckdb.connect()
con.execute(f"LOAD '{ext[0]}'")
q = f"delta_scan('{path}')"
duck = con.execute(f"SELECT count(*), count(d) FROM {q}").fetchone()
print(json.dumps({"rows": len(rows), "columns": t.schema.names, "latest": {str(k): v for k, v in latest.items()},
                  "duck_rows": duck[0], "duck_d": duck[1]}))
`

// TestEvolvedTableReaders: a Delta bronze table that went through a
// dropped column, an added column, a second capture instance and the
// switch to it (the new column added to the table by a metadata action,
// the files before it lacking the column) is read by delta-rs and DuckDB,
// and its latest image equals the source in every column the instance
// that wrote each key's row captures. Key 8 moves to 108 under trace flag
// 8207, logged as an update-before of 8 and an update-after of 108. A retype the table cannot take
// stops the stream with a *SchemaChangeError on Delta too, the table's
// version unchanged.
func TestEvolvedTableReaders(t *testing.T) {
	py := testenv.Python(t, "delta-rs and DuckDB read an evolved table")
	ctx := context.Background()
	db := fake.New(fake.Options{SingletonKeyUpdates: true})
	must := func(_ lsn.LSN, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "a", Type: "varchar(10)", Nullable: true}, {Name: "b", Type: "int", Nullable: true}, {Name: "c", Type: "int", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		must(db.Load("dbo", "t", fake.Row{int64(i), fmt.Sprint("a", i), int64(i), int64(i)}))
	}
	dir := filepath.Join(t.TempDir(), "bronze")
	table, err := delta.Open(ctx, dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	from, _, err := snapshot.Bootstrap(ctx, db, table, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 2, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	must(db.DropColumn("dbo", "t", "b"))
	must(db.AddColumn("dbo", "t", fake.ColumnDef{Name: "d", Type: "nvarchar(20)", Nullable: true}))
	tx := db.Begin()
	for i := range 5 {
		if err := tx.Update("dbo", "t", []any{int64(i)}, fake.Row{int64(i), "upd", int64(i), "early"}); err != nil {
			t.Fatal(err)
		}
	}
	must(tx.Commit())
	if _, err := db.EnableCDC("dbo", "t", "dbo_t_v2"); err != nil {
		t.Fatal(err)
	}
	tx = db.Begin()
	if err := tx.Delete("dbo", "t", []any{int64(7)}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 10; i++ {
		if i != 7 {
			to := int64(i)
			if i == 8 {
				to = 108
			}
			if err := tx.Update("dbo", "t", []any{int64(i)}, fake.Row{to, "late", int64(i), fmt.Sprint("d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Insert("dbo", "t", fake.Row{int64(100), "new", int64(1), "dnew"}); err != nil {
		t.Fatal(err)
	}
	must(tx.Commit())
	sw, err := snapshot.Switch(ctx, db, table, from, snapshot.SwitchOptions{From: "dbo_t", To: "dbo_t_v2", BatchID: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := snapshot.Poll(ctx, db, table, "dbo_t_v2", sw.Next, snapshot.PollOptions{BatchID: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The old instance disabled, a rerun of the switch finds its last
	// batch in the table (delta.Table.LastBatch) and resumes.
	if err := db.DisableCDC("dbo_t"); err != nil {
		t.Fatal(err)
	}
	if again, err := snapshot.Switch(ctx, db, table, from, snapshot.SwitchOptions{From: "dbo_t", To: "dbo_t_v2", BatchID: 1}); err != nil || !again.Resumed || again.Next != sw.Next {
		t.Fatalf("the switch rerun after dbo_t was disabled: %+v, %v", again, err)
	}

	// A retype the table cannot take (no type widening): the stream
	// stops, nothing written.
	must(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "c", Type: "bigint", Nullable: true}))
	must(db.Load("dbo", "t", fake.Row{int64(101), "x", int64(1) << 40, nil}))
	v0, err := table.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot.Poll(ctx, db, table, "dbo_t_v2", p.Next, snapshot.PollOptions{BatchID: 2})
	var sc *snapshot.SchemaChangeError
	if !errors.As(err, &sc) || len(sc.DDL) != 1 || !strings.Contains(err.Error(), "ALTER COLUMN [c] bigint") || !strings.Contains(err.Error(), sc.DDL[0].LSN.String()) {
		t.Fatalf("a retype the Delta table cannot take: %v", err)
	}
	if v1, _ := table.Version(ctx); v1 != v0 {
		t.Fatalf("the refused batch moved the table from version %d to %d", v0, v1)
	}

	script := filepath.Join(t.TempDir(), "evolved.py")
	if err := os.WriteFile(script, []byte(evolvedReaders), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, dir).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", py, script, err)
	}
	var got struct {
		Rows    int                       `json:"rows"`
		Columns []string                  `json:"columns"`
		Latest  map[string]map[string]any `json:"latest"`
		DuckRow int                       `json:"duck_rows"`
		DuckD   int                       `json:"duck_d"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// d is non-NULL in dbo_t_v2's rows only: 6 update-afters and an
	// insert, and the update-befores of keys 3 and 4 ("early").
	if !strings.Contains(strings.Join(got.Columns, ","), "d") || got.DuckRow != got.Rows || got.DuckD != 9 {
		t.Fatalf("delta-rs read %d rows, columns %v; DuckDB %d rows, %d values of d", got.Rows, got.Columns, got.DuckRow, got.DuckD)
	}
	srcRows, err := db.Rows("dbo", "t")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, r := range srcRows {
		if r[0] == int64(101) {
			continue // committed after the stream stopped
		}
		want++
		img, ok := got.Latest[fmt.Sprint(r[0])]
		if !ok {
			t.Fatalf("key %v: not in delta-rs's latest image", r[0])
		}
		if img["a"] != r[1] {
			t.Errorf("key %v: a = %v, the source %v", r[0], img["a"], r[1])
		}
		// d is the new instance's: equal where its row wrote the key.
		if img["ci"] == "dbo_t_v2" && img["d"] != r[3] {
			t.Errorf("key %v: d = %v from dbo_t_v2, the source %v", r[0], img["d"], r[3])
		}
	}
	if len(got.Latest) != want {
		t.Errorf("delta-rs's latest image has %d keys, the source %d", len(got.Latest), want)
	}
}

// TestTypeWideningFlows: into a Delta table with type widening
// (delta.enableTypeWidening), a captured column retyped wider (int to
// bigint, decimal(10,2) to decimal(12,2); FACTS.md F62) widens the table's
// column by a metadata action recording delta.typeChanges (PROTOCOL.md
// "Type Widening"), the stream flows, and the table's rows read back with
// the old and the new values; DuckDB reads the widened table.
func TestTypeWideningFlows(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "dbo_t",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "n", Type: "int", Nullable: true}, {Name: "d", Type: "decimal(10,2)", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	must := func(_ lsn.LSN, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.Load("dbo", "t", fake.Row{int64(1), int64(7), keyrange.Decimal("1.50")}))
	dir := filepath.Join(t.TempDir(), "bronze")
	table, err := delta.Open(ctx, dir, delta.Options{Create: delta.CreateOptions{Features: []string{"typeWidening"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	from, _, err := snapshot.Bootstrap(ctx, db, table, snapshot.Options{CaptureInstance: "dbo_t"})
	if err != nil {
		t.Fatal(err)
	}
	must(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "n", Type: "bigint", Nullable: true}))
	must(db.AlterColumn("dbo", "t", fake.ColumnDef{Name: "d", Type: "decimal(12,2)", Nullable: true}))
	must(db.Load("dbo", "t", fake.Row{int64(2), int64(1) << 40, keyrange.Decimal("1234567890.25")}))
	p, err := snapshot.Poll(ctx, db, table, "dbo_t", from, snapshot.PollOptions{BatchID: 1})
	if err != nil || p.Rows != 1 || len(p.DDL) != 2 {
		t.Fatalf("poll after the widening: %+v, %v", p, err)
	}
	// The last metaData action of the log holds the widened schema.
	logs, err := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("the log: %v, %v", logs, err)
	}
	var schemaString string
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a struct {
				MetaData *struct {
					SchemaString string `json:"schemaString"`
				} `json:"metaData"`
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.MetaData != nil {
				schemaString = a.MetaData.SchemaString
			}
		}
	}
	var sch struct {
		Fields []struct {
			Name     string         `json:"name"`
			Type     any            `json:"type"`
			Metadata map[string]any `json:"metadata"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schemaString), &sch); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range sch.Fields {
		if f.Name == "n" || f.Name == "d" {
			got[f.Name] = fmt.Sprint(f.Type, " ", f.Metadata["delta.typeChanges"])
		}
	}
	if got["n"] != "long [map[fromType:integer toType:long]]" || got["d"] != "decimal(12,2) [map[fromType:decimal(10,2) toType:decimal(12,2)]]" {
		t.Fatalf("the widened columns: %v", got)
	}
	rows := map[int64]string{}
	rr, err := table.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			id, _ := fake.ArrowValue(rec.Column(0), i)
			n, _ := fake.ArrowValue(rec.Column(1), i)
			d, _ := fake.ArrowValue(rec.Column(2), i)
			rows[id.(int64)] = fmt.Sprint(n, " ", d)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Release()
	if rows[1] != "7 1.50" || rows[2] != "1099511627776 1234567890.25" {
		t.Fatalf("the widened table reads %v", rows)
	}
	// deltalake 1.6.6 refuses the typeWidening reader feature (its
	// pyarrow dataset and DataFusion scans alike); DuckDB's delta
	// extension reads it.
	py := testenv.Python(t, "DuckDB reads a widened table")
	script := filepath.Join(t.TempDir(), "widened.py")
	if err := os.WriteFile(script, []byte(`
import glob, os, sys, duckdb, duckdb_extension_delta
ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions", "*", "delta.duckdb_extension"))
con = duckdb.connect()
con.execute(f"LOAD '{ext[0]}'")
print(con.execute(f"SELECT id, n, CAST(d AS VARCHAR), typeof(n) FROM delta_scan('{sys.argv[1]}') ORDER BY id").fetchall())
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB: %v: %s", err, out)
	}
	if want := "[(1, 7, '1.50', 'BIGINT'), (2, 1099511627776, '1234567890.25', 'BIGINT')]"; strings.TrimSpace(string(out)) != want {
		t.Fatalf("DuckDB reads %s, want %s", out, want)
	}
}
