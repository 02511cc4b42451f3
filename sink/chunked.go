package sink

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// ErrChunkCommitted is wrapped by CommitChunks's error when a chunk of the
// wave is already committed, or the wave does not start at the first
// uncommitted chunk (another writer got there first): nothing is
// committed, and the returned Chunked is the sink's current state.
var ErrChunkCommitted = errors.New("chunk already committed")

// Chunked is the durable state of a chunked snapshot (DESIGN.md R12): its
// snapshot LSN S, its plan, how many of its chunks are
// committed, and whether it is complete.
//
// Chunks are committed in order, a wave at a time: chunks 0..Committed-1
// are visible, the others are not. A snapshot is complete only after its
// last chunk, once CompleteChunked recorded it.
type Chunked struct {
	// CaptureInstance is the name as the snapshot's options gave it.
	CaptureInstance string `json:"capture_instance"`
	// LSN is the snapshot's LSN S, recorded before any of its rows was
	// read: the stream starts after it, whether the snapshot is complete
	// or not.
	LSN lsn.LSN `json:"lsn"`
	// CommitTS is the commit time of LSN at the source.
	CommitTS time.Time `json:"commit_ts"`
	// PlanID identifies the snapshot (Info.PlanID of its writes).
	PlanID string `json:"plan_id"`
	// Chunks is the number of chunks planned.
	Chunks int `json:"chunks"`
	// Committed is the number of chunks committed: chunks 0..Committed-1.
	Committed int `json:"committed"`
	// Complete is true once CompleteChunked recorded the last chunk.
	Complete bool `json:"complete"`
	// Plan is the writer's plan exactly as OpenChunked stored it, opaque to
	// the sink (package snapshot stores a snapshot.BackfillPlan).
	Plan json.RawMessage `json:"plan"`
	// Version is the sink's version of the snapshot's latest commit (open,
	// wave or complete).
	Version int64 `json:"version"`
}

// Wave describes one wave of chunks being committed.
type Wave struct {
	// Number counts the waves of the snapshot from 0.
	Number int `json:"wave"`
	// Stamp is the wave's LSN L (>= the snapshot's LSN S), recorded before
	// any of its chunks was read; the chunks' rows carry it as _start_lsn.
	Stamp lsn.LSN `json:"stamp"`
	// CommitTS is the commit time of Stamp.
	CommitTS time.Time `json:"commit_ts"`
}

// ChunkedUserMetadata is the JSON a chunked snapshot's commits carry in
// Delta's commitInfo.userMetadata, for people reading the log (the state
// itself must be recorded where checkpoints keep it, see ChunkSink):
// {"snapshot": ci, "lsn": S, "plan_id": id, "chunked": event, "chunks":
// [first, end), "stamp": L, "commit_ts": time of L or S}. Event is
// "open", "wave" or "complete".
type ChunkedUserMetadata struct {
	Snapshot string `json:"snapshot"`
	LSN      string `json:"lsn"`
	PlanID   string `json:"plan_id"`
	Event    string `json:"chunked"`
	Chunks   []int  `json:"chunks,omitempty"`
	Stamp    string `json:"stamp,omitempty"`
	CommitTS string `json:"commit_ts"`
}

// ChunkSink is a Sink that also stores chunked snapshots: a snapshot read
// in chunks next to a running stream, one atomic commit per wave of chunks,
// resumable after a crash. Package snapshot's Backfill drives it.
//
// Chunk rows are written with WritePartition (the partition number is the
// chunk number; Info.LSN is S and Info.PlanID the chunked snapshot's
// PlanID) and stay invisible until CommitChunks commits their wave.
//
// Whole and chunked snapshots are separate: FindSnapshot never returns a
// chunked snapshot (complete or not), and FindChunked never a whole one.
// Implementations must be safe for concurrent use, and must keep every
// piece of state FindChunked returns durable across restarts, log
// checkpoints and log cleanup (for Delta: in txn actions and files it
// references, not in commitInfo).
type ChunkSink interface {
	Sink

	// FindChunked returns the newest chunked snapshot of the capture
	// instance (name matched ignoring case), open or complete, or an error
	// wrapping ErrNotFound.
	FindChunked(ctx context.Context, captureInstance string) (Chunked, error)

	// OpenChunked records a new chunked snapshot durably, before any of its
	// rows is read: info's capture instance, LSN S, commit time and PlanID,
	// the number of chunks planned (at least 1), and plan, stored as given
	// and returned by FindChunked. info.Replaces is ignored; replaces is the
	// PlanID of the newest chunked snapshot of the instance the caller saw
	// ("" for none). If the sink's newest one is another, a writer landed
	// meanwhile: it returns that one and an error wrapping
	// ErrSnapshotExists, and records nothing. Opening the plan again (same
	// PlanID) returns its state.
	OpenChunked(ctx context.Context, info Info, chunks int, plan json.RawMessage, replaces string) (Chunked, error)

	// CommitChunks makes one wave's parts visible in one atomic step and
	// records them as committed. The parts' Partition numbers must be
	// exactly Committed, Committed+1, ... of the open snapshot info.PlanID
	// (in any order), written by WritePartition for info.PlanID. A wave
	// whose chunks are already committed, or that does not start at the
	// first uncommitted chunk, returns the current state and an error
	// wrapping ErrChunkCommitted, committing nothing: no chunk is ever
	// visible twice. A complete snapshot, an unknown PlanID and parts of
	// another plan are refused with an error that names them.
	CommitChunks(ctx context.Context, info Info, wave Wave, parts []Part) (Chunked, error)

	// CompleteChunked records durably that the snapshot info.PlanID is
	// complete; every chunk must be committed. Completing a complete
	// snapshot returns its state.
	CompleteChunked(ctx context.Context, info Info) (Chunked, error)
}
