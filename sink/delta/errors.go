package delta

import (
	"errors"
	"fmt"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// The error types below are defined with the log layer (an internal
// package) and named here, where users match them with errors.As.

// UnsupportedProtocolError reports a table that uses a Delta protocol
// feature this package does not implement: the table is refused rather
// than misread (or miswritten). Its fields: Table, the table's URL as
// given to Open; Feature, what is unsupported (a reader or writer feature
// such as "columnMapping" or "v2Checkpoint", or "minReaderVersion=N" /
// "minWriterVersion=N" for a bare version; several unsupported reader
// features joined by commas); Write, true when only writing is refused
// (the table can be read).
type UnsupportedProtocolError = deltalog.UnsupportedProtocolError

// SchemaError reports records whose schema the table cannot take, even by
// adding nullable columns; nothing was written. Its fields: Column, the
// offending column's name; Reason, what is wrong with it.
type SchemaError = deltalog.SchemaError

// CorruptLogError reports a transaction log this package cannot replay: a
// gap between commits, an unreadable action or checkpoint. Its fields:
// File, the log file at fault relative to the table root (if known); Err,
// the underlying problem (Unwrap returns it).
type CorruptLogError = deltalog.CorruptLogError

// ErrNoConditionalWrites is returned by the first write to a table whose
// store ignores put-if-absent (a second conditional write of one key
// succeeded): two writers of one version would overwrite each other's
// commit, so nothing is written.
var ErrNoConditionalWrites = deltalog.ErrNoConditionalWrites

// PartsError reports parts that CommitSnapshot refuses: written for
// another plan, duplicated, missing, or inconsistent with their data.
type PartsError struct {
	// Partition is the offending part's partition index (-1 when the
	// problem is not one part's).
	Partition int
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *PartsError) Error() string {
	if e.Partition < 0 {
		return "delta: refusing parts: " + e.Reason
	}
	return fmt.Sprintf("delta: refusing part %d: %s", e.Partition, e.Reason)
}

// ErrClosed is returned by a Table's methods after Close.
var ErrClosed = errors.New("delta: table is closed")
