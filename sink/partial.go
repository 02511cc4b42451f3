package sink

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// ErrPartRecorded is wrapped by RecordPart's error when the partition of a
// partial snapshot already has a recorded part (another process wrote it
// first): the returned Part is that one, and the caller uses it instead of
// its own, whose data then is never committed.
var ErrPartRecorded = errors.New("partition already recorded")

// Partial is a whole snapshot written in part but not committed: its plan,
// recorded before any of its rows was read, and the parts of the partitions
// that finished, recorded as they did. A rerun resumes it by reading only
// the partitions missing from Parts, then commits every part at once.
type Partial struct {
	// CaptureInstance is the name as the snapshot's options gave it.
	CaptureInstance string `json:"capture_instance"`
	// LSN is the snapshot's LSN L0.
	LSN lsn.LSN `json:"lsn"`
	// PlanID identifies the snapshot (Info.PlanID of its writes).
	PlanID string `json:"plan_id"`
	// Replaces is Info.Replaces of the snapshot: the newest snapshot of the
	// instance when it was planned (the zero LSN: none).
	Replaces lsn.LSN `json:"replaces"`
	// Created is when the plan was recorded, by the clock of the process
	// that recorded it.
	Created time.Time `json:"created"`
	// Plan is the writer's plan exactly as OpenPartial stored it, opaque to
	// the sink (package snapshot stores a snapshot.Plan).
	Plan json.RawMessage `json:"plan"`
	// Parts are the recorded parts whose data the sink still holds, in
	// partition order.
	Parts []Part `json:"parts"`
	// Lost are partitions whose recorded part's data is gone (a VACUUM
	// removed uncommitted files, say): they must be read again.
	Lost []int `json:"lost,omitempty"`
}

// PartialSink is a Sink that records a whole snapshot's progress where no
// reader of the target sees it, so a rerun after a crash resumes the
// snapshot instead of reading it all again, and still commits it once.
// Package snapshot's Take and Prepare drive it. sink/delta and fake.MemSink
// implement it.
//
// Every record must be durable across restarts before the call returns,
// written put-if-absent (of two processes recording one partition, exactly
// one succeeds), and invisible to readers of the target's rows.
// Implementations must be safe for concurrent use.
type PartialSink interface {
	Sink

	// OpenPartial records a whole snapshot about to be read: info's
	// capture instance, LSN, PlanID and Replaces, and plan, stored as given
	// and returned by FindPartial. It first checks, as WritePartition
	// would, that the sink can take rows of info.Schema, and refuses
	// writing nothing when it cannot. Opening the same PlanID again with
	// the same plan is a no-op; with another plan it is an error.
	OpenPartial(ctx context.Context, info Info, plan json.RawMessage) error

	// RecordPart records part, written by WritePartition for info.PlanID,
	// as finished. If its partition has a recorded part whose data is
	// intact, it returns that one and an error wrapping ErrPartRecorded
	// (a record whose data is lost is replaced). A PlanID that was never
	// opened (or was dropped) is an error wrapping ErrNotFound.
	RecordPart(ctx context.Context, info Info, part Part) (Part, error)

	// FindPartial returns the newest (by Created) partial snapshot of the
	// capture instance, the name matched ignoring case, with every recorded
	// part whose data is intact, or an error wrapping ErrNotFound. It does
	// not read data files' contents.
	FindPartial(ctx context.Context, captureInstance string) (Partial, error)

	// DropPartial forgets the partial snapshot planID of the capture
	// instance: FindPartial no longer returns it, and RecordPart refuses
	// it. It removes the records only, never data files (a committed
	// snapshot references them; an abandoned one's are left to the
	// target's own cleanup). Dropping an unknown plan is not an error.
	DropPartial(ctx context.Context, captureInstance, planID string) error
}

// Checker is a Sink that can tell, reading no row and writing nothing,
// whether it could take a snapshot in a bronze schema. Package snapshot
// calls it before it records the snapshot's LSN, so a target that cannot
// take the capture instance is refused before anything is read.
type Checker interface {
	// CheckSnapshot returns nil if snapshots of captureInstance in schema
	// (a bronze schema) could be written and committed, else an error that
	// names every column and table feature that would be refused.
	CheckSnapshot(ctx context.Context, captureInstance string, schema *arrow.Schema) error
}
