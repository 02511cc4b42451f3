package sqlserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

var _ source.DDLHistorian = (*Source)(nil)

// DDLHistory implements source.DDLHistorian with
// sys.sp_cdc_get_ddl_history (FACTS.md F65): the changes of the capture
// instance's table's column structure since the instance was enabled, in
// LSN order, ddl_time read in the server's zone as commit times are. An
// instance that is gone (the procedure refuses it) is an error wrapping
// source.ErrNotFound.
func (s *Source) DDLHistory(ctx context.Context, captureInstance string) ([]source.DDL, error) {
	rs, err := s.run(ctx, s.db, "DDL history of "+captureInstance, mssqlstmt.DDLHistoryStatement(captureInstance))
	var me mssql.Error
	if errors.As(err, &me) {
		return nil, fmt.Errorf("%w: %w", &source.AccessError{CaptureInstance: captureInstance, Reason: "sys.sp_cdc_get_ddl_history refused it"}, err)
	}
	if err != nil {
		return nil, err
	}
	out, err := parseDDLHistory(rs)
	if err != nil {
		return nil, err
	}
	c, err := s.serverClock(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[time.Time]drop{}
	for i := range out {
		if out[i].Time.IsZero() {
			continue
		}
		if out[i].Time, err = c.instant(ctx, out[i].Time, out[i].LSN, out[i].LSN, seen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseDDLHistory reads the result of DDLHistoryStatement (FACTS.md F65),
// ddl_time as the server's wall clock labelled UTC (F51), for
// DDLHistory to read in the server's zone.
func parseDDLHistory(rs resultSet) ([]source.DDL, error) {
	const what = "sp_cdc_get_ddl_history"
	idx := map[string]int{}
	for _, n := range []string{"source_schema", "source_table", "capture_instance", "required_column_update", "ddl_command", "ddl_lsn", "ddl_time"} {
		i, err := rs.col(what, n)
		if err != nil {
			return nil, err
		}
		idx[n] = i
	}
	var out []source.DDL
	for r, row := range rs.Rows {
		if len(row) != len(rs.Columns) {
			return nil, fmt.Errorf("sqlserver: %s: row %d has %d values for %d columns", what, r, len(row), len(rs.Columns))
		}
		var d source.DDL
		var err error
		for _, f := range []struct {
			col string
			to  *string
		}{{"source_schema", &d.SourceSchema}, {"source_table", &d.SourceTable}, {"capture_instance", &d.CaptureInstance}, {"ddl_command", &d.Command}} {
			if *f.to, err = asString(what+" "+f.col, row[idx[f.col]]); err != nil {
				return nil, err
			}
		}
		if d.RequiredColumnUpdate, err = asBit(what+" required_column_update", row[idx["required_column_update"]]); err != nil {
			return nil, err
		}
		b, ok := row[idx["ddl_lsn"]].([]byte)
		if !ok {
			return nil, fmt.Errorf("sqlserver: %s: ddl_lsn of row %d: want binary(10), have %T", what, r, row[idx["ddl_lsn"]])
		}
		if d.LSN, err = lsn.FromBytes(b); err != nil {
			return nil, fmt.Errorf("sqlserver: %s: ddl_lsn of row %d: %w", what, r, err)
		}
		switch t := row[idx["ddl_time"]].(type) {
		case time.Time:
			d.Time = t
		case nil:
		default:
			return nil, fmt.Errorf("sqlserver: %s: ddl_time of row %d: want datetime, have %T", what, r, t)
		}
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(a, b source.DDL) int { return a.LSN.Compare(b.LSN) })
	return out, nil
}
