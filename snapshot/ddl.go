package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	// up to (no commit time maps to a DDL's LSN, F65, so the max LSN need
	// not pass it): every retype from the batch's start on.
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

// ErrColumnsChanged is wrapped by *ColumnsChangedError.
var ErrColumnsChanged = errors.New("the capture instance's columns are not the ones the snapshot reads with")

// ColumnsChangedError stops a snapshot before it reads, or before it
// commits what it read, when the capture instance's captured columns are
// not the ones it reads with: a read sized from an older description
// would truncate or round a widened column's values without an error (a
// CAST does, source/sqlserver FACTS.md F92), and a read that names a
// dropped column fails. Nothing of the read is committed. It wraps
// ErrColumnsChanged.
type ColumnsChangedError struct {
	CaptureInstance string
	// Columns say what differs, one column each.
	Columns []string
	// Pending is true when the table's column has another type than the
	// captured one because the capture job has not processed an ALTER
	// COLUMN yet (source.Column.PendingType, F62): retrying after it has
	// reads in the new type. False: the instance's captured columns
	// changed since the snapshot was planned.
	Pending bool
	// Replan is true when the open chunked snapshot (Backfill), planned
	// with the old columns, cannot go on: a new one must be taken. False
	// when running again does (a whole snapshot plans anew; a chunked one
	// reads a dropped column as NULL).
	Replan bool
	// DDL are the type changes the instance's DDL history records since
	// the snapshot's LSN (required_column_update), oldest first; empty
	// when it records none yet or the source keeps no history.
	DDL []source.DDL
	// Err is the read's error the change explains, if any.
	Err error
}

// Error implements error.
func (e *ColumnsChangedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capture instance %q: %s", e.CaptureInstance, strings.Join(e.Columns, "; "))
	for _, d := range e.DDL {
		fmt.Fprintf(&b, "; DDL at LSN %s: %s", d.LSN, d.Command)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " (the read failed: %v)", e.Err)
	}
	switch {
	case e.Pending:
		b.WriteString(". The capture job has not processed that ALTER COLUMN yet, so the table's type and the captured type differ: a read cast to the captured type could truncate or round a widened column's values, and one in the table's type would not be the type the change table takes once the job passes the DDL. Nothing was read. Retry once sys.fn_cdc_get_max_lsn() has passed the DDL; if sys.dm_cdc_errors shows error 2628 or 8115 for it (a narrowing the change table's rows do not fit), consume the instance's changes, then disable and enable it again (Known issues and errors with CDC)")
	case e.Replan:
		b.WriteString(". The chunked snapshot reads with the columns it was planned with, and nothing of this wave was committed: take a new chunked snapshot (BackfillOptions{Resnapshot: true}), whose chunks supersede this one's, next to the stream")
	default:
		b.WriteString(". Nothing of it was committed: run the snapshot again, which reads the instance's columns as they are now")
	}
	return b.String()
}

// Unwrap returns ErrColumnsChanged and the read's error.
func (e *ColumnsChangedError) Unwrap() []error { return []error{ErrColumnsChanged, e.Err} }

// ErrTableRenamed is wrapped by *TableRenamedError.
var ErrTableRenamed = errors.New("the captured table was renamed while the snapshot read it")

// TableRenamedError stops a snapshot whose reads named the captured table
// by a name it no longer has (sp_rename; FACTS.md F93): CDC follows the
// table, and another table may have taken the old name. The reads are
// guarded by the table's object id, so none returned another table's
// rows, and nothing of them was committed. It wraps ErrTableRenamed.
type TableRenamedError struct {
	CaptureInstance string
	// Was and Now are the table's names, "schema.table".
	Was, Now string
	// Err is the read's error the rename explains, if any.
	Err error
}

// Error implements error.
func (e *TableRenamedError) Error() string {
	s := fmt.Sprintf("capture instance %q: its table %s was renamed to %s while the snapshot read it (sp_rename): the reads of the old name were guarded by the table's object id, and nothing they read was committed; run again, which reads %s", e.CaptureInstance, e.Was, e.Now, e.Now)
	if e.Err != nil {
		s += fmt.Sprintf(" (the read failed: %v)", e.Err)
	}
	return s
}

// Unwrap returns ErrTableRenamed and the read's error.
func (e *TableRenamedError) Unwrap() []error { return []error{ErrTableRenamed, e.Err} }

func tableName(ci *source.CaptureInstance) string { return ci.SourceSchema + "." + ci.SourceTable }

// pendingColumns names each column of ci whose captured type lags the
// table's (source.Column.PendingType).
func pendingColumns(ci *source.CaptureInstance) []string {
	var out []string
	for _, c := range ci.Columns {
		if c.PendingType != "" {
			out = append(out, fmt.Sprintf("column %q is %s in the table and %s in the capture instance", c.Name, c.PendingType, c.Declared()))
		}
	}
	return out
}

// readInstance compares now, the capture instance as the source describes
// it, with was, the one a snapshot reads with, by column_id, and returns
// what to read with: was, with the names of now's table and, for each
// column, now's Dropped, Nullable and CastOnRead. A column may have been
// dropped since (CDC writes NULL for it: read it so, F60) and the table
// renamed; a captured type that changed, or lags the table's, is a
// *ColumnsChangedError; another instance under the name (re-created) is
// one too.
func readInstance(was, now *source.CaptureInstance, chunked bool) (*source.CaptureInstance, error) {
	e := &ColumnsChangedError{CaptureInstance: was.Name, Replan: chunked}
	if p := pendingColumns(now); len(p) > 0 {
		e.Columns, e.Pending, e.Replan = p, true, false
		return nil, e
	}
	switch {
	case !slices.Equal(was.Key, now.Key):
		e.Columns = append(e.Columns, fmt.Sprintf("the key changed from %v to %v", was.Key, now.Key))
	case was.ObjectID != 0 && now.ObjectID != 0 && was.ObjectID != now.ObjectID,
		!was.CreateDate.IsZero() && !now.CreateDate.IsZero() && !was.CreateDate.Equal(now.CreateDate):
		e.Columns = append(e.Columns, "the capture instance was disabled and enabled again")
	case len(was.Columns) != len(now.Columns):
		e.Columns = append(e.Columns, fmt.Sprintf("it captures %d columns, not %d", len(now.Columns), len(was.Columns)))
	}
	if len(e.Columns) > 0 {
		return nil, e
	}
	read := *was
	read.SourceSchema, read.SourceTable = now.SourceSchema, now.SourceTable
	read.Columns = slices.Clone(was.Columns)
	for i, c := range was.Columns {
		n := now.Columns[i]
		switch {
		case c.ID != n.ID && c.ID != 0 || c.Name != n.Name:
			e.Columns = append(e.Columns, fmt.Sprintf("column %d is %q (column_id %d), not %q (column_id %d)", i+1, n.Name, n.ID, c.Name, c.ID))
		case c.Declared() != n.Declared() || c.Computed != n.Computed:
			e.Columns = append(e.Columns, fmt.Sprintf("column %q is %s, not %s as the snapshot reads it", c.Name, n.Declared(), c.Declared()))
		case c.Dropped && !n.Dropped:
			e.Columns = append(e.Columns, fmt.Sprintf("column %q is in the table again", c.Name))
		}
		read.Columns[i].Dropped, read.Columns[i].Nullable, read.Columns[i].CastOnRead = n.Dropped, n.Nullable, n.CastOnRead
	}
	if len(e.Columns) > 0 {
		return nil, e
	}
	return &read, nil
}

// explainReadError returns err, a failed read of plan's instance, as a
// *TableRenamedError or a *ColumnsChangedError when the instance as the
// source describes it now says why (a table renamed: error 208; a column
// dropped: error 207), else err itself.
func explainReadError(ctx context.Context, src source.Source, was *source.CaptureInstance, chunked bool, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	now, derr := src.CaptureInstance(ctx, was.Name)
	if derr != nil {
		return err
	}
	if tableName(now) != tableName(was) {
		return &TableRenamedError{CaptureInstance: was.Name, Was: tableName(was), Now: tableName(now), Err: err}
	}
	if _, cerr := readInstance(was, now, chunked); cerr != nil {
		var ce *ColumnsChangedError
		if errors.As(cerr, &ce) {
			ce.Err = err
			return ce
		}
	}
	var dropped []string
	for i, c := range was.Columns {
		if !c.Dropped && i < len(now.Columns) && now.Columns[i].Dropped {
			dropped = append(dropped, fmt.Sprintf("column %q was dropped from the table", c.Name))
		}
	}
	if len(dropped) > 0 {
		return &ColumnsChangedError{CaptureInstance: was.Name, Columns: dropped, Err: err}
	}
	return err
}
