package tdsfake_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestSplitColumnOverTheWire: source/sqlserver describes a table's
// indexes and heap from IndexesStatement, and, split on a non-unique
// nullable column (SplitOn), its SeekKey statement (the CROSS APPLY form)
// gives the bounds the fake's own SeekKey gives, and ReadRange over the
// ranges keyrange.NTile plans from them reads every row exactly once.
func TestSplitColumnOverTheWire(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	r := rand.New(rand.NewPCG(18, 4))
	var rows []fake.Row
	for i := range 300 {
		var g any
		if r.IntN(5) > 0 {
			g = int64(r.IntN(7))
		}
		rows = append(rows, fake.Row{int64(i), g, "name"})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "events", Key: []string{"id"}, KeyNonclustered: true,
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "g", Type: "int", Nullable: true}, {Name: "v", Type: "varchar(10)", Nullable: true}},
		Indexes: []fake.IndexDef{{Name: "IX_events_g", Columns: []string{"g"}}},
		Rows:    rows, CaptureInstance: "dbo_events"}); err != nil {
		t.Fatal(err)
	}
	src, _, _ := serve(t, db, tdsfake.Options{PageRows: 17}, sqlserver.Options{})
	ci, err := src.CaptureInstance(ctx, "dbo_events")
	if err != nil {
		t.Fatal(err)
	}
	want, err := db.CaptureInstance(ctx, "dbo_events")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ci.Indexes, want.Indexes) || !ci.Heap || ci.KeyIndex == nil || ci.KeyIndex.Name != "PK_events" || ci.KeyIndex.Clustered {
		t.Fatalf("over the wire: indexes %+v heap %v key index %+v; the fake has %+v", ci.Indexes, ci.Heap, ci.KeyIndex, want.Indexes)
	}
	split, err := ci.SplitOn("g")
	if err != nil {
		t.Fatal(err)
	}
	fsplit, err := want.SplitOn("g")
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []keyrange.Tuple{nil, {nil}, {int64(0)}, {int64(3)}, {int64(6)}} {
		for _, k := range []int64{0, 1, 40, 90, 299} {
			got, ok, err := src.SeekKey(ctx, split, source.ReadCommitted, from, k)
			if err != nil {
				t.Fatal(err)
			}
			w, wok, err := db.SeekKey(ctx, fsplit, source.ReadCommitted, from, k)
			if err != nil {
				t.Fatal(err)
			}
			if ok != wok || !reflect.DeepEqual(got, w) {
				t.Fatalf("SeekKey(from %v, %d): wire %v %v, fake %v %v", from, k, got, ok, w, wok)
			}
		}
	}
	ranges, err := keyrange.NTile(ctx, seeker{src, split}, int64(len(rows)), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) < 3 {
		t.Fatalf("planned %v: want several ranges", ranges)
	}
	seen := map[int64]int{}
	for _, rg := range ranges {
		rr, err := src.ReadRange(ctx, split, rg, source.ReadOptions{BatchRows: 11})
		if err != nil {
			t.Fatal(err)
		}
		for rr.Next() {
			ids := rr.RecordBatch().Column(0).(*array.Int32)
			for i := range ids.Len() {
				seen[int64(ids.Value(i))]++
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
	}
	for i := range rows {
		if seen[int64(i)] != 1 {
			t.Fatalf("row %d read %d times over %v", i, seen[int64(i)], ranges)
		}
	}
	if len(seen) != len(rows) {
		t.Fatalf("read %d rows of %d", len(seen), len(rows))
	}
}

type seeker struct {
	src source.Source
	ci  *source.CaptureInstance
}

func (s seeker) SeekKey(ctx context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	return s.src.SeekKey(ctx, s.ci, source.ReadCommitted, from, k)
}
