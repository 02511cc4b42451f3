// Package sink defines where snapshot rows go: the Sink interface, the
// bronze schema every sink receives, and the record of a snapshot a rerun
// finds. sink/delta implements it as a Delta Lake table; package fake
// keeps it in memory.
//
// A snapshot reaches a sink in two steps, so partitions can be written in
// parallel (or on other machines) and still land in one atomic commit:
// WritePartition stores one partition's rows where no reader sees them yet
// and describes them in a Part; CommitSnapshot makes every Part visible at
// once, or none of them.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// ErrNotFound means the sink holds no (whole) snapshot of the capture
// instance.
var ErrNotFound = errors.New("no snapshot in the sink")

// ErrSnapshotExists is wrapped by CommitSnapshot's error when a snapshot of
// the same capture instance landed first (another process won the race):
// the returned Snapshot is that one, and this commit's parts stay invisible.
var ErrSnapshotExists = errors.New("a snapshot of the capture instance already exists")

// Snapshot is a committed whole snapshot.
type Snapshot struct {
	// CaptureInstance is the name as the snapshot's options gave it.
	CaptureInstance string `json:"snapshot"`
	// LSN is the snapshot's LSN: the stream starts after it.
	LSN lsn.LSN `json:"lsn"`
	// CommitTS is the commit time of LSN at the source.
	CommitTS time.Time `json:"commit_ts"`
	// Version identifies the commit in the sink (a Delta table version).
	Version int64 `json:"version"`
	// Rows is the number of rows committed, when the sink knows it (-1 when not).
	Rows int64 `json:"rows"`
}

// Info describes the snapshot being written.
type Info struct {
	// CaptureInstance is the name as the options gave it.
	CaptureInstance string `json:"capture_instance"`
	// LSN is the snapshot's LSN S, recorded before any row was read.
	LSN lsn.LSN `json:"lsn"`
	// CommitTS is the commit time of LSN.
	CommitTS time.Time `json:"commit_ts"`
	// Schema is the bronze schema of the rows (see BronzeSchema).
	Schema *arrow.Schema `json:"-"`
	// PlanID identifies the plan the parts belong to, so a commit can refuse
	// parts written for another plan.
	PlanID string `json:"plan_id"`
	// Replaces is the LSN of the newest snapshot of the instance that the
	// writer saw before it started (a resnapshot replaces it), or the zero
	// LSN when it saw none. CommitSnapshot commits only while that is still
	// the sink's newest snapshot of the instance.
	Replaces lsn.LSN `json:"replaces"`
}

// Part describes one partition's rows, written but not yet visible.
type Part struct {
	// Partition is the partition's index in the plan.
	Partition int `json:"partition"`
	// PlanID is Info.PlanID of the write.
	PlanID string `json:"plan_id"`
	// Rows is the number of rows written.
	Rows int64 `json:"rows"`
	// Bytes is the size written, when the sink knows it.
	Bytes int64 `json:"bytes"`
	// Data is the sink's own description of what it wrote (for Delta, the
	// add actions), opaque to everyone else and JSON so a Part can travel
	// between processes.
	Data json.RawMessage `json:"data,omitempty"`
}

// Sink stores snapshots. Implementations must be safe for concurrent use.
type Sink interface {
	// FindSnapshot returns the newest whole snapshot of the capture
	// instance, the name matched ignoring case, or an error wrapping
	// ErrNotFound. It must not depend on reading every data file.
	FindSnapshot(ctx context.Context, captureInstance string) (Snapshot, error)

	// WritePartition stores the records of rr (all in info.Schema) where no
	// reader of the sink sees them, and describes them in a Part. On error
	// nothing it wrote may ever become visible.
	WritePartition(ctx context.Context, info Info, partition int, rr array.RecordReader) (Part, error)

	// CommitSnapshot makes parts visible in one atomic step and records the
	// snapshot durably, so FindSnapshot finds it (the newest snapshot of an
	// instance wins). If the sink's newest whole snapshot of the capture
	// instance (ignoring case) is no longer info.Replaces (the zero LSN:
	// none), another writer landed meanwhile: it returns that snapshot and an
	// error wrapping ErrSnapshotExists, and commits nothing. Parts whose
	// PlanID is not info.PlanID, duplicate partitions and missing ones are
	// refused with an error that names them.
	CommitSnapshot(ctx context.Context, info Info, parts []Part) (Snapshot, error)
}

// The bronze metadata columns, after the captured columns (DESIGN.md, "The
// bronze table"). All are nullable.
const (
	ColCaptureInstance = "_capture_instance"
	ColOperation       = "_operation"
	ColStartLSN        = "_start_lsn"
	ColSeqval          = "_seqval"
	ColCommandID       = "_command_id"
	ColBatchID         = "_batch_id"
	ColCommitTS        = "_commit_ts"
	ColSnapshot        = "_snapshot"
	ColChunk           = "_chunk"
)

// OperationSnapshot is _operation on snapshot rows; SQL Server's codes are
// 1 delete, 2 insert, 3 update before, 4 update after.
const OperationSnapshot = 0

// MetadataFields returns the bronze metadata fields in table order.
func MetadataFields() []arrow.Field {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	return []arrow.Field{
		{Name: ColCaptureInstance, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColOperation, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: ColStartLSN, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColSeqval, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColCommandID, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: ColBatchID, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: ColCommitTS, Type: ts, Nullable: true},
		{Name: ColSnapshot, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColChunk, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}
}

// BronzeSchema returns captured + the metadata fields. A captured column
// whose name equals a metadata column's ignoring case (Delta and Spark
// compare names that way), or that starts with "__$" (CDC's own prefix),
// is an error naming it: nothing could tell the two apart.
func BronzeSchema(captured *arrow.Schema) (*arrow.Schema, error) {
	meta := MetadataFields()
	seen := map[string]string{}
	for _, f := range meta {
		seen[strings.ToLower(f.Name)] = f.Name
	}
	for _, f := range captured.Fields() {
		if strings.HasPrefix(f.Name, "__$") {
			return nil, fmt.Errorf("captured column %q uses CDC's reserved prefix __$", f.Name)
		}
		if m, ok := seen[strings.ToLower(f.Name)]; ok {
			if _, isMeta := metaName(m); isMeta {
				return nil, fmt.Errorf("captured column %q collides with the bronze metadata column %q", f.Name, m)
			}
			return nil, fmt.Errorf("captured columns %q and %q are equal ignoring case", m, f.Name)
		}
		seen[strings.ToLower(f.Name)] = f.Name
	}
	fields := append(append([]arrow.Field(nil), captured.Fields()...), meta...)
	return arrow.NewSchema(fields, nil), nil
}

func metaName(name string) (arrow.Field, bool) {
	for _, f := range MetadataFields() {
		if f.Name == name {
			return f, true
		}
	}
	return arrow.Field{}, false
}

// SameInstance reports whether two capture instance names denote the same
// instance in a sink: equal ignoring case.
func SameInstance(a, b string) bool { return strings.EqualFold(a, b) }

// UserMetadata is the JSON a snapshot commit carries (Delta's
// commitInfo.userMetadata): {"snapshot": ci, "lsn": "0x…", "commit_ts": "…"}.
type UserMetadata struct {
	Snapshot string `json:"snapshot"`
	LSN      string `json:"lsn"`
	CommitTS string `json:"commit_ts"`
}

// NewUserMetadata returns the metadata of a snapshot commit; CommitTS is
// RFC 3339 in UTC with microseconds, or empty when the commit time is
// unknown (the zero time).
func NewUserMetadata(info Info) UserMetadata {
	m := UserMetadata{Snapshot: info.CaptureInstance, LSN: info.LSN.String()}
	if !info.CommitTS.IsZero() {
		m.CommitTS = info.CommitTS.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	return m
}
