package snapshot

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"

	"github.com/cdcsnap/cdcsnap/sink"
)

// stamp holds the metadata values that are the same on every row of a
// snapshot partition (or of a change batch, for the constants it has).
type stamp struct {
	captureInstance string
	lsn             string // _start_lsn and _snapshot of snapshot rows
	snapshot        string // _snapshot when it differs from lsn (a chunk: S, where lsn is its stamp L); "" means lsn
	commitTS        time.Time
	chunk           *int32 // nil: NULL
	batchID         *int64 // change rows only
	changes         bool   // the input carries _operation, _start_lsn, _seqval, _command_id, _commit_ts
	// pad names captured fields of the bronze schema the input lacks:
	// columns of the bronze table the capture instance does not capture,
	// written as NULL.
	pad map[string]bool
}

// stamper turns record batches of the captured columns (or of the change
// schema) into bronze record batches. Metadata that is constant is built
// once as an array and sliced per batch, so stamping allocates nothing per
// row.
type stamper struct {
	refs     atomic.Int64
	in       array.RecordReader
	schema   *arrow.Schema
	from     []int // per output field: input column, or -1 for a constant
	values   []scalar.Scalar
	consts   []arrow.Array // per output field, len == capacity
	capacity int
	cur      arrow.RecordBatch
	rows     int64
	progress func(rows int64)
	err      error
}

func newStamper(in array.RecordReader, bronze *arrow.Schema, st stamp, progress func(int64)) (*stamper, error) {
	s := &stamper{in: in, schema: bronze, progress: progress}
	s.refs.Store(1)
	inSchema := in.Schema()
	nCaptured := bronze.NumFields() - len(sink.MetadataFields())
	for i, f := range bronze.Fields() {
		if i < nCaptured && st.pad[f.Name] {
			s.from = append(s.from, -1)
			s.values = append(s.values, scalar.MakeNullScalar(f.Type))
			continue
		}
		if i < nCaptured {
			j := inSchema.FieldIndices(f.Name)
			if len(j) != 1 || !arrow.TypeEqual(inSchema.Field(j[0]).Type, f.Type) {
				return nil, fmt.Errorf("source rows lack column %q of type %s (they have %s)", f.Name, f.Type, inSchema)
			}
			s.from = append(s.from, j[0])
			s.values = append(s.values, nil)
			continue
		}
		var v scalar.Scalar
		switch f.Name {
		case sink.ColCaptureInstance:
			v = scalar.NewStringScalar(st.captureInstance)
		case sink.ColOperation:
			v = scalar.NewInt32Scalar(sink.OperationSnapshot)
		case sink.ColStartLSN:
			v = scalar.NewStringScalar(st.lsn)
		case sink.ColSnapshot:
			v = scalar.NewStringScalar(st.lsn)
			if st.snapshot != "" {
				v = scalar.NewStringScalar(st.snapshot)
			}
		case sink.ColCommitTS:
			if !st.commitTS.IsZero() { // zero: the source has no time for the LSN
				v = scalar.NewTimestampScalar(arrow.Timestamp(st.commitTS.UnixMicro()), f.Type)
			}
		case sink.ColChunk:
			if st.chunk != nil {
				v = scalar.NewInt32Scalar(*st.chunk)
			}
		case sink.ColBatchID:
			if st.batchID != nil {
				v = scalar.NewInt64Scalar(*st.batchID)
			}
		}
		if st.changes {
			switch f.Name {
			case sink.ColOperation, sink.ColStartLSN, sink.ColSeqval, sink.ColCommandID, sink.ColCommitTS:
				j := inSchema.FieldIndices(f.Name)
				if len(j) != 1 || !arrow.TypeEqual(inSchema.Field(j[0]).Type, f.Type) {
					return nil, fmt.Errorf("change rows lack column %q of type %s", f.Name, f.Type)
				}
				s.from = append(s.from, j[0])
				s.values = append(s.values, nil)
				continue
			case sink.ColSnapshot:
				v = nil
			}
		}
		if v == nil {
			v = scalar.MakeNullScalar(f.Type)
		}
		s.from = append(s.from, -1)
		s.values = append(s.values, v)
	}
	in.Retain()
	s.consts = make([]arrow.Array, len(s.from))
	return s, nil
}

func (s *stamper) Retain() { s.refs.Add(1) }

func (s *stamper) Release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	for i, a := range s.consts {
		if a != nil {
			a.Release()
			s.consts[i] = nil
		}
	}
	s.in.Release()
}

func (s *stamper) Schema() *arrow.Schema { return s.schema }

func (s *stamper) Err() error { return s.err }

// Deprecated: use RecordBatch.
func (s *stamper) Record() arrow.RecordBatch { return s.cur }

func (s *stamper) RecordBatch() arrow.RecordBatch { return s.cur }

func (s *stamper) Next() bool {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.err != nil || !s.in.Next() {
		if s.err == nil {
			s.err = s.in.Err()
		}
		return false
	}
	rec := s.in.RecordBatch()
	n := int(rec.NumRows())
	if err := s.grow(n); err != nil {
		s.err = err
		return false
	}
	cols := make([]arrow.Array, len(s.from))
	for i, j := range s.from {
		if j >= 0 {
			cols[i] = rec.Column(j)
			cols[i].Retain()
		} else {
			cols[i] = array.NewSlice(s.consts[i], 0, int64(n))
		}
	}
	s.cur = array.NewRecordBatch(s.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	s.rows += int64(n)
	if s.progress != nil {
		s.progress(s.rows)
	}
	return true
}

// grow makes every constant array at least n long.
func (s *stamper) grow(n int) error {
	if n <= s.capacity && s.capacity > 0 { // a batch of 0 rows needs the arrays too
		return nil
	}
	capacity := max(n, 2*s.capacity, 1024)
	for i, v := range s.values {
		if v == nil {
			continue
		}
		a, err := scalar.MakeArrayFromScalar(v, capacity, memory.DefaultAllocator)
		if err != nil {
			return fmt.Errorf("stamping %s: %w", s.schema.Field(i).Name, err)
		}
		if s.consts[i] != nil {
			s.consts[i].Release()
		}
		s.consts[i] = a
	}
	s.capacity = capacity
	return nil
}
