package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/collate"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Tables that change under a running capture (SQL Server's rules:
// source/sqlserver/FACTS.md F59-F67).
//
// What flows by itself:
//   - A captured column dropped from the table: CDC writes NULL for it
//     from then on, and a snapshot reads it as a NULL of its type.
//   - A column added to the table (or dropped and added again, which is
//     another column): the capture instance does not capture it; its
//     changes and snapshots carry the columns it captures. To capture the
//     new column, enable a second capture instance and Switch to it.
//   - A change of nullability, or of a string's or a binary's length: the
//     bronze type stays.
//   - A captured column retyped to a type the bronze table holds (narrower
//     than its column): the sink casts.
//   - A captured column retyped wider, when the bronze table has type
//     widening (Delta's typeWidening feature, delta.enableTypeWidening):
//     sink/delta widens the column, recording delta.typeChanges.
//
// What stops the stream, before any row of the new shape is written: a
// captured column retyped to a type the bronze table cannot take (wider
// without type widening, or another kind of type). Poll returns a
// *SchemaChangeError naming the DDL, its LSN and what to do.

// ErrSchemaChange is wrapped by *SchemaChangeError.
var ErrSchemaChange = errors.New("the capture instance's columns changed in a way the bronze table cannot take")

// SchemaChangeError stops a stream before it appends rows the bronze table
// cannot take: a captured column's type changed (ALTER TABLE ... ALTER
// COLUMN, which SQL Server applies to the capture instance's change table,
// FACTS.md F62). Nothing of the batch was written. It wraps
// ErrSchemaChange and the sink's refusal.
type SchemaChangeError struct {
	CaptureInstance string
	// From and To are the LSNs the refused batch would have read.
	From, To lsn.LSN
	// DDL are the statements the capture instance recorded from From on
	// that altered a captured column's type (required_column_update),
	// oldest first; empty when the source keeps no DDL history.
	DDL []source.DDL
	// Err is the sink's refusal, naming the columns.
	Err error
}

// Error implements error.
func (e *SchemaChangeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capture instance %q: the changes from %s to %s have captured columns the bronze table cannot take", e.CaptureInstance, e.From, e.To)
	for _, d := range e.DDL {
		fmt.Fprintf(&b, "; DDL at LSN %s: %s", d.LSN, d.Command)
	}
	fmt.Fprintf(&b, " (%v). Nothing of the batch was written. If the change widens the column (integer to a wider integer, float to double, a decimal to more digits), enable type widening on the bronze table (Delta: ALTER TABLE ... SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')) and poll again; otherwise the table's column cannot hold the new values: take a new snapshot into a new table (Options.Resnapshot into another target) and stream from it", e.Err)
	return b.String()
}

// Unwrap returns ErrSchemaChange and the sink's error.
func (e *SchemaChangeError) Unwrap() []error { return []error{ErrSchemaChange, e.Err} }

// TableSchemaer is a sink that tells its table's schema (delta.Table,
// fake.MemSink): the stream then writes the table's columns that a capture
// instance does not capture as NULL, so a newer instance that lacks a
// column (dropped from the table) still appends.
type TableSchemaer interface {
	ArrowSchema(ctx context.Context) (*arrow.Schema, error)
}

// tableSchema returns dst's table schema, nil when it has none or does not
// tell.
func tableSchema(ctx context.Context, dst any) *arrow.Schema {
	ts, ok := dst.(TableSchemaer)
	if !ok {
		return nil
	}
	s, err := ts.ArrowSchema(ctx)
	if err != nil {
		return nil
	}
	return s
}

// changes is Changes of ci, stamped as name, with the captured columns of
// the bronze table table (nil: none known) that ci does not capture
// written as NULL.
func changes(ctx context.Context, src source.Source, ci *source.CaptureInstance, name string, from, to lsn.LSN, batchID int64, table *arrow.Schema) (array.RecordReader, error) {
	captured, err := source.ArrowSchema(ci.Columns)
	if err != nil {
		return nil, fmt.Errorf("changes of %q: %w", ci.Name, err)
	}
	pad := map[string]bool{}
	if table != nil {
		have := map[string]bool{}
		for _, f := range captured.Fields() {
			have[collate.Fold(f.Name)] = true
		}
		for _, f := range sink.MetadataFields() {
			have[collate.Fold(f.Name)] = true
		}
		fields := captured.Fields()
		for _, f := range table.Fields() {
			if !have[collate.Fold(f.Name)] {
				f.Nullable = true
				fields = append(fields, f)
				pad[f.Name] = true
			}
		}
		captured = arrow.NewSchema(fields, nil)
	}
	bronze, err := sink.BronzeSchema(captured)
	if err != nil {
		return nil, fmt.Errorf("changes of %q: %w", ci.Name, err)
	}
	rr, err := src.ReadChanges(ctx, ci, from, to)
	if err != nil {
		return nil, fmt.Errorf("changes of %q from %s to %s: %w", ci.Name, from, to, err)
	}
	defer rr.Release()
	s, err := newStamper(rr, bronze, stamp{captureInstance: name, batchID: &batchID, changes: true, pad: pad}, nil)
	if err != nil {
		return nil, fmt.Errorf("changes of %q: %w", ci.Name, err)
	}
	return s, nil
}

// ddlHistory returns the DDL src recorded for the capture instance, nil
// when src keeps none or the history cannot be read (the stream does not
// depend on it: it names the DDL in errors and logs).
func ddlHistory(ctx context.Context, src source.Source, captureInstance string, log *slog.Logger) []source.DDL {
	h, ok := src.(source.DDLHistorian)
	if !ok {
		return nil
	}
	ddl, err := h.DDLHistory(ctx, captureInstance)
	if err != nil {
		log.DebugContext(ctx, "DDL history not read", "capture_instance", captureInstance, "error", err)
		return nil
	}
	return ddl
}

// schemaChange classifies a sink's refusal of a batch's schema.
func schemaChange(ctx context.Context, src source.Source, captureInstance string, from, to lsn.LSN, refusal error, log *slog.Logger) *SchemaChangeError {
	e := &SchemaChangeError{CaptureInstance: captureInstance, From: from, To: to, Err: refusal}
	// A retype reaches the change table when the capture job reaches its
	// DDL (FACTS.md F62), which can be above the max LSN the batch reads
	// up to (a DDL is no commit): every retype from the batch's start on.
	for _, d := range ddlHistory(ctx, src, captureInstance, log) {
		if d.RequiredColumnUpdate && !d.LSN.Less(from) {
			e.DDL = append(e.DDL, d)
		}
	}
	return e
}

// logDDL logs the DDL recorded in [from, to], each with what it does to the
// stream.
func logDDL(ctx context.Context, log *slog.Logger, ddl []source.DDL, captureInstance string) {
	for _, d := range ddl {
		what := "the table's columns changed"
		cmd := strings.ToUpper(d.Command)
		switch {
		case d.RequiredColumnUpdate:
			what = "a captured column's type changed: its changes now read in the new type"
		case strings.Contains(cmd, " DROP COLUMN "):
			what = "a column was dropped: if the capture instance captures it, its changes and snapshots read NULL for it from now on"
		case strings.Contains(cmd, " ADD "):
			what = "a column was added: the capture instance does not capture it; to stream it, enable a second capture instance and switch to it (snapshot.Switch)"
		}
		log.WarnContext(ctx, "DDL on the captured table", "capture_instance", captureInstance, "lsn", d.LSN, "ddl", d.Command, "effect", what)
	}
}
