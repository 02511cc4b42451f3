package sinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
)

// TableReader is implemented by sinks that can read every committed row
// back (fake.MemSink and delta.Table do). When the ChunkSink under test
// implements it, RunChunked checks that the committed chunks' rows are
// exactly the rows written for them, each once, and that no row of a
// refused, failed or uncommitted wave is visible.
type TableReader interface {
	// ReadAll returns every committed row (the rows of whole snapshots,
	// chunks and changes alike). Every column the rows were written with
	// must be present, by name, holding the values written. The caller
	// releases the reader.
	ReadAll(ctx context.Context) (array.RecordReader, error)
}

// RunChunked runs the conformance suite of sink.ChunkSink (chunked
// snapshots) against the sinks newSink returns, one fresh, empty sink per
// subtest, as Run does for sink.Sink.
//
// It checks what the sink.ChunkSink contract states: OpenChunked records a
// plan that FindChunked returns (name matched ignoring case), and opening
// the same PlanID again returns its state; a second open of the instance
// that did not see the first, or that names a snapshot which is no longer
// the newest, returns the newest with an error wrapping
// sink.ErrSnapshotExists, also under concurrent opens; waves commit in
// order as a prefix of the plan, and a wave whose chunks are committed, or
// that does not start at the first uncommitted chunk, commits nothing and
// wraps sink.ErrChunkCommitted, so of concurrent commits of one wave
// exactly one lands; CompleteChunked succeeds only when every chunk is
// committed, and again after that; FindChunked's state after each step;
// FindSnapshot never returns a chunked snapshot, nor FindChunked a whole
// one; a failed WritePartition leaves nothing. A sink that implements
// TableReader also has its rows checked.
func RunChunked(t *testing.T, newSink func(t *testing.T) sink.ChunkSink) {
	t.Helper()
	runSuite(t, newSink, []suiteCase[sink.ChunkSink]{
		{"OpenFindResume", testChunkedOpenFindResume},
		{"SecondOpenRefused", testChunkedSecondOpenRefused},
		{"WavesInOrder", testChunkedWavesInOrder},
		{"ConcurrentWaveOneLands", testChunkedConcurrentWave},
		{"ConcurrentOpensOneWins", testChunkedConcurrentOpens},
		{"FailedWriteLeavesNothing", testChunkedFailedWrite},
		{"ForeignPartsRefused", testChunkedForeignParts},
		{"WholeAndChunkedApart", testChunkedWholeApart},
	})
}

// ChunkRecords returns the rows of ids from (inclusive) to to (exclusive)
// as Records does, stamped as rows of chunk number chunk of the chunked
// snapshot info (info.LSN is its S), read in wave: _snapshot S, _chunk
// chunk, _start_lsn wave.Stamp and _commit_ts wave.CommitTS. The caller
// releases the reader.
func ChunkRecords(mem memory.Allocator, info sink.Info, chunk int, wave sink.Wave, from, to int64, batchRows int) (array.RecordReader, error) {
	rr, err := Records(mem, info, from, to, batchRows)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	schema := rr.Schema()
	idx := map[string]int{}
	for _, c := range []string{sink.ColStartLSN, sink.ColCommitTS, sink.ColChunk} {
		f := schema.FieldIndices(c)
		if len(f) != 1 {
			return nil, fmt.Errorf("sinktest: info.Schema needs one column %q: %s", c, schema)
		}
		idx[c] = f[0]
	}
	if !arrow.TypeEqual(schema.Field(idx[sink.ColChunk]).Type, arrow.PrimitiveTypes.Int32) {
		return nil, fmt.Errorf("sinktest: column %q is %s, want int32", sink.ColChunk, schema.Field(idx[sink.ColChunk]).Type)
	}
	ts, err := arrow.TimestampFromTime(wave.CommitTS, arrow.Microsecond)
	if err != nil {
		return nil, fmt.Errorf("sinktest: wave commit time %s: %w", wave.CommitTS, err)
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for rr.Next() {
		rec := rr.RecordBatch()
		n := int(rec.NumRows())
		cols := slices.Clone(rec.Columns())
		sb := array.NewStringBuilder(mem)
		tb := array.NewTimestampBuilder(mem, schema.Field(idx[sink.ColCommitTS]).Type.(*arrow.TimestampType))
		cb := array.NewInt32Builder(mem)
		for range n {
			sb.Append(wave.Stamp.String())
			tb.Append(ts)
			cb.Append(int32(chunk))
		}
		fresh := []arrow.Array{sb.NewArray(), tb.NewArray(), cb.NewArray()}
		sb.Release()
		tb.Release()
		cb.Release()
		cols[idx[sink.ColStartLSN]], cols[idx[sink.ColCommitTS]], cols[idx[sink.ColChunk]] = fresh[0], fresh[1], fresh[2]
		recs = append(recs, array.NewRecordBatch(schema, cols, int64(n)))
		for _, a := range fresh {
			a.Release()
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	return array.NewRecordReader(schema, recs)
}

// chunkRows is one chunk's rows: ids [span.from, span.to) read in wave.
type chunkRows struct {
	chunk int
	span  span
	wave  sink.Wave
}

// chunkSpans returns n chunks of distinct sizes over consecutive ids.
func chunkSpans(n int) []span {
	out := make([]span, n)
	from := int64(1)
	for i := range out {
		rows := int64(40 + 7*i)
		out[i] = span{from, from + rows}
		from += rows
	}
	return out
}

// newWave returns wave number n stamped at l, its commit time derived
// from l as Info derives CommitTS.
func newWave(n int, stampOf sink.Info) sink.Wave {
	return sink.Wave{Number: n, Stamp: stampOf.LSN, CommitTS: stampOf.CommitTS.Add(time.Duration(n+1) * time.Second)}
}

func writeChunk(ctx context.Context, s sink.Sink, info sink.Info, c chunkRows) (sink.Part, error) {
	rr, err := ChunkRecords(memory.DefaultAllocator, info, c.chunk, c.wave, c.span.from, c.span.to, batchRows)
	if err != nil {
		return sink.Part{}, err
	}
	defer rr.Release()
	return s.WritePartition(ctx, info, c.chunk, rr)
}

// writeChunks writes each chunk and checks its Part.
func writeChunks(t *testing.T, s sink.Sink, info sink.Info, cs []chunkRows) []sink.Part {
	t.Helper()
	parts := make([]sink.Part, len(cs))
	for i, c := range cs {
		p, err := writeChunk(t.Context(), s, info, c)
		if err != nil {
			t.Fatalf("WritePartition(%q, plan %s, chunk %d): %v", info.CaptureInstance, info.PlanID, c.chunk, err)
		}
		checkPart(t, p, info, c.chunk, c.span.rows())
		parts[i] = p
	}
	return parts
}

// compactPlan returns a compact JSON plan naming info's plan.
func compactPlan(info sink.Info, chunks int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"chunks":%d,"note":"Zoë 東京"}`, info.PlanID, chunks))
}

// wantChunked describes the state a ChunkSink must report.
type wantChunked struct {
	info      sink.Info
	chunks    int
	committed int
	complete  bool
	plan      json.RawMessage
}

func checkChunked(t *testing.T, what string, got sink.Chunked, want wantChunked) {
	t.Helper()
	if got.CaptureInstance != want.info.CaptureInstance {
		t.Errorf("%s: CaptureInstance = %q, want %q (the name as OpenChunked's Info gave it)", what, got.CaptureInstance, want.info.CaptureInstance)
	}
	if got.LSN != want.info.LSN {
		t.Errorf("%s: LSN = %s, want S = %s", what, got.LSN, want.info.LSN)
	}
	g, w := got.CommitTS.UTC().Truncate(time.Microsecond), want.info.CommitTS.UTC().Truncate(time.Microsecond)
	if !g.Equal(w) {
		t.Errorf("%s: CommitTS = %s, want %s (compared in UTC to the microsecond)", what, got.CommitTS.UTC().Format(time.RFC3339Nano), w.Format(time.RFC3339Nano))
	}
	if got.PlanID != want.info.PlanID {
		t.Errorf("%s: PlanID = %q, want %q", what, got.PlanID, want.info.PlanID)
	}
	if got.Chunks != want.chunks || got.Committed != want.committed || got.Complete != want.complete {
		t.Errorf("%s: Chunks %d, Committed %d, Complete %v; want %d, %d, %v", what, got.Chunks, got.Committed, got.Complete, want.chunks, want.committed, want.complete)
	}
	if want.plan != nil && !bytes.Equal(got.Plan, want.plan) {
		t.Errorf("%s: Plan = %s, want %s (stored as OpenChunked was given it)", what, got.Plan, want.plan)
	}
}

// findChunkedOK returns FindChunked(ci), failing the test on error.
func findChunkedOK(t *testing.T, s sink.ChunkSink, ci, when string) sink.Chunked {
	t.Helper()
	c, err := s.FindChunked(t.Context(), ci)
	if err != nil {
		t.Fatalf("%s: FindChunked(%q): %v", when, ci, err)
	}
	return c
}

// checkFound checks FindChunked(ci) reports want at version.
func checkFound(t *testing.T, s sink.ChunkSink, ci, when string, want wantChunked, version int64) {
	t.Helper()
	c := findChunkedOK(t, s, ci, when)
	checkChunked(t, fmt.Sprintf("%s: FindChunked(%q)", when, ci), c, want)
	if c.Version != version {
		t.Errorf("%s: FindChunked(%q).Version = %d, want %d, the version of the snapshot's latest commit", when, ci, c.Version, version)
	}
}

func wantChunkedNotFound(t *testing.T, s sink.ChunkSink, ci, when string) {
	t.Helper()
	c, err := s.FindChunked(t.Context(), ci)
	switch {
	case err == nil:
		t.Errorf("%s: FindChunked(%q) found plan %s (LSN %s), want an error wrapping sink.ErrNotFound", when, ci, c.PlanID, c.LSN)
	case !errors.Is(err, sink.ErrNotFound):
		t.Errorf("%s: FindChunked(%q) = %v, want an error wrapping sink.ErrNotFound", when, ci, err)
	}
}

func openChunked(t *testing.T, s sink.ChunkSink, info sink.Info, chunks int, replaces string) sink.Chunked {
	t.Helper()
	plan := compactPlan(info, chunks)
	c, err := s.OpenChunked(t.Context(), info, chunks, plan, replaces)
	if err != nil {
		t.Fatalf("OpenChunked(%q, plan %s, %d chunks, replaces %q): %v", info.CaptureInstance, info.PlanID, chunks, replaces, err)
	}
	checkChunked(t, "OpenChunked", c, wantChunked{info, chunks, 0, false, plan})
	return c
}

// commitWave commits parts as one wave and checks the state it returns:
// committed chunks, a version above prev.
func commitWave(t *testing.T, s sink.ChunkSink, info sink.Info, wave sink.Wave, parts []sink.Part, want wantChunked, prev int64) sink.Chunked {
	t.Helper()
	c, err := s.CommitChunks(t.Context(), info, wave, jsonParts(t, parts))
	if err != nil {
		t.Fatalf("CommitChunks(plan %s, wave %d, %d parts): %v", info.PlanID, wave.Number, len(parts), err)
	}
	checkChunked(t, fmt.Sprintf("CommitChunks(wave %d)", wave.Number), c, want)
	if c.Version <= prev {
		t.Errorf("CommitChunks(wave %d): Version = %d, want above %d, the snapshot's previous commit", wave.Number, c.Version, prev)
	}
	return c
}

// How a refused wave must fail.
const (
	// refusedCommitted: wrapping sink.ErrChunkCommitted, returning the state.
	refusedCommitted = iota
	// refusedOther: not wrapping sink.ErrChunkCommitted (Backfill would
	// take the wave for another writer's and carry on).
	refusedOther
	// refusedAny: any error.
	refusedAny
)

// refused checks that a CommitChunks call failed as how says, and that
// FindChunked still reports want at version.
func refused(t *testing.T, s sink.ChunkSink, what string, got sink.Chunked, err error, how int, want wantChunked, version int64) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("CommitChunks of %s succeeded (Committed %d), want an error", what, got.Committed)
	case how == refusedCommitted && !errors.Is(err, sink.ErrChunkCommitted):
		t.Errorf("CommitChunks of %s = %v, want an error wrapping sink.ErrChunkCommitted", what, err)
	case how == refusedCommitted:
		checkChunked(t, "the state CommitChunks returns with ErrChunkCommitted for "+what, got, wantChunked{want.info, want.chunks, want.committed, want.complete, nil})
	case how == refusedOther && errors.Is(err, sink.ErrChunkCommitted):
		t.Errorf("CommitChunks of %s = %v, want an error about the wave, not ErrChunkCommitted", what, err)
	}
	checkFound(t, s, want.info.CaptureInstance, "after CommitChunks refused "+what, want, version)
}

// checkAllRows compares every committed row, when s is a TableReader,
// with the rows of want.
func checkAllRows(t *testing.T, s sink.Sink, info sink.Info, want []chunkRows) {
	t.Helper()
	r, ok := s.(TableReader)
	if !ok {
		return
	}
	wantRows := map[string]int{}
	for _, c := range want {
		rr, err := ChunkRecords(memory.DefaultAllocator, info, c.chunk, c.wave, c.span.from, c.span.to, batchRows)
		if err != nil {
			t.Fatal(err)
		}
		err = canonicalRows(rr, info.Schema, wantRows)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	rr, err := r.ReadAll(t.Context())
	if err != nil {
		t.Errorf("ReadAll: %v", err)
		return
	}
	defer rr.Release()
	got := map[string]int{}
	if hasColumns(rr.Schema(), info.Schema) {
		err = canonicalRows(rr, info.Schema, got)
	} else {
		// A sink with no rows yet may not know their schema.
		for rr.Next() {
			if n := rr.RecordBatch().NumRows(); n > 0 {
				err = fmt.Errorf("%d rows in schema %s, which lacks the bronze columns", n, rr.Schema())
				break
			}
		}
		if err == nil {
			err = rr.Err()
		}
	}
	if err != nil {
		t.Errorf("ReadAll: %v", err)
		return
	}
	compareRows(t, "ReadAll", "each committed chunk's rows once", got, wantRows)
}

func hasColumns(have, want *arrow.Schema) bool {
	for _, f := range want.Fields() {
		if len(have.FieldIndices(f.Name)) != 1 {
			return false
		}
	}
	return true
}

func testChunkedOpenFindResume(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	info := Info("dbo_Orders", LSN(0x1000))
	wantChunkedNotFound(t, s, "dbo_orders", "an empty sink")
	plan := compactPlan(info, 3)
	st := openChunked(t, s, info, 3, "")
	want := wantChunked{info, 3, 0, false, plan}
	for _, name := range []string{"dbo_Orders", "DBO_ORDERS", "dbo_orders"} {
		checkFound(t, s, name, "after OpenChunked", want, st.Version)
	}
	wantChunkedNotFound(t, s, "dbo_Order", "another instance")
	wantNotFound(t, s, info.CaptureInstance, "a chunked snapshot only (FindSnapshot must ignore it)")

	// Opening the same plan again (a rerun that crashed after the open)
	// returns its state, with the plan first stored.
	again, err := s.OpenChunked(ctx, info, 3, json.RawMessage(`{"another":"plan"}`), "")
	if err != nil {
		t.Fatalf("OpenChunked of the same PlanID again: %v, want its state", err)
	}
	checkChunked(t, "OpenChunked of the same PlanID again", again, want)
	if again.Version != st.Version {
		t.Errorf("OpenChunked of the same PlanID again: Version %d, want %d (nothing new committed)", again.Version, st.Version)
	}

	// A wave, then a resume: the state says where to carry on.
	spans := chunkSpans(3)
	w0 := newWave(0, Info("", LSN(0x1001)))
	c0 := chunkRows{0, spans[0], w0}
	want.committed = 1
	st1 := commitWave(t, s, info, w0, writeChunks(t, s, info, []chunkRows{c0}), want, st.Version)
	checkFound(t, s, "dbo_orders", "after wave 0", want, st1.Version)
	resumed, err := s.OpenChunked(ctx, info, 3, plan, "")
	if err != nil {
		t.Fatalf("OpenChunked of the same PlanID after a wave: %v", err)
	}
	checkChunked(t, "OpenChunked of the same PlanID after a wave", resumed, want)
	if resumed.Version != st1.Version {
		t.Errorf("OpenChunked of the same PlanID after a wave: Version %d, want %d", resumed.Version, st1.Version)
	}
	wantNotFound(t, s, info.CaptureInstance, "a chunked snapshot with a committed wave (FindSnapshot must ignore it)")
	checkAllRows(t, s, info, []chunkRows{c0})
}

func testChunkedSecondOpenRefused(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	first := Info("dbo_Orders", LSN(0x2000))
	a := openChunked(t, s, first, 2, "")
	second := Info("DBO_ORDERS", LSN(0x2100))
	got, err := s.OpenChunked(ctx, second, 4, compactPlan(second, 4), "")
	if !errors.Is(err, sink.ErrSnapshotExists) {
		t.Fatalf("OpenChunked of a second plan that did not see the first = %v, want an error wrapping sink.ErrSnapshotExists", err)
	}
	want := wantChunked{first, 2, 0, false, compactPlan(first, 2)}
	checkChunked(t, "the state a refused OpenChunked returns", got, want)
	checkFound(t, s, "dbo_orders", "after a refused open", want, a.Version)

	// A resnapshot names the one it replaces, and becomes the newest.
	third := Info("dbo_orders", LSN(0x2200))
	c := openChunked(t, s, third, 3, first.PlanID)
	if c.Version <= a.Version {
		t.Errorf("a resnapshot's OpenChunked: Version %d, want above %d", c.Version, a.Version)
	}
	wantThird := wantChunked{third, 3, 0, false, compactPlan(third, 3)}
	checkFound(t, s, "Dbo_Orders", "after a resnapshot", wantThird, c.Version)

	// One that still names the first lost the race to the third.
	fourth := Info("DBO_Orders", LSN(0x2300))
	got, err = s.OpenChunked(ctx, fourth, 1, compactPlan(fourth, 1), first.PlanID)
	if !errors.Is(err, sink.ErrSnapshotExists) {
		t.Fatalf("OpenChunked of a stale resnapshot (replaces %s, newest %s) = %v, want ErrSnapshotExists", first.PlanID, third.PlanID, err)
	}
	checkChunked(t, "the state a stale resnapshot's OpenChunked returns", got, wantThird)
	checkFound(t, s, "dbo_orders", "after a stale resnapshot", wantThird, c.Version)

	// Replacing a snapshot the sink does not hold records nothing.
	other := Info("dbo_Other", LSN(0x2400))
	if got, err := s.OpenChunked(ctx, other, 1, compactPlan(other, 1), "no-such-plan"); err == nil {
		t.Errorf("OpenChunked replacing a plan the sink does not hold succeeded (%+v), want an error", got)
	}
	wantChunkedNotFound(t, s, other.CaptureInstance, "after an open that replaces an unknown plan")
	wantNotFound(t, s, first.CaptureInstance, "chunked snapshots only")
}

func testChunkedWavesInOrder(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	info := Info("dbo_Orders", LSN(0x3000))
	st := openChunked(t, s, info, 5, "")
	want := wantChunked{info, 5, 0, false, compactPlan(info, 5)}
	spans := chunkSpans(5)
	w0, w1 := newWave(0, Info("", LSN(0x3005))), newWave(1, Info("", LSN(0x3009)))
	cs := make([]chunkRows, 5)
	for i := range cs {
		w := w0
		if i >= 2 {
			w = w1
		}
		cs[i] = chunkRows{i, spans[i], w}
	}
	parts := writeChunks(t, s, info, cs)
	checkFound(t, s, info.CaptureInstance, "after WritePartition of every chunk, before CommitChunks", want, st.Version)
	checkAllRows(t, s, info, nil)

	got, err := s.CommitChunks(ctx, info, w0, []sink.Part{parts[1]})
	refused(t, s, "a wave that skips chunk 0", got, err, refusedCommitted, want, st.Version)
	got, err = s.CommitChunks(ctx, info, w0, []sink.Part{parts[1], parts[2]})
	refused(t, s, "a wave of chunks 1..2 (chunk 0 is uncommitted)", got, err, refusedCommitted, want, st.Version)
	got, err = s.CommitChunks(ctx, info, w0, []sink.Part{parts[0], parts[2]})
	refused(t, s, "a wave with a gap (chunks 0 and 2)", got, err, refusedAny, want, st.Version)
	got, err = s.CommitChunks(ctx, info, w0, []sink.Part{parts[0], parts[0]})
	refused(t, s, "a wave with chunk 0 twice", got, err, refusedAny, want, st.Version)
	got, err = s.CommitChunks(ctx, info, sink.Wave{Stamp: LSN(0x2fff)}, []sink.Part{parts[0]})
	refused(t, s, "a wave stamped below S", got, err, refusedOther, want, st.Version)
	if got, err := s.CompleteChunked(ctx, info); err == nil {
		t.Errorf("CompleteChunked with no chunk committed succeeded (%+v), want an error", got)
	}
	checkFound(t, s, info.CaptureInstance, "after refused waves", want, st.Version)
	checkAllRows(t, s, info, nil)

	// Chunks 0..1, parts in any order.
	want.committed = 2
	st0 := commitWave(t, s, info, w0, []sink.Part{parts[1], parts[0]}, want, st.Version)
	checkFound(t, s, "DBO_ORDERS", "after wave 0", want, st0.Version)
	wantNotFound(t, s, info.CaptureInstance, "after a chunked wave (FindSnapshot must ignore it)")
	checkAllRows(t, s, info, cs[:2])

	got, err = s.CommitChunks(ctx, info, w0, []sink.Part{parts[0]})
	refused(t, s, "chunk 0 again", got, err, refusedCommitted, want, st0.Version)
	got, err = s.CommitChunks(ctx, info, w0, []sink.Part{parts[0], parts[1]})
	refused(t, s, "wave 0 again", got, err, refusedCommitted, want, st0.Version)
	got, err = s.CommitChunks(ctx, info, w1, []sink.Part{parts[1], parts[2]})
	refused(t, s, "a wave that overlaps a committed chunk", got, err, refusedCommitted, want, st0.Version)
	got, err = s.CommitChunks(ctx, info, w1, []sink.Part{parts[3]})
	refused(t, s, "a wave that skips chunk 2", got, err, refusedCommitted, want, st0.Version)
	if _, err := s.CompleteChunked(ctx, info); err == nil {
		t.Errorf("CompleteChunked with 2 of 5 chunks committed succeeded, want an error")
	}
	checkAllRows(t, s, info, cs[:2])

	// A chunk beyond the plan is refused.
	beyond := chunkRows{5, span{1000, 1010}, w1}
	bp := writeChunks(t, s, info, []chunkRows{beyond})
	got, err = s.CommitChunks(ctx, info, w1, []sink.Part{parts[2], parts[3], parts[4], bp[0]})
	refused(t, s, "a wave with a chunk beyond the plan", got, err, refusedOther, want, st0.Version)

	want.committed = 5
	st1 := commitWave(t, s, info, w1, []sink.Part{parts[4], parts[2], parts[3]}, want, st0.Version)
	checkFound(t, s, "dbo_orders", "after the last wave", want, st1.Version)
	checkAllRows(t, s, info, cs)

	want.complete = true
	done, err := s.CompleteChunked(ctx, info)
	if err != nil {
		t.Fatalf("CompleteChunked with every chunk committed: %v", err)
	}
	checkChunked(t, "CompleteChunked", done, want)
	if done.Version <= st1.Version {
		t.Errorf("CompleteChunked: Version %d, want above %d", done.Version, st1.Version)
	}
	checkFound(t, s, "dbo_ORDERS", "after CompleteChunked", want, done.Version)
	again, err := s.CompleteChunked(ctx, info)
	if err != nil {
		t.Fatalf("CompleteChunked of a complete snapshot: %v, want its state", err)
	}
	checkChunked(t, "CompleteChunked again", again, want)
	if again.Version != done.Version {
		t.Errorf("CompleteChunked again: Version %d, want %d (nothing new committed)", again.Version, done.Version)
	}
	got, err = s.CommitChunks(ctx, info, w1, []sink.Part{parts[4]})
	if err == nil {
		t.Errorf("CommitChunks on a complete snapshot succeeded (%+v), want an error", got)
	}
	checkFound(t, s, info.CaptureInstance, "after a wave refused by a complete snapshot", want, done.Version)
	wantNotFound(t, s, info.CaptureInstance, "a complete chunked snapshot (FindSnapshot must ignore it)")
	reopened, err := s.OpenChunked(ctx, info, 5, compactPlan(info, 5), "")
	if err != nil {
		t.Fatalf("OpenChunked of a complete snapshot's PlanID: %v, want its state", err)
	}
	checkChunked(t, "OpenChunked of a complete snapshot's PlanID", reopened, want)
	checkAllRows(t, s, info, cs)
}

func testChunkedConcurrentWave(t *testing.T, s sink.ChunkSink) {
	const n = 8
	info := Info("dbo_Orders", LSN(0x4000))
	st := openChunked(t, s, info, 3, "")
	spans := chunkSpans(3)
	// Every writer reads the same chunks (as a rerun racing a crashed
	// process that was not dead would), each with its own stamp.
	states := make([]sink.Chunked, n)
	errs := make([]error, n)
	waves := make([]sink.Wave, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		waves[i] = newWave(0, Info("", LSN(0x4001+uint64(i))))
		wg.Go(func() {
			<-start
			ctx := t.Context()
			var parts []sink.Part
			for c := range 2 {
				p, err := writeChunk(ctx, s, info, chunkRows{c, spans[c], waves[i]})
				if err != nil {
					errs[i] = fmt.Errorf("WritePartition(writer %d, chunk %d): %w", i, c, err)
					return
				}
				parts = append(parts, p)
			}
			states[i], errs[i] = s.CommitChunks(ctx, info, waves[i], parts)
		})
	}
	close(start)
	wg.Wait()
	want := wantChunked{info, 3, 2, false, nil}
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("CommitChunks of wave 0 by writers %d and %d both succeeded, want exactly one", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, sink.ErrChunkCommitted):
			t.Errorf("writer %d: %v, want nil or an error wrapping sink.ErrChunkCommitted", i, err)
		default:
			checkChunked(t, fmt.Sprintf("writer %d's refused CommitChunks", i), states[i], want)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d concurrent commits of wave 0 succeeded: %v", n, errors.Join(errs...))
	}
	checkChunked(t, "the winning CommitChunks", states[winner], want)
	if states[winner].Version <= st.Version {
		t.Errorf("the winning CommitChunks: Version %d, want above %d", states[winner].Version, st.Version)
	}
	want.plan = compactPlan(info, 3)
	checkFound(t, s, "DBO_orders", "after concurrent commits of one wave", want, states[winner].Version)
	checkAllRows(t, s, info, []chunkRows{{0, spans[0], waves[winner]}, {1, spans[1], waves[winner]}})
}

func testChunkedConcurrentOpens(t *testing.T, s sink.ChunkSink) {
	const n = 8
	names := []string{"dbo_Orders", "DBO_ORDERS", "dbo_orders", "Dbo_Orders"}
	infos := make([]sink.Info, n)
	states := make([]sink.Chunked, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		infos[i] = Info(names[i%len(names)], LSN(0x5000+uint64(i)))
		wg.Go(func() {
			<-start
			states[i], errs[i] = s.OpenChunked(t.Context(), infos[i], 1+i, compactPlan(infos[i], 1+i), "")
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("OpenChunked of plans %d and %d of one instance both succeeded, want exactly one", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, sink.ErrSnapshotExists):
			t.Errorf("plan %d: %v, want nil or an error wrapping sink.ErrSnapshotExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d concurrent opens of one instance succeeded: %v", n, errors.Join(errs...))
	}
	want := wantChunked{infos[winner], 1 + winner, 0, false, compactPlan(infos[winner], 1+winner)}
	for i, err := range errs {
		if i != winner && errors.Is(err, sink.ErrSnapshotExists) {
			checkChunked(t, fmt.Sprintf("plan %d's refused OpenChunked", i), states[i], want)
		}
	}
	for _, name := range names {
		checkFound(t, s, name, "after concurrent opens", want, states[winner].Version)
	}
}

func testChunkedFailedWrite(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	info := Info("dbo_Orders", LSN(0x6000))
	st := openChunked(t, s, info, 2, "")
	want := wantChunked{info, 2, 0, false, compactPlan(info, 2)}
	spans := chunkSpans(2)
	w := newWave(0, Info("", LSN(0x6001)))
	good := writeChunks(t, s, info, []chunkRows{{0, spans[0], w}})
	rr, err := ChunkRecords(memory.DefaultAllocator, info, 1, w, spans[1].from, spans[1].to+500, batchRows)
	if err != nil {
		t.Fatal(err)
	}
	fr := &failingReader{RecordReader: rr, batches: 1}
	part, err := s.WritePartition(ctx, info, 1, fr)
	rr.Release()
	switch {
	case err != nil:
	case fr.Err() != nil:
		t.Logf("WritePartition returned nil (Part.Rows %d) for a reader whose Err() is %v; the caller checks Err() and does not commit", part.Rows, fr.Err())
	default:
		t.Fatal("the failing reader reported no error; the suite is broken")
	}
	checkFound(t, s, info.CaptureInstance, "after a failed WritePartition", want, st.Version)
	checkAllRows(t, s, info, nil)

	// The wave is read again, and commits only what the rerun wrote.
	cs := []chunkRows{{0, spans[0], w}, {1, spans[1], w}}
	again := writeChunks(t, s, info, cs[1:])
	want.committed = 2
	st1 := commitWave(t, s, info, w, []sink.Part{good[0], again[0]}, want, st.Version)
	checkFound(t, s, info.CaptureInstance, "after the rerun's wave", want, st1.Version)
	checkAllRows(t, s, info, cs)
}

func testChunkedForeignParts(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	a := Info("dbo_A", LSN(0x7000))
	b := Info("dbo_B", LSN(0x7000))
	sa := openChunked(t, s, a, 1, "")
	sb := openChunked(t, s, b, 1, "")
	spans := chunkSpans(1)
	w := newWave(0, Info("", LSN(0x7001)))
	pa := writeChunks(t, s, a, []chunkRows{{0, spans[0], w}})
	pb := writeChunks(t, s, b, []chunkRows{{0, spans[0], w}})
	wantA := wantChunked{a, 1, 0, false, compactPlan(a, 1)}
	got, err := s.CommitChunks(ctx, a, w, pb)
	refused(t, s, "a part of another plan", got, err, refusedOther, wantA, sa.Version)

	unknown := Info("dbo_A", LSN(0x7000))
	if got, err := s.CommitChunks(ctx, unknown, w, writeChunks(t, s, unknown, []chunkRows{{0, spans[0], w}})); err == nil {
		t.Errorf("CommitChunks of a PlanID the sink never opened succeeded (%+v), want an error", got)
	}
	if got, err := s.CompleteChunked(ctx, unknown); err == nil {
		t.Errorf("CompleteChunked of a PlanID the sink never opened succeeded (%+v), want an error", got)
	}
	checkFound(t, s, a.CaptureInstance, "after refused foreign parts", wantA, sa.Version)
	checkAllRows(t, s, a, nil)

	// Refusals commit nothing: proper waves still work.
	wantA.committed = 1
	commitWave(t, s, a, w, pa, wantA, sa.Version)
	wantB := wantChunked{b, 1, 1, false, compactPlan(b, 1)}
	commitWave(t, s, b, w, pb, wantB, sb.Version)
	r, ok := s.(TableReader)
	if !ok {
		return
	}
	// Both instances' rows, once each.
	wantRows := map[string]int{}
	for _, info := range []sink.Info{a, b} {
		rr, err := ChunkRecords(memory.DefaultAllocator, info, 0, w, spans[0].from, spans[0].to, batchRows)
		if err != nil {
			t.Fatal(err)
		}
		err = canonicalRows(rr, info.Schema, wantRows)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	rr, err := r.ReadAll(ctx)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	defer rr.Release()
	got2 := map[string]int{}
	if err := canonicalRows(rr, a.Schema, got2); err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	compareRows(t, "ReadAll of two instances' chunks", "each committed chunk's rows once", got2, wantRows)
}

func testChunkedWholeApart(t *testing.T, s sink.ChunkSink) {
	ctx := t.Context()
	whole := Info("dbo_Orders", LSN(0x8000))
	snap := commit(t, s, whole, []span{{1, 121}})
	wantChunkedNotFound(t, s, "dbo_orders", "a whole snapshot only (FindChunked must ignore it)")

	// A chunked snapshot of the same instance at the same LSN.
	info := Info("DBO_ORDERS", LSN(0x8000))
	st := openChunked(t, s, info, 2, "")
	spans := chunkSpans(2)
	w := newWave(0, Info("", LSN(0x8000)))
	cs := []chunkRows{{0, spans[0], w}, {1, spans[1], w}}
	want := wantChunked{info, 2, 2, false, compactPlan(info, 2)}
	st1 := commitWave(t, s, info, w, writeChunks(t, s, info, cs), want, st.Version)
	want.complete = true
	done, err := s.CompleteChunked(ctx, info)
	if err != nil {
		t.Fatalf("CompleteChunked: %v", err)
	}
	if done.Version <= st1.Version {
		t.Errorf("CompleteChunked: Version %d, want above %d", done.Version, st1.Version)
	}
	checkFound(t, s, "dbo_orders", "next to a whole snapshot", want, done.Version)
	found := find(t, s, "dbo_orders", "next to a complete chunked snapshot")
	checkSnapshot(t, "FindSnapshot next to a chunked snapshot", found, whole, 120)
	if found.Version != snap.Version {
		t.Errorf("FindSnapshot next to a chunked snapshot: Version %d, want the whole snapshot's %d", found.Version, snap.Version)
	}
	// A whole snapshot's rows never include a chunk's (RowReader).
	checkRows(t, s, "dbo_orders", whole, []span{{1, 121}})

	// And a whole resnapshot does not touch the chunked one.
	again := Info("dbo_orders", LSN(0x8100))
	again.Replaces = whole.LSN
	commit(t, s, again, []span{{1, 11}})
	checkFound(t, s, "dbo_orders", "after a whole resnapshot", want, done.Version)
}
