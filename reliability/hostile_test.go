package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// keys lists every object of a bucket, sorted.
func keys(t testing.TB, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		o, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

// refusedWithNothingWritten runs a Take that must fail with an error
// accepted by check, and asserts the bucket's objects did not change.
func refusedWithNothingWritten(t *testing.T, what string, b *blob.Bucket, take func() error, check func(error) bool) {
	t.Helper()
	before := keys(t, b)
	err := take()
	if err == nil || !check(err) {
		t.Errorf("%s: got %v, want a clear refusal", what, err)
		return
	}
	if after := keys(t, b); !slices.Equal(before, after) {
		t.Errorf("%s: refused (%v) but the bucket changed:\nbefore %v\nafter  %v", what, err, before, after)
	}
	t.Logf("%s: %v", what, err)
}

// TestMalformedLSNs: every malformed LSN text is an error, never a panic
// or a silent zero, in lsn.Parse, in JSON (a plan shipped to a worker)
// and in a plan's Commit.
func TestMalformedLSNs(t *testing.T) {
	bad := []string{"", "0x", "0X", "x", "0xZZ00000000000000000", "0x0000002A00000F38000", "0x0000002A00000F3800011",
		"0x0000002A00000F38000100", "0000002A00000F3800 01", "-0x0000002A00000F380001", "0x0000002A00000F38000１",
		"0000002A:00000F38", "0000002A:00000F38:0001:0", "0000002A:00000F3G:0001", "0x0000002A00000F38000\u00e9",
		"0x0000002A00000F380001; DROP TABLE t", "0x0000002A00000F380001\x00", "NaN", "+1", "1e10"}
	for _, s := range bad {
		if l, err := lsn.Parse(s); err == nil {
			t.Errorf("lsn.Parse(%q) = %s, want an error", s, l)
		}
		var l lsn.LSN
		if err := json.Unmarshal([]byte(fmt.Sprintf("%q", s)), &l); err == nil {
			t.Errorf("JSON %q decoded as %s, want an error", s, l)
		}
		var p snapshot.Plan
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{"id":"x","lsn":%q}`, s)), &p); err == nil {
			t.Errorf("a plan with LSN %q decoded, want an error", s)
		}
	}
}

var hostileNames = []string{
	"dbo_orders]", "dbo_]]x[", "dbo_o'; DROP TABLE dbo.orders; --", `dbo_"quoted"`, "dbo_semi;colon",
	"dbo_ünïcödé_表", "dbo_a/b%2F..%00", "dbo_tab\tand space ", "dbo_\u202eRTL",
}

// TestHostileCaptureInstanceNames: names with ], quotes, ;, unicode,
// slashes and escapes. A name that does not exist is a clear error and
// writes nothing; one that exists is snapshotted under exactly its name
// (its txn record round-trips, a rerun spelled in another case finds it);
// and every SQL Server statement passes it as a parameter or quotes it as
// QUOTENAME would.
func TestHostileCaptureInstanceNames(t *testing.T) {
	ctx := context.Background()
	for _, name := range hostileNames {
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"}, {Name: "note", Type: "nvarchar(20)", Nullable: true}}, Key: []string{"id"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load("dbo", "orders", fake.Row{int64(1), "a"}, fake.Row{int64(2), nil}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "orders", "dbo_orders_plain"); err != nil {
			t.Fatal(err)
		}
		mem := memblob.OpenBucket(nil)
		tb := openBucket(t, mem, "mem://hostile", delta.Options{})
		refusedWithNothingWritten(t, fmt.Sprintf("absent instance %q", name), mem, func() error {
			_, err := snapshot.Take(ctx, db, tb, snapshot.Options{CaptureInstance: name})
			return err
		}, func(err error) bool {
			return errors.Is(err, source.ErrNotFound) && strings.Contains(err.Error(), "dbo_orders_plain")
		})

		if _, err := db.EnableCDC("dbo", "orders", name); err != nil {
			t.Logf("the fake refuses instance name %q: %v", name, err)
			tb.Close()
			mem.Close()
			continue
		}
		res, err := snapshot.Take(ctx, db, tb, snapshot.Options{CaptureInstance: name, Partitions: 2, MinPartitionRows: -1})
		if err != nil {
			t.Fatalf("instance %q: %v", name, err)
		}
		tb2 := openBucket(t, mem, "mem://hostile", delta.Options{})
		snaps := instanceSnapshots(t, ctx, tb2, name)
		if len(snaps) != 1 || snaps[0].CaptureInstance != name || snaps[0].LSN != res.LSN {
			t.Errorf("instance %q: the table records %+v", name, snaps)
		}
		again, err := snapshot.Take(ctx, db, tb2, snapshot.Options{CaptureInstance: strings.ToUpper(name)})
		if err != nil || !again.Existing || again.LSN != res.LSN {
			t.Errorf("instance %q: rerun upper-cased: %+v, %v; want the existing snapshot", name, again, err)
		}
		tb2.Close()

		// SQL Server statements: a parameter, or QUOTENAME's quoting.
		if st := mssqlstmt.CapturedColumnsStatement(name); strings.Contains(st.SQL, name) || !slices.Contains(st.Args, any(name)) {
			t.Errorf("instance %q: captured-columns statement inlines the name: %q", name, st.SQL)
		}
		if st := mssqlstmt.MinLSNStatement(name); strings.Contains(st.SQL, name) {
			t.Errorf("instance %q: min-LSN statement inlines the name: %q", name, st.SQL)
		}
		ci, err := db.CaptureInstance(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := mssqlstmt.ChangesStatement(ci, res.LSN, res.LSN)
		if err != nil {
			t.Logf("instance %q: changes statement refused: %v", name, err)
		} else {
			q, err := mssqlstmt.QuoteName("fn_cdc_get_all_changes_" + name)
			if err != nil {
				t.Fatal(err)
			}
			want := "[fn_cdc_get_all_changes_" + strings.ReplaceAll(name, "]", "]]") + "]"
			if q != want || !strings.Contains(st.SQL, "[cdc]."+q+"(") {
				t.Errorf("instance %q: changes statement %q does not call %s", name, st.SQL, want)
			}
		}
		tb.Close()
		mem.Close()
	}
}

// TestMetadataColumnCollisions: a captured column named like a bronze
// metadata column (in any case) or with CDC's __$ prefix is a clear error
// naming it, and nothing is written.
func TestMetadataColumnCollisions(t *testing.T) {
	ctx := context.Background()
	for _, col := range []string{"_operation", "_OPERATION", "_Start_LSN", "_snapshot", "_chunk", "_capture_instance", "__$tile", "__$prev", "__$start_lsn", "__$operation"} {
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"}, {Name: col, Type: "int", Nullable: true}}, Key: []string{"id"}}); err != nil {
			t.Logf("the fake refuses column %q: %v", col, err)
			continue
		}
		if _, err := db.Load("dbo", "t", fake.Row{int64(1), int64(2)}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
			t.Fatal(err)
		}
		mem := memblob.OpenBucket(nil)
		tb := openBucket(t, mem, "mem://cols", delta.Options{})
		refusedWithNothingWritten(t, "column "+col, mem, func() error {
			_, err := snapshot.Take(ctx, db, tb, snapshot.Options{CaptureInstance: "dbo_t"})
			return err
		}, func(err error) bool { return strings.Contains(err.Error(), col) })
		ms := fake.NewMemSink()
		if _, err := snapshot.Take(ctx, db, ms, snapshot.Options{CaptureInstance: "dbo_t"}); err == nil || len(ms.Commits()) != 0 || ms.Pending() != 0 {
			t.Errorf("column %q: memory sink: %v, %d commits, %d pending", col, err, len(ms.Commits()), ms.Pending())
		}
		ms.Close()
		tb.Close()
		mem.Close()
	}
}

// keyOverride reports a capture instance whose key is another column (a
// user's own Source may describe any column as the key).
type keyOverride struct {
	*fake.DB
	key     string
	keyType string
}

func (k keyOverride) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	ci, err := k.DB.CaptureInstance(ctx, name)
	if err != nil {
		return nil, err
	}
	c := *ci
	c.Columns = slices.Clone(ci.Columns)
	for i := range c.Columns {
		if c.Columns[i].Name == k.key && k.keyType != "" {
			c.Columns[i].Type = k.keyType
		}
	}
	c.Key = []string{k.key}
	return &c, nil
}

// TestUnsupportedKeyTypes: a key of a type the bronze schema cannot hold
// (sql_variant) or that is not captured is a clear error and writes
// nothing; a key that cannot be bound safely (xml, geography) is read as
// one partition, with the reason in the plan.
func TestUnsupportedKeyTypes(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Columns: []fake.ColumnDef{
		{Name: "id", Type: "int"}, {Name: "v", Type: "nvarchar(20)", Nullable: true}, {Name: "f", Type: "float", Nullable: true}}, Key: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(1), "a", 1.5}, fake.Row{int64(2), "b", 2.5}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  keyOverride
		want string
	}{
		{keyOverride{db, "v", "sql_variant"}, "sql_variant"},
		{keyOverride{db, "missing", ""}, "missing"},
	} {
		mem := memblob.OpenBucket(nil)
		tb := openBucket(t, mem, "mem://keys", delta.Options{})
		refusedWithNothingWritten(t, "key "+c.want, mem, func() error {
			_, err := snapshot.Take(ctx, c.src, tb, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1})
			return err
		}, func(err error) bool { return strings.Contains(err.Error(), c.want) })
		tb.Close()
		mem.Close()
	}
	for _, src := range []keyOverride{{db, "v", "xml"}, {db, "v", "geography"}} {
		plan, err := snapshot.NewPlan(ctx, src, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1})
		if err != nil {
			t.Errorf("key %s (%s): %v", src.key, src.keyType, err)
			continue
		}
		if len(plan.Ranges) != 1 || plan.Reason == "" {
			t.Errorf("key %s (%s): %d ranges, reason %q; want one range with a reason", src.key, src.keyType, len(plan.Ranges), plan.Reason)
		}
	}
}

// TestSchemaChangedUnderBronze: a bronze table written from one schema,
// then a source whose column changed type (a new capture instance after
// ALTER TABLE, or a resnapshot): the Take is refused with a
// *delta.SchemaError naming the column, and nothing is written.
func TestSchemaChangedUnderBronze(t *testing.T) {
	ctx := context.Background()
	mk := func(noteType string) *fake.DB {
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"}, {Name: "note", Type: noteType, Nullable: true}}, Key: []string{"id"}}); err != nil {
			t.Fatal(err)
		}
		v := any("x")
		if noteType == "int" {
			v = int64(7)
		}
		if _, err := db.Load("dbo", "t", fake.Row{int64(1), v}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "t", "dbo_t_v2"); err != nil {
			t.Fatal(err)
		}
		tx := db.Begin()
		if err := tx.Insert("dbo", "t", fake.Row{int64(2), v}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return db
	}
	mem := memblob.OpenBucket(nil)
	defer mem.Close()
	tb := openBucket(t, mem, "mem://schema", delta.Options{})
	defer tb.Close()
	if _, err := snapshot.Take(ctx, mk("nvarchar(20)"), tb, snapshot.Options{CaptureInstance: "dbo_t"}); err != nil {
		t.Fatal(err)
	}
	changed := mk("int")
	isSchema := func(err error) bool {
		var se *delta.SchemaError
		return errors.As(err, &se) && se.Column == "note"
	}
	refusedWithNothingWritten(t, "resnapshot after a type change", mem, func() error {
		_, err := snapshot.Take(ctx, changed, tb, snapshot.Options{CaptureInstance: "dbo_t", Resnapshot: true})
		return err
	}, isSchema)
	refusedWithNothingWritten(t, "new instance after a type change", mem, func() error {
		_, err := snapshot.Take(ctx, changed, tb, snapshot.Options{CaptureInstance: "dbo_t_v2"})
		return err
	}, isSchema)
	refusedWithNothingWritten(t, "changes after a type change", mem, func() error {
		ci, err := changed.CaptureInstance(ctx, "dbo_t")
		if err != nil {
			return err
		}
		rr, err := snapshot.Changes(ctx, changed, "dbo_t", ci.StartLSN, mustMax(t, changed), 1)
		if err != nil {
			return err
		}
		defer rr.Release()
		_, err = tb.AppendChanges(ctx, "dbo_t", 1, rr)
		return err
	}, isSchema)
}

func mustMax(t *testing.T, db *fake.DB) lsn.LSN {
	l, err := db.MaxLSN(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// corruptTable returns a memblob table holding a snapshot of dbo_t (version
// 0) and a change batch (version 1), and its world.
func corruptTable(t *testing.T) (*testworld.World, *blob.Bucket) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	w := testworld.New(t, r, shapes()[0], 30)
	mem := memblob.OpenBucket(nil)
	tb := openBucket(t, mem, "mem://corrupt", delta.Options{CheckpointInterval: -1})
	res, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI})
	if err != nil {
		t.Fatal(err)
	}
	w.Change(t, r)
	if err := streamAndCompare(t, ctx, w, tb, res, 1); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	return w, mem
}

func commitName(v int) string { return fmt.Sprintf("_delta_log/%020d.json", v) }

// TestCorruptOrForeignLog: a log entry that is not JSON, a missing
// commit, or a snapshot record that does not parse is refused with a
// *delta.CorruptLogError and nothing is written; entries another Delta
// writer may leave (its own txn, commitInfo, a remove of an unknown file,
// a stale _last_checkpoint) are tolerated and the existing snapshot is
// still found.
func TestCorruptOrForeignLog(t *testing.T) {
	ctx := context.Background()
	isCorrupt := func(err error) bool {
		var c *delta.CorruptLogError
		return errors.As(err, &c)
	}
	edit := func(t *testing.T, mem *blob.Bucket, v int, f func(string) string) {
		b, err := mem.ReadAll(ctx, commitName(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteAll(ctx, commitName(v), []byte(f(string(b))), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, mem *blob.Bucket)
	}{
		{"a line that is not JSON", func(t *testing.T, mem *blob.Bucket) {
			edit(t, mem, 1, func(s string) string { return s + "{\"add\": {\"path\": \n" })
		}},
		{"a missing commit", func(t *testing.T, mem *blob.Bucket) {
			if err := mem.WriteAll(ctx, commitName(3), []byte(`{"commitInfo":{}}`+"\n"), nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"an action of the wrong shape", func(t *testing.T, mem *blob.Bucket) {
			edit(t, mem, 1, func(s string) string { return s + `{"add": [1, 2, 3]}` + "\n" })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, mem := corruptTable(t)
			defer mem.Close()
			c.corrupt(t, mem)
			tb := openBucket(t, mem, "mem://corrupt", delta.Options{})
			defer tb.Close()
			for _, ci := range []string{w.CI, "dbo_other"} {
				refusedWithNothingWritten(t, c.name+", Take of "+ci, mem, func() error {
					_, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: ci})
					return err
				}, isCorrupt)
			}
		})
	}

	t.Run("a snapshot record that does not parse", func(t *testing.T) {
		w, mem := corruptTable(t)
		defer mem.Close()
		edit(t, mem, 0, func(s string) string {
			i := strings.Index(s, `"appId":"cdcsnap/snapshot/`)
			j := strings.Index(s[i:], "/0x") + i + 3
			return s[:j] + "ZZ" + s[j+2:]
		})
		tb := openBucket(t, mem, "mem://corrupt", delta.Options{})
		defer tb.Close()
		before := keys(t, mem)
		_, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI})
		if err == nil || !isCorrupt(err) || !slices.Equal(before, keys(t, mem)) {
			t.Errorf("a snapshot record that does not parse must refuse the table with a *CorruptLogError and write nothing "+
				"(Take returned %v; objects before %d, after %d)", err, len(before), len(keys(t, mem)))
		}
	})

	t.Run("foreign entries are tolerated", func(t *testing.T) {
		w, mem := corruptTable(t)
		defer mem.Close()
		foreign := `{"commitInfo":{"timestamp":1,"operation":"STREAMING UPDATE","engineInfo":"Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}` + "\n" +
			`{"txn":{"appId":"3f1c-spark-query","version":12,"lastUpdated":1}}` + "\n" +
			`{"remove":{"path":"part-never-existed.parquet","deletionTimestamp":1,"dataChange":true}}` + "\n"
		if err := mem.WriteAll(ctx, commitName(2), []byte(foreign), nil); err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteAll(ctx, "_delta_log/_last_checkpoint", []byte(`{"version": 99, "size": -1`), nil); err != nil {
			t.Fatal(err)
		}
		tb := openBucket(t, mem, "mem://corrupt", delta.Options{})
		defer tb.Close()
		res, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI})
		if err != nil || !res.Existing {
			t.Fatalf("Take with foreign entries: %+v, %v; want the existing snapshot", res, err)
		}
		w.Change(t, rand.New(rand.NewPCG(1, 1)))
		if err := streamAndCompare(t, ctx, w, tb, res, 2); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNewerProtocolRefused: a table whose protocol needs reader or writer
// features this package does not implement is refused with a
// *delta.UnsupportedProtocolError naming the feature, and nothing is
// written: never misread, never corrupted.
func TestNewerProtocolRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		actions   string
		writeOnly bool
	}{
		// Deletion vectors, column mapping, row tracking and change data
		// feed are honoured now (sink/delta's "Tables with features");
		// these are not.
		{"reader version 4", `{"protocol":{"minReaderVersion":4,"minWriterVersion":8}}`, false},
		{"an unknown reader feature", `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["futureFeature"],"writerFeatures":["futureFeature"]}}`, false},
		{"variant columns", `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["variantType"],"writerFeatures":["variantType"]}}`, false},
		{"clustering (writer 7)", `{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["rowTracking","domainMetadata","clustering"]}}`, true},
		{"an unknown writer feature", `{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["futureWriterFeature"]}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, mem := corruptTable(t)
			defer mem.Close()
			if err := mem.WriteAll(ctx, commitName(2), []byte(`{"commitInfo":{"engineInfo":"newer"}}`+"\n"+c.actions+"\n"), nil); err != nil {
				t.Fatal(err)
			}
			tb := openBucket(t, mem, "mem://proto", delta.Options{})
			defer tb.Close()
			isProto := func(err error) bool {
				var pe *delta.UnsupportedProtocolError
				return errors.As(err, &pe) && pe.Write == c.writeOnly
			}
			w2 := w.With(w.CI + "_v2")
			if _, err := w.DB.EnableCDC("dbo", w.Shape.Name, w2.CI); err != nil {
				t.Fatal(err)
			}
			refusedWithNothingWritten(t, c.name+", a new snapshot", mem, func() error {
				_, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w2.CI})
				return err
			}, isProto)
			refusedWithNothingWritten(t, c.name+", a resnapshot", mem, func() error {
				_, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI, Resnapshot: true})
				return err
			}, isProto)
			refusedWithNothingWritten(t, c.name+", changes", mem, func() error {
				rr := emptyReader(t, bronze(t, w))
				defer rr.Release()
				_, err := tb.AppendChanges(ctx, w.CI, 5, rr)
				return err
			}, isProto)
			if c.writeOnly {
				// Reading is fine: the existing snapshot is found.
				res, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w.CI})
				if err != nil || !res.Existing {
					t.Errorf("a writer-only feature: Take of the snapshotted instance = %+v, %v; want the existing snapshot", res, err)
				}
			}
		})
	}
}

var _ = sink.ErrNotFound

// TestTamperedPlanRefused: a plan shipped to workers (JSON) whose ranges
// no longer tile the key space — a range dropped, a gap between two, no
// range at all, two overlapping — must be refused before anything is
// committed: committed, it loses (or duplicates) rows silently.
func TestTamperedPlanRefused(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 50))
	w := testworld.New(t, r, shapes()[0], 120)
	var bad []string
	for _, c := range []struct {
		name   string
		tamper func(p *snapshot.Plan)
	}{
		{"the last range dropped", func(p *snapshot.Plan) { p.Ranges = p.Ranges[:len(p.Ranges)-1] }},
		{"no range at all", func(p *snapshot.Plan) { p.Ranges = nil }},
		{"a gap between two ranges", func(p *snapshot.Plan) {
			p.Ranges[0].Upper = p.Ranges[0].Lower
			if p.Ranges[0].Upper == nil {
				p.Ranges[0].Upper = p.Ranges[1].Lower[:len(p.Ranges[1].Lower)]
				p.Ranges[1].Lower = p.Ranges[2].Lower
			}
		}},
		{"two ranges overlapping", func(p *snapshot.Plan) { p.Ranges[1].Lower = p.Ranges[0].Lower }},
	} {
		plan, err := snapshot.NewPlan(ctx, w.DB, snapshot.Options{CaptureInstance: w.CI, Partitions: 4, MinPartitionRows: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Ranges) < 3 {
			t.Fatalf("want at least 3 ranges, got %d", len(plan.Ranges))
		}
		js, _ := json.Marshal(plan)
		var shipped snapshot.Plan
		if err := json.Unmarshal(js, &shipped); err != nil {
			t.Fatal(err)
		}
		c.tamper(&shipped)
		dst := fake.NewMemSink()
		var parts []sink.Part
		var execErr error
		for i := range shipped.Ranges {
			p, err := snapshot.Execute(ctx, w.DB, dst, &shipped, i, nil)
			if err != nil {
				execErr = err
				break
			}
			parts = append(parts, p)
		}
		if execErr == nil {
			res, err := snapshot.Commit(ctx, dst, &shipped, parts, nil)
			if err == nil {
				bad = append(bad, fmt.Sprintf("%s: committed %d rows of %d", c.name, res.Rows, len(w.Keys)))
			}
		}
		dst.Close()
	}
	if len(bad) > 0 {
		t.Errorf("a plan whose ranges do not tile the key space was executed and committed: %s", strings.Join(bad, "; "))
	}
}

// TestRefusedBeforeL0: a target whose schema or protocol cannot take the
// capture instance is refused before the snapshot's LSN is recorded (the
// fake's max LSN is never asked for, no key is sought, no row read), with
// one error naming every column and every feature, and nothing written.
func TestRefusedBeforeL0(t *testing.T) {
	ctx := context.Background()
	mk := func(cols ...fake.ColumnDef) *fake.DB {
		db := fake.New(fake.Options{})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Columns: append([]fake.ColumnDef{{Name: "id", Type: "int"}}, cols...), Key: []string{"id"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
			t.Fatal(err)
		}
		return db
	}
	before := mk(fake.ColumnDef{Name: "note", Type: "nvarchar(20)", Nullable: true}, fake.ColumnDef{Name: "qty", Type: "int", Nullable: true})
	after := mk(fake.ColumnDef{Name: "note", Type: "int", Nullable: true}, fake.ColumnDef{Name: "qty", Type: "nvarchar(5)", Nullable: true})
	errL0 := errors.New("the max LSN was asked for")
	take := func(db *fake.DB, tb *delta.Table, opts snapshot.Options) error {
		db.FailNext(fake.OpMaxLSN, errL0)
		db.ResetStats()
		_, err := snapshot.Take(ctx, db, tb, opts)
		if errors.Is(err, errL0) {
			t.Fatalf("the snapshot recorded its LSN before it was refused: %v", err)
		}
		if _, lerr := db.MaxLSN(ctx); !errors.Is(lerr, errL0) {
			t.Fatalf("the refused snapshot asked for the max LSN (the fault was spent): %v", lerr)
		}
		if st, _ := db.Stats("dbo", "t"); st.Seeks+st.RangeReads+st.RowsExamined != 0 {
			t.Fatalf("the refused snapshot read the table: %+v", st)
		}
		return err
	}

	t.Run("schema", func(t *testing.T) {
		mem := memblob.OpenBucket(nil)
		defer mem.Close()
		tb := openBucket(t, mem, "mem://l0", delta.Options{})
		defer tb.Close()
		if _, err := snapshot.Take(ctx, before, tb, snapshot.Options{CaptureInstance: "dbo_t"}); err != nil {
			t.Fatal(err)
		}
		refusedWithNothingWritten(t, "two columns changed type", mem, func() error {
			return take(after, tb, snapshot.Options{CaptureInstance: "dbo_t", Resnapshot: true})
		}, func(err error) bool {
			var se *delta.SchemaError
			return errors.As(err, &se) && strings.Contains(err.Error(), `column "note": the table has type string, the records integer`) &&
				strings.Contains(err.Error(), `column "qty": the table has type integer, the records string`)
		})
	})
	t.Run("protocol", func(t *testing.T) {
		w, mem := corruptTable(t)
		defer mem.Close()
		if err := mem.WriteAll(ctx, commitName(2), []byte(`{"commitInfo":{"engineInfo":"newer"}}`+"\n"+
			`{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["appendOnly","rowTracking","domainMetadata","clustering","futureFeature"]}}`+"\n"), nil); err != nil {
			t.Fatal(err)
		}
		tb := openBucket(t, mem, "mem://l0", delta.Options{})
		defer tb.Close()
		w2 := w.With(w.CI + "_v2")
		if _, err := w.DB.EnableCDC("dbo", w.Shape.Name, w2.CI); err != nil {
			t.Fatal(err)
		}
		refusedWithNothingWritten(t, "two unsupported writer features", mem, func() error {
			w.DB.FailNext(fake.OpMaxLSN, errL0)
			_, err := snapshot.Take(ctx, w.DB, tb, snapshot.Options{CaptureInstance: w2.CI})
			if _, lerr := w.DB.MaxLSN(ctx); !errors.Is(lerr, errL0) {
				t.Fatalf("the refused snapshot asked for the max LSN: %v", lerr)
			}
			return err
		}, func(err error) bool {
			var pe *delta.UnsupportedProtocolError
			return errors.As(err, &pe) && pe.Write && pe.Feature == "clustering, futureFeature"
		})
	})
}
