package delta

import (
	"context"
	"fmt"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// maybeCheckpoint writes a checkpoint of version s.version when it is a
// multiple of the interval. A failure is logged, never returned: the
// commit is already durable and readers do not need the checkpoint.
func (t *Table) maybeCheckpoint(ctx context.Context, s *deltalog.State) {
	n := t.opts.checkpointInterval()
	if n <= 0 || s.Version <= 0 || s.Version%n != 0 {
		return
	}
	if s.Protocol.MinWriterVersion > 2 || len(s.Meta.PartitionColumns) > 0 {
		// A table with features (v2 checkpoints, row tracking, ...) is
		// checkpointed by the engine that gave it those features; a
		// missing checkpoint only costs readers a longer replay.
		t.log.Debug("no checkpoint written: the table has features", "version", s.Version)
		return
	}
	if err := t.dlog.WriteCheckpoint(ctx, s, 1); err != nil {
		t.log.Warn("checkpoint failed", "version", s.Version, "error", err)
	}
}

// Checkpoint writes a classic checkpoint of the latest version (in parts
// Parquet files when parts > 1, a multi-part checkpoint) and
// _last_checkpoint.
func (t *Table) Checkpoint(ctx context.Context, parts int) error {
	s, err := t.current(ctx)
	if err != nil {
		return err
	}
	if s.Version < 0 {
		return fmt.Errorf("delta: table %s does not exist", t.url)
	}
	if len(s.Meta.PartitionColumns) > 0 || s.Protocol.MinWriterVersion > 2 {
		return fmt.Errorf("delta: table %s: checkpoints of partitioned tables or tables with features are not supported", t.url)
	}
	return t.dlog.WriteCheckpoint(ctx, s, max(parts, 1))
}
