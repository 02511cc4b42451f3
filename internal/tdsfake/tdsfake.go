// Package tdsfake serves a fake.DB to SQL Server clients over TDS, so that
// source/sqlserver and go-mssqldb run whole snapshots, chunked backfills and
// change polling against the fake, through the wire. It answers exactly the
// statements source/sqlserver sends (built by internal/mssqlstmt, pinned by
// its golden files): it parses their text and parameters back (parse.go)
// and answers from the fake's state, with result sets shaped as SQL Server
// documents them (internal/mssqldocs, source/sqlserver/FACTS.md), never as
// the fake's Go structs are. Any other statement gets an error naming it.
//
// It models what the facts register says SQL Server does where the
// statements depend on it: error 313 from the change function for an
// interval outside the valid one (F09), error 229 from a table of schema
// cdc the login may not read (a change table, cdc.lsn_time_mapping) and
// HAS_PERMS_BY_NAME's 0 for it (Options.DenyChangeTables, CDCGrants,
// fake.DB.DenyChangeTable; F11, F86), 0x00… as the minimum LSN of an instance the login may not read (F07), the commit time on the
// first change row of each LSN only (what the statement's CASE asks for,
// F41), SET TRANSACTION ISOLATION LEVEL kept on a connection across
// connection resets (F32).
package tdsfake

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqldocs"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// Options configure a Server. The zero value serves every statement as a
// db_owner login would be served.
type Options struct {
	// DenyChangeTables makes every read of a table of schema cdc (the
	// change tables, cdc.lsn_time_mapping) fail with error 229, and
	// HAS_PERMS_BY_NAME answer 0 for them, as for a login without SELECT
	// on the cdc schema (FACTS.md F11, F86): the source refuses to read
	// changes (sqlserver.ErrChangeTableDenied), or with
	// AllowChangeFunction reads them through
	// cdc.fn_cdc_get_all_changes_<instance>.
	DenyChangeTables bool
	// CDCGrants, when not nil, are the tables of schema cdc the login's
	// database user was granted SELECT on, one by one ("dbo_t_CT",
	// "lsn_time_mapping", names compared ignoring case): a statement
	// reading any other fails with error 229 naming it, the change table
	// first, and HAS_PERMS_BY_NAME answers 0 for it. Nil grants every
	// table (db_owner, or SELECT on the schema). fake.DB.DenyChangeTable
	// takes one change table away whatever the grants.
	CDCGrants []string
	// PacketSize is the TDS packet size granted a client that asks for
	// none; 0 means 4096.
	PacketSize int
	// Logger receives the server's protocol events; nil is silent.
	Logger *slog.Logger
	// NoRecord turns off the log of requests (Server.Requests), for long
	// runs and benchmarks.
	NoRecord bool
	// PageRows is the rows of each page a range read takes from the fake
	// (fake.ScanPieces): the fake's page hook runs between pages, so a test
	// can commit while a read streams. 0 means fake.DefaultBatchRows.
	PageRows int
	// BeforeServe, when set, runs before each statement is answered, with
	// its text: a test's hook to change the fake between the statements of
	// one source call (a cleanup between a check and a read, say).
	BeforeServe func(ctx context.Context, sql string)
	// ReplicaMaxLSN, when set, stands for the replica a connection
	// reached: for each connection (by its id and login) it may return the
	// sys.fn_cdc_get_max_lsn() that replica shows and true, as a readable
	// secondary whose redo lags the primary answers (FACTS.md F56), or
	// false for the fake's own. Only that answer lags: rows are the fake's.
	ReplicaMaxLSN func(conn uint64, login tdsserver.Login) (lsn.LSN, bool)
	// Inject, when set, arms a fault in the response to a request (see
	// tdsserver.Options.Inject): a transient SQL Server error or a cut
	// connection mid-stream; Server.Faults counts those that struck.
	Inject func(req *tdsserver.Request) (tdsserver.Fault, bool)
	// Locked, when set, stands for a lock another session holds on what a
	// read needs: it is called with the text of each range read, seek and
	// change read, and a channel it returns that is not closed yet makes
	// the statement wait until it closes, or until the connection's SET
	// LOCK_TIMEOUT has passed, when the statement fails with error 1222
	// as SQL Server's does (FACTS.md F83). Without a time-out (-1, the
	// default of every connection) it waits for the lock or until the
	// client cancels.
	Locked func(sql string) <-chan struct{}
	// TimeZone is the zone the server's clock runs in: cdc.lsn_time_mapping
	// keeps commit times as its wall clock (FACTS.md F08) and
	// SYSDATETIMEOFFSET answers with its offset. Nil is UTC.
	TimeZone *time.Location
	// TimeZoneID is what CURRENT_TIMEZONE_ID() answers, a Windows zone name
	// (F37); "" is "UTC".
	TimeZoneID string
	// ProductMajorVersion is SERVERPROPERTY('ProductMajorVersion'): 0 is
	// 16 (SQL Server 2022). Below 16 the server has no
	// CURRENT_TIMEZONE_ID() and answers it with error 195, unless it is
	// Azure SQL (EngineEdition 5 or 8).
	ProductMajorVersion int
	// EngineEdition is SERVERPROPERTY('EngineEdition'): 0 is 3
	// (Enterprise, Developer); 5 is Azure SQL Database, whose
	// CURRENT_TIMEZONE_ID() names a database-scoped zone when one is set
	// (TimeZoneID), UTC otherwise (FACTS.md F37).
	EngineEdition int
}

// Server is a fake.DB served over TDS on a loopback port.
type Server struct {
	*tdsserver.Server
	h *handler
}

// Start serves db on 127.0.0.1 at a free port until Close or until ctx is
// done. Connect with Server.DSN("cdcsnap").
func Start(ctx context.Context, db *fake.DB, opts Options) (*Server, error) {
	h := &handler{db: db, opts: opts, iso: map[uint64]source.Isolation{}, lock: map[uint64]time.Duration{}}
	s, err := tdsserver.Start(ctx, h, tdsserver.Options{
		User: "cdcsnap", Password: "fake-Passw0rd", PacketSize: opts.PacketSize,
		Logger: opts.Logger, NoRecord: opts.NoRecord, ServerName: "tdsfake", Inject: opts.Inject,
	})
	if err != nil {
		return nil, err
	}
	return &Server{Server: s, h: h}, nil
}

// Attentions returns how many statements the client cancelled with
// ATTENTION while they were answered.
func (s *Server) Attentions() int64 { return s.h.attentions.Load() }

// Isolation returns the isolation level connection conn has now (READ
// COMMITTED until a SET TRANSACTION ISOLATION LEVEL).
func (s *Server) Isolation(conn uint64) source.Isolation {
	return s.h.isolation(conn)
}

type handler struct {
	db         *fake.DB
	opts       Options
	attentions atomic.Int64

	mu   sync.Mutex
	iso  map[uint64]source.Isolation // per connection
	lock map[uint64]time.Duration    // SET LOCK_TIMEOUT per connection; absent: -1
}

// Fixed texts of the statements that take no names.
var (
	sqlList         = mssqlstmt.ListCaptureInstancesStatement().SQL
	sqlListTable    = mssqlstmt.TableCaptureInstancesStatement("", "").SQL
	sqlCaptured     = mssqlstmt.CapturedColumnsStatement("").SQL
	sqlDDLHistory   = mssqlstmt.DDLHistoryStatement("").SQL
	sqlColumns      = mssqlstmt.ColumnsStatement(0, 0).SQL
	sqlIndexes      = mssqlstmt.IndexesStatement(0).SQL
	sqlProbe        = mssqlstmt.GUIDProbeStatement().SQL
	sqlNow          = mssqlstmt.ServerNowStatement().SQL
	sqlMaxLSN       = mssqlstmt.MaxLSNStatement().SQL
	sqlMinLSN       = mssqlstmt.MinLSNStatement("").SQL
	sqlLSNTime      = mssqlstmt.LSNTimeStatement(lsn.LSN{}).SQL
	sqlVersion      = mssqlstmt.ServerVersionStatement().SQL
	sqlZoneID       = mssqlstmt.TimeZoneIDStatement().SQL
	sqlClockBack    = mssqlstmt.ClockBackStatement(lsn.LSN{}, time.Time{}, time.Time{}).SQL
	sqlReadCommited = mssqlstmt.IsolationStatement(source.ReadCommitted).SQL
	sqlSnapshot     = mssqlstmt.IsolationStatement(source.Snapshot).SQL
	sqlPing         = "select 1;"
	sqlChangeAccess = func() string { st, _ := mssqlstmt.ChangeAccessStatement("x"); return st.SQL }()
	// sqlLockTimeout is LockTimeoutStatement's text before its number.
	sqlLockTimeout = strings.TrimSuffix(mssqlstmt.LockTimeoutStatement(0).SQL, "0")
)

// Serve implements tdsserver.Handler.
func (h *handler) Serve(ctx context.Context, req *tdsserver.Request, w *tdsserver.ResponseWriter) error {
	err := h.serve(ctx, req, w)
	if errors.Is(context.Cause(ctx), tdsserver.ErrAttention) {
		h.attentions.Add(1)
	}
	return err
}

func (h *handler) serve(ctx context.Context, req *tdsserver.Request, w *tdsserver.ResponseWriter) error {
	a := args{}
	for _, p := range req.Params {
		n, err := strconv.Atoi(strings.TrimPrefix(p.Name, "@p"))
		if err == nil {
			a[n] = p.Value
		}
	}
	sql := req.SQL
	if h.opts.BeforeServe != nil {
		h.opts.BeforeServe(ctx, sql)
	}
	if req.Reset {
		// A pooled connection's reset sets the SET options back to their
		// defaults, the lock time-out among them, but not the isolation
		// level (FACTS.md F32, F83).
		h.mu.Lock()
		delete(h.lock, req.ConnID)
		h.mu.Unlock()
	}
	switch {
	case strings.HasPrefix(sql, sqlLockTimeout):
		ms, err := strconv.ParseInt(strings.TrimPrefix(sql, sqlLockTimeout), 10, 32)
		if err != nil || ms < -1 {
			return w.Error(102, 15, 1, fmt.Sprintf("Incorrect syntax near '%s'.", clip(strings.TrimPrefix(sql, sqlLockTimeout))))
		}
		h.mu.Lock()
		h.lock[req.ConnID] = time.Duration(ms) * time.Millisecond
		if ms < 0 {
			delete(h.lock, req.ConnID)
		}
		h.mu.Unlock()
		return nil
	case sql == sqlReadCommited || sql == sqlSnapshot:
		h.mu.Lock()
		h.iso[req.ConnID] = source.ReadCommitted
		if sql == sqlSnapshot {
			h.iso[req.ConnID] = source.Snapshot
		}
		h.mu.Unlock()
		return nil
	case sql == sqlList:
		return h.list(ctx, w, nil)
	case sql == sqlListTable:
		schema, err := a.str("@p1")
		if err != nil {
			return err
		}
		name, err := a.str("@p2")
		if err != nil {
			return err
		}
		if _, err := h.db.Table(schema, name); err != nil {
			// The procedure's @source_name must exist (FACTS.md F01); the
			// error's number is not documented: 208 stands for it (the
			// source takes any error as a reason to list every instance).
			return w.Error(208, 16, 1, fmt.Sprintf("Invalid object name '%s.%s'.", schema, name))
		}
		return h.list(ctx, w, func(ci *source.CaptureInstance) bool {
			return strings.EqualFold(ci.SourceSchema, schema) && strings.EqualFold(ci.SourceTable, name)
		})
	case sql == sqlCaptured:
		return h.captured(ctx, a, w)
	case sql == sqlDDLHistory:
		return h.ddlHistory(ctx, a, w)
	case sql == sqlColumns:
		return h.columns(ctx, a, w)
	case sql == sqlIndexes:
		return h.indexes(ctx, a, w)
	case sql == sqlProbe:
		return h.probe(a, w)
	case sql == sqlPing:
		// go-mssqldb's Conn.Ping (database/sql's PingContext) sends this
		// batch (go-mssqldb v1.11.2 mssql.go, Ping); SQL Server answers
		// one row of one unnamed int column.
		if err := w.Columns([]tdsserver.Column{{Type: "int"}}); err != nil {
			return err
		}
		return w.Row(int32(1))
	case sql == sqlNow:
		if err := w.Columns([]tdsserver.Column{{Name: "now", Type: "datetimeoffset(7)"}}); err != nil {
			return err
		}
		now := time.Now().In(h.zone()).Truncate(100 * time.Nanosecond)
		_, off := now.Zone()
		return w.Row(now.In(time.FixedZone("", off)))
	case sql == sqlVersion:
		major := h.opts.ProductMajorVersion
		if major == 0 {
			major = 16
		}
		if err := w.Columns([]tdsserver.Column{{Name: "major", Type: "int", Nullable: true}, {Name: "edition", Type: "int", Nullable: true}}); err != nil {
			return err
		}
		edition := h.opts.EngineEdition
		if edition == 0 {
			edition = 3 // Enterprise, Developer
		}
		return w.Row(int64(major), int64(edition))
	case sql == sqlZoneID:
		if h.opts.ProductMajorVersion != 0 && h.opts.ProductMajorVersion < 16 && h.opts.EngineEdition != 5 && h.opts.EngineEdition != 8 {
			return w.Error(195, 15, 10, "'CURRENT_TIMEZONE_ID' is not a recognized built-in function name.")
		}
		id := h.opts.TimeZoneID
		if id == "" {
			id = "UTC"
		}
		if err := w.Columns([]tdsserver.Column{{Name: "zone", Type: "varchar(128)", Collation: "SQL_Latin1_General_CP1_CI_AS", Nullable: true}}); err != nil {
			return err
		}
		return w.Row(id)
	case sql == sqlClockBack:
		return h.clockBack(ctx, sql, a, w)
	case sql == sqlMaxLSN:
		if h.opts.ReplicaMaxLSN != nil {
			if l, ok := h.opts.ReplicaMaxLSN(req.ConnID, req.Login); ok {
				return writeMaxLSN(w, l)
			}
		}
		return h.maxLSN(ctx, w)
	case sql == sqlMinLSN:
		return h.minLSN(ctx, a, w)
	case sql == sqlLSNTime:
		return h.lsnTime(ctx, a, w)
	case sql == sqlChangeAccess:
		return h.changeAccess(ctx, a, w)
	case strings.HasPrefix(sql, "EXEC sys.sp_spaceused @objname = @p1"):
		return h.spaceUsed(ctx, a, w)
	case strings.HasPrefix(sql, "SELECT (SELECT MIN("), strings.HasPrefix(sql, "SELECT CAST((SELECT MIN("):
		return h.intKeyBounds(ctx, sql, w)
	case strings.HasPrefix(sql, "SELECT CAST(CAST(CAST(@p") && strings.Contains(sql, " COLLATE "):
		return h.boundCheck(sql, a, w)
	}
	// The reads, which take row locks.
	read := func() error {
		switch {
		case strings.Contains(sql, " FROM [cdc]."):
			return h.changes(ctx, sql, a, w)
		case strings.Contains(sql, ") AS [v]\nCROSS APPLY ("):
			return h.seekBeyond(ctx, req.ConnID, sql, a, w)
		case strings.HasSuffix(sql, " ROWS FETCH NEXT 1 ROWS ONLY"):
			return h.seek(ctx, req.ConnID, sql, a, w)
		}
		return h.readRange(ctx, req.ConnID, sql, a, w)
	}
	if strings.HasPrefix(sql, "SELECT ") {
		if blocked, err := h.waitForLock(ctx, req.ConnID, sql); blocked || err != nil {
			if err != nil {
				return err
			}
			f := tdsserver.TransientFault(1222, 0)
			return w.Error(f.Number, f.Class, f.State, f.Message)
		}
		return read()
	}
	return fmt.Errorf("tdsfake: not a statement source/sqlserver sends: %q", clip(sql))
}

// waitForLock waits for the lock Options.Locked says sql is blocked by:
// until it is released (false), until the connection's lock time-out has
// passed (true: the statement fails with error 1222), or until the client
// cancels (ctx's error).
func (h *handler) waitForLock(ctx context.Context, conn uint64, sql string) (bool, error) {
	if h.opts.Locked == nil {
		return false, nil
	}
	held := h.opts.Locked(sql)
	if held == nil {
		return false, nil
	}
	h.mu.Lock()
	d, ok := h.lock[conn]
	h.mu.Unlock()
	var timeout <-chan time.Time
	if ok {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-held:
		return false, nil
	case <-timeout:
		return true, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// indexes answers IndexesStatement for the table whose object id is @p1:
// its heap row when it has no clustered index, then each index's key
// columns, index_id 1 for the clustered one. A table whose capture
// instances hide a collation (the login may not see its metadata, as
// columns answers) has no rows.
func (h *handler) indexes(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	id, err := a.get("@p1")
	if err != nil {
		return err
	}
	cis, err := h.instances(ctx)
	if err != nil {
		return err
	}
	if err := w.Columns(docColumns(mssqldocs.Indexes)); err != nil {
		return err
	}
	for _, ci := range cis {
		if ci.ObjectID != id {
			continue
		}
		_, visible, err := h.visibleTable(ci)
		if err != nil || !visible {
			return err // hidden: no rows
		}
		if ci.Heap {
			if err := w.Row(int64(0), nil, int64(0), false, nil, nil); err != nil {
				return err
			}
		}
		next := int64(2)
		for _, ix := range ci.Indexes {
			n, typ := next, int64(2)
			if ix.Clustered {
				n, typ = 1, 1
			} else {
				next++
			}
			for k, c := range ix.Columns {
				if err := w.Row(n, ix.Name, typ, ix.Unique, int64(k+1), c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return nil
}

// docColumns turns documented columns into result columns, every one
// nullable (the procedures' results are).
func docColumns(cols []mssqldocs.Column) []tdsserver.Column {
	out := make([]tdsserver.Column, len(cols))
	for i, c := range cols {
		out[i] = tdsserver.Column{Name: c.Name, Type: c.Type, Nullable: true}
	}
	return out
}

// changeTableID is the object id of ci's change table: new for an
// instance enabled again under its old name, as SQL Server's new change
// table has.
func (h *handler) changeTableID(ci *source.CaptureInstance) int64 {
	created, _ := h.db.CreatedAt(ci.Name)
	f := fnv.New32a()
	f.Write([]byte(strings.ToLower("cdc." + ci.Name + "_CT@" + created.String())))
	return int64(f.Sum32()&0x3fffffff) + 1
}

// instances returns the capture instances the login may read, described.
func (h *handler) instances(ctx context.Context) ([]*source.CaptureInstance, error) {
	var out []*source.CaptureInstance
	for _, n := range h.db.CaptureInstanceNames() {
		ci, err := h.db.CaptureInstance(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, ci)
	}
	return out, nil
}

// onTable returns a capture instance of the table schema.name (any: every
// instance of a table reads the same rows).
// With names, the instance must capture each of them, as columns the table
// still has: a table with two instances is read through the one whose
// columns the statement names (a column dropped and added again is the
// newer instance's, FACTS.md F61).
func (h *handler) onTable(ctx context.Context, schema, name string, names ...string) (*source.CaptureInstance, error) {
	cis, err := h.instances(ctx)
	if err != nil {
		return nil, err
	}
	for _, ci := range cis {
		if strings.EqualFold(ci.SourceSchema, schema) && strings.EqualFold(ci.SourceTable, name) &&
			!slices.ContainsFunc(names, func(n string) bool { c, ok := ci.Column(n); return !ok || c.Dropped }) {
			return ci, nil
		}
	}
	return nil, fmt.Errorf("tdsfake: no capture instance on [%s].[%s] captures %v", schema, name, names)
}

func quotedList(names []string) string {
	var q []string
	for _, n := range names {
		s, _ := mssqlstmt.QuoteName(n)
		q = append(q, s)
	}
	return strings.Join(q, ", ")
}

// list answers sys.sp_cdc_help_change_data_capture (FACTS.md F01): the
// instances the fake lists (fake.DB.ListCaptureInstances, so its faults
// and DenyChanges apply) that keep holds (all when nil), each described
// for the columns its row holds; object_id, the change table's, is new for
// an instance enabled again under its old name.
func (h *handler) list(ctx context.Context, w *tdsserver.ResponseWriter, keep func(*source.CaptureInstance) bool) error {
	listed, err := h.db.ListCaptureInstances(ctx)
	if err != nil {
		return err
	}
	cis := make([]*source.CaptureInstance, len(listed))
	for i, l := range listed {
		if cis[i], err = h.db.CaptureInstance(ctx, l.Name); err != nil {
			return err
		}
	}
	if err := w.Columns(docColumns(mssqldocs.HelpChangeDataCapture)); err != nil {
		return err
	}
	for _, ci := range cis {
		if keep != nil && !keep(ci) {
			continue
		}
		id, changeTable := ci.ObjectID, h.changeTableID(ci)
		var captured []string
		for _, c := range ci.Columns {
			captured = append(captured, c.Name)
		}
		var start, index, keys any
		if !ci.StartLSN.IsZero() {
			start = ci.StartLSN.Bytes()
		}
		if len(ci.Key) > 0 {
			index, keys = "PK_"+ci.SourceTable, quotedList(ci.Key)
			if ci.KeyIndex != nil {
				index = ci.KeyIndex.Name
			}
		}
		if err := w.Row(ci.SourceSchema, ci.SourceTable, ci.Name, changeTable, id, start, nil,
			len(ci.Key) > 0, nil, nil, index, nil, ci.CreateDate, keys, quotedList(captured)); err != nil {
			return err
		}
	}
	return nil
}

// captured answers sys.sp_cdc_get_captured_columns (FACTS.md F04, F05):
// column_ordinal, as SQL Server 2017 and later name it.
func (h *handler) captured(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	s, err := a.str("@p1")
	if err != nil {
		return err
	}
	ci, err := h.db.CaptureInstance(ctx, s)
	if err != nil {
		return err
	}
	if err := w.Columns(docColumns(mssqldocs.CapturedColumns)); err != nil {
		return err
	}
	for ord, c := range ci.Columns {
		// The column_id the instance recorded, kept after a drop (FACTS.md
		// F59, F61); the data type it reports (F62, F64).
		length, prec, radix, scale, dt := mssqldocs.CapturedColumnMetadata(c)
		typ := c.Type
		if typ == "rowversion" {
			typ = "timestamp" // the type's name in the catalog
		}
		if alias := h.db.TypeAlias(ci.SourceSchema, ci.SourceTable, c.Name); alias != "" {
			typ = alias // the declared type's name: an alias type (FACTS.md F85)
		}
		if err := w.Row(ci.SourceSchema, ci.SourceTable, ci.Name, c.Name, int64(c.ID), int64(ord+1), typ, length, prec, radix, scale, dt); err != nil {
			return err
		}
	}
	return nil
}

// columns answers the sys.columns query (FACTS.md F35) of the table whose
// object id is @p1 and of the change table whose object id is @p3, each
// row with its [object_id]. A table whose capture instances hide a
// collation (the login may not see its metadata) has no rows, nor has its
// change table; nor has a change table the login may not read
// (Options.DenyChangeTables).
func (h *handler) columns(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	id, err := a.get("@p1")
	if err != nil {
		return err
	}
	ctArg, err := a.get("@p3")
	if err != nil {
		return err
	}
	ctID, _ := ctArg.(int64)
	cis, err := h.instances(ctx)
	if err != nil {
		return err
	}
	cols := docColumns([]mssqldocs.Column{{Name: "name", Type: "sysname"}, {Name: "collation_name", Type: "sysname"},
		{Name: "is_nullable", Type: "bit"}, {Name: "is_computed", Type: "bit"}, {Name: "max_length", Type: "smallint"}, {Name: "code_page", Type: "int"},
		{Name: "column_id", Type: "int"}, {Name: "is_identity", Type: "bit"}, {Name: "type_name", Type: "sysname"},
		{Name: "precision", Type: "tinyint"}, {Name: "scale", Type: "tinyint"}, {Name: "object_id", Type: "int"}})
	if err := w.Columns(cols); err != nil {
		return err
	}
	row := func(c source.Column, identity bool, object int64) error {
		var coll, cp any
		if c.Collation != "" {
			coll, cp = c.Collation, int64(codePage(c.Collation))
		}
		typ := c.Type
		if typ == "rowversion" {
			typ = "timestamp" // TYPE_NAME of its system_type_id
		}
		prec, scale := columnPrecision(c)
		return w.Row(c.Name, coll, c.Nullable, c.Computed, int64(maxLength(c)), cp, int64(c.ID), identity, typ, prec, scale, object)
	}
	tableDone := false
	for _, ci := range cis {
		isTable, isChange := ci.ObjectID == id && !tableDone, h.changeTableID(ci) == ctID
		if !isTable && !isChange {
			continue
		}
		info, visible, err := h.visibleTable(ci)
		if err != nil {
			return err
		}
		if !visible {
			continue // hidden: no rows
		}
		if isTable {
			tableDone = true
			for _, c := range info.Columns {
				if err := row(c, c.Name == info.Identity, ci.ObjectID); err != nil {
					return err
				}
			}
		}
		if isChange && !h.opts.DenyChangeTables {
			// The change table's columns (FACTS.md F11): its metadata
			// columns, then the captured columns in their change-table
			// types (F64), a dropped one's too (F60).
			ct, err := h.db.ChangeTableColumns(ctx, ci.Name)
			if err != nil {
				return err
			}
			meta := []source.Column{{Name: "__$start_lsn", Type: "binary", Length: 10}, {Name: "__$end_lsn", Type: "binary", Length: 10, Nullable: true},
				{Name: "__$seqval", Type: "binary", Length: 10}, {Name: "__$operation", Type: "int"}, {Name: "__$update_mask", Type: "varbinary", Length: 128, Nullable: true}}
			for k, c := range append(meta, ct...) {
				c.ID = k + 1
				if err := row(c, false, ctID); err != nil {
					return err
				}
			}
			if err := row(source.Column{Name: "__$command_id", Type: "int", ID: len(meta) + len(ct) + 1, Nullable: true}, false, ctID); err != nil {
				return err
			}
		}
	}
	return nil
}

// columnPrecision is sys.columns' precision and scale of c (FACTS.md
// F35): a decimal's own, the digits of an integer type, a time type's
// fractional scale; 0 for the others.
func columnPrecision(c source.Column) (int64, int64) {
	switch c.Type {
	case "decimal", "numeric":
		return int64(c.Precision), int64(c.Scale)
	case "tinyint":
		return 3, 0
	case "smallint":
		return 5, 0
	case "int":
		return 10, 0
	case "bigint":
		return 19, 0
	case "time", "datetime2", "datetimeoffset":
		return 0, int64(c.Scale)
	}
	return 0, 0
}

// ddlHistory answers sys.sp_cdc_get_ddl_history (FACTS.md F65) from the
// fake's DDL history; an instance that is gone is error 22985 as a
// procedure call on a missing instance fails.
func (h *handler) ddlHistory(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	name, err := a.str("@p1")
	if err != nil {
		return err
	}
	rows, err := h.db.DDLHistory(ctx, name)
	if errors.Is(err, source.ErrNotFound) {
		return w.Error(22985, 16, 1, fmt.Sprintf("Could not find the capture instance '%s'.", name))
	}
	if err != nil {
		return err
	}
	if err := w.Columns(docColumns(mssqldocs.DDLHistory)); err != nil {
		return err
	}
	for _, d := range rows {
		if err := w.Row(d.SourceSchema, d.SourceTable, d.CaptureInstance, d.RequiredColumnUpdate, d.Command, d.LSN.Bytes(), d.Time.UTC()); err != nil {
			return err
		}
	}
	return nil
}

// visibleTable returns the table ci captures, and false when ci hides one
// of its columns' collations (the login may not see its metadata).
func (h *handler) visibleTable(ci *source.CaptureInstance) (fake.TableInfo, bool, error) {
	info, err := h.db.Table(ci.SourceSchema, ci.SourceTable)
	if err != nil {
		return info, false, err
	}
	for _, c := range ci.Columns {
		for _, tc := range info.Columns {
			if tc.ID == c.ID && tc.Collation != c.Collation {
				return info, false, nil
			}
		}
	}
	return info, true, nil
}

// maxLength is sys.columns.max_length: bytes, -1 for max and xml, two
// bytes a character for nchar and nvarchar (FACTS.md F35).
func maxLength(c source.Column) int {
	switch c.Type {
	case "char", "varchar", "binary", "varbinary":
		return c.Length
	case "nchar", "nvarchar":
		if c.Length < 0 {
			return -1
		}
		return 2 * c.Length
	case "xml", "hierarchyid", "geometry", "geography":
		return -1
	case "text", "ntext", "image":
		return 16
	case "tinyint", "bit":
		return 1
	case "smallint":
		return 2
	case "int", "real", "smallmoney", "smalldatetime":
		return 4
	case "bigint", "money", "float", "datetime", "timestamp", "rowversion":
		return 8
	case "uniqueidentifier":
		return 16
	case "date":
		return 3
	// Storage sizes, as the wire's value lengths (MS-TDS 2.2.5.5.1;
	// "time (Transact-SQL)": 3 to 5 bytes by scale, datetime2 3 more,
	// datetimeoffset 5 more; "decimal and numeric": 5 to 17 by precision).
	case "decimal", "numeric":
		return tdsserver.DecimalLen(c.Precision)
	case "time":
		return tdsserver.TimeLen(c.Scale)
	case "datetime2":
		return tdsserver.TimeLen(c.Scale) + 3
	case "datetimeoffset":
		return tdsserver.TimeLen(c.Scale) + 5
	}
	return 8
}

// codePage is COLLATIONPROPERTY(collation, 'CodePage') for the collations
// the fake's tables use: 65001 for a _UTF8 one (FACTS.md F30), else the
// Windows code page of its language; 0 when not known here.
func codePage(collation string) int {
	u := strings.ToUpper(collation)
	if strings.HasSuffix(u, "_UTF8") {
		return 65001
	}
	for _, p := range []struct {
		prefix string
		cp     int
	}{
		{"SQL_LATIN1_GENERAL_CP1254", 1254}, {"SQL_LATIN1_GENERAL_CP1253", 1253}, {"SQL_LATIN1_GENERAL_CP1251", 1251},
		{"SQL_LATIN1_GENERAL_CP1250", 1250}, {"SQL_LATIN1_GENERAL_CP1_", 1252}, {"LATIN1_GENERAL", 1252},
		{"GREEK", 1253}, {"TURKISH", 1254}, {"AZERI_LATIN", 1254}, {"AZERI_CYRILLIC", 1251}, {"CYRILLIC", 1251},
		{"HEBREW", 1255}, {"ARABIC", 1256}, {"THAI", 874}, {"JAPANESE", 932}, {"CHINESE_PRC", 936},
		{"KOREAN", 949}, {"CHINESE_TAIWAN", 950}, {"VIETNAMESE", 1258}, {"POLISH", 1250}, {"CZECH", 1250},
		{"HUNGARIAN", 1250}, {"CROATIAN", 1250}, {"ROMANIAN", 1250}, {"SLOVAK", 1250}, {"SLOVENIAN", 1250},
		{"ALBANIAN", 1250}, {"ESTONIAN", 1257}, {"LATVIAN", 1257}, {"LITHUANIAN", 1257},
		{"DANISH", 1252}, {"FINNISH", 1252}, {"FRENCH", 1252}, {"GERMAN", 1252}, {"MODERN_SPANISH", 1252},
		{"TRADITIONAL_SPANISH", 1252}, {"ICELANDIC", 1252},
	} {
		if strings.HasPrefix(u, p.prefix) {
			return p.cp
		}
	}
	return 0
}

// probe answers GUIDProbeStatement: the text parameter as a
// uniqueidentifier, in SQL Server's byte layout (FACTS.md F44).
func (h *handler) probe(a args, w *tdsserver.ResponseWriter) error {
	s, err := a.str("@p1")
	if err != nil {
		return err
	}
	u, err := keyrange.ParseUUID(s)
	if err != nil {
		return w.Error(8169, 16, 2, "Conversion failed when converting from a character string to uniqueidentifier.")
	}
	if err := w.Columns([]tdsserver.Column{{Name: "probe", Type: "uniqueidentifier", Nullable: true}}); err != nil {
		return err
	}
	return w.Row(u.SQLServerBytes())
}

func lsnColumn(name string) []tdsserver.Column {
	return []tdsserver.Column{{Name: name, Type: "binary(10)", Nullable: true}}
}

func (h *handler) maxLSN(ctx context.Context, w *tdsserver.ResponseWriter) error {
	l, err := h.db.MaxLSN(ctx)
	if err != nil {
		return err
	}
	return writeMaxLSN(w, l)
}

// writeMaxLSN answers sys.fn_cdc_get_max_lsn() with l, NULL for zero.
func writeMaxLSN(w *tdsserver.ResponseWriter, l lsn.LSN) error {
	if err := w.Columns(lsnColumn("")); err != nil {
		return err
	}
	if l.IsZero() {
		return w.Row(nil)
	}
	return w.Row(l.Bytes())
}

// minLSN answers sys.fn_cdc_get_min_lsn: NULL until the capture job
// reaches a new instance, 0x00… for one that does not exist or that the
// login may not read (FACTS.md F07).
func (h *handler) minLSN(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	name, err := a.str("@p1")
	if err != nil {
		return err
	}
	l, ok, err := h.db.MinLSN(ctx, name)
	var out any
	var ae *source.AccessError
	switch {
	case errors.As(err, &ae) || errors.Is(err, source.ErrNotFound):
		out = make([]byte, 10)
	case err != nil:
		return err
	case ok:
		out = l.Bytes()
	}
	if err := w.Columns(lsnColumn("")); err != nil {
		return err
	}
	return w.Row(out)
}

// changeAccess answers ChangeAccessStatement as HAS_PERMS_BY_NAME does
// (FACTS.md F86): 1 for an object of schema cdc the login may SELECT from,
// 0 for one it may not, NULL for a name that is no such object (or a
// class or permission other than OBJECT and SELECT). DenyChangeTables
// denies the whole schema, the change tables and cdc.lsn_time_mapping;
// fake.DB.DenyChangeTable one change table.
func (h *handler) changeAccess(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	class, err := a.str("@p3")
	if err != nil {
		return err
	}
	perm, err := a.str("@p4")
	if err != nil {
		return err
	}
	out := make([]any, 2)
	for i, ref := range []string{"@p1", "@p2"} {
		name, err := a.str(ref)
		if err != nil {
			return err
		}
		schema, obj, rest, err := twoPart(name)
		if err != nil || rest != "" || !strings.EqualFold(schema, "cdc") || !strings.EqualFold(class, "OBJECT") || !strings.EqualFold(perm, "SELECT") {
			continue // NULL
		}
		switch {
		case strings.EqualFold(obj, "lsn_time_mapping"):
		case strings.HasSuffix(obj, "_CT"):
			var access *source.AccessError
			denied, err := h.db.ChangeAccess(ctx, &source.CaptureInstance{Name: strings.TrimSuffix(obj, "_CT")})
			switch {
			case err != nil:
				return err
			case errors.As(denied, &access):
				continue // no such object the login can see
			}
		default:
			continue
		}
		out[i] = int64(0)
		if h.maySelect(ctx, obj) {
			out[i] = int64(1)
		}
	}
	if err := w.Columns(docColumns(mssqldocs.ChangeAccess)); err != nil {
		return err
	}
	return w.Row(out...)
}

// maySelect reports whether the login may SELECT from table name of
// schema cdc (a change table "<instance>_CT", or "lsn_time_mapping"):
// Options.DenyChangeTables, Options.CDCGrants, and for a change table
// fake.DB.DenyChangeTable.
func (h *handler) maySelect(ctx context.Context, name string) bool {
	if h.opts.DenyChangeTables {
		return false
	}
	if h.opts.CDCGrants != nil && !slices.ContainsFunc(h.opts.CDCGrants, func(g string) bool { return strings.EqualFold(g, name) }) {
		return false
	}
	if ci, ok := strings.CutSuffix(name, "_CT"); ok {
		denied, err := h.db.ChangeAccess(ctx, &source.CaptureInstance{Name: ci})
		return err != nil || !errors.Is(denied, fake.ErrChangeTableDenied)
	}
	return true
}

// deniedSelect answers with SQL Server's error 229 for table name of
// schema cdc (FACTS.md F11, F21).
func deniedSelect(w *tdsserver.ResponseWriter, name string) error {
	return w.Error(229, 14, 5, fmt.Sprintf("The SELECT permission was denied on the object '%s', database 'cdcsnap', schema 'cdc'.", name))
}

// lsnTime answers sys.fn_cdc_map_lsn_to_time: a datetime, the fake's UTC
// commit time standing for the server's local time (the fake's server
// runs on UTC, FACTS.md F08).
func (h *handler) lsnTime(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	v, err := a.get("@p1")
	if err != nil {
		return err
	}
	b, _ := v.([]byte)
	l, err := lsn.FromBytes(b)
	if err != nil {
		return err
	}
	ts, err := h.db.LSNTime(ctx, l)
	if err != nil {
		return err
	}
	if err := w.Columns([]tdsserver.Column{{Name: "", Type: "datetime", Nullable: true}}); err != nil {
		return err
	}
	if ts.IsZero() {
		return w.Row(nil)
	}
	return w.Row(h.wall(ts))
}

// zone is the server's time zone (Options.TimeZone).
func (h *handler) zone() *time.Location {
	if h.opts.TimeZone != nil {
		return h.opts.TimeZone
	}
	return time.UTC
}

// wall is the server's wall clock at instant t, as a datetime holds it
// (FACTS.md F08): its fields, in whole 1/300 s as datetime rounds them.
func (h *handler) wall(t time.Time) time.Time {
	l := t.In(h.zone())
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// clockBack answers ClockBackStatement from cdc.lsn_time_mapping (the
// fake's commit times as the server's wall clock): the first row at or
// below @p1 whose time, in [@p2, @p3), reads more than a minute before the
// row before it, scanning from the row that reads last before @p2 less a
// minute. A NULL time compares as SQL compares it (never), and the
// progress rows (tran_id 0x00) count only when the statement does not
// leave them out: it answers what the text asks.
func (h *handler) clockBack(ctx context.Context, sql string, a args, w *tdsserver.ResponseWriter) error {
	if !h.maySelect(ctx, "lsn_time_mapping") {
		return deniedSelect(w, "lsn_time_mapping")
	}
	var upTo lsn.LSN
	var start, end time.Time
	for ref, to := range map[string]any{"@p1": &upTo, "@p2": &start, "@p3": &end} {
		v, err := a.get(ref)
		if err != nil {
			return err
		}
		switch x := to.(type) {
		case *lsn.LSN:
			b, _ := v.([]byte)
			if *x, err = lsn.FromBytes(b); err != nil {
				return err
			}
		case *time.Time:
			t, ok := v.(time.Time)
			if !ok {
				return fmt.Errorf("tdsfake: clock back: %s is %T, want datetime2", ref, v)
			}
			*x = t
		}
	}
	all, err := h.db.Mapping(ctx)
	if err != nil {
		return err
	}
	transactions := strings.Contains(sql, "[tran_id] <> ")
	// The seek: the last row in time that reads before start less a
	// minute (ties: the highest LSN); the zero LSN when none does.
	var lo lsn.LSN
	var loAt time.Time
	for _, m := range all {
		if t := h.wall(m.Time); !(transactions && m.Progress) && !m.Time.IsZero() && t.Before(start.Add(-time.Minute)) && !t.Before(loAt) {
			lo, loAt = m.LSN, t
		}
	}
	var mapping []fake.MappedCommit
	for _, m := range all {
		if !(transactions && m.Progress) && !m.LSN.Less(lo) && !upTo.Less(m.LSN) {
			mapping = append(mapping, m)
		}
	}
	if err := w.Columns(lsnColumn("start_lsn")); err != nil {
		return err
	}
	for i := 1; i < len(mapping); i++ {
		if mapping[i].Time.IsZero() || mapping[i-1].Time.IsZero() {
			continue // NULL
		}
		t, prev := h.wall(mapping[i].Time), h.wall(mapping[i-1].Time)
		if !t.Before(start) && t.Before(end) && t.Before(prev.Add(-time.Minute)) {
			return w.Row(mapping[i].LSN.Bytes())
		}
	}
	return nil
}

// spaceUsed answers sp_spaceused @objname = '[schema].[table]' (FACTS.md
// F16): rows as char(20) text.
func (h *handler) spaceUsed(ctx context.Context, a args, w *tdsserver.ResponseWriter) error {
	s, err := a.str("@p1")
	if err != nil {
		return err
	}
	schema, name, rest, err := twoPart(s)
	if err != nil || rest != "" {
		return fmt.Errorf("tdsfake: sp_spaceused @objname %q: want [schema].[table]", s)
	}
	ci, err := h.onTable(ctx, schema, name)
	if err != nil {
		return err
	}
	n, err := h.db.RowCount(ctx, ci)
	if err != nil {
		return err
	}
	if err := w.Columns(docColumns(mssqldocs.SpaceUsed)); err != nil {
		return err
	}
	rows := fmt.Sprintf("%-20d", n)
	return w.Row(name, rows, "72 KB", "8 KB", "16 KB", "48 KB")
}

// intKeyBounds answers IntKeyBoundsStatement.
func (h *handler) intKeyBounds(ctx context.Context, sql string, w *tdsserver.ResponseWriter) error {
	_, after, ok := strings.Cut(sql, ") FROM ")
	if !ok {
		return fmt.Errorf("tdsfake: MIN/MAX: no FROM")
	}
	schema, name, _, err := twoPart(after)
	if err != nil {
		return err
	}
	ci, err := h.onTable(ctx, schema, name)
	if err != nil {
		return err
	}
	body, cast := strings.TrimPrefix(sql, "SELECT (SELECT MIN("), ""
	if rest, ok := strings.CutPrefix(sql, "SELECT CAST((SELECT MIN("); ok {
		// The bounds cast to the key's captured type (FACTS.md F64).
		body = rest
		_, c, _ := strings.Cut(rest, ") AS ")
		cast, _, _ = strings.Cut(c, ")")
	}
	col, _, err := unquote(body)
	if err != nil {
		return fmt.Errorf("tdsfake: MIN/MAX: %w", err)
	}
	ci = keyedBy(ci, []string{col})
	if cast != "" {
		to, err := source.ParseType(cast)
		if err != nil {
			return fmt.Errorf("tdsfake: MIN/MAX: CAST to %s: %w", cast, err)
		}
		cp := *ci
		cp.Columns = slices.Clone(ci.Columns)
		for i := range cp.Columns {
			if cp.Columns[i].Name == col {
				cp.Columns[i].Type, cp.Columns[i].Length, cp.Columns[i].Precision, cp.Columns[i].Scale = to.Type, to.Length, to.Precision, to.Scale
			}
		}
		ci = &cp
	}
	lo, hi, ok, err := h.db.IntKeyBounds(ctx, ci)
	if err != nil {
		return err
	}
	k, _ := ci.Column(ci.Key[0])
	if err := w.Columns([]tdsserver.Column{{Name: "min", Type: k.Declared(), Nullable: true}, {Name: "max", Type: k.Declared(), Nullable: true}}); err != nil {
		return err
	}
	if !ok {
		return w.Row(nil, nil)
	}
	return w.Row(lo, hi)
}

// result is the result columns of a select list over a capture
// instance's columns: each one's captured column (-1 for a NULL), and the
// conversion its CAST makes of the value the fake gives (nil: none).
type result struct {
	cols []tdsserver.Column
	idx  []int
	conv []func(any) (any, error)
	post []func(any) (any, error) // castsOf: the casts of the wire value; nil: none
}

// value returns the wire value of result column i of row.
func (r *result) value(i int, row []any) (any, error) {
	j := r.idx[i]
	if j < 0 {
		return nil, nil
	}
	v := row[j]
	if r.conv[i] != nil && v != nil {
		var err error
		if v, err = r.conv[i](v); err != nil {
			return nil, err
		}
	}
	if r.post != nil {
		return r.post[i](wireValue(v))
	}
	return wireValue(v), nil
}

// resultColumns returns the result columns of a select list over ci's
// columns: each column with its type in info (the table's, or the change
// table's), matched by column_id (FACTS.md F61), or as its CAST types it.
func resultColumns(ci *source.CaptureInstance, info fake.TableInfo, sel []selected, nullable bool) (*result, error) {
	res := &result{}
	for _, s := range sel {
		if s.Null {
			res.cols = append(res.cols, tdsserver.Column{Name: s.Name, Type: s.Cast, Nullable: true})
			res.idx = append(res.idx, -1)
			res.conv = append(res.conv, nil)
			continue
		}
		j := -1
		for i, c := range ci.Columns {
			if c.Name == s.Name {
				j = i
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("tdsfake: [%s] is not a captured column of %s", s.Name, ci.Name)
		}
		c := ci.Columns[j]
		for _, tc := range info.Columns {
			if tc.ID == c.ID {
				c = tc // the table's type and collation, even where the instance hides it
			}
		}
		col := tdsserver.Column{Name: c.Name, Type: c.Declared(), Collation: c.Collation, Nullable: nullable || c.Nullable || c.Computed}
		var conv func(any) (any, error)
		if s.Cast != "" {
			col.Type, col.Collation, col.Nullable = s.Cast, "", true
			if strings.HasPrefix(s.Cast, "nvarchar") {
				col.Collation = c.Collation
			}
			// Every CAST converts as SQL Server's does, truncating a
			// string or bytes longer than the target and rounding a
			// decimal to its scale (FACTS.md F92), as when the read's
			// description is older than the table (a widened column);
			// castsOf then takes nchar text to its UTF-16 bytes (F90) and
			// multiplies a decimal for its bigint (F91).
			if s.Times == "" {
				to, err := source.ParseType(s.Cast)
				if err != nil {
					return nil, fmt.Errorf("tdsfake: CAST to %s: %w", s.Cast, err)
				}
				from, inner := c, source.Column{}
				if s.Inner != "" {
					if inner, err = source.ParseType(s.Inner); err != nil {
						return nil, fmt.Errorf("tdsfake: CAST to %s: %w", s.Inner, err)
					}
					inner.Collation = c.Collation
				}
				conv = func(v any) (any, error) {
					f := from
					if inner.Type != "" {
						var err error
						if v, err = fake.CastValue(v, f, inner); err != nil {
							return nil, err
						}
						f = inner
					}
					return fake.CastValue(v, f, to)
				}
			}
		}
		res.cols = append(res.cols, col)
		res.idx = append(res.idx, j)
		res.conv = append(res.conv, conv)
	}
	return res, nil
}

// castsOf returns, for each item of a select list, what SQL Server's
// conversion does to a value (after wireValue): nothing for a column read
// as it is or cast to nvarchar; for an nchar or nvarchar cast to
// varbinary, its UTF-16LE bytes (FACTS.md F90); for a decimal multiplied
// by a parameter and cast to bigint, the product truncated toward zero,
// error 8115 when it leaves bigint (F91).
func castsOf(sel []selected, a args) ([]func(any) (any, error), error) {
	out := make([]func(any) (any, error), len(sel))
	for i, s := range sel {
		out[i] = func(v any) (any, error) { return v, nil }
		switch {
		case s.Times != "":
			m, err := a.get(s.Times)
			if err != nil {
				return nil, err
			}
			mul, ok := m.(int64)
			if !ok || !strings.HasPrefix(s.Cast, "bigint") {
				return nil, fmt.Errorf("tdsfake: [%s] * %s (%T) AS %s: want a bigint multiplier and a bigint cast", s.Name, s.Times, m, s.Cast)
			}
			name := s.Name
			out[i] = func(v any) (any, error) {
				if v == nil {
					return nil, nil
				}
				d, ok := v.(string)
				r, ok2 := new(big.Rat).SetString(d)
				if !ok || !ok2 {
					return nil, fmt.Errorf("tdsfake: [%s] * %d: %T %v is not a decimal", name, mul, v, v)
				}
				r.Mul(r, new(big.Rat).SetInt64(mul))
				n := new(big.Int).Quo(r.Num(), r.Denom())
				if !n.IsInt64() {
					return nil, fmt.Errorf("tdsfake: arithmetic overflow converting [%s] * %d to bigint (SQL Server: error 8115)", name, mul)
				}
				return n.Int64(), nil
			}
		case strings.HasPrefix(s.Cast, "varbinary"):
			out[i] = func(v any) (any, error) {
				if x, ok := v.(string); ok {
					b := make([]byte, 0, 2*len(x))
					for _, u := range utf16.Encode([]rune(x)) {
						b = append(b, byte(u), byte(u>>8))
					}
					return b, nil
				}
				return v, nil
			}
		}
	}
	return out, nil
}

// wireValue turns a value as the fake stores it into what the TDS writer
// takes for its column: decimal text, uniqueidentifier in SQL Server's
// byte layout.
func wireValue(v any) any {
	switch x := v.(type) {
	case keyrange.Decimal:
		return string(x)
	case keyrange.UUID:
		return x.SQLServerBytes()
	}
	return v
}

// pieces reads the pieces of a range read's WHERE clauses.
func pieces(ci *source.CaptureInstance, wheres []string, a args) ([]keyrange.Piece, error) {
	tb, err := newTable(ci)
	if err != nil {
		return nil, err
	}
	var out []keyrange.Piece
	for _, where := range wheres {
		p, ok, err := tb.parsePiece(where, a)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (h *handler) isolation(conn uint64) source.Isolation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.iso[conn]
}

// read opens the read of a select list over the pieces of wheres of the
// table schema.name, under the connection's isolation level: the result
// columns, each one's captured column, and the rows (nil when the pieces
// hold none).
//
// The table is the one the name names now (error 208 when none does): a
// capture instance's table renamed away, and another given its name
// (fake.DB.RenameTable, FACTS.md F93), is read as that other table, whose
// rows none is returned when guardOK is false (the statement's guard
// OBJECT_ID(name) = source_object_id failed).
func (h *handler) read(ctx context.Context, conn uint64, schema, name string, sel []selected, wheres []string, a args, guardOK bool) (*result, *fake.RowCursor, error) {
	var names []string
	for _, s := range sel {
		if !s.Null {
			names = append(names, s.Name)
		}
	}
	info, err := h.db.Table(schema, name)
	if err != nil {
		return nil, nil, &sqlError{number: 208, class: 16, state: 1, message: fmt.Sprintf("Invalid object name '%s.%s'.", schema, name)}
	}
	for _, s := range sel {
		// A column the table does not have is error 207 (FACTS.md F21,
		// F60): a statement that names a dropped column fails.
		if !s.Null && !slices.ContainsFunc(info.Columns, func(c source.Column) bool { return c.Name == s.Name }) {
			return nil, nil, &sqlError{number: 207, class: 16, state: 1, message: fmt.Sprintf("Invalid column name '%s'.", s.Name)}
		}
	}
	if !guardOK {
		res, err := resultColumns(&source.CaptureInstance{Columns: info.Columns}, info, sel, false)
		return res, nil, err
	}
	ci, err := h.onTable(ctx, schema, name, names...)
	if err != nil {
		return nil, nil, err
	}
	ci = keyedBy(ci, columnsNamed(wheres))
	res, err := resultColumns(ci, info, sel, false)
	if err != nil {
		return nil, nil, err
	}
	ps, err := pieces(ci, wheres, a)
	if err != nil || len(ps) == 0 {
		return res, nil, err
	}
	cur, err := h.db.ScanPieces(ctx, ci, ps, source.ReadOptions{Isolation: h.isolation(conn), BatchRows: h.opts.PageRows})
	return res, cur, err
}

// guard evaluates OBJECT_ID(@name) = @id: whether the two-part name the
// parameter holds names the object whose id the other holds now.
func (h *handler) guard(nameRef, idRef string, a args) (bool, error) {
	n, err := a.str(nameRef)
	if err != nil {
		return false, err
	}
	id, err := a.get(idRef)
	if err != nil {
		return false, err
	}
	schema, name, rest, err := twoPart(n)
	if err != nil || rest != "" {
		return false, fmt.Errorf("tdsfake: OBJECT_ID(%q): want [schema].[table]", n)
	}
	info, err := h.db.Table(schema, name)
	return err == nil && info.ObjectID == id, nil
}

// sqlError is an error SQL Server would answer a statement with.
type sqlError struct {
	number       int32
	class, state uint8
	message      string
}

func (e *sqlError) Error() string { return fmt.Sprintf("error %d: %s", e.number, e.message) }

// rowValues returns the wire values of row under res.
func (res *result) rowValues(row []any) ([]any, error) {
	vals := make([]any, len(res.idx))
	for i := range res.idx {
		v, err := res.value(i, row)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// readRange answers ReadRangeStatement from fake.ScanPieces, under the
// connection's isolation level.
func (h *handler) readRange(ctx context.Context, conn uint64, sql string, a args, w *tdsserver.ResponseWriter) error {
	r, err := parseRangeRead(sql)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	guardOK := true
	if r.guardName != "" {
		if guardOK, err = h.guard(r.guardName, r.guardID, a); err != nil {
			return err
		}
	}
	res, cur, err := h.read(ctx, conn, r.schema, r.name, r.sel, r.where, a, guardOK)
	var sqlErr *sqlError
	if errors.As(err, &sqlErr) {
		return w.Error(sqlErr.number, sqlErr.class, sqlErr.state, sqlErr.message)
	}
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	if err := w.Columns(res.cols); err != nil || cur == nil {
		return err
	}
	if res.post, err = castsOf(r.sel, a); err != nil {
		return err
	}
	next := cur.Next
	if !r.ordered {
		page := h.opts.PageRows
		if page <= 0 {
			page = fake.DefaultBatchRows
		}
		next = unordered(cur, page)
	}
	for {
		row, ok := next()
		if !ok {
			return cur.Err()
		}
		vals, err := res.rowValues(row)
		if err != nil {
			return err
		}
		if err := w.Row(vals...); err != nil {
			return err
		}
	}
}

// unordered returns cur's rows a page of n at a time, each page in reverse
// key order: SQL Server guarantees no order of a result without ORDER BY
// (FACTS.md F95), and a plan it picks may return a clustered index's rows
// out of key order, so the fake does not lend such a read the key order
// it reads in.
func unordered(cur *fake.RowCursor, n int) func() ([]any, bool) {
	var page [][]any
	return func() ([]any, bool) {
		if len(page) == 0 {
			for len(page) < n {
				row, ok := cur.Next()
				if !ok {
					break
				}
				page = append(page, row)
			}
			slices.Reverse(page)
		}
		if len(page) == 0 {
			return nil, false
		}
		row := page[0]
		page = page[1:]
		return row, true
	}
}

// seek answers SeekKeyStatement: the key OFFSET k rows into the union of
// the pieces, in key order.
func (h *handler) seek(ctx context.Context, conn uint64, sql string, a args, w *tdsserver.ResponseWriter) error {
	r, err := parseSeek(sql)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	off, err := a.get(r.offset)
	if err != nil {
		return err
	}
	k, _ := off.(int64)
	res, cur, err := h.read(ctx, conn, r.schema, r.name, r.sel, r.where, a, true)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	if err := w.Columns(res.cols); err != nil || cur == nil {
		return err
	}
	if res.post, err = castsOf(r.sel, a); err != nil {
		return err
	}
	for n := int64(0); ; n++ {
		row, ok := cur.Next()
		if !ok {
			return cur.Err()
		}
		if n == k {
			vals, err := res.rowValues(row)
			if err != nil {
				return err
			}
			return w.Row(vals...)
		}
	}
}

// changes answers ChangeTableStatement and ChangesStatement.
func (h *handler) changes(ctx context.Context, sql string, a args, w *tdsserver.ResponseWriter) error {
	r, err := parseChanges(sql)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	fromV, err := a.get(r.from)
	if err != nil {
		return err
	}
	toV, err := a.get(r.to)
	if err != nil {
		return err
	}
	fb, _ := fromV.([]byte)
	tb, _ := toV.([]byte)
	from, err := lsn.FromBytes(fb)
	if err != nil {
		return err
	}
	to, err := lsn.FromBytes(tb)
	if err != nil {
		return err
	}
	object := "fn_cdc_get_all_changes_" + r.instance
	if r.changeTable {
		object = r.instance + "_CT"
	}
	ci, err := h.db.CaptureInstance(ctx, r.instance)
	if err != nil {
		return w.Error(208, 16, 1, fmt.Sprintf("Invalid object name 'cdc.%s'.", object))
	}
	if r.changeTable {
		// The change table, then cdc.lsn_time_mapping, which the
		// statement joins for commit times.
		for _, o := range []string{object, "lsn_time_mapping"} {
			if !h.maySelect(ctx, o) {
				return deniedSelect(w, o)
			}
		}
	}
	if !r.changeTable {
		// The change function checks the interval (FACTS.md F09).
		min, ok, err := h.db.MinLSN(ctx, ci.Name)
		if err != nil {
			return w.Error(229, 14, 5, fmt.Sprintf("The SELECT permission was denied on the object '%s', database 'cdcsnap', schema 'cdc'.", object))
		}
		max, err := h.db.MaxLSN(ctx)
		if err != nil {
			return err
		}
		if !ok || from.Less(min) || max.Less(to) {
			return w.Error(313, 16, 3, fmt.Sprintf("An insufficient number of arguments were supplied for the procedure or function cdc.%s.", object))
		}
	}
	rows, err := h.db.ChangeRows(ctx, ci, from, to)
	if err != nil {
		return err
	}
	if !r.changeTable {
		// The function's statement orders by LSN, seqval and operation.
		sort.SliceStable(rows, func(i, j int) bool {
			x, y := rows[i], rows[j]
			if c := x.StartLSN.Compare(y.StartLSN); c != 0 {
				return c < 0
			}
			if c := x.Seqval.Compare(y.Seqval); c != 0 {
				return c < 0
			}
			return x.Operation < y.Operation
		})
	}
	// The change table's own types (FACTS.md F62, F64), the table's
	// collations.
	ct, err := h.db.ChangeTableColumns(ctx, ci.Name)
	if err != nil {
		return w.Error(208, 16, 1, fmt.Sprintf("Invalid object name 'cdc.%s'.", object))
	}
	info, err := h.db.Table(ci.SourceSchema, ci.SourceTable)
	if err != nil {
		return err
	}
	for i := range ct {
		for _, tc := range info.Columns {
			if tc.ID == ct[i].ID {
				ct[i].Collation = tc.Collation
			}
		}
	}
	info.Columns = ct
	res, err := resultColumns(ci, info, r.sel, true)
	if err != nil {
		return err
	}
	lead := []tdsserver.Column{{Name: "__$start_lsn", Type: "binary(10)"}, {Name: "__$seqval", Type: "binary(10)"}, {Name: "__$operation", Type: "int"}}
	if r.changeTable {
		lead = append(lead, tdsserver.Column{Name: "__$command_id", Type: "int", Nullable: true})
	}
	all := append(append(lead, res.cols...), tdsserver.Column{Name: "__$commit_ts", Type: "datetime", Nullable: true})
	if err := w.Columns(all); err != nil {
		return err
	}
	if res.post, err = castsOf(r.sel, a); err != nil {
		return err
	}
	var last lsn.LSN
	for i, c := range rows {
		vals := []any{c.StartLSN.Bytes(), c.Seqval.Bytes(), int64(c.Operation)}
		if r.changeTable {
			vals = append(vals, int64(c.CommandID))
		}
		cv, err := res.rowValues(c.Values)
		if err != nil {
			return err
		}
		vals = append(vals, cv...)
		// The change table's join gives every row its commit time; the
		// function's CASE WHEN the LSN equals the row before's THEN NULL
		// ELSE its time, the first of an LSN only.
		var ts any
		if r.changeTable || i == 0 || c.StartLSN != last {
			ts = h.wall(c.CommitTS)
		}
		last = c.StartLSN
		if err := w.Row(append(vals, ts)...); err != nil {
			return err
		}
	}
	return nil
}

// columnsNamed returns the bracket-quoted names the WHERE clauses compare,
// in order of first appearance: the key columns a read's pieces bound.
func columnsNamed(wheres []string) []string {
	var out []string
	for _, w := range wheres {
		for i := 0; i < len(w); i++ {
			if w[i] != '[' {
				continue
			}
			j := closeBracket(w, i)
			if j < 0 {
				break
			}
			n := strings.ReplaceAll(w[i+1:j], "]]", "]")
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
			i = j
		}
	}
	return out
}

// keyedBy returns ci when names are a prefix of its key, else the copy a
// snapshot reads a split column with (source.CaptureInstance.SplitOn),
// or, for columns no index leads with, a copy keyed by them.
func keyedBy(ci *source.CaptureInstance, names []string) *source.CaptureInstance {
	if len(names) <= len(ci.Key) && slices.Equal(names, ci.Key[:len(names)]) {
		return ci
	}
	if len(names) == 1 {
		if split, err := ci.SplitOn(names[0]); err == nil {
			return split
		}
	}
	cp := *ci
	cp.Key, cp.KeyIndex = names, &source.Index{Name: "none", Columns: names}
	return &cp
}

// seekBeyond answers SeekKeyStatement for a key that is not unique: the
// (k+1)-th key v of [from, +inf), then the smallest key at or above v
// and above from (fake.DB.SeekKey's rule for such a key).
func (h *handler) seekBeyond(ctx context.Context, conn uint64, sql string, a args, w *tdsserver.ResponseWriter) error {
	outer, r, err := parseSeekBeyond(sql)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	off, err := a.get(r.offset)
	if err != nil {
		return err
	}
	k, _ := off.(int64)
	ci, err := h.onTable(ctx, r.schema, r.name)
	if err != nil {
		return err
	}
	info, err := h.db.Table(ci.SourceSchema, ci.SourceTable)
	if err != nil {
		return err
	}
	split := keyedBy(ci, []string{outer[0].Name})
	ps, err := pieces(split, r.where, a)
	if err != nil {
		return fmt.Errorf("tdsfake: %w in %q", err, clip(sql))
	}
	var from keyrange.Tuple
	if len(ps) == 1 && ps[0].Lower != nil {
		from = keyrange.Tuple{ps[0].Lower.Value}
	}
	key, found, err := h.db.SeekKey(ctx, split, h.isolation(conn), from, k)
	if err != nil {
		return err
	}
	res, err := resultColumns(split, info, outer, false)
	if err != nil {
		return err
	}
	if err := w.Columns(res.cols); err != nil || !found {
		return err
	}
	row := make([]any, len(split.Columns))
	row[res.idx[0]] = key[0]
	v, err := res.value(0, row)
	if err != nil {
		return err
	}
	return w.Row(v)
}
