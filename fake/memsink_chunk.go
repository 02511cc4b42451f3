package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/sink"
)

var _ sink.ChunkSink = (*MemSink)(nil)

// chunkedMeta renders a chunked commit's userMetadata.
func chunkedMeta(st *sink.Chunked, event string, chunks []int, wave *sink.Wave) string {
	m := sink.ChunkedUserMetadata{Snapshot: st.CaptureInstance, LSN: st.LSN.String(), PlanID: st.PlanID, Event: event,
		CommitTS: st.CommitTS.UTC().Format("2006-01-02T15:04:05.000000Z")}
	if len(chunks) > 0 {
		m.Chunks = []int{chunks[0], chunks[len(chunks)-1] + 1}
	}
	if wave != nil {
		m.Stamp = wave.Stamp.String()
		m.CommitTS = wave.CommitTS.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func cloneChunked(st *sink.Chunked) sink.Chunked {
	c := *st
	c.Plan = slices.Clone(st.Plan)
	return c
}

// newestChunkedLocked returns the newest chunked snapshot of ci.
func (s *MemSink) newestChunkedLocked(ci string) *sink.Chunked {
	for i := len(s.chunked) - 1; i >= 0; i-- {
		if sink.SameInstance(s.chunked[i].CaptureInstance, ci) {
			return s.chunked[i]
		}
	}
	return nil
}

func (s *MemSink) chunkedLocked(planID string) *sink.Chunked {
	for _, c := range s.chunked {
		if c.PlanID == planID {
			return c
		}
	}
	return nil
}

// FindChunked implements sink.ChunkSink: the newest chunked snapshot of
// the capture instance (ignoring case), open or complete.
func (s *MemSink) FindChunked(ctx context.Context, captureInstance string) (sink.Chunked, error) {
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Chunked{}, ErrSinkClosed
	}
	if c := s.newestChunkedLocked(captureInstance); c != nil {
		return cloneChunked(c), nil
	}
	return sink.Chunked{}, fmt.Errorf("fake: memory sink: capture instance %q has no chunked snapshot: %w", captureInstance, sink.ErrNotFound)
}

// OpenChunked implements sink.ChunkSink. It commits a "chunked-open"
// commit holding no rows.
func (s *MemSink) OpenChunked(ctx context.Context, info sink.Info, chunks int, plan json.RawMessage, replaces string) (sink.Chunked, error) {
	where := fmt.Sprintf("fake: memory sink: open chunked snapshot of %q (plan %q)", info.CaptureInstance, info.PlanID)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if info.PlanID == "" || chunks < 1 {
		return sink.Chunked{}, fmt.Errorf("%s: a plan needs an id and at least one chunk (got %d)", where, chunks)
	}
	if !json.Valid(plan) {
		return sink.Chunked{}, fmt.Errorf("%s: the plan is not JSON", where)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Chunked{}, ErrSinkClosed
	}
	if c := s.chunkedLocked(info.PlanID); c != nil {
		return cloneChunked(c), nil
	}
	if c := s.newestChunkedLocked(info.CaptureInstance); c != nil && c.PlanID != replaces {
		return cloneChunked(c), fmt.Errorf("%s: chunked snapshot %q at %s opened first: %w", where, c.PlanID, c.LSN, sink.ErrSnapshotExists)
	} else if c == nil && replaces != "" {
		return sink.Chunked{}, fmt.Errorf("%s: it replaces chunked snapshot %q, which the sink does not hold", where, replaces)
	}
	st := &sink.Chunked{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS.UTC(), PlanID: info.PlanID,
		Chunks: chunks, Plan: slices.Clone(plan), Version: int64(len(s.commits))}
	s.chunked = append(s.chunked, st)
	s.commits = append(s.commits, Commit{Version: st.Version, Kind: "chunked-open", CaptureInstance: info.CaptureInstance,
		UserMetadata: chunkedMeta(st, "open", nil, nil), Chunked: cloneChunked(st)})
	s.records = append(s.records, nil)
	return cloneChunked(st), nil
}

// CommitChunks implements sink.ChunkSink. Besides what the interface
// refuses, it refuses parts it did not write or committed already, and
// parts whose schema differs from info.Schema. FailNextCommit applies.
func (s *MemSink) CommitChunks(ctx context.Context, info sink.Info, wave sink.Wave, parts []sink.Part) (sink.Chunked, error) {
	where := fmt.Sprintf("fake: memory sink: commit wave %d of chunked snapshot %q (plan %q)", wave.Number, info.CaptureInstance, info.PlanID)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := checkBronze(info.Schema); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if len(parts) == 0 {
		return sink.Chunked{}, fmt.Errorf("%s: no parts", where)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Chunked{}, ErrSinkClosed
	}
	st := s.chunkedLocked(info.PlanID)
	switch {
	case st == nil:
		return sink.Chunked{}, fmt.Errorf("%s: the sink holds no chunked snapshot with this plan", where)
	case st.Complete:
		return cloneChunked(st), fmt.Errorf("%s: the snapshot is complete: %w", where, sink.ErrChunkCommitted)
	case wave.Stamp.Less(st.LSN):
		return sink.Chunked{}, fmt.Errorf("%s: stamp %s is below the snapshot's LSN %s", where, wave.Stamp, st.LSN)
	}
	chunks := make([]int, len(parts))
	ids := make([]int64, len(parts))
	order := make([]int, len(parts))
	for i, p := range parts {
		if p.PlanID != info.PlanID {
			return sink.Chunked{}, fmt.Errorf("%s: part %d (chunk %d) belongs to plan %q", where, i, p.Partition, p.PlanID)
		}
		if p.Partition < st.Committed {
			return cloneChunked(st), fmt.Errorf("%s: chunk %d is committed already (chunks 0..%d are): %w", where, p.Partition, st.Committed-1, sink.ErrChunkCommitted)
		}
		if p.Partition >= st.Chunks {
			return sink.Chunked{}, fmt.Errorf("%s: chunk %d: the plan has %d chunks", where, p.Partition, st.Chunks)
		}
		chunks[i] = p.Partition
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return chunks[order[a]] < chunks[order[b]] })
	for k, i := range order {
		if chunks[i] != st.Committed+k {
			if k > 0 && chunks[i] == chunks[order[k-1]] {
				return sink.Chunked{}, fmt.Errorf("%s: chunk %d appears twice", where, chunks[i])
			}
			return cloneChunked(st), fmt.Errorf("%s: the wave must be chunks %d..%d, the first uncommitted ones, but chunk %d is missing: %w",
				where, st.Committed, st.Committed+len(parts)-1, st.Committed+k, sink.ErrChunkCommitted)
		}
	}
	for _, i := range order {
		p := parts[i]
		var d partData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: chunk %d: data %q is not this sink's: %w", where, p.Partition, p.Data, err)
		}
		pp, ok := s.pending[d.ID]
		if !ok {
			return sink.Chunked{}, fmt.Errorf("%s: chunk %d: the sink holds no uncommitted part %d (committed already, or written elsewhere)", where, p.Partition, d.ID)
		}
		if pp.planID != info.PlanID || pp.partition != p.Partition || pp.rows != p.Rows {
			return sink.Chunked{}, fmt.Errorf("%s: chunk %d does not match what was written (plan %q, partition %d, %d rows)", where, p.Partition, pp.planID, pp.partition, pp.rows)
		}
		if !pp.schema.Equal(info.Schema) {
			return sink.Chunked{}, fmt.Errorf("%s: chunk %d was written with another schema", where, p.Partition)
		}
		ids[i] = d.ID
	}
	table, err := s.evolveLocked(info.Schema)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := s.failCommit; err != nil {
		s.failCommit = nil
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	s.table = table
	var recs []arrow.RecordBatch
	var rows int64
	for _, i := range order {
		pp := s.pending[ids[i]]
		recs = append(recs, pp.records...)
		rows += pp.rows
		delete(s.pending, ids[i])
	}
	slices.Sort(chunks)
	st.Committed += len(parts)
	st.Version = int64(len(s.commits))
	s.commits = append(s.commits, Commit{Version: st.Version, Kind: "chunks", CaptureInstance: info.CaptureInstance, Rows: rows,
		UserMetadata: chunkedMeta(st, "wave", chunks, &wave), Chunked: cloneChunked(st), Chunks: chunks})
	s.records = append(s.records, recs)
	return cloneChunked(st), nil
}

// CompleteChunked implements sink.ChunkSink with a "chunked-complete"
// commit holding no rows.
func (s *MemSink) CompleteChunked(ctx context.Context, info sink.Info) (sink.Chunked, error) {
	where := fmt.Sprintf("fake: memory sink: complete chunked snapshot of %q (plan %q)", info.CaptureInstance, info.PlanID)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Chunked{}, ErrSinkClosed
	}
	st := s.chunkedLocked(info.PlanID)
	switch {
	case st == nil:
		return sink.Chunked{}, fmt.Errorf("%s: the sink holds no chunked snapshot with this plan", where)
	case st.Complete:
		return cloneChunked(st), nil
	case st.Committed != st.Chunks:
		return cloneChunked(st), fmt.Errorf("%s: only %d of %d chunks are committed", where, st.Committed, st.Chunks)
	}
	st.Complete = true
	st.Version = int64(len(s.commits))
	s.commits = append(s.commits, Commit{Version: st.Version, Kind: "chunked-complete", CaptureInstance: info.CaptureInstance,
		UserMetadata: chunkedMeta(st, "complete", nil, nil), Chunked: cloneChunked(st)})
	s.records = append(s.records, nil)
	return cloneChunked(st), nil
}

// ReadAll returns every committed row as one record reader (the latest
// table version, as (*delta.Table).ReadAll does), for reconcile and tests.
// Every committed record must share one schema; the caller releases the
// reader.
func (s *MemSink) ReadAll(ctx context.Context) (array.RecordReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSinkClosed
	}
	var recs []arrow.RecordBatch
	var schema *arrow.Schema
	for _, rs := range s.records {
		for _, r := range rs {
			if schema == nil {
				schema = r.Schema()
			} else if !schema.Equal(r.Schema()) {
				return nil, fmt.Errorf("fake: memory sink: read all: committed records have two schemas, %s and %s", schema, r.Schema())
			}
			recs = append(recs, r)
		}
	}
	if schema == nil {
		schema = arrow.NewSchema(sink.MetadataFields(), nil)
	}
	rr, err := array.NewRecordReader(schema, recs)
	if err != nil {
		return nil, fmt.Errorf("fake: memory sink: read all: %w", err)
	}
	return rr, nil
}
