package delta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
)

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

// switchAppPrefix starts the txn record of a stream's switch to a capture
// instance: appId "cdcsnap/switch/<lower to>/<create_date micros>/<at>",
// the instance's name folded and path-escaped as changesAppID's.
const switchAppPrefix = "cdcsnap/switch/"

func switchAppPrefixOf(to string, created time.Time) string {
	return changesAppID(to)[len(changesAppPrefix):] + "/" + strconv.FormatInt(appIDMicros(created), 10) + "/"
}

// RecordSwitch records in the table, in a commit of its own, that the
// stream moves to capture instance to (enabled at created) at LSN at:
// snapshot.Switch records its start S before it appends the old
// instance's last changes, and a rerun takes S from here, not from the
// instance's start_lsn, which cleanup raises (snapshot.SwitchRecorder). A
// switch recorded already for the instance is kept, whatever at says.
func (t *Table) RecordSwitch(ctx context.Context, to string, created time.Time, at lsn.LSN) error {
	prefix := switchAppPrefix + switchAppPrefixOf(to, created)
	appID := prefix + at.String()
	_, err := t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		if s.Version < 0 {
			return nil, errors.New("the table does not exist yet")
		}
		// The first S recorded for the instance stays: a rerun's S (its
		// start_lsn, which cleanup raises) is not recorded beside it.
		for id := range s.Txns {
			if strings.HasPrefix(id, prefix) {
				return nil, errNoop
			}
		}
		acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", fmt.Sprintf(`{"switch_to":%q,"at":%q}`, to, at), map[string]any{"mode": "Append"})}}
		return append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: appID, Version: v, LastUpdated: time.Now().UnixMilli()}}), nil
	})
	if err != nil && !errors.Is(err, errNoop) {
		return fmt.Errorf("delta: table %s: recording the switch to %q at %s: %w", t.url, to, at, err)
	}
	return nil
}

// FindSwitch returns the LSN RecordSwitch recorded for capture instance
// to (enabled at created), and false when there is none.
func (t *Table) FindSwitch(ctx context.Context, to string, created time.Time) (lsn.LSN, bool, error) {
	s, err := t.current(ctx)
	if err != nil {
		return lsn.LSN{}, false, err
	}
	prefix := switchAppPrefix + switchAppPrefixOf(to, created)
	for id := range s.Txns {
		rest, ok := strings.CutPrefix(id, prefix)
		if !ok {
			continue
		}
		at, err := lsn.Parse(rest)
		if err != nil {
			return lsn.LSN{}, false, fmt.Errorf("delta: table %s: switch record %q: %w", t.url, id, err)
		}
		return at, true, nil
	}
	return lsn.LSN{}, false, nil
}
