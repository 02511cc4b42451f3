package fake

import (
	"context"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// MappedCommit is one row of cdc.lsn_time_mapping: a commit's LSN and its
// commit time (UTC).
type MappedCommit struct {
	LSN  lsn.LSN
	Time time.Time
}

// Mapping returns the rows of cdc.lsn_time_mapping the capture job has
// written, in LSN order: the commits with captured changes it has processed.
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
		out = append(out, MappedCommit{LSN: m.lsn, Time: m.ts})
	}
	return out, nil
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
