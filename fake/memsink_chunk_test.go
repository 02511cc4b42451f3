package fake_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// TestMemSinkChunked: the chunked-snapshot contract a sink.ChunkSink must
// keep, on MemSink: waves commit in order and never twice, completion only
// after the last chunk, FindSnapshot and FindChunked never see each other,
// and a second open loses to the first.
func TestMemSinkChunked(t *testing.T) {
	s := fake.NewMemSink()
	defer s.Close()
	schema := bronze(t)
	in := info(schema, "dbo_Orders", "plan-a", 5)
	if _, err := s.FindChunked(ctx, "dbo_orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("empty sink: %v", err)
	}
	st, err := s.OpenChunked(ctx, in, 3, []byte(`{"plan":1}`), "")
	if err != nil || st.Chunks != 3 || st.Committed != 0 || st.Complete || string(st.Plan) != `{"plan":1}` {
		t.Fatalf("open: %+v, %v", st, err)
	}
	if again, err := s.OpenChunked(ctx, in, 3, []byte(`{}`), ""); err != nil || again.PlanID != "plan-a" || string(again.Plan) != `{"plan":1}` {
		t.Fatalf("reopening the same plan: %+v, %v", again, err)
	}
	other := info(schema, "DBO_ORDERS", "plan-b", 6)
	if got, err := s.OpenChunked(ctx, other, 2, []byte(`{}`), ""); !errors.Is(err, sink.ErrSnapshotExists) || got.PlanID != "plan-a" {
		t.Fatalf("a second open that did not see the first: %+v, %v", got, err)
	}
	wave := sink.Wave{Number: 0, Stamp: lsn.LSN{9: 7}}
	p0, p1, p2 := write(t, s, in, 0, 0, 4), write(t, s, in, 1, 4, 4), write(t, s, in, 2, 8, 2)
	if _, err := s.CommitChunks(ctx, in, wave, []sink.Part{p1}); !errors.Is(err, sink.ErrChunkCommitted) {
		t.Fatalf("a wave that skips chunk 0: %v", err)
	}
	if _, err := s.CommitChunks(ctx, in, sink.Wave{Stamp: lsn.LSN{9: 4}}, []sink.Part{p0}); err == nil {
		t.Fatal("a stamp below S was committed")
	}
	if _, err := s.CompleteChunked(ctx, in); err == nil {
		t.Fatal("completed with no chunk committed")
	}
	s.FailNextCommit(fake.ErrInjected)
	if _, err := s.CommitChunks(ctx, in, wave, []sink.Part{p1, p0}); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("injected commit failure: %v", err)
	}
	st, err = s.CommitChunks(ctx, in, wave, []sink.Part{p1, p0})
	if err != nil || st.Committed != 2 {
		t.Fatalf("wave 0: %+v, %v", st, err)
	}
	if got, err := s.CommitChunks(ctx, in, wave, []sink.Part{p0}); !errors.Is(err, sink.ErrChunkCommitted) || got.Committed != 2 {
		t.Fatalf("chunk 0 again: %+v, %v", got, err)
	}
	if _, err := s.FindSnapshot(ctx, "dbo_orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("FindSnapshot sees a chunked snapshot: %v", err)
	}
	st, err = s.CommitChunks(ctx, in, sink.Wave{Number: 1, Stamp: lsn.LSN{9: 8}}, []sink.Part{p2})
	if err != nil || st.Committed != 3 || st.Complete {
		t.Fatalf("wave 1: %+v, %v", st, err)
	}
	st, err = s.CompleteChunked(ctx, in)
	if err != nil || !st.Complete {
		t.Fatalf("complete: %+v, %v", st, err)
	}
	if found, err := s.FindChunked(ctx, "DBO_orders"); err != nil || !found.Complete || found.LSN != in.LSN {
		t.Fatalf("FindChunked: %+v, %v", found, err)
	}
	var kinds []string
	for _, c := range s.Commits() {
		kinds = append(kinds, c.Kind)
		if c.Kind == "chunks" && !strings.Contains(c.UserMetadata, `"chunked":"wave"`) {
			t.Fatalf("wave commit metadata %s", c.UserMetadata)
		}
	}
	if strings.Join(kinds, ",") != "chunked-open,chunks,chunks,chunked-complete" {
		t.Fatalf("commits %v", kinds)
	}
	rr, err := s.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	n := 0
	for rr.Next() {
		n += int(rr.RecordBatch().NumRows())
	}
	if n != 10 {
		t.Fatalf("ReadAll: %d rows, want 10", n)
	}
	// A new chunked snapshot that saw plan-a replaces it.
	if st, err := s.OpenChunked(ctx, other, 2, []byte(`{}`), "plan-a"); err != nil || st.PlanID != "plan-b" {
		t.Fatalf("resnapshot: %+v, %v", st, err)
	}
	if found, _ := s.FindChunked(ctx, "dbo_orders"); found.PlanID != "plan-b" || found.Complete {
		t.Fatalf("FindChunked after the resnapshot: %+v", found)
	}
}
