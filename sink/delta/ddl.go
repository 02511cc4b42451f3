package delta

import "context"

// LastBatch returns the newest stream batch appended for the capture
// instance (AppendChanges' batch id, name ignoring case), and false when
// there is none: from the table's txn record, or, once log cleanup dropped
// it, from the rows. snapshot.Switch uses it (snapshot.BatchFinder) to
// resume after a crash when the old capture instance is gone.
func (t *Table) LastBatch(ctx context.Context, captureInstance string) (int64, bool, error) {
	s, err := t.current(ctx)
	if err != nil {
		return 0, false, err
	}
	return t.lastBatch(ctx, s, captureInstance)
}
