package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

var _ sinktest.TableReader = (*FolderSink)(nil)

// TestChunkedConformance runs the chunked-snapshot conformance suite, the
// same one sink/delta and fake.MemSink pass.
func TestChunkedConformance(t *testing.T) {
	sinktest.RunChunked(t, func(t *testing.T) sink.ChunkSink {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		t.Cleanup(func() { mem.AssertSize(t, 0) })
		s, err := NewFolderSink(t.TempDir(), mem)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestBackfill takes a chunked snapshot of a fake table into a FolderSink a
// wave at a time, through a new FolderSink per call (as separate runs
// would): it completes, holds every source row once, and a rerun reads
// nothing.
func TestBackfill(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"}, {Name: "note", Type: "nvarchar(40)", Nullable: true},
	}, Key: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "orders", "dbo_Orders"); err != nil {
		t.Fatal(err)
	}
	var rows []fake.Row
	for i := range 257 {
		rows = append(rows, fake.Row{int64(i * 3), fmt.Sprint("order ", i)})
	}
	if _, err := db.Load("dbo", "orders", rows...); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := snapshot.BackfillOptions{CaptureInstance: "dbo_Orders", ChunkRows: 30, WaveChunks: 2, MaxWaves: 1}
	var res snapshot.BackfillResult
	for wave := 0; !res.Complete; wave++ {
		if wave > 20 {
			t.Fatalf("no progress: %+v", res)
		}
		s, err := NewFolderSink(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err = snapshot.Backfill(ctx, db, s, opts); err != nil {
			t.Fatalf("wave %d: %v", wave, err)
		}
	}
	if res.Chunks != 9 || res.Committed != 9 {
		t.Fatalf("result %+v, want 9 chunks committed", res)
	}
	s, err := NewFolderSink(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := db.CaptureInstance(ctx, "dbo_Orders")
	if err != nil {
		t.Fatal(err)
	}
	want, err := snapshot.SourceImage(ctx, db, ci)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ci.KeyColumns()
	got := snapshot.NewImage(ci.Columns, key)
	rr, err := s.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = snapshot.ReadImage(ctx, got, rr, true)
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(got, 5); len(d) > 0 || got.Len() != len(rows) {
		t.Fatalf("the chunks differ from the source (%d rows): %v", got.Len(), d)
	}
	again, err := snapshot.Backfill(ctx, db, s, opts)
	if err != nil || !again.Existing || again.PlanID != res.PlanID {
		t.Fatalf("rerun: %+v, %v", again, err)
	}
	if _, err := s.FindSnapshot(ctx, "dbo_orders"); err == nil {
		t.Fatal("FindSnapshot found a whole snapshot; there is only a chunked one")
	}
}
