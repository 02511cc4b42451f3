package snapshot

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// Changes reads the changes of captureInstance with from <= __$start_lsn
// <= to as bronze records: _capture_instance as given here, _batch_id =
// batchID, _snapshot and _chunk NULL. Asking from below the instance's
// minimum LSN is an error wrapping source.ErrDataLoss (*source.DataLossError).
func Changes(ctx context.Context, src source.Source, captureInstance string, from, to lsn.LSN, batchID int64) (array.RecordReader, error) {
	ci, err := src.CaptureInstance(ctx, captureInstance)
	if err != nil {
		return nil, fmt.Errorf("changes of %q: %w", captureInstance, err)
	}
	return changes(ctx, src, ci, captureInstance, from, to, batchID, nil)
}
