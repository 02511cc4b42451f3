package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/collate"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// ErrSinkClosed is returned by a MemSink after Close.
var ErrSinkClosed = errors.New("fake: memory sink is closed")

// Commit is one commit of a MemSink: a snapshot or a batch of changes.
type Commit struct {
	// Version numbers commits from 0, like Delta table versions.
	Version int64
	// Kind is "snapshot", "changes", or for a chunked snapshot
	// "chunked-open", "chunks" (one wave) or "chunked-complete".
	Kind string
	// CaptureInstance is the name as the writer gave it.
	CaptureInstance string
	// Snapshot is the snapshot committed, for Kind "snapshot".
	Snapshot sink.Snapshot
	// BatchID is the stream batch of a "changes" commit.
	BatchID int64
	// Rows is the number of rows committed.
	Rows int64
	// UserMetadata is the commit's userMetadata JSON (sink.NewUserMetadata
	// for a snapshot, sink.ChunkedUserMetadata for a chunked snapshot's
	// commits; empty for changes).
	UserMetadata string
	// Chunked is the chunked snapshot's state after a chunked commit.
	Chunked sink.Chunked
	// Chunks are the chunk numbers a "chunks" commit made visible.
	Chunks []int
}

// pending is a part written but not committed.
type pending struct {
	planID    string
	partition int
	schema    *arrow.Schema
	records   []arrow.RecordBatch
	rows      int64
}

// partData is what MemSink puts in Part.Data.
type partData struct {
	ID int64 `json:"mem_part"`
}

// MemSink is an in-memory sink.Sink, safe for concurrent use. Written parts
// stay invisible until CommitSnapshot makes all of a snapshot's parts
// visible at once. A snapshot of the same capture instance (ignoring case)
// committed after the first WritePartition of a plan makes that plan's
// commit fail with sink.ErrSnapshotExists; one committed before it does not
// (that is a re-snapshot).
type MemSink struct {
	mu       sync.Mutex
	closed   bool
	nextPart int64
	pending  map[int64]*pending
	commits  []Commit
	records  [][]arrow.RecordBatch // per commit
	batches  map[string]Commit     // lower-case instance + batch id -> commit
	chunked  []*sink.Chunked       // chunked snapshots, in the order they opened
	partials []*memPartial         // partial whole snapshots, in the order they opened
	now      func() time.Time      // stamps Partial.Created; nil: time.Now

	table        *arrow.Schema      // the table's schema (memsink_schema.go); nil before the first commit
	typeWidening bool               // SetTypeWidening
	lastBatch    map[string]int64   // lower-case instance -> its newest stream batch
	switches     map[string]lsn.LSN // RecordSwitch: folded instance@create_date -> S

	failCommit error
	failWrite  *writeFault
}

type writeFault struct {
	after int
	err   error
}

var _ sink.Sink = (*MemSink)(nil)

// NewMemSink returns an empty memory sink.
func NewMemSink() *MemSink {
	return &MemSink{pending: map[int64]*pending{}, batches: map[string]Commit{}, lastBatch: map[string]int64{}}
}

// FailNextCommit makes the next CommitSnapshot, CommitChunks or
// AppendChanges fail with err (wrapped), committing nothing.
func (s *MemSink) FailNextCommit(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCommit = err
}

// FailWriteAfter makes the next WritePartition fail with err (wrapped)
// after it has read records record batches; nothing it read is kept.
func (s *MemSink) FailWriteAfter(records int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWrite = &writeFault{after: records, err: err}
}

// FindSnapshot implements sink.Sink: the newest snapshot of the capture
// instance, matched ignoring case.
func (s *MemSink) FindSnapshot(ctx context.Context, captureInstance string) (sink.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return sink.Snapshot{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Snapshot{}, ErrSinkClosed
	}
	if c, ok := s.newestSnapshotLocked(captureInstance, -1); ok {
		return c.Snapshot, nil
	}
	return sink.Snapshot{}, fmt.Errorf("fake: memory sink: capture instance %q: %w", captureInstance, sink.ErrNotFound)
}

// newestSnapshotLocked returns the newest snapshot commit of ci with a
// version above after.
func (s *MemSink) newestSnapshotLocked(ci string, after int64) (Commit, bool) {
	for i := len(s.commits) - 1; i >= 0; i-- {
		c := s.commits[i]
		if c.Version <= after {
			break
		}
		if c.Kind == "snapshot" && sink.SameInstance(c.CaptureInstance, ci) {
			return c, true
		}
	}
	return Commit{}, false
}

// checkBronze checks that schema is a bronze schema: captured columns, then
// sink.MetadataFields.
func checkBronze(schema *arrow.Schema) error {
	if schema == nil {
		return fmt.Errorf("no schema")
	}
	meta := sink.MetadataFields()
	fs := schema.Fields()
	if len(fs) < len(meta) {
		return fmt.Errorf("schema %s lacks the bronze metadata columns", schema)
	}
	for i, m := range meta {
		f := fs[len(fs)-len(meta)+i]
		if f.Name != m.Name || !arrow.TypeEqual(f.Type, m.Type) {
			return fmt.Errorf("schema field %d is %s %s, want bronze metadata column %s %s", len(fs)-len(meta)+i, f.Name, f.Type, m.Name, m.Type)
		}
	}
	return nil
}

// WritePartition implements sink.Sink: it reads every record of rr
// (retaining them) and keeps them invisible until CommitSnapshot. Records
// must have info.Schema.
func (s *MemSink) WritePartition(ctx context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sink.Part{}, ErrSinkClosed
	}
	fault := s.failWrite
	s.failWrite = nil
	s.mu.Unlock()

	where := fmt.Sprintf("fake: memory sink: write partition %d of %q (plan %q)", partition, info.CaptureInstance, info.PlanID)
	if err := checkBronze(info.Schema); err != nil {
		return sink.Part{}, fmt.Errorf("%s: %w", where, err)
	}
	p := &pending{planID: info.PlanID, partition: partition, schema: info.Schema}
	drop := func() {
		for _, r := range p.records {
			r.Release()
		}
	}
	var bytes int64
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			drop()
			return sink.Part{}, fmt.Errorf("%s: %w", where, err)
		}
		if fault != nil && len(p.records) >= fault.after {
			drop()
			return sink.Part{}, fmt.Errorf("%s: after %d records: %w", where, len(p.records), fault.err)
		}
		rec := rr.RecordBatch()
		if !rec.Schema().Equal(info.Schema) {
			drop()
			return sink.Part{}, fmt.Errorf("%s: record schema %s differs from the snapshot's schema %s", where, rec.Schema(), info.Schema)
		}
		rec.Retain()
		p.records = append(p.records, rec)
		p.rows += rec.NumRows()
		for _, col := range rec.Columns() {
			for _, b := range col.Data().Buffers() {
				if b != nil {
					bytes += int64(b.Len())
				}
			}
		}
	}
	if err := rr.Err(); err != nil {
		drop()
		return sink.Part{}, fmt.Errorf("%s: reading the partition: %w", where, err)
	}
	if fault != nil && len(p.records) >= fault.after {
		drop()
		return sink.Part{}, fmt.Errorf("%s: after %d records: %w", where, len(p.records), fault.err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		drop()
		return sink.Part{}, ErrSinkClosed
	}
	id := s.nextPart
	s.nextPart++
	s.pending[id] = p
	data, _ := json.Marshal(partData{ID: id})
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: p.rows, Bytes: bytes, Data: data}, nil
}

// CommitSnapshot implements sink.Sink. It refuses parts of another plan,
// duplicate partitions, partitions missing from 0..len(parts)-1, parts it
// did not write or already committed, and parts whose schema differs from
// info.Schema. If the newest snapshot of the same instance is not the one
// info.Replaces names (none, for the zero LSN), another writer landed
// meanwhile: it returns that snapshot and an error wrapping
// sink.ErrSnapshotExists, and commits nothing.
func (s *MemSink) CommitSnapshot(ctx context.Context, info sink.Info, parts []sink.Part) (sink.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return sink.Snapshot{}, err
	}
	where := fmt.Sprintf("fake: memory sink: commit snapshot of %q (plan %q)", info.CaptureInstance, info.PlanID)
	if err := checkBronze(info.Schema); err != nil {
		return sink.Snapshot{}, fmt.Errorf("%s: %w", where, err)
	}
	if len(parts) == 0 {
		return sink.Snapshot{}, fmt.Errorf("%s: no parts", where)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Snapshot{}, ErrSinkClosed
	}
	seen := make([]bool, len(parts))
	ids := make([]int64, len(parts))
	rowsOf := make([]int64, len(parts))
	for i, p := range parts {
		if p.PlanID != info.PlanID {
			return sink.Snapshot{}, fmt.Errorf("%s: part %d (partition %d) belongs to plan %q", where, i, p.Partition, p.PlanID)
		}
		if p.Partition < 0 || p.Partition >= len(parts) {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d is outside 0..%d: some partitions are missing", where, p.Partition, len(parts)-1)
		}
		if seen[p.Partition] {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d appears twice", where, p.Partition)
		}
		seen[p.Partition] = true
		var d partData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d: data %q is not this sink's: %w", where, p.Partition, p.Data, err)
		}
		ids[p.Partition], rowsOf[p.Partition] = d.ID, p.Rows
	}
	// A snapshot that landed first wins before the parts are looked up:
	// its commit may have taken the very parts a concurrent resume holds.
	if c, ok := s.newestSnapshotLocked(info.CaptureInstance, -1); ok && c.Snapshot.LSN != info.Replaces {
		return c.Snapshot, fmt.Errorf("%s: snapshot at %s landed first (version %d): %w", where, c.Snapshot.LSN, c.Version, sink.ErrSnapshotExists)
	}
	for i, id := range ids {
		pp, ok := s.pending[id]
		if !ok {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d: the sink holds no uncommitted part %d (committed already, or written elsewhere)", where, i, id)
		}
		if pp.planID != info.PlanID || pp.partition != i || pp.rows != rowsOf[i] {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d does not match what was written (plan %q, partition %d, %d rows)", where, i, pp.planID, pp.partition, pp.rows)
		}
		if !pp.schema.Equal(info.Schema) {
			return sink.Snapshot{}, fmt.Errorf("%s: partition %d was written with another schema", where, i)
		}
	}
	table, err := s.evolveLocked(info.Schema)
	if err != nil {
		return sink.Snapshot{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := s.failCommit; err != nil {
		s.failCommit = nil
		return sink.Snapshot{}, fmt.Errorf("%s: %w", where, err)
	}
	s.table = table
	var recs []arrow.RecordBatch
	var rows int64
	for _, id := range ids {
		pp := s.pending[id]
		recs = append(recs, pp.records...)
		rows += pp.rows
		delete(s.pending, id)
	}
	meta, _ := json.Marshal(sink.NewUserMetadata(info))
	snap := sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS.UTC(), Version: int64(len(s.commits)), Rows: rows}
	s.commits = append(s.commits, Commit{Version: snap.Version, Kind: "snapshot", CaptureInstance: info.CaptureInstance, Snapshot: snap, Rows: rows, UserMetadata: string(meta)})
	s.records = append(s.records, recs)
	return snap, nil
}

// AppendChanges commits change rows (records in a bronze schema) for a
// stream batch, atomically. A batch already committed for the capture
// instance (ignoring case) is not appended again: its commit is returned.
func (s *MemSink) AppendChanges(ctx context.Context, captureInstance string, batchID int64, rr array.RecordReader) (Commit, error) {
	where := fmt.Sprintf("fake: memory sink: append changes of %q batch %d", captureInstance, batchID)
	if err := ctx.Err(); err != nil {
		return Commit{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := checkBronze(rr.Schema()); err != nil {
		return Commit{}, fmt.Errorf("%s: %w", where, err)
	}
	var recs []arrow.RecordBatch
	var rows int64
	drop := func() {
		for _, r := range recs {
			r.Release()
		}
	}
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		drop()
		return Commit{}, fmt.Errorf("%s: %w", where, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		drop()
		return Commit{}, ErrSinkClosed
	}
	key := fmt.Sprintf("%s\x00%d", collate.Fold(captureInstance), batchID)
	if c, ok := s.batches[key]; ok {
		drop()
		return c, nil
	}
	table, err := s.evolveLocked(rr.Schema())
	if err != nil {
		drop()
		return Commit{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := s.failCommit; err != nil {
		s.failCommit = nil
		drop()
		return Commit{}, fmt.Errorf("%s: %w", where, err)
	}
	s.table = table
	if last, ok := s.lastBatch[collate.Fold(captureInstance)]; !ok || batchID > last {
		s.lastBatch[collate.Fold(captureInstance)] = batchID
	}
	c := Commit{Version: int64(len(s.commits)), Kind: "changes", CaptureInstance: captureInstance, BatchID: batchID, Rows: rows}
	s.commits = append(s.commits, c)
	s.records = append(s.records, recs)
	s.batches[key] = c
	return c, nil
}

// RecordSwitch records that the stream moves to capture instance to
// (enabled at created) at LSN at, as sink/delta's Table does
// (snapshot.SwitchRecorder).
func (s *MemSink) RecordSwitch(ctx context.Context, to string, created time.Time, at lsn.LSN) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.switches == nil {
		s.switches = map[string]lsn.LSN{}
	}
	k := collate.Fold(to) + "@" + created.UTC().Format(time.RFC3339Nano)
	if _, ok := s.switches[k]; !ok {
		s.switches[k] = at
	}
	return nil
}

// FindSwitch returns the LSN RecordSwitch recorded for capture instance
// to (enabled at created), and false when there is none.
func (s *MemSink) FindSwitch(ctx context.Context, to string, created time.Time) (lsn.LSN, bool, error) {
	if err := ctx.Err(); err != nil {
		return lsn.LSN{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.switches[collate.Fold(to)+"@"+created.UTC().Format(time.RFC3339Nano)]
	return at, ok, nil
}

// LastBatch returns the newest stream batch appended for the capture
// instance (name ignoring case), and false when there is none.
func (s *MemSink) LastBatch(ctx context.Context, captureInstance string) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lastBatch[collate.Fold(captureInstance)]
	return b, ok, nil
}

// Commits returns every commit, oldest first.
func (s *MemSink) Commits() []Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Commit(nil), s.commits...)
}

// Records returns every committed record batch in commit order. The sink
// owns them: they stay valid until Close; Retain one to keep it longer.
func (s *MemSink) Records() []arrow.RecordBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []arrow.RecordBatch
	for _, rs := range s.records {
		out = append(out, rs...)
	}
	return out
}

// Pending returns the number of parts written and not committed.
func (s *MemSink) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Rows returns every committed row as a map from column name to Go value,
// in commit order: integers as int64, floats as float64, decimals as
// keyrange.Decimal, strings, []byte, timestamps and dates as time.Time in
// UTC, NULL as nil.
func (s *MemSink) Rows() ([]map[string]any, error) {
	var out []map[string]any
	for _, rec := range s.Records() {
		fields := rec.Schema().Fields()
		for i := 0; i < int(rec.NumRows()); i++ {
			m := make(map[string]any, len(fields))
			for j, f := range fields {
				v, err := ArrowValue(rec.Column(j), i)
				if err != nil {
					return nil, fmt.Errorf("fake: memory sink: column %q: %w", f.Name, err)
				}
				m[f.Name] = v
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// ArrowValue converts value i of an Arrow array the fake or a snapshot
// produces back to the Go value the fake uses: integers as int64, floats as
// float64, decimals as keyrange.Decimal, strings, []byte, timestamps and
// dates as time.Time in UTC, NULL as nil. Other Arrow types are an error.
func ArrowValue(col arrow.Array, i int) (any, error) {
	if col.IsNull(i) {
		return nil, nil
	}
	switch a := col.(type) {
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.Binary:
		// A copy that is never nil: an empty value is []byte{}, not NULL.
		return append([]byte{}, a.Value(i)...), nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return keyrange.Decimal(decnum.FormatScaled(a.Value(i).BigInt(), int(scale))), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC(), nil
	case *array.Date32:
		return a.Value(i).ToTime().UTC(), nil
	}
	return nil, fmt.Errorf("no Go value for Arrow type %s", col.DataType())
}

// Close releases every record, committed or pending. Later calls of the
// sink's methods return ErrSinkClosed (accessors return nothing).
func (s *MemSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, rs := range s.records {
		for _, r := range rs {
			r.Release()
		}
	}
	for _, p := range s.pending {
		for _, r := range p.records {
			r.Release()
		}
	}
	s.records, s.pending, s.commits, s.chunked, s.partials = nil, nil, nil, nil, nil
	return nil
}
