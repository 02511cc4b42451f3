package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sourcetest"
)

// TestSourceConformance runs the source conformance suite (the same one the
// fake passes) against SQL Server. Its hooks run DDL and DML as the
// CDCSNAP_MSSQL_DSN login (which integration/setup.sql makes db_owner).
func TestSourceConformance(t *testing.T) {
	db, src := open(t, "CDCSNAP_MSSQL_DSN")
	h := mssqlHarness{db: db}
	sourcetest.Run(t, sourcetest.Harness{
		Source:      src,
		Prefix:      fmt.Sprintf("st%d_", time.Now().Unix()), // fresh names per run
		CreateTable: h.createTable,
		Commit:      h.commit,
		Cleanup:     h.cleanup,
	})
}

type mssqlHarness struct{ db *sql.DB }

func tableName(tb sourcetest.Table) (string, error) {
	schema, err := mssqlstmt.QuoteName(tb.Schema)
	if err != nil {
		return "", err
	}
	name, err := mssqlstmt.QuoteName(tb.Name)
	return schema + "." + name, err
}

// columnType rebuilds a column's declared type through the same allowlist
// the source uses for CASTs.
func columnType(c sourcetest.Column) (string, error) {
	col, err := source.ParseType(c.Type)
	if err != nil {
		return "", err
	}
	col.Name = c.Name
	return mssqlstmt.InlineType(col)
}

// param converts a suite value to what go-mssqldb binds; every value is
// CAST to its column's declared type in the statement.
func param(v any) any {
	switch x := v.(type) {
	case keyrange.Decimal:
		return string(x)
	case keyrange.UUID:
		return x.String()
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.9999999")
	default:
		return v
	}
}

func (h mssqlHarness) createTable(ctx context.Context, tb sourcetest.Table, instance string, rows []sourcetest.Row) error {
	name, err := tableName(tb)
	if err != nil {
		return err
	}
	var cols, keys []string
	types := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		q, err := mssqlstmt.QuoteName(c.Name)
		if err != nil {
			return err
		}
		if types[i], err = columnType(c); err != nil {
			return err
		}
		def := q + " " + types[i]
		if c.Collation != "" {
			if !mssqlstmt.ValidCollation(c.Collation) {
				return fmt.Errorf("collation %q", c.Collation)
			}
			def += " COLLATE " + c.Collation
		}
		if !c.Nullable {
			def += " NOT NULL"
		}
		cols = append(cols, def)
	}
	for _, k := range tb.Key {
		q, err := mssqlstmt.QuoteName(k)
		if err != nil {
			return err
		}
		keys = append(keys, q)
	}
	ddl := fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", name, strings.Join(cols, ", "), strings.Join(keys, ", "))
	if _, err := h.db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("%s: %w", ddl, err)
	}
	for _, ix := range tb.Indexes {
		qi, err := mssqlstmt.QuoteName(ix.Name)
		if err != nil {
			return err
		}
		var ic []string
		for _, c := range ix.Columns {
			q, err := mssqlstmt.QuoteName(c)
			if err != nil {
				return err
			}
			ic = append(ic, q)
		}
		ddl := fmt.Sprintf("CREATE NONCLUSTERED INDEX %s ON %s (%s)", qi, name, strings.Join(ic, ", "))
		if _, err := h.db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("%s: %w", ddl, err)
		}
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rows {
		if err := insert(ctx, tx, name, tb, types, r); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = h.db.ExecContext(ctx, "EXEC sys.sp_cdc_enable_table @source_schema = @p1, @source_name = @p2, @capture_instance = @p3, @role_name = NULL, @supports_net_changes = 0",
		tb.Schema, tb.Name, instance)
	return err
}

func insert(ctx context.Context, tx *sql.Tx, name string, tb sourcetest.Table, types []string, r sourcetest.Row) error {
	var cols, vals []string
	var args []any
	for i, c := range tb.Columns {
		q, _ := mssqlstmt.QuoteName(c.Name)
		cols = append(cols, q)
		args = append(args, param(r[i]))
		vals = append(vals, fmt.Sprintf("CAST(@p%d AS %s)", len(args), types[i]))
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", name, strings.Join(cols, ", "), strings.Join(vals, ", ")), args...)
	return err
}

// keyWhere is "[k1] = CAST(@pN AS type) AND ..." for a key, with its args
// appended after the statement's others.
func keyWhere(tb sourcetest.Table, types []string, key []any, args []any) (string, []any) {
	var conds []string
	for i, k := range tb.Key {
		for j, c := range tb.Columns {
			if c.Name == k {
				q, _ := mssqlstmt.QuoteName(k)
				args = append(args, param(key[i]))
				conds = append(conds, fmt.Sprintf("%s = CAST(@p%d AS %s)", q, len(args), types[j]))
			}
		}
	}
	return strings.Join(conds, " AND "), args
}

// lastCommitLSN is the newest transaction's LSN in cdc.lsn_time_mapping
// (tran_id 0x00 rows are the capture job's idle marks, not commits).
const lastCommitLSN = "SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00"

func (h mssqlHarness) commit(ctx context.Context, tb sourcetest.Table, changes []sourcetest.Change) (lsn.LSN, error) {
	name, err := tableName(tb)
	if err != nil {
		return lsn.LSN{}, err
	}
	types := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		if types[i], err = columnType(c); err != nil {
			return lsn.LSN{}, err
		}
	}
	var before lsn.NullLSN
	if err := h.db.QueryRowContext(ctx, lastCommitLSN).Scan(&before); err != nil {
		return lsn.LSN{}, err
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return lsn.LSN{}, err
	}
	defer tx.Rollback()
	for _, c := range changes {
		switch c.Op {
		case sourcetest.Insert:
			err = insert(ctx, tx, name, tb, types, c.Row)
		case sourcetest.Update:
			var sets []string
			var args []any
			for i, col := range tb.Columns {
				q, _ := mssqlstmt.QuoteName(col.Name)
				args = append(args, param(c.Row[i]))
				sets = append(sets, fmt.Sprintf("%s = CAST(@p%d AS %s)", q, len(args), types[i]))
			}
			where, args := keyWhere(tb, types, c.Key, args)
			_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE %s", name, strings.Join(sets, ", "), where), args...)
		case sourcetest.Delete:
			where, args := keyWhere(tb, types, c.Key, nil)
			_, err = tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", name, where), args...)
		}
		if err != nil {
			return lsn.LSN{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return lsn.LSN{}, err
	}
	// Wait for the capture job to process the commit.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		var after lsn.NullLSN
		if err := h.db.QueryRowContext(ctx, lastCommitLSN).Scan(&after); err != nil {
			return lsn.LSN{}, err
		}
		if after.Valid && (!before.Valid || after.LSN.Compare(before.LSN) > 0) {
			return after.LSN, nil
		}
	}
	return lsn.LSN{}, fmt.Errorf("the capture job did not process the commit to %s within 2 minutes", name)
}

func (h mssqlHarness) cleanup(ctx context.Context, instance string, low lsn.LSN) error {
	_, err := h.db.ExecContext(ctx, "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = @p1, @low_water_mark = @p2, @threshold = 5000", instance, low.Bytes())
	return err
}
