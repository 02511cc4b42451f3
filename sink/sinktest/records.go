package sinktest

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// The captured columns of the suite's table.
const (
	// ColID is the key column: bigint, never NULL.
	ColID = "id"
	// ColName is an nvarchar column, NULL for every id divisible by 5.
	ColName = "name"
)

// CapturedSchema returns the captured columns the suite writes, as
// source.ArrowSchema maps them: id (bigint, the key) and name (nvarchar,
// nullable).
func CapturedSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		{Name: ColName, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// commitBase is the commit time Info derives every CommitTS from.
var commitBase = time.Date(2026, time.January, 2, 3, 4, 5, 123456000, time.UTC)

// Info returns the sink.Info of a new plan of a snapshot of captureInstance
// at l: Schema is sink.BronzeSchema over CapturedSchema, PlanID is fresh
// and random on every call (so two calls are two plans), and CommitTS is a
// UTC time with microsecond precision derived from l (so snapshots at
// different LSNs have different commit times).
func Info(captureInstance string, l lsn.LSN) sink.Info {
	// CapturedSchema is fixed and valid: BronzeSchema cannot refuse it.
	schema, _ := sink.BronzeSchema(CapturedSchema())
	id := make([]byte, 16)
	_, _ = rand.Read(id) // crypto/rand.Read never returns an error.
	seconds := binary.BigEndian.Uint32(l[lsn.Size-4:])
	return sink.Info{
		CaptureInstance: captureInstance,
		LSN:             l,
		CommitTS:        commitBase.Add(time.Duration(seconds%1_000_000) * time.Second),
		Schema:          schema,
		PlanID:          hex.EncodeToString(id),
	}
}

// LSN returns the LSN whose last eight bytes are n, big-endian: a short way
// to write distinct, ordered LSNs in tests.
func LSN(n uint64) lsn.LSN {
	var l lsn.LSN
	binary.BigEndian.PutUint64(l[lsn.Size-8:], n)
	return l
}

// Records returns a reader over the bronze rows of ids from (inclusive) to
// to (exclusive), in batches of at most batchRows rows, stamped as snapshot
// rows of info: _capture_instance info.CaptureInstance, _operation 0,
// _start_lsn and _snapshot info.LSN, _commit_ts info.CommitTS, the other
// metadata columns NULL. name is "name-<id>" with a non-ASCII suffix for
// odd ids, and NULL for ids divisible by 5. info.Schema must hold the id
// and name columns of CapturedSchema; columns the suite does not know are
// NULL. from == to gives a reader with no batches. The caller releases the
// reader.
func Records(mem memory.Allocator, info sink.Info, from, to int64, batchRows int) (array.RecordReader, error) {
	if info.Schema == nil {
		return nil, errors.New("sinktest: info.Schema is nil")
	}
	if batchRows <= 0 {
		return nil, fmt.Errorf("sinktest: batchRows is %d, want > 0", batchRows)
	}
	if to < from {
		return nil, fmt.Errorf("sinktest: ids from %d to %d: to is below from", from, to)
	}
	for _, want := range CapturedSchema().Fields() {
		idx := info.Schema.FieldIndices(want.Name)
		if len(idx) != 1 || !arrow.TypeEqual(info.Schema.Field(idx[0]).Type, want.Type) {
			return nil, fmt.Errorf("sinktest: info.Schema needs one column %q of type %s: %s", want.Name, want.Type, info.Schema)
		}
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for lo := from; lo < to; lo += int64(batchRows) {
		hi := min(lo+int64(batchRows), to)
		rec, err := buildBatch(mem, info, lo, hi)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return array.NewRecordReader(info.Schema, recs)
}

// EmptyBatch returns a reader with one batch of zero rows in info.Schema.
// The caller releases the reader.
func EmptyBatch(mem memory.Allocator, info sink.Info) (array.RecordReader, error) {
	if info.Schema == nil {
		return nil, errors.New("sinktest: info.Schema is nil")
	}
	rec, err := buildBatch(mem, info, 0, 0)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return array.NewRecordReader(info.Schema, []arrow.RecordBatch{rec})
}

// name returns the name column's value for id, and false for NULL.
func name(id int64) (string, bool) {
	switch {
	case id%5 == 0:
		return "", false
	case id%2 != 0:
		return fmt.Sprintf("name-%d-Zoë-東京", id), true
	default:
		return fmt.Sprintf("name-%d", id), true
	}
}

func buildBatch(mem memory.Allocator, info sink.Info, lo, hi int64) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(mem, info.Schema)
	defer b.Release()
	n := int(hi - lo)
	stamp := info.LSN.String()
	ts, err := arrow.TimestampFromTime(info.CommitTS, arrow.Microsecond)
	if err != nil {
		return nil, fmt.Errorf("sinktest: commit time %s: %w", info.CommitTS, err)
	}
	for i, f := range info.Schema.Fields() {
		fb := b.Field(i)
		fb.Reserve(n)
		for id := lo; id < hi; id++ {
			if err := appendCell(fb, f, info, stamp, ts, id); err != nil {
				return nil, err
			}
		}
	}
	return b.NewRecordBatch(), nil
}

func appendCell(fb array.Builder, f arrow.Field, info sink.Info, stamp string, ts arrow.Timestamp, id int64) error {
	wrongType := func() error {
		return fmt.Errorf("sinktest: column %q has type %s, which the suite cannot fill", f.Name, f.Type)
	}
	switch f.Name {
	case ColID:
		b, ok := fb.(*array.Int64Builder)
		if !ok {
			return wrongType()
		}
		b.Append(id)
	case ColName:
		b, ok := fb.(*array.StringBuilder)
		if !ok {
			return wrongType()
		}
		if s, ok := name(id); ok {
			b.Append(s)
		} else {
			b.AppendNull()
		}
	case sink.ColCaptureInstance:
		b, ok := fb.(*array.StringBuilder)
		if !ok {
			return wrongType()
		}
		b.Append(info.CaptureInstance)
	case sink.ColOperation:
		b, ok := fb.(*array.Int32Builder)
		if !ok {
			return wrongType()
		}
		b.Append(sink.OperationSnapshot)
	case sink.ColStartLSN, sink.ColSnapshot:
		b, ok := fb.(*array.StringBuilder)
		if !ok {
			return wrongType()
		}
		b.Append(stamp)
	case sink.ColCommitTS:
		b, ok := fb.(*array.TimestampBuilder)
		if !ok {
			return wrongType()
		}
		b.Append(ts)
	default:
		fb.AppendNull()
	}
	return nil
}
