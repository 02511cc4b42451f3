package snapshot

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cdcsnap/cdcsnap/source"
)

// partitionAttempts is how many times a partition (or chunk) is read when
// its reads fail with source.ErrTransient: an error reading again can get
// past that the source could not get past in place, as when a range whose
// key gives no order to resume by (a key that is not unique, a
// nonclustered or text key) had already handed out rows. Each attempt
// reads the range from its start into new files; the files of a failed one
// are never committed (sink.Sink.WritePartition).
const partitionAttempts = 3

// retryPause is the pause before attempt n+1: the source has already
// paused through its own retries.
func retryPause(n int) time.Duration { return time.Duration(n) * 250 * time.Millisecond }

// again runs read, the read of one partition or chunk (what), again from
// its start while it fails with source.ErrTransient, up to
// partitionAttempts, each attempt logged.
func again(ctx context.Context, logger *slog.Logger, what string, read func() error) error {
	for n := 1; ; n++ {
		err := read()
		if err == nil || n >= partitionAttempts || !errors.Is(err, source.ErrTransient) || ctx.Err() != nil {
			return err
		}
		logger.WarnContext(ctx, "transient read error: reading the "+what+" again from its start", "attempt", n+1, "of", partitionAttempts, "error", err)
		t := time.NewTimer(retryPause(n))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}
