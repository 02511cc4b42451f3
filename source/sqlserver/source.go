package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"go.opentelemetry.io/otel/metric"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/winzone"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// DefaultBatchRows is the rows per record batch when neither Options nor
// source.ReadOptions sets it.
const DefaultBatchRows = 8192

// ConnPolicy says what happens to a read's dedicated connection when the
// read ends. SET TRANSACTION ISOLATION LEVEL sticks to a pooled connection,
// so a connection never goes back to the pool with a level it was given.
type ConnPolicy int

const (
	// ResetConn sets READ COMMITTED again and returns the connection to the
	// pool; a connection whose reset fails is closed instead.
	ResetConn ConnPolicy = iota
	// CloseConn closes the connection after every read.
	CloseConn
)

// Options configure a Source.
type Options struct {
	// Logger receives debug and warning records; nil logs nothing.
	Logger *slog.Logger
	// BatchRows is the rows per record batch (DefaultBatchRows when zero);
	// source.ReadOptions.BatchRows overrides it per read.
	BatchRows int
	// ConnPolicy is what happens to a read's connection afterwards.
	ConnPolicy ConnPolicy
	// ServerTimeZone is the SQL Server machine's time zone, in which
	// cdc.lsn_time_mapping keeps commit times as local wall clocks
	// (FACTS.md F08), for example time.LoadLocation("Europe/Berlin"). Nil
	// means the zone the server names: SQL Server 2022 and later, Azure SQL
	// Database and Managed Instance answer CURRENT_TIMEZONE_ID() with a
	// Windows zone name, mapped to its IANA zone by CLDR's windowsZones
	// (F37; the zone must load: the machine's tz database, or the program
	// imports time/tzdata); on Azure SQL Database, whose instance runs on
	// UTC, a zone other than UTC there (a database-scoped TIME_ZONE) is an
	// error wrapping ErrZoneUnknown: whether commit times follow it is
	// undocumented, so set this. SQL database in Microsoft Fabric, whose
	// engine edition is neither 5 nor 8, is read by its UTC offset now as
	// an older server is. An older server names none: then its UTC offset
	// now (SYSDATETIMEOFFSET, read again at most once a minute, the first
	// reading logged), right for a server on UTC or on a zone without
	// daylight saving time, an hour off across a clock change elsewhere:
	// set this for such a server. In the hour a fall-back repeats, a
	// commit reads it the second time once the server's clock is seen
	// going back before it in LSN order: a commit more than a minute
	// before the one before it (F84). When every commit before the change
	// reads earlier than those after it (02:10 CEST, then 02:40 CET), no
	// step back shows and those read their first time, an hour early.
	ServerTimeZone *time.Location
	// AllowChangeFunction lets ReadChanges read a capture instance whose
	// change table the login may not read through
	// cdc.fn_cdc_get_all_changes_<instance> instead, with a warning. That
	// function has no __$command_id, and orders the rows of one
	// transaction by __$seqval, which Microsoft's documentation says not to
	// use for ordering (FACTS.md F10, F54): the latest image then depends on
	// an order nobody documents. The zero value refuses, with an error
	// wrapping ErrChangeTableDenied that names the grant (README,
	// "Permissions").
	AllowChangeFunction bool
	// Retry is how a range read, a seek or a change read that fails with a
	// transient error (Transient: a deadlock victim, a lock time-out,
	// Azure SQL's reconfiguration errors, a broken connection) runs again
	// on a new connection; the zero value retries DefaultRetryAttempts
	// times. Each retry is logged as a warning and counted (MetricRetries).
	Retry Retry
	// MeterProvider receives the source's metrics (MetricRetries) through
	// OpenTelemetry's API; nil records none.
	MeterProvider metric.MeterProvider
	// LockTimeout is how long a statement of a range read, a seek or a
	// change read waits for a lock another session holds before SQL
	// Server ends it with error 1222 (SET LOCK_TIMEOUT on the read's
	// connection, FACTS.md F83). 1222 is transient: the read runs again
	// within Retry's budget, so a read blocked behind a writer shows as
	// logged and counted retries and, once the budget is spent, fails
	// naming the error, instead of waiting unseen until the context ends.
	// Zero means DefaultLockTimeout; a negative value sets none (SQL
	// Server's default: wait as long as the lock is held). Reads under
	// SNAPSHOT isolation take no row locks and are seldom blocked.
	LockTimeout time.Duration
}

// DefaultLockTimeout is Options.LockTimeout's zero value: with
// DefaultRetry's 8 retries, a read blocked by one lock holder fails after
// about six minutes of logged retries.
const DefaultLockTimeout = 30 * time.Second

// lockTimeout is the SET LOCK_TIMEOUT of a read's connection (negative:
// none).
func (o Options) lockTimeout() time.Duration {
	if o.LockTimeout == 0 {
		return DefaultLockTimeout
	}
	return o.LockTimeout
}

// ErrChangeTableDenied means the login may not read a capture instance's
// change table, cdc.[<capture instance>_CT], or cdc.lsn_time_mapping,
// which the change read joins, and Options.AllowChangeFunction is not set.
// Grant SELECT on both tables to the login's database user; the error
// names the two statements.
var ErrChangeTableDenied = errors.New("the login may not read the change table")

// ErrZoneUnknown means the source cannot tell the zone the server keeps
// commit times in, and Options.ServerTimeZone is not set: on Azure SQL
// Database with a database-scoped time zone (FACTS.md F37). Commit times
// are not guessed; set Options.ServerTimeZone.
var ErrZoneUnknown = errors.New("the server's commit-time zone is not known")

// changeTableRetry is how long a capture instance whose change table the
// login could not read is read through the change function before the
// change table is tried again (a grant may have come meanwhile).
const changeTableRetry = 5 * time.Minute

// zoneRefresh is how long a detected UTC offset is used before the server
// is asked again (a daylight-saving change may have come meanwhile).
const zoneRefresh = time.Minute

// Source is a SQL Server database with CDC enabled, read through
// database/sql and go-mssqldb. It is safe for concurrent use. It learns a
// few facts about its connections once, when it first needs them, and
// keeps them: how the driver returns uniqueidentifier bytes (the DSN's
// "guid conversion" setting, FACTS.md F44), the server's time zone (or its
// UTC offset) when Options.ServerTimeZone is nil, and, per capture
// instance, whether the
// login may read its change table (else it reads changes through
// cdc.fn_cdc_get_all_changes_<capture instance>).
type Source struct {
	db      *sql.DB
	opts    Options
	log     *slog.Logger
	retries retries

	mu          sync.Mutex
	guid        *bool          // the driver returns RFC byte order; nil until probed
	named       *time.Location // the zone the server named; nil until asked
	unnamed     bool           // the server names no zone: use the offset
	zone        *time.Location // the detected offset; nil until needed
	zoneAt      time.Time      // when zone was read
	clockBackNo bool           // cdc.lsn_time_mapping could not be read for a fall-back (logged once)
	changeTable map[string]changeTableState
	described   map[string]*described // by capture instance name
}

// changeTableState is what the source learnt of a capture instance's
// change table: readable, or refused with a reason at a time.
type changeTableState struct {
	refused string // the error; "" when it could be read
	at      time.Time
}

var _ source.Source = (*Source)(nil)

// New returns a Source on db (opened with the "sqlserver" driver of
// github.com/microsoft/go-mssqldb, for example by Open). The caller keeps
// ownership of db.
func New(db *sql.DB, opts Options) (*Source, error) {
	if db == nil {
		return nil, errors.New("sqlserver: New: nil *sql.DB")
	}
	if opts.BatchRows < 0 {
		return nil, fmt.Errorf("sqlserver: New: BatchRows %d is negative", opts.BatchRows)
	}
	if opts.ConnPolicy != ResetConn && opts.ConnPolicy != CloseConn {
		return nil, fmt.Errorf("sqlserver: New: unknown ConnPolicy %d", opts.ConnPolicy)
	}
	if err := opts.Retry.validate(); err != nil {
		return nil, err
	}
	if opts.LockTimeout > math.MaxInt32*time.Millisecond {
		return nil, fmt.Errorf("sqlserver: New: LockTimeout %s is above SQL Server's limit of 2^31-1 ms", opts.LockTimeout)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, err := newRetries(opts.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Source{db: db, opts: opts, log: log, retries: r}, nil
}

// guidConversion reports how the driver returns uniqueidentifier bytes,
// probing once (GUIDProbeStatement).
func (s *Source) guidConversion(ctx context.Context) (bool, error) {
	s.mu.Lock()
	g := s.guid
	s.mu.Unlock()
	if g != nil {
		return *g, nil
	}
	rs, err := s.run(ctx, s.db, "probing how the driver returns uniqueidentifier", mssqlstmt.GUIDProbeStatement())
	if err != nil {
		return false, err
	}
	conv, err := parseGUIDProbe(rs)
	if err != nil {
		return false, err
	}
	s.log.DebugContext(ctx, "sqlserver: uniqueidentifier byte order probed", "guid_conversion", conv)
	s.mu.Lock()
	s.guid = &conv
	s.mu.Unlock()
	return conv, nil
}

// serverClock returns the clock that reads the server's commit times:
// in Options.ServerTimeZone, else in the zone the server names, else (a
// server before 2022) in its UTC offset now (serverOffset).
func (s *Source) serverClock(ctx context.Context) (*serverClock, error) {
	if s.opts.ServerTimeZone != nil {
		return &serverClock{loc: s.opts.ServerTimeZone, secondFrom: s.clockBack}, nil
	}
	s.mu.Lock()
	named, unnamed := s.named, s.unnamed
	s.mu.Unlock()
	if named == nil && !unnamed {
		var err error
		if named, err = s.namedZone(ctx); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.named, s.unnamed = named, named == nil
		s.mu.Unlock()
	}
	if named != nil {
		return &serverClock{loc: named, secondFrom: s.clockBack}, nil
	}
	off, err := s.serverOffset(ctx)
	if err != nil {
		return nil, err
	}
	return fixedClock(off), nil
}

// namedZone asks a server that can name its zone for it (SQL Server 2022
// and later, Azure SQL: CURRENT_TIMEZONE_ID(), FACTS.md F37) and maps the
// Windows name to its IANA zone (CLDR's windowsZones, package winzone). Nil
// means the server names none, or a name that cannot be used (logged).
func (s *Source) namedZone(ctx context.Context) (*time.Location, error) {
	rs, err := s.run(ctx, s.db, "reading the server's version", mssqlstmt.ServerVersionStatement())
	if err != nil {
		return nil, err
	}
	v, err := parseServerVersion(rs)
	if err != nil || !v.namesZone {
		return nil, err
	}
	rs, err = s.run(ctx, s.db, "reading the server's time zone", mssqlstmt.TimeZoneIDStatement())
	if err != nil {
		return nil, err
	}
	win, err := parseTimeZoneID(rs)
	if err != nil {
		return nil, err
	}
	if v.azureSQLDatabase && win != "UTC" {
		return nil, fmt.Errorf("sqlserver: %w: Azure SQL Database names the time zone %q (a database-scoped TIME_ZONE, ALTER DATABASE SCOPED CONFIGURATION), while its instance runs on UTC; whether cdc.lsn_time_mapping's commit times follow that zone or stay UTC no documentation says (FACTS.md F37): set Options.ServerTimeZone to the zone they are in", ErrZoneUnknown, win)
	}
	iana, ok := winzone.IANA(win)
	if !ok {
		s.log.WarnContext(ctx, "sqlserver: the server's time zone is not in CLDR's windowsZones: commit times use its UTC offset now; set Options.ServerTimeZone", "zone", win, "cldr", winzone.CLDRVersion)
		return nil, nil
	}
	loc, err := time.LoadLocation(iana)
	if err != nil {
		s.log.WarnContext(ctx, "sqlserver: the server's time zone does not load (no tz database? import time/tzdata): commit times use its UTC offset now; set Options.ServerTimeZone", "zone", win, "iana", iana, "error", err)
		return nil, nil
	}
	s.log.DebugContext(ctx, "sqlserver: the server names its time zone", "zone", win, "iana", iana)
	return loc, nil
}

// clockBack runs ClockBackStatement for serverClock: the first commit at or
// below upTo that read the hour [start, end) the second time. A login that
// may not read cdc.lsn_time_mapping (a least-privilege login reading
// through the change function) gets every repeated time at its first
// reading, with a warning.
func (s *Source) clockBack(ctx context.Context, start, end time.Time, upTo lsn.LSN) (lsn.LSN, bool, error) {
	rs, err := s.run(ctx, s.db, "finding where the server's clock went back", mssqlstmt.ClockBackStatement(upTo, start, end))
	if err != nil {
		if !slices.ContainsFunc(changeTableRefused, func(n int32) bool { return isServerError(err, n) }) {
			return lsn.LSN{}, false, err
		}
		s.mu.Lock()
		logged := s.clockBackNo
		s.clockBackNo = true
		s.mu.Unlock()
		if !logged {
			s.log.WarnContext(ctx, "sqlserver: the login may not read cdc.lsn_time_mapping: commit times in an hour a fall-back repeats are read the first time, an hour early after the clock went back; GRANT SELECT ON cdc.lsn_time_mapping TO <user> (the login's database user)", "error", err)
		}
		return lsn.LSN{}, false, nil
	}
	if len(rs.Rows) == 0 {
		return lsn.LSN{}, false, nil
	}
	l, err := parseLSN("the commit the server's clock went back for", rs)
	return l.LSN, l.Valid, err
}

// serverOffset returns the server's UTC offset (ServerNowStatement), read
// again when the last reading is older than zoneRefresh.
func (s *Source) serverOffset(ctx context.Context) (*time.Location, error) {
	s.mu.Lock()
	z, at := s.zone, s.zoneAt
	s.mu.Unlock()
	if z != nil && time.Since(at) < zoneRefresh {
		return z, nil
	}
	rs, err := s.run(ctx, s.db, "reading the server's UTC offset", mssqlstmt.ServerNowStatement())
	if err != nil {
		return nil, err
	}
	nz, err := parseServerNow(rs)
	if err != nil {
		return nil, err
	}
	switch {
	case z == nil:
		s.log.InfoContext(ctx, "sqlserver: the server names no time zone (before SQL Server 2022) and Options.ServerTimeZone is not set: commit times use the server's UTC offset now; set ServerTimeZone if the server's zone observes daylight saving time", "offset", nz.String())
	case z.String() != nz.String():
		s.log.WarnContext(ctx, "sqlserver: the server's UTC offset changed (daylight saving time?): commit times from before the change, read now, are off by the difference; set Options.ServerTimeZone", "was", z.String(), "now", nz.String())
	}
	s.mu.Lock()
	s.zone, s.zoneAt = nz, time.Now()
	s.mu.Unlock()
	return nz, nil
}

// decodeOptions returns what decoding cols needs to know of the
// connection: the uniqueidentifier byte order when a column has that type,
// and the server's zone when zone is set (change rows' commit times).
func (s *Source) decodeOptions(ctx context.Context, cols []source.Column, zone bool) (decodeOptions, error) {
	var o decodeOptions
	var err error
	if slices.ContainsFunc(cols, func(c source.Column) bool { return c.Type == "uniqueidentifier" }) {
		if o.guidConversion, err = s.guidConversion(ctx); err != nil {
			return o, err
		}
	}
	if zone {
		if o.clock, err = s.serverClock(ctx); err != nil {
			return o, err
		}
	}
	return o, nil
}

// querier is what *sql.DB and *sql.Conn share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// scanRows reads the rest of rows as driver values.
func scanRows(rows *sql.Rows) (resultSet, error) {
	cols, err := rows.Columns()
	if err != nil {
		return resultSet{}, err
	}
	rs := resultSet{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return resultSet{}, err
		}
		rs.Rows = append(rs.Rows, vals)
	}
	return rs, rows.Err()
}

// run executes st and returns its first result set.
func (s *Source) run(ctx context.Context, q querier, what string, st mssqlstmt.Stmt) (resultSet, error) {
	s.log.DebugContext(ctx, "sqlserver: query", "what", what, "sql", st.SQL, "params", len(st.Args))
	rows, err := q.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return resultSet{}, fmt.Errorf("sqlserver: %s: %w", what, err)
	}
	defer rows.Close()
	rs, err := scanRows(rows)
	if err != nil {
		return resultSet{}, fmt.Errorf("sqlserver: %s: %w", what, err)
	}
	return rs, nil
}

// ListCaptureInstances lists the capture instances the login can read: one
// EXEC sys.sp_cdc_help_change_data_capture without arguments, which
// returns every instance the caller has SELECT access to (all of them for
// db_owner; FACTS.md F01,
// https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-help-change-data-capture-transact-sql).
// Each has Name, SourceSchema, SourceTable, StartLSN and Key set, no
// Columns: CaptureInstance describes one fully. It implements
// database.Lister, so database.Bootstrap can select among them.
func (s *Source) ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error) {
	rs, err := s.run(ctx, s.db, "listing capture instances", mssqlstmt.ListCaptureInstancesStatement())
	if err != nil {
		return nil, err
	}
	return parseListedInstances(rs)
}

// CaptureInstance resolves name among the capture instances the login can
// see (exact name first, else the one equal ignoring case) and describes
// it: source table, start LSN, captured columns with their declared types
// (sys.sp_cdc_get_captured_columns), collations and nullability
// (sys.columns, when visible), the key (index_column_list) and the table's
// indexes (sys.indexes, sys.index_columns, when visible): the key's index,
// the split columns source.CaptureInstance.SplitOn can choose, and whether
// the table is a heap.
//
// A name described before (resolved exactly) is looked up again among its
// table's instances only (sys.sp_cdc_help_change_data_capture with
// @source_schema and @source_name), and, while that is the same instance
// (its change table, key and captured column list: a dropped and
// re-created one has a new change table), its indexes are not read again
// for indexRefresh. The captured columns and sys.columns are read on every
// call: DDL shows there, the captured types once the capture process
// reaches an ALTER COLUMN (FACTS.md F62), which no cheaper statement
// tells. A poll so sends three statements where it sent four, and no
// listing of the whole database.
func (s *Source) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	if d := s.cachedInstance(name); d != nil {
		st := mssqlstmt.TableCaptureInstancesStatement(d.row.Instance.SourceSchema, d.row.Instance.SourceTable)
		rs, err := s.run(ctx, s.db, "capture instances of "+d.row.Instance.SourceSchema+"."+d.row.Instance.SourceTable, st)
		if err == nil {
			var rows []captureRow
			if rows, err = parseCaptureInstances(rs); err == nil {
				for _, r := range rows {
					if r.Instance.Name == name && r.sameInstance(d.row) {
						return s.describe(ctx, r, d)
					}
				}
			}
		}
		// Gone, re-created, changed, or the table renamed or dropped (the
		// procedure refuses a table that does not exist): look again.
		s.log.DebugContext(ctx, "sqlserver: the capture instance changed since it was described; describing it again", "capture_instance", name, "error", err)
		s.forgetInstance(name)
	}
	rs, err := s.run(ctx, s.db, "listing capture instances", mssqlstmt.ListCaptureInstancesStatement())
	if err != nil {
		return nil, err
	}
	rows, err := parseCaptureInstances(rs)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Instance.Name
	}
	got, err := source.Resolve(name, names)
	if err != nil {
		return nil, err
	}
	var row captureRow
	for _, r := range rows {
		if r.Instance.Name == got {
			row = r
		}
	}
	return s.describe(ctx, row, nil)
}

// indexRefresh is how long the indexes of a described capture instance are
// used before they are read again (CREATE and DROP INDEX change them
// without changing the instance).
const indexRefresh = 5 * time.Minute

// described is what CaptureInstance read of one capture instance and may
// use again while the instance is the same (captureRow.sameInstance).
type described struct {
	row       captureRow
	indexes   []source.Index
	heap      bool
	indexesOK bool // sys.indexes showed the table
	indexesAt time.Time
}

func (s *Source) cachedInstance(name string) *described {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.described[name]
}

func (s *Source) forgetInstance(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.described, name)
}

// describe completes the instance of row: its captured columns,
// sys.columns, and its indexes (from d when fresh). It keeps what it read
// for the next call.
func (s *Source) describe(ctx context.Context, row captureRow, d *described) (*source.CaptureInstance, error) {
	got := row.Instance.Name
	ci := row.Instance
	next := &described{row: row}
	if d != nil && time.Since(d.indexesAt) < indexRefresh {
		next.indexes, next.heap, next.indexesOK, next.indexesAt = d.indexes, d.heap, d.indexesOK, d.indexesAt
	}
	rs, err := s.run(ctx, s.db, "captured columns of "+got, mssqlstmt.CapturedColumnsStatement(got))
	if err != nil {
		return nil, err
	}
	captured, err := parseCapturedColumns(rs)
	if err != nil {
		return nil, err
	}
	rs, err = s.run(ctx, s.db, "collations of "+got, mssqlstmt.ColumnsStatement(row.SourceObjectID, row.ChangeTableID))
	if err != nil {
		return nil, err
	}
	table, change, err := splitColumns(rs, row.ChangeTableID)
	if err != nil {
		return nil, err
	}
	if len(table.Rows) == 0 {
		s.log.WarnContext(ctx, "sqlserver: sys.columns shows no columns of the source table: no collations, varchar keys stay in one partition", "capture_instance", got)
	}
	if captured, err = applyChangeTableTypes(captured, change); err != nil {
		return nil, err
	}
	if ci.Columns, err = applyColumnInfo(captured, table); err != nil {
		return nil, err
	}
	for _, c := range ci.Columns {
		if !aliasType(c.Type) {
			continue
		}
		why := "sys.columns shows the login no column of the table (grant it VIEW DEFINITION or SELECT on the table)"
		if len(table.Rows) > 0 {
			why = "the table no longer has the column, and sys.columns shows the login no column of the change table cdc." + row.Instance.Name + "_CT (grant it VIEW DEFINITION or SELECT on the change table)"
		}
		return nil, fmt.Errorf("sqlserver: capture instance %q: column %q has type %q, which is no SQL Server system type: an alias type (sysname, CREATE TYPE ... FROM), whose base type only sys.columns names, and %s (FACTS.md F85)", got, c.Name, c.Type, why)
	}
	for _, k := range ci.Key {
		c, ok := ci.Column(k)
		if !ok {
			return nil, fmt.Errorf("sqlserver: capture instance %q: key column %q is not captured", got, k)
		}
		if c.Computed {
			return nil, fmt.Errorf("sqlserver: capture instance %q: key column %q is computed: CDC writes NULL for it in change rows (FACTS.md F13), so changes cannot be matched to rows", got, k)
		}
	}
	if next.indexesAt.IsZero() {
		rs, err = s.run(ctx, s.db, "indexes of "+got, mssqlstmt.IndexesStatement(row.SourceObjectID))
		if err != nil {
			return nil, err
		}
		if next.indexes, next.heap, next.indexesOK, err = parseIndexes(rs); err != nil {
			return nil, err
		}
		next.indexesAt = time.Now()
		if !next.indexesOK {
			s.log.WarnContext(ctx, "sqlserver: sys.indexes shows no index of the source table: no split columns, and whether the key's index is clustered is not known", "capture_instance", got)
		}
	}
	ci.Indexes, ci.Heap = slices.Clone(next.indexes), next.heap
	for _, ix := range ci.Indexes {
		if row.IndexName == "" || ix.Name != row.IndexName {
			continue
		}
		ix.Unique = true // CDC's index_name is a unique index (FACTS.md F18)
		ci.KeyIndex = &ix
		if !ix.Clustered && d == nil {
			s.log.WarnContext(ctx, "sqlserver: the capture instance's unique index is nonclustered: each key range is an index seek plus a key lookup per row, or a scan of the table", "capture_instance", got, "index", row.IndexName)
		}
	}
	s.mu.Lock()
	if s.described == nil {
		s.described = map[string]*described{}
	}
	s.described[got] = next
	s.mu.Unlock()
	return &ci, nil
}

// MaxLSN returns sys.fn_cdc_get_max_lsn(); NULL (nothing captured yet, or
// cleanup emptied the mapping: FACTS.md F06) is the zero LSN.
func (s *Source) MaxLSN(ctx context.Context) (lsn.LSN, error) {
	rs, err := s.run(ctx, s.db, "fn_cdc_get_max_lsn", mssqlstmt.MaxLSNStatement())
	if err != nil {
		return lsn.LSN{}, err
	}
	n, err := parseLSN("fn_cdc_get_max_lsn", rs)
	return n.LSN, err
}

// MinLSN returns sys.fn_cdc_get_min_lsn(ci); ok is false for NULL (a new
// instance the capture job has not reached). The zero LSN, which SQL Server
// returns for an instance that does not exist and for a caller who may not
// read it (FACTS.md F07), is a *source.AccessError.
func (s *Source) MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error) {
	rs, err := s.run(ctx, s.db, "fn_cdc_get_min_lsn", mssqlstmt.MinLSNStatement(ci))
	if err != nil {
		return lsn.LSN{}, false, err
	}
	return parseMinLSN(ci, rs)
}

// ChangeAccess tells, reading no change, whether ReadChanges of ci would
// be refused for want of a grant: SELECT on the instance's change table,
// cdc.[<capture instance>_CT], and on cdc.lsn_time_mapping, which the
// change read joins (ChangeTableStatement), as HAS_PERMS_BY_NAME evaluates
// the login's effective permissions (FACTS.md F86). denied wraps
// ErrChangeTableDenied and names the grant; it is nil when the login may
// read both, and when Options.AllowChangeFunction lets ReadChanges read
// through cdc.fn_cdc_get_all_changes_<capture instance> instead. The
// gating role and SELECT on the captured columns, which both reads need,
// are what MinLSN checks (F07, F19). err is why it could not tell.
func (s *Source) ChangeAccess(ctx context.Context, ci *source.CaptureInstance) (denied, err error) {
	stmt, err := mssqlstmt.ChangeAccessStatement(ci.Name)
	if err != nil {
		return nil, err
	}
	rs, err := s.run(ctx, s.db, "HAS_PERMS_BY_NAME of the change table", stmt)
	if err != nil {
		return nil, err
	}
	missing, err := parseChangeAccess(changeTableName(ci.Name), rs)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	if s.opts.AllowChangeFunction {
		s.log.InfoContext(ctx, "sqlserver: the login may not read the change table: changes will be read through the change function (Options.AllowChangeFunction)", "capture_instance", ci.Name, "missing", strings.Join(missing, ", "))
		return nil, nil
	}
	return fmt.Errorf("%w: SQL Server says it may not SELECT from %s (HAS_PERMS_BY_NAME): %s", ErrChangeTableDenied, strings.Join(missing, " and "), grantHint(ci.Name)), nil
}

// changeTableName is ci's change table, cdc.[<capture instance>_CT]
// (FACTS.md F11), for messages.
func changeTableName(ci string) string {
	ct, err := mssqlstmt.QuoteName(ci + "_CT")
	if err != nil {
		ct = ci + "_CT"
	}
	return "cdc." + ct
}

// grantHint names the grants that let a login read ci's changes from its
// change table, which the read joins to cdc.lsn_time_mapping (README,
// step 3). GRANT goes to a database user, not a login. A grant on schema
// cdc would do too, but it reads every instance's change table directly,
// past the gating role and the captured columns' grants that CDC's query
// functions check (FACTS.md F19), so the hint warns against it.
func grantHint(ci string) string {
	return fmt.Sprintf("GRANT SELECT ON %s TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user> (<user>: the login's database user; not GRANT SELECT ON SCHEMA::cdc, which lets it read every capture instance's changes whatever its gating role)", changeTableName(ci))
}

// LSNTime returns sys.fn_cdc_map_lsn_to_time(l) as an instant in UTC,
// the zero time for NULL (l is no commit's LSN, FACTS.md F08), reading the
// server's wall clock in its zone (Options.ServerTimeZone, see there).
func (s *Source) LSNTime(ctx context.Context, l lsn.LSN) (time.Time, error) {
	rs, err := s.run(ctx, s.db, "fn_cdc_map_lsn_to_time", mssqlstmt.LSNTimeStatement(l))
	if err != nil {
		return time.Time{}, err
	}
	wall, ok, err := parseLSNTime(rs)
	if err != nil || !ok {
		return time.Time{}, err
	}
	c, err := s.serverClock(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return c.instant(ctx, wall, l, l, nil)
}

// IntKeyBounds returns MIN and MAX of the single integer key column.
func (s *Source) IntKeyBounds(ctx context.Context, ci *source.CaptureInstance) (int64, int64, bool, error) {
	st, err := mssqlstmt.IntKeyBoundsStatement(ci)
	if err != nil {
		return 0, 0, false, err
	}
	rs, err := s.run(ctx, s.db, "MIN/MAX of the key of "+ci.Name, st)
	if err != nil {
		return 0, 0, false, err
	}
	return parseIntKeyBounds(rs)
}

// RowCount returns the row count sys.sp_spaceused reports.
func (s *Source) RowCount(ctx context.Context, ci *source.CaptureInstance) (int64, error) {
	st, err := mssqlstmt.RowCountStatement(ci)
	if err != nil {
		return 0, err
	}
	rs, err := s.run(ctx, s.db, "sp_spaceused of "+ci.Name, st)
	if err != nil {
		return 0, err
	}
	return parseSpaceUsed(rs)
}

// conn is a dedicated connection set to an isolation level and
// Options.LockTimeout.
type conn struct {
	c           *sql.Conn
	s           *Source
	ctx         context.Context
	lockTimeout bool // set on the connection: reset it on release
}

// acquire takes a connection from the pool and sets iso on it.
func (s *Source) acquire(ctx context.Context, iso source.Isolation) (*conn, error) {
	if iso != source.ReadCommitted && iso != source.Snapshot {
		return nil, fmt.Errorf("sqlserver: unknown isolation level %d", iso)
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlserver: taking a connection: %w", err)
	}
	cn := &conn{c: c, s: s, ctx: ctx}
	if _, err := c.ExecContext(ctx, mssqlstmt.IsolationStatement(iso).SQL); err != nil {
		cn.release(true)
		return nil, fmt.Errorf("sqlserver: setting isolation level %s: %w", iso, err)
	}
	if err := cn.setLockTimeout(); err != nil {
		return nil, err
	}
	return cn, nil
}

// setLockTimeout sets Options.LockTimeout on the connection (nothing when
// it is negative: SQL Server's default); on failure it discards the
// connection.
func (cn *conn) setLockTimeout() error {
	d := cn.s.opts.lockTimeout()
	if d < 0 {
		return nil
	}
	if _, err := cn.c.ExecContext(cn.ctx, mssqlstmt.LockTimeoutStatement(d).SQL); err != nil {
		cn.release(true)
		return fmt.Errorf("sqlserver: setting the lock time-out: %w", err)
	}
	cn.lockTimeout = true
	return nil
}

// release resets the isolation level and the lock time-out and returns the
// connection to the pool, or closes it (ConnPolicy CloseConn, a failed
// reset, or discard).
func (cn *conn) release(discard bool) {
	if !discard && cn.s.opts.ConnPolicy == ResetConn {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(cn.ctx), 30*time.Second)
		_, err := cn.c.ExecContext(ctx, mssqlstmt.ResetIsolationStatement().SQL)
		if err == nil && cn.lockTimeout {
			_, err = cn.c.ExecContext(ctx, mssqlstmt.ResetLockTimeoutStatement().SQL)
		}
		cancel()
		if err == nil {
			_ = cn.c.Close()
			return
		}
		cn.s.log.WarnContext(cn.ctx, "sqlserver: resetting the isolation level or the lock time-out failed; closing the connection", "error", err)
	}
	// Returning driver.ErrBadConn makes database/sql close the connection
	// instead of pooling it.
	_ = cn.c.Raw(func(any) error { return driver.ErrBadConn })
	_ = cn.c.Close()
}

// SeekKey returns the key k rows after from, read under iso on a dedicated
// connection (see mssqlstmt.SeekKeyStatement).
func (s *Source) SeekKey(ctx context.Context, ci *source.CaptureInstance, iso source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	st, err := mssqlstmt.SeekKeyStatement(ci, from, k)
	if err != nil {
		return nil, false, err
	}
	var keyCols []source.Column
	for _, k := range ci.Key {
		if c, ok := ci.Column(k); ok {
			keyCols = append(keyCols, c)
		}
	}
	o, err := s.decodeOptions(ctx, keyCols, false)
	if err != nil {
		return nil, false, err
	}
	rs, err := s.queryRetrying(ctx, iso, OpSeekKey, ci.Name, "seeking the key of "+ci.Name, st)
	if err != nil {
		return nil, false, err
	}
	return parseSeekKey(ci, rs, o.guidConversion)
}

// queryRetrying runs st on a connection of its own under iso, retrying
// transient errors as operation op on capture instance ci; what names
// the statement in errors.
func (s *Source) queryRetrying(ctx context.Context, iso source.Isolation, op, ci, what string, st mssqlstmt.Stmt) (resultSet, error) {
	var rs resultSet
	err := s.retrying(ctx, newRetrier(s.opts.Retry), op, ci, func() error {
		cn, err := s.acquire(ctx, iso)
		if err != nil {
			return err
		}
		rs, err = s.run(ctx, cn.c, what, st)
		cn.release(err != nil && (ctx.Err() != nil || Transient(err)))
		return err
	})
	return rs, markTransient(ctx, err)
}

func (s *Source) batchRows(n int) int {
	switch {
	case n > 0:
		return n
	case s.opts.BatchRows > 0:
		return s.opts.BatchRows
	}
	return DefaultBatchRows
}

// ReadRange streams the rows of ci's source table whose key lies in r (see
// mssqlstmt.ReadRangeStatement), under opts.Isolation on a dedicated connection that
// is reset (or closed) when the reader is released or runs out. With
// opts.NotBefore set, that connection first checks its replica has
// captured through it (a *source.ReplicaBehindError otherwise).
func (s *Source) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	st, err := mssqlstmt.ReadRangeStatement(ci, r)
	if err != nil {
		return nil, err
	}
	if err := s.checkBounds(ctx, ci, r, opts.Isolation); err != nil {
		return nil, err
	}
	o, err := s.decodeOptions(ctx, ci.Columns, false)
	if err != nil {
		return nil, err
	}
	d, err := newTableDecoder(ci.Columns, o)
	if err != nil {
		return nil, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	// openStmt takes a connection, checks its replica and starts st.
	openStmt := func(st mssqlstmt.Stmt) (*conn, *sql.Rows, error) {
		cn, err := s.acquire(ctx, opts.Isolation)
		if err != nil {
			return nil, nil, err
		}
		if err := s.caughtUp(ctx, cn, ci, opts.NotBefore); err != nil {
			cn.release(ctx.Err() != nil || Transient(err))
			return nil, nil, err
		}
		s.log.DebugContext(ctx, "sqlserver: reading range", "capture_instance", ci.Name, "range", r.String(), "isolation", opts.Isolation.String())
		rows, err := cn.c.QueryContext(ctx, st.SQL, st.Args...)
		if err != nil {
			cn.release(ctx.Err() != nil || Transient(err))
			return nil, nil, fmt.Errorf("sqlserver: reading %s of %q: %w", r, ci.Name, err)
		}
		return cn, rows, nil
	}
	rt := newRetrier(s.opts.Retry)
	var cn *conn
	var rows *sql.Rows
	if err := s.retrying(ctx, rt, OpReadRange, ci.Name, func() (err error) {
		cn, rows, err = openStmt(st)
		return err
	}); err != nil {
		d.Release()
		return nil, markTransient(ctx, err)
	}
	wrap := func(err error) error {
		return fmt.Errorf("sqlserver: reading %s of %q: %w", r, ci.Name, markTransient(ctx, err))
	}
	rr := newRowsReader(d, rows, s.batchRows(opts.BatchRows), func() {
		if cn != nil {
			cn.release(ctx.Err() != nil)
		}
	}, wrap)
	// A read cut by a transient error goes on, on a new connection:
	// ordered by a unique key (OrderedRange), from the last key it
	// returned (the row of that key dropped again); otherwise from the
	// start, as long as no rows went out yet in a batch (an unordered
	// statement's rest cannot be told from what it returned).
	pos := &rangePosition{}
	if mssqlstmt.OrderedRange(ci) {
		for _, k := range ci.Key {
			at := 0 // the key column's place in the select list: read columns before it
			for _, c := range ci.Columns {
				if c.Name == k {
					pos.at = append(pos.at, at)
				}
				if mssqlstmt.IsRead(c) {
					at++
				}
			}
		}
		rr.observe = pos.observe
	}
	rr.resume = func(err error, handed, _ int64) (rowSource, bool, error) {
		cn.release(true)
		cn = nil
		from, resumeAt := st, pos.last != nil
		if resumeAt {
			lower, ok := lastKeyBound(ci, pos.last, o.guidConversion)
			if !ok {
				return nil, false, err
			}
			var serr error
			if from, serr = mssqlstmt.ReadRangeStatement(ci, keyrange.Range{Index: r.Index, Lower: lower, Upper: r.Upper}); serr != nil {
				return nil, false, errors.Join(err, serr)
			}
		} else if handed > 0 {
			return nil, false, err
		}
		for s.again(ctx, rt, OpReadRange, ci.Name, err) {
			var nrows *sql.Rows
			if cn, nrows, err = openStmt(from); err != nil {
				continue
			}
			if resumeAt {
				s.log.InfoContext(ctx, "sqlserver: range read resumed after its last key", "capture_instance", ci.Name, "range", r.String(), "after", fmt.Sprint(pos.last))
				return &dropLeading{rowSource: nrows, drop: afterKey(pos)}, false, nil
			}
			return nrows, true, nil
		}
		return nil, false, err
	}
	return rr, nil
}

// caughtUp checks, on the connection that is about to read, that the
// replica it reached has captured through need (source.ReadOptions.NotBefore;
// zero checks nothing): sys.fn_cdc_get_max_lsn() at or above need. On a
// readable secondary every statement sees the data as of the log the
// replica has applied (FACTS.md F56), and redo applies it in order, so the
// read that follows on the same connection sees a state at least as recent
// as the mapping row of need, which the capture job wrote after the commit
// at need. Connections to one server always pass: its max LSN only grows.
func (s *Source) caughtUp(ctx context.Context, cn *conn, ci *source.CaptureInstance, need lsn.LSN) error {
	if need.IsZero() {
		return nil
	}
	rs, err := s.run(ctx, cn.c, "fn_cdc_get_max_lsn on the reading connection", mssqlstmt.MaxLSNStatement())
	if err != nil {
		return err
	}
	have, err := parseLSN("fn_cdc_get_max_lsn", rs)
	if err != nil {
		return err
	}
	if have.LSN.Less(need) {
		s.log.WarnContext(ctx, "sqlserver: the reading connection's replica is behind the snapshot's LSN", "capture_instance", ci.Name, "need", need.String(), "have", have.LSN.String())
		return &source.ReplicaBehindError{CaptureInstance: ci.Name, Need: need, Have: have.LSN}
	}
	return nil
}

// ReadChanges streams the changes of ci with from <= __$start_lsn <= to.
// It checks sys.fn_cdc_get_min_lsn first: from below it is a
// *source.DataLossError, as is SQL Server error 313 should cleanup move the
// minimum meanwhile, and as is a minimum that cleanup raised above from
// while the rows were read (rows below it may have been deleted before the
// read reached them). A minimum of zero (the instance was dropped, or the
// login may not read it) is a *source.AccessError. A to above
// sys.fn_cdc_get_max_lsn on the reading connection (a readable secondary
// behind the one to came from, an LSN the capture job has not mapped yet)
// is a *source.ReplicaBehindError, never a shorter read; so is a read
// that, cut by a transient error, resumes on a connection whose maximum is
// below to, once its retries are spent. A new instance whose minimum LSN is
// still NULL has no changes to read yet: an empty reader.
//
// The minimum and maximum, the rows and the end check run on one
// connection, so behind a listener with read-only routing they come from
// one replica (FACTS.md F56).
//
// The rows come from the change table, ordered by __$command_id within an
// LSN (ChangeTableStatement), where the login may read it; otherwise, and
// on a server whose change tables lack __$command_id, from
// cdc.fn_cdc_get_all_changes_<ci> (ChangesStatement), with _command_id
// NULL and a warning logged, when Options.AllowChangeFunction allows it
// (else an error wrapping ErrChangeTableDenied); a denied change table
// (229, 230) is tried again after five minutes, one that was not found
// (208, 207: a dropped or re-created instance as much as a missing grant)
// on the next read.
func (s *Source) ReadChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (array.RecordReader, error) {
	schema, err := source.ChangeSchema(ci.Columns)
	if err != nil {
		return nil, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	empty := func() (array.RecordReader, error) { return array.NewRecordReader(schema, nil) }
	if to.Less(from) {
		return empty()
	}
	rt := newRetrier(s.opts.Retry)
	var cr *changeRead
	if err := s.retrying(ctx, rt, OpReadChanges, ci.Name, func() (err error) {
		cr, err = s.openChanges(ctx, ci, from, to)
		return err
	}); err != nil {
		return nil, markTransient(ctx, err)
	}
	if cr.rows == nil {
		return empty()
	}
	o, err := s.decodeOptions(ctx, ci.Columns, true)
	if err != nil {
		cr.rows.Close()
		cr.close(true)
		return nil, err
	}
	o.ctx, o.upTo = ctx, cr.to
	d, err := newChangeDecoder(ci.Columns, o, cr.commandID)
	if err != nil {
		cr.rows.Close()
		cr.close(true)
		return nil, fmt.Errorf("sqlserver: capture instance %q: %w", ci.Name, err)
	}
	pos := &changePosition{commandID: cr.commandID}
	r := newRowsReader(d, cr.rows, s.batchRows(0), func() { cr.close(ctx.Err() != nil) }, func(err error) error { return cr.wrap(ctx, markTransient(ctx, err)) })
	r.observe = pos.observe
	// A read cut by a transient error goes on from the LSN of the last
	// row decoded, on a new connection, dropping that LSN's rows up to
	// and including the last one decoded by identity (changeID): the rows
	// up to the first read's upper bound are captured, so the second read
	// returns the same rows, in the order of a key that is unique on the
	// change table. The change function's order is not known to be total:
	// two rows of one LSN sharing an identity refuse the resume
	// (errTiedChanges). A resume never reads to less than the first read:
	// a connection whose max LSN is below it is retried like a transient
	// error, then fails (FACTS.md F56).
	r.resume = func(err error, _, _ int64) (rowSource, bool, error) {
		cr.close(true)
		at := from
		var drop func([]any) (bool, error)
		if pos.lsn != nil {
			if pos.tied {
				return nil, false, errors.Join(err, errTiedChanges(ci.Name, pos.lsn, pos.commandID))
			}
			l, lerr := lsn.FromBytes(pos.lsn)
			if lerr != nil {
				return nil, false, lerr
			}
			at, drop = l, afterChange(ci.Name, pos)
		}
		rt.behind = true
		for s.again(ctx, rt, OpReadChanges, ci.Name, err) {
			next, oerr := s.openChanges(ctx, ci, at, cr.to)
			switch {
			case oerr != nil:
				err = oerr
				continue
			case next.rows == nil:
				return nil, false, fmt.Errorf("sqlserver: changes of %q: the read resumed at %s found no minimum LSN", ci.Name, at)
			case next.commandID != cr.commandID:
				next.rows.Close()
				next.close(true)
				return nil, false, fmt.Errorf("sqlserver: changes of %q: the read resumed at %s from %s, not from what it began with: the order within an LSN differs", ci.Name, at, map[bool]string{true: "the change table", false: "the change function"}[next.commandID])
			}
			cr = next
			s.log.InfoContext(ctx, "sqlserver: change read resumed after its last row", "capture_instance", ci.Name, "at", at.String())
			if drop == nil {
				return next.rows, false, nil
			}
			return &dropLeading{rowSource: next.rows, drop: drop}, false, nil
		}
		return nil, false, err
	}
	r.atEnd = func() error {
		// Cleanup deletes change rows below the minimum it sets: a
		// minimum above from now means rows this read had not reached may
		// be gone. Asked on the connection that read them.
		now, ok, err := cr.minLSN(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if ok && from.Less(now) {
			return &source.DataLossError{CaptureInstance: ci.Name, Requested: from, MinLSN: now}
		}
		return nil
	}
	return r, nil
}

// changeRead is one change read's connection and rows (nil when there is
// nothing to read: the minimum LSN is still NULL).
type changeRead struct {
	s         *Source
	ci        *source.CaptureInstance
	from, to  lsn.LSN
	min       lsn.LSN
	cn        *conn
	rows      *sql.Rows
	commandID bool
}

// close gives the connection back (reset, see conn.release), or closes it
// when discard is set (a broken connection, a cancelled read).
func (cr *changeRead) close(discard bool) {
	if cr.cn != nil {
		cr.cn.release(discard)
		cr.cn = nil
	}
}

func (cr *changeRead) minLSN(ctx context.Context) (lsn.LSN, bool, error) {
	rs, err := cr.s.run(ctx, cr.cn.c, "fn_cdc_get_min_lsn", mssqlstmt.MinLSNStatement(cr.ci.Name))
	if err != nil {
		return lsn.LSN{}, false, err
	}
	return parseMinLSN(cr.ci.Name, rs)
}

// wrap names the read in err; SQL Server error 313 (the interval is no
// longer valid: cleanup moved the minimum) is a *source.DataLossError.
func (cr *changeRead) wrap(ctx context.Context, err error) error {
	if isServerError(err, 313) {
		// The pool, not c: c may still hold the failed result.
		m, _, merr := cr.s.MinLSN(context.WithoutCancel(ctx), cr.ci.Name)
		if merr != nil {
			m = cr.min
		}
		return fmt.Errorf("%w (SQL Server error 313: %v)", &source.DataLossError{CaptureInstance: cr.ci.Name, Requested: cr.from, MinLSN: m}, err)
	}
	return fmt.Errorf("sqlserver: changes of %q from %s to %s: %w", cr.ci.Name, cr.from, cr.to, err)
}

// openChanges takes a connection and starts the read of the changes of ci
// from from to to: the minimum LSN first (from below it is a
// *source.DataLossError, NULL nothing to read), the maximum LSN (below to
// a *source.ReplicaBehindError), then the rows, all on that one connection
// (FACTS.md F56).
func (s *Source) openChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (*changeRead, error) {
	// One connection for the bounds, the rows and the end check: behind a
	// listener with read-only routing, two connections can reach two
	// replicas, and a maximum read on one says nothing of what another
	// has applied (FACTS.md F56).
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlserver: taking a connection: %w", err)
	}
	cr := &changeRead{s: s, ci: ci, from: from, to: to, cn: &conn{c: c, s: s, ctx: ctx}}
	failed := func(err error) bool { return ctx.Err() != nil || Transient(err) }
	min, ok, err := cr.minLSN(ctx)
	if err != nil {
		cr.close(failed(err))
		return nil, err
	}
	if !ok {
		cr.close(false)
		s.log.DebugContext(ctx, "sqlserver: minimum LSN is NULL: the capture job has not reached the instance yet", "capture_instance", ci.Name)
		return cr, nil
	}
	cr.min = min
	if from.Less(min) {
		cr.close(false)
		return nil, &source.DataLossError{CaptureInstance: ci.Name, Requested: from, MinLSN: min}
	}
	rs, err := s.run(ctx, c, "fn_cdc_get_max_lsn", mssqlstmt.MaxLSNStatement())
	if err != nil {
		cr.close(failed(err))
		return nil, err
	}
	max, err := parseLSN("fn_cdc_get_max_lsn", rs)
	if err != nil {
		cr.close(false)
		return nil, err
	}
	if max.LSN.Less(to) {
		// Never a shorter read than asked: the caller would take the
		// changes above max as read (FACTS.md F56).
		cr.close(false)
		s.log.DebugContext(ctx, "sqlserver: the reading connection's max LSN is below the change read's upper bound", "capture_instance", ci.Name, "to", to.String(), "max_lsn", max.LSN.String())
		return nil, &source.ReplicaBehindError{CaptureInstance: ci.Name, Need: to, Have: max.LSN}
	}
	// The change table takes row locks under READ COMMITTED as any table.
	if err := cr.cn.setLockTimeout(); err != nil {
		return nil, err
	}
	cr.rows, cr.commandID, err = s.queryChanges(ctx, c, ci, from, cr.to)
	if err != nil {
		cr.close(failed(err))
		return nil, cr.wrap(ctx, err)
	}
	return cr, nil
}

// changeTableRefused are the errors that mean the login may not read a
// change table directly, or the server's change tables lack
// __$command_id: 229 (SELECT permission denied), 230 (denied on a column),
// 208 (invalid object name: a table the login may not see, or an instance
// dropped meanwhile), 207 (invalid column name). FACTS.md F21.
var changeTableRefused = []int32{229, 230, 208, 207}

// changeTableDenied are the refusals that certainly concern the grant, and
// so are remembered (changeTableRetry); 208 and 207 also come from an
// instance dropped or re-created since it was described, which the next
// read should see afresh.
var changeTableDenied = []int32{229, 230}

// queryChanges runs the change read: the change table where the login may
// read it, else (with Options.AllowChangeFunction) the change function.
// commandID says which ran.
func (s *Source) queryChanges(ctx context.Context, q querier, ci *source.CaptureInstance, from, to lsn.LSN) (rows *sql.Rows, commandID bool, err error) {
	s.mu.Lock()
	st, tried := s.changeTable[ci.Name]
	s.mu.Unlock()
	if !tried || st.refused == "" || time.Since(st.at) >= changeTableRetry {
		stmt, err := mssqlstmt.ChangeTableStatement(ci, from, to)
		if err != nil {
			return nil, false, err
		}
		s.log.DebugContext(ctx, "sqlserver: query", "what", "changes of "+ci.Name+" from its change table", "sql", stmt.SQL, "params", len(stmt.Args))
		rows, err := q.QueryContext(ctx, stmt.SQL, stmt.Args...)
		if err == nil {
			if st.refused != "" {
				s.log.InfoContext(ctx, "sqlserver: the change table can be read again: changes are ordered by __$command_id", "capture_instance", ci.Name)
			}
			s.rememberChangeTable(ci.Name, "")
			return rows, true, nil
		}
		if !slices.ContainsFunc(changeTableRefused, func(n int32) bool { return isServerError(err, n) }) {
			return nil, false, err
		}
		if !s.opts.AllowChangeFunction {
			return nil, false, fmt.Errorf("%w %s (or cdc.lsn_time_mapping, which the read joins): %s; cdc.fn_cdc_get_all_changes_%s has no __$command_id and orders a transaction's rows by __$seqval, which the documentation says not to use for ordering (FACTS.md F10, F54), so it is read only with Options.AllowChangeFunction: %w", ErrChangeTableDenied, changeTableName(ci.Name), grantHint(ci.Name), ci.Name, err)
		}
		if st.refused == "" {
			s.log.WarnContext(ctx, "sqlserver: the login may not read the change table: reading changes through cdc.fn_cdc_get_all_changes_<capture instance> (Options.AllowChangeFunction), which has no __$command_id and orders a transaction's rows by __$seqval (FACTS.md F10, F54). "+grantHint(ci.Name), "capture_instance", ci.Name, "change_table", changeTableName(ci.Name), "reason", err.Error())
		}
		if slices.ContainsFunc(changeTableDenied, func(n int32) bool { return isServerError(err, n) }) {
			s.rememberChangeTable(ci.Name, err.Error())
		}
	}
	stmt, err := mssqlstmt.ChangesStatement(ci, from, to)
	if err != nil {
		return nil, false, err
	}
	s.log.DebugContext(ctx, "sqlserver: query", "what", "changes of "+ci.Name, "sql", stmt.SQL, "params", len(stmt.Args))
	rows, err = q.QueryContext(ctx, stmt.SQL, stmt.Args...)
	return rows, false, err
}

func (s *Source) rememberChangeTable(ci, refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changeTable == nil {
		s.changeTable = map[string]changeTableState{}
	}
	s.changeTable[ci] = changeTableState{refused: refused, at: time.Now()}
}
