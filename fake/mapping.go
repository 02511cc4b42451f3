package fake

import (
	"context"
	"fmt"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// MappedCommit is one row of cdc.lsn_time_mapping: a commit's LSN and its
// commit time (UTC), or a row the capture job wrote to mark its progress
// (Progress: tran_id 0x00, Time as MapProgress was given it, zero for
// NULL).
type MappedCommit struct {
	LSN      lsn.LSN
	Time     time.Time
	Progress bool
}

// Mapping returns the rows of cdc.lsn_time_mapping the capture job has
// written, in LSN order: the commits with captured changes it has
// processed, and its progress rows (MapProgress).
func (db *DB) Mapping(ctx context.Context) ([]MappedCommit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []MappedCommit
	for _, m := range db.mapping {
		if db.captured.Less(m.lsn) {
			break
		}
		out = append(out, MappedCommit{LSN: m.lsn, Time: m.ts, Progress: m.idle})
	}
	return out, nil
}

// MapProgress writes a row of cdc.lsn_time_mapping with no change entries
// and no transaction (tran_id 0x00), as the capture job does to record how
// far it has processed in a period with no changes to capture (FACTS.md
// F08, F15), at the next LSN, and lets the capture job catch up to it: the
// max LSN moves without a commit. at is its tran_end_time, which no page
// defines (the zero time stands for NULL); LSNTime answers it as
// sys.fn_cdc_map_lsn_to_time answers the row of an LSN. It returns the
// row's LSN.
func (db *DB) MapProgress(at time.Time) (lsn.LSN, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := db.next
	next, err := l.Next()
	if err != nil {
		return lsn.LSN{}, fmt.Errorf("fake: progress row: %w", err)
	}
	if !at.IsZero() {
		at = at.UTC().Truncate(time.Microsecond)
	}
	db.mapping = append(db.mapping, lsnTime{lsn: l, ts: at, idle: true})
	db.lastLSN, db.next = l, next
	db.runCaptureJobLocked()
	return l, nil
}

// CreatedAt returns the start_lsn capture instance name had when it was
// enabled (cleanup raises its start_lsn later, FACTS.md F20): what tells
// an instance from one dropped and enabled again under the same name, as
// SQL Server's new change table does.
func (db *DB) CreatedAt(name string) (lsn.LSN, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, in := range db.instances {
		if in.name == name {
			return in.start, true
		}
	}
	return lsn.LSN{}, false
}

// TypeAlias returns the alias type column of schema.name was declared with
// (ColumnDef.Alias), "" for a column declared with a system type.
func (db *DB) TypeAlias(schema, name, column string) string {
	db.mu.RLock()
	defer db.mu.RUnlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return ""
	}
	return t.aliases[column]
}
