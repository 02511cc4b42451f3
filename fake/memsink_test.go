package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

func bronze(t testing.TB) *arrow.Schema {
	t.Helper()
	captured := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	return must[*arrow.Schema](t)(sink.BronzeSchema(captured))
}

// partReader returns a reader of n bronze rows with ids from first, in
// batches of batch rows.
func partReader(t testing.TB, schema *arrow.Schema, first, n, batch int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var recs []arrow.RecordBatch
	for i := 0; i < n; {
		for j := 0; j < batch && i < n; j++ {
			b.Field(0).(*array.Int32Builder).Append(int32(first + i))
			for k := 1; k < schema.NumFields(); k++ {
				b.Field(k).AppendNull()
			}
			i++
		}
		recs = append(recs, b.NewRecordBatch())
	}
	rr := must[array.RecordReader](t)(array.NewRecordReader(schema, recs))
	for _, r := range recs {
		r.Release()
	}
	return rr
}

func info(schema *arrow.Schema, ci, plan string, l byte) sink.Info {
	return sink.Info{CaptureInstance: ci, LSN: lsn.LSN{9: l}, CommitTS: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Schema: schema, PlanID: plan}
}

func write(t *testing.T, s *fake.MemSink, in sink.Info, partition, first, n int) sink.Part {
	t.Helper()
	rr := partReader(t, in.Schema, first, n, 3)
	defer rr.Release()
	return must[sink.Part](t)(s.WritePartition(ctx, in, partition, rr))
}

func TestMemSinkCommitsAtomically(t *testing.T) {
	s := fake.NewMemSink()
	defer s.Close()
	schema := bronze(t)
	a := info(schema, "dbo_Orders", "plan-a", 1)
	p0 := write(t, s, a, 0, 0, 5)
	p1 := write(t, s, a, 1, 5, 4)
	if len(s.Records()) != 0 || s.Pending() != 2 {
		t.Fatal("written parts are visible before the commit")
	}
	if _, err := s.FindSnapshot(ctx, "dbo_orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("FindSnapshot before commit: %v", err)
	}
	// A plan that starts now races the first one.
	b := info(schema, "DBO_ORDERS", "plan-b", 2)
	q0 := write(t, s, b, 0, 100, 2)

	snap := must[sink.Snapshot](t)(s.CommitSnapshot(ctx, a, []sink.Part{p1, p0}))
	if snap.Rows != 9 || snap.LSN != a.LSN || snap.Version != 0 || snap.CaptureInstance != "dbo_Orders" {
		t.Fatalf("snapshot %+v", snap)
	}
	rows := must[[]map[string]any](t)(s.Rows())
	if len(rows) != 9 || rows[0]["id"] != int64(0) || rows[8]["id"] != int64(8) {
		t.Fatalf("rows %v", rows)
	}
	found := must[sink.Snapshot](t)(s.FindSnapshot(ctx, "DBO_orders"))
	if found != snap {
		t.Fatalf("found %+v, want %+v", found, snap)
	}
	var meta sink.UserMetadata
	check(t, json.Unmarshal([]byte(s.Commits()[0].UserMetadata), &meta))
	if meta != sink.NewUserMetadata(a) {
		t.Fatalf("user metadata %+v", meta)
	}

	got, err := s.CommitSnapshot(ctx, b, []sink.Part{q0})
	if !errors.Is(err, sink.ErrSnapshotExists) || got != snap {
		t.Fatalf("racing commit: %+v, %v; want the first snapshot and ErrSnapshotExists", got, err)
	}
	if rows := must[[]map[string]any](t)(s.Rows()); len(rows) != 9 {
		t.Fatal("the refused commit made rows visible")
	}

	// A re-snapshot that names the snapshot it replaces lands and is found.
	c := info(schema, "dbo_orders", "plan-c", 3)
	c.Replaces = snap.LSN
	r0 := write(t, s, c, 0, 200, 1)
	snap2 := must[sink.Snapshot](t)(s.CommitSnapshot(ctx, c, []sink.Part{r0}))
	if f := must[sink.Snapshot](t)(s.FindSnapshot(ctx, "dbo_ORDERS")); f != snap2 || snap2.Version != 1 {
		t.Fatalf("newest snapshot %+v, want %+v", f, snap2)
	}
}

func TestMemSinkRefusesBadParts(t *testing.T) {
	s := fake.NewMemSink()
	defer s.Close()
	schema := bronze(t)
	a := info(schema, "ci", "plan-a", 1)
	p0 := write(t, s, a, 0, 0, 1)
	p1 := write(t, s, a, 1, 1, 1)
	other := write(t, s, info(schema, "ci", "plan-x", 1), 1, 0, 1)
	for _, tc := range []struct {
		parts []sink.Part
		want  string
	}{
		{[]sink.Part{p0, other}, `belongs to plan "plan-x"`},
		{[]sink.Part{p0, p0}, "appears twice"},
		{[]sink.Part{p1}, "some partitions are missing"},
		{nil, "no parts"},
	} {
		if _, err := s.CommitSnapshot(ctx, a, tc.parts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("commit %d parts: %v, want %q", len(tc.parts), err, tc.want)
		}
	}
	s.FailNextCommit(fake.ErrInjected)
	if _, err := s.CommitSnapshot(ctx, a, []sink.Part{p0, p1}); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("failed commit: %v", err)
	}
	if len(s.Commits()) != 0 {
		t.Fatal("a failed commit committed")
	}
	must[sink.Snapshot](t)(s.CommitSnapshot(ctx, a, []sink.Part{p0, p1}))
	if _, err := s.CommitSnapshot(ctx, a, []sink.Part{p0, p1}); err == nil {
		t.Fatal("parts committed twice")
	}

	s.FailWriteAfter(1, fake.ErrInjected)
	rr := partReader(t, schema, 0, 10, 2)
	defer rr.Release()
	if _, err := s.WritePartition(ctx, info(schema, "ci", "plan-z", 1), 0, rr); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("failed write: %v", err)
	}
	wrong := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	rr2 := partReader(t, wrong, 0, 1, 1)
	defer rr2.Release()
	if _, err := s.WritePartition(ctx, info(wrong, "ci", "plan-w", 1), 0, rr2); err == nil || !strings.Contains(err.Error(), "bronze") {
		t.Fatalf("non-bronze schema: %v", err)
	}
}

func TestMemSinkAppendChangesAndConcurrency(t *testing.T) {
	s := fake.NewMemSink()
	defer s.Close()
	schema := bronze(t)
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := partReader(t, schema, p*10, 10, 4)
			defer rr.Release()
			if _, err := s.AppendChanges(context.Background(), "ci", int64(p), rr); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	rr := partReader(t, schema, 0, 10, 4)
	defer rr.Release()
	again := must[fake.Commit](t)(s.AppendChanges(ctx, "CI", 3, rr))
	if again.BatchID != 3 || len(s.Commits()) != 8 {
		t.Fatalf("a repeated batch was appended again: %+v, %d commits", again, len(s.Commits()))
	}
	if rows := must[[]map[string]any](t)(s.Rows()); len(rows) != 80 {
		t.Fatalf("%d rows", len(rows))
	}
}
