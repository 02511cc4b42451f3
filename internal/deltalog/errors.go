package deltalog

import (
	"errors"
	"fmt"
)

// UnsupportedProtocolError reports a table that uses a Delta protocol
// feature cdcsnap does not implement. The table is refused rather than
// misread (or miswritten). sink/delta names it for its users.
type UnsupportedProtocolError struct {
	// Table is the table's URL as given to sink/delta's Open.
	Table string
	// Feature names what is unsupported: a reader or writer feature
	// ("deletionVectors", "columnMapping", "v2Checkpoint", ...), or
	// "minReaderVersion=N" / "minWriterVersion=N" for a bare version;
	// several unsupported reader features are joined by commas.
	Feature string
	// Write is true when only writing is refused (the table can be read).
	Write bool
}

// Error implements error.
func (e *UnsupportedProtocolError) Error() string {
	op := "read"
	if e.Write {
		op = "write"
	}
	return fmt.Sprintf("delta: cannot %s table %s: unsupported protocol feature %q", op, e.Table, e.Feature)
}

// SchemaError reports records whose schema the table cannot take, even by
// adding nullable columns. Nothing was written. sink/delta names it for
// its users.
type SchemaError struct {
	// Column is the offending column's name.
	Column string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("delta: column %q: %s", e.Column, e.Reason)
}

// CorruptLogError reports a transaction log that cannot be replayed: a
// gap between commits, an unreadable action or checkpoint. sink/delta
// names it for its users.
type CorruptLogError struct {
	// Table is the table's URL as given to Open ("" when not known).
	Table string
	// File is the log file at fault, relative to the table root, if known.
	File string
	// Err is the underlying problem.
	Err error
}

// Error implements error: the table, and that its _delta_log is not a
// Delta log it can read (a folder that is no Delta table, or a damaged
// one), first.
func (e *CorruptLogError) Error() string {
	if e.Table == "" {
		return fmt.Sprintf("delta: log file %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("delta: table %s: not a Delta table, or a damaged one: log file %s: %v", e.Table, e.File, e.Err)
}

// Unwrap returns the wrapped error, for errors.Is and errors.As.
func (e *CorruptLogError) Unwrap() error { return e.Err }

// ErrConflict is returned by a put-if-absent commit when the version
// already exists.
var ErrConflict = errors.New("delta: commit version already exists")

// ErrNoConditionalWrites is returned by the first write to a table whose
// store ignores put-if-absent (a second conditional write of one key
// succeeded): two writers of one version would overwrite each other's
// commit, so nothing is written. sink/delta names it for its users.
var ErrNoConditionalWrites = errors.New("delta: the store does not honour conditional writes (put-if-absent)")
