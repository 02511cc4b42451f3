package source

import (
	"context"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// DDL is one row of sys.sp_cdc_get_ddl_history (FACTS.md F65): a change
// of the source table's column structure (a column added, dropped or
// retyped) that a capture instance recorded. SQL Server writes it when
// the capture job reaches the DDL in the log, one row per capture instance
// of the table.
type DDL struct {
	// CaptureInstance is the instance that recorded it.
	CaptureInstance string `json:"capture_instance"`
	// SourceSchema and SourceTable name the table.
	SourceSchema string `json:"source_schema"`
	SourceTable  string `json:"source_table"`
	// Command is the statement as SQL Server recorded it (ddl_command).
	Command string `json:"ddl_command"`
	// LSN is ddl_lsn, the LSN of the DDL's commit (cdc.ddl_history). No
	// commit time maps to it: cdc.lsn_time_mapping has rows only for
	// transactions with change rows (FACTS.md F65).
	LSN lsn.LSN `json:"ddl_lsn"`
	// Time is ddl_time, converted to UTC as commit times are.
	Time time.Time `json:"ddl_time"`
	// RequiredColumnUpdate is true when the DDL altered a column of the
	// change table: a captured column's type changed (FACTS.md F62).
	RequiredColumnUpdate bool `json:"required_column_update"`
}

// DDLHistorian is a source that reads a capture instance's DDL history.
// source/sqlserver and package fake implement it; a Source without it has
// no history to read, and callers then rely on the captured columns alone.
type DDLHistorian interface {
	// DDLHistory returns the DDL the capture instance recorded, in LSN
	// order. An instance that is gone (or that the login may not read) is
	// an error wrapping ErrNotFound.
	DDLHistory(ctx context.Context, captureInstance string) ([]DDL, error)
}
