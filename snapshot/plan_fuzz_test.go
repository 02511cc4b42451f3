package snapshot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// fzTable builds a fake table of one of four key layouts (integer, two
// columns with a case-insensitive varchar, a case-insensitive string, a
// decimal and date composite) with random rows from seed.
func fzTable(t *testing.T, seed uint64, rows int, layout int) (*fake.DB, string) {
	r := rand.New(rand.NewPCG(seed, 99))
	db := fake.New(fake.Options{})
	var def fake.TableDef
	var row func() fake.Row
	word := func(alpha string, n int) string {
		runes := []rune(alpha)
		b := make([]rune, 1+r.IntN(n))
		for i := range b {
			b[i] = runes[r.IntN(len(runes))]
		}
		s := string(b)
		if r.IntN(4) == 0 {
			s += " "
		}
		return s
	}
	switch layout % 4 {
	case 0:
		def = fake.TableDef{Name: "t", Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(10)", Nullable: true}}, Key: []string{"id"}}
		row = func() fake.Row {
			id := r.Int64N(400) - 200
			if r.IntN(8) == 0 {
				id = r.Int64() - 1<<62
			}
			return fake.Row{id, word("ab", 3)}
		}
	case 1:
		def = fake.TableDef{Name: "t", Columns: []fake.ColumnDef{{Name: "co", Type: "varchar(8)", Collation: "Latin1_General_CI_AS"}, {Name: "id", Type: "int"}}, Key: []string{"co", "id"}}
		row = func() fake.Row { return fake.Row{word("aAbB", 2), int64(r.IntN(30))} }
	case 2:
		def = fake.TableDef{Name: "t", Columns: []fake.ColumnDef{{Name: "code", Type: "nvarchar(6)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "n", Type: "int", Nullable: true}}, Key: []string{"code"}}
		row = func() fake.Row { return fake.Row{word("nNéÉ", 4), int64(r.IntN(9))} }
	default:
		def = fake.TableDef{Name: "t", Columns: []fake.ColumnDef{{Name: "d", Type: "decimal(9,3)"}, {Name: "day", Type: "date"}, {Name: "x", Type: "bit", Nullable: true}}, Key: []string{"d", "day"}}
		row = func() fake.Row {
			return fake.Row{keyrange.Decimal(fmt.Sprintf("%d.%03d", r.IntN(20)-10, r.IntN(1000))), time.Date(2026, 1, 1+r.IntN(4), 0, 0, 0, 0, time.UTC), r.IntN(2) == 0}
		}
	}
	def.Schema = "dbo"
	if err := db.CreateTable(def); err != nil {
		t.Fatal(err)
	}
	info, err := db.Table("dbo", "t")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var batch []fake.Row
	for tries := 0; len(batch) < rows && tries < 20*rows; tries++ {
		rw := row()
		var k strings.Builder
		for i, j := range info.KeyIndexes {
			s, err := keyrange.CollationKey(info.KeyColumns[i], rw[j])
			if err != nil {
				t.Fatal(err)
			}
			k.WriteString(s + "\x00")
		}
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		batch = append(batch, rw)
	}
	if len(batch) > 0 {
		if _, err := db.Load("dbo", "t", batch...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	return db, "dbo_t"
}

// FuzzPlanFanOut plans a snapshot of a random table, ships the plan
// through JSON (as a fan-out coordinator does, typed key bounds
// included), executes every partition from the decoded plan in random
// order and commits: every row of the source is in the snapshot exactly
// once, whatever the key layout, row count, skewed row count, partition
// count and batch size.
func FuzzPlanFanOut(f *testing.F) {
	f.Add(uint64(1), uint8(50), uint8(4), uint8(7), uint8(0), int8(0))
	f.Add(uint64(2), uint8(200), uint8(12), uint8(1), uint8(1), int8(-20))
	f.Add(uint64(3), uint8(0), uint8(3), uint8(3), uint8(2), int8(5))
	f.Add(uint64(4), uint8(1), uint8(9), uint8(2), uint8(3), int8(-1))
	f.Add(uint64(5), uint8(90), uint8(30), uint8(5), uint8(3), int8(40))
	f.Fuzz(func(t *testing.T, seed uint64, rows, parts, batch, layout uint8, skew int8) {
		ctx := context.Background()
		db, ci := fzTable(t, seed, int(rows), int(layout))
		if err := db.SetRowCountSkew("dbo", "t", int64(skew)); err != nil {
			t.Fatal(err)
		}
		plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: ci, Partitions: 1 + int(parts)%40, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 1 + int(batch)%30}})
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		var shipped snapshot.Plan
		if err := json.Unmarshal(js, &shipped); err != nil {
			t.Fatalf("plan JSON does not decode: %v\n%s", err, js)
		}
		if js2, _ := json.Marshal(&shipped); string(js2) != string(js) {
			t.Fatalf("plan JSON is not stable:\n%s\n%s", js, js2)
		}
		dst := fake.NewMemSink()
		defer dst.Close()
		order := rand.New(rand.NewPCG(seed, 7)).Perm(len(shipped.Ranges))
		var partsOut []sink.Part
		for _, i := range order {
			p, err := snapshot.Execute(ctx, db, dst, &shipped, i, nil)
			if err != nil {
				t.Fatalf("partition %d: %v", i, err)
			}
			partsOut = append(partsOut, p)
		}
		res, err := snapshot.Commit(ctx, dst, plan, partsOut, nil)
		if err != nil {
			t.Fatal(err)
		}
		src, err := db.Rows("dbo", "t")
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != int64(len(src)) {
			t.Fatalf("%s plan of %d ranges: the snapshot has %d rows, the source %d", plan.Strategy, len(plan.Ranges), res.Rows, len(src))
		}
		cis, err := db.CaptureInstance(ctx, ci)
		if err != nil {
			t.Fatal(err)
		}
		want, err := snapshot.SourceImage(ctx, db, cis)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := cis.KeyColumns()
		got := snapshot.NewImage(cis.Columns, key)
		for _, rec := range dst.Records() {
			err := got.AddRows(rec) // reads the captured columns by name
			rec.Release()
			if err != nil {
				t.Fatalf("%s plan: %v", plan.Strategy, err) // a key read twice
			}
		}
		if d := want.Diff(got, 5); len(d) > 0 {
			t.Fatalf("%s plan of %d ranges differs from the source:\n%s", plan.Strategy, len(plan.Ranges), strings.Join(d, "\n"))
		}
	})
}

// FuzzPlanJSON: any bytes as a shipped plan decode or fail; a decoded
// plan's Execute and Commit fail cleanly or succeed, never panic, and a
// commit of parts from another plan is always refused.
func FuzzPlanJSON(f *testing.F) {
	f.Add([]byte(`{"id":"p","capture_instance":"dbo_t","instance":{"name":"dbo_t","columns":[{"name":"id","type":"bigint"}],"key":["id"]},"lsn":"0x0000002A00000F380001","ranges":[{}],"strategy":"single"}`))
	f.Add([]byte(`{"id":"p","ranges":[{"lo":[1],"hi":[0]}],"lsn":"0x00"}`))
	f.Add([]byte(`{"id":"","ranges":null}`))
	f.Add([]byte(`{"id":"p","instance":{"name":"dbo_t","columns":[{"name":"_operation","type":"int"}]},"ranges":[{},{}]}`))
	f.Add([]byte(`{"id":"p","capture_instance":"dbo_t","instance":{"name":"dbo_t","columns":[{"name":"id","type":"bigint"},{"name":"v","type":"nvarchar(10)"}],"key":["v"],"key_index":{"name":"IX_v","columns":["v"],"unique":false}},"split_column":"v","lsn":"0x0000002A00000F380001","ranges":[{"index":0,"upper":["b"]},{"index":1,"lower":["b"]}],"strategy":"keyset"}`))
	f.Add([]byte(`{"id":"p","capture_instance":"dbo_t","instance":{"name":"dbo_t","columns":[{"name":"id","type":"bigint"}],"key":["id"]},"split_column":"v","lsn":"0x0000002A00000F380001","ranges":[{}],"strategy":"single"}`))
	f.Add([]byte(`{"id":"p","capture_instance":"dbo_t","instance":{"name":"dbo_t","columns":[{"name":"id","type":"bigint"}],"key":["id"]},"lsn":"0x0000002A00000F380001","max_lsn":"0x0000002A00000F380002","ranges":[{}],"strategy":"single"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p snapshot.Plan
		if err := json.Unmarshal(b, &p); err != nil {
			return
		}
		ctx := context.Background()
		db, _ := fzTable(t, 1, 20, 0)
		dst := fake.NewMemSink()
		defer dst.Close()
		var parts []sink.Part
		for i := -1; i <= len(p.Ranges) && i < 8; i++ {
			if part, err := snapshot.Execute(ctx, db, dst, &p, i, nil); err == nil {
				parts = append(parts, part)
			}
		}
		foreign := make([]sink.Part, len(parts))
		for i, q := range parts {
			q.PlanID = p.ID + "-other"
			foreign[i] = q
		}
		if len(foreign) > 0 {
			if _, err := snapshot.Commit(ctx, dst, &p, foreign, nil); err == nil {
				t.Fatalf("parts of another plan were committed")
			}
		}
		_, _ = snapshot.Commit(ctx, dst, &p, parts, nil)
	})
}
