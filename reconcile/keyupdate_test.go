package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestKeyUpdatesLoggedAsUpdates: under trace flag 8207 an update of a key
// column is logged as an update-before of the old key and an update-after
// of the new one (FACTS.md F14; fake.Options.SingletonKeyUpdates). The
// latest image (snapshot.Image) and reconcile's merge of the target both
// drop the old key; with the rule "an update-before never wins" the old
// key stayed, a row the source no longer has.
func TestKeyUpdatesLoggedAsUpdates(t *testing.T) {
	ctx := context.Background()
	for _, flag := range []bool{false, true} {
		db := fake.New(fake.Options{SingletonKeyUpdates: flag})
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"},
			Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "v", Type: "nvarchar(10)", Nullable: true}},
			Rows:    []fake.Row{{int64(1), "a"}, {int64(2), "b"}, {int64(3), "c"}}}); err != nil {
			t.Fatal(err)
		}
		ci, err := db.EnableCDC("dbo", "t", "")
		if err != nil {
			t.Fatal(err)
		}
		dst := fake.NewMemSink()
		from, _, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: ci.Name, Partitions: 2, MinPartitionRows: -1})
		if err != nil {
			t.Fatal(err)
		}
		tx := db.Begin()
		if err := tx.Update("dbo", "t", []any{int64(1)}, fake.Row{int64(10), "a"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Update("dbo", "t", []any{int64(2)}, fake.Row{int64(2), "B"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		rows, err := db.ChangeRows(ctx, ci, from, lsn.Max)
		if err != nil {
			t.Fatal(err)
		}
		var ops []int32
		for _, r := range rows {
			ops = append(ops, r.Operation)
		}
		want := map[bool]string{false: "[1 2 3 4]", true: "[3 4 3 4]"}[flag]
		if got := fmt.Sprint(ops); got != want {
			t.Fatalf("trace flag 8207 %v: operations %s, want %s", flag, got, want)
		}
		if _, err := snapshot.Poll(ctx, db, snapshot.AppendFunc(func(ctx context.Context, ci string, batch int64, rr array.RecordReader) (int64, error) {
			c, err := dst.AppendChanges(ctx, ci, batch, rr)
			return c.Version, err
		}), ci.Name, from, snapshot.PollOptions{BatchID: 1}); err != nil {
			t.Fatal(err)
		}
		want2, err := snapshot.SourceImage(ctx, db, ci)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := ci.KeyColumns()
		got := snapshot.NewImage(ci.Columns, key)
		for _, rec := range dst.Records() {
			if err := got.AddBronze(rec); err != nil {
				t.Fatal(err)
			}
		}
		if d := want2.Diff(got, 5); len(d) > 0 || got.Len() != 3 {
			t.Errorf("trace flag 8207 %v: the latest image has %d keys and differs from the source: %v", flag, got.Len(), d)
		}
		rep, err := reconcile.Run(ctx, db, dst, reconcile.Options{CaptureInstance: ci.Name})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() {
			t.Errorf("trace flag 8207 %v: reconcile found %v", flag, rep.Differences)
		}
		dst.Close()
	}
}
