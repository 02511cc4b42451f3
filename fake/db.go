package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// DefaultCollation is the collation of string columns that declare none:
// SQL Server's default server collation.
const DefaultCollation = "SQL_Latin1_General_CP1_CI_AS"

// DefaultBatchRows is the page size of ReadRange and ReadChanges when
// source.ReadOptions.BatchRows is zero.
const DefaultBatchRows = 1024

// Options configures a DB. The zero value is a usable configuration.
type Options struct {
	// FirstLSN is the LSN of the first commit; zero means
	// 0x0000002A00000F380001.
	FirstLSN lsn.LSN
	// Now returns the commit time of each commit. Nil means a fake clock
	// that starts at Start and advances by Tick per commit. Times are kept
	// in UTC, truncated to microseconds.
	Now func() time.Time
	// Start is the fake clock's first commit time (zero: 2026-01-01 UTC).
	Start time.Time
	// Tick is how far the fake clock advances per commit (zero: 1s).
	Tick time.Duration
	// CaptureEvery makes the capture job catch up after every CaptureEvery
	// commits; zero means after every commit.
	CaptureEvery int
	// ManualCapture runs the capture job only when RunCaptureJob is called.
	ManualCapture bool
	// SingletonKeyUpdates is SQL Server's trace flag 8207 ("enables
	// singleton updates for Transactional Replication and CDC"): an update
	// of one row that changes its key is logged as an update-before (3)
	// of the old key and an update-after (4) of the new one, where without
	// it the log holds a delete (1) and an insert (2) (FACTS.md F14). Every
	// Tx.Update is one row. SQL Server does so only for a key that is a
	// unique index and no constraint (a primary key's update stays 1 and 2
	// under the flag); the fake does it for every key, a superset.
	SingletonKeyUpdates bool
	// DefaultCollation is the collation of string columns that declare
	// none; empty means DefaultCollation.
	DefaultCollation string
	// ReportChangeTableTypes makes capture instances report identity and
	// rowversion columns with their change table's types (int or bigint,
	// binary(8)) instead of the source table's: which of the two
	// sys.sp_cdc_get_captured_columns reports is not documented (FACTS.md
	// F64), so tests run both.
	ReportChangeTableTypes bool
	// NullStartLSN makes sys.sp_cdc_help_change_data_capture show a new
	// capture instance's start_lsn as NULL ("the low endpoint has not
	// been established") until the capture job has passed it. Whether SQL
	// Server does is not documented; Materialize observed it set at once,
	// ahead of fn_cdc_get_max_lsn (FACTS.md F02, F07): the zero value
	// follows that, and tests run both.
	NullStartLSN bool
}

// ColumnDef declares a table column.
type ColumnDef struct {
	// Name is the column name.
	Name string
	// Type is the declared SQL Server type ("varchar(20)", "int",
	// "decimal(18,4)"), parsed by source.ParseType.
	Type string
	// Collation applies to char, varchar, nchar, nvarchar, text and ntext
	// columns; empty means the DB's default collation.
	Collation string
	// HideCollation makes capture instances report the collation as not
	// visible (source.Column.Collation empty), as for a login that cannot
	// read sys.columns. Rows still order by the real collation.
	HideCollation bool
	// Alias names a user-defined alias type the column is declared with
	// (CREATE TYPE <Alias> FROM <Type>), or "sysname", SQL Server's own
	// alias of nvarchar(128): Type is then its base type.
	// sys.sp_cdc_get_captured_columns reports the alias as the column's
	// data_type, sys.columns the base type (source/sqlserver FACTS.md F85).
	Alias string
	// Nullable allows NULL.
	Nullable bool
	// Computed makes the column a computed column: the value a row gives
	// for it stands for its expression's result. CDC writes NULL for a
	// computed column in every change row, and ReadRange reads it as NULL
	// too, as source/sqlserver does, so snapshot and stream agree
	// (FACTS.md F13). A key column cannot be computed.
	Computed bool
	// Identity makes the column the table's IDENTITY(1,1) column (one at
	// most; tinyint, smallint, int, bigint, or decimal/numeric of scale 0;
	// NOT NULL): an insert that leaves it NULL gets the next value, one
	// that gives a value takes it (as SET IDENTITY_INSERT ON) and raises
	// the next above it, an update keeps it. Its change-table type is int
	// or bigint (FACTS.md F64).
	Identity bool
}

// A column of type rowversion (or timestamp) takes its value from the
// database on every insert and update, 8 bytes of a counter the whole
// database shares (@@DBTS); a row gives nil for it. Its change-table type
// is binary(8) (FACTS.md F64).

// TableDef declares a table.
type TableDef struct {
	// Schema and Name name the table ("dbo", "orders"). Names resolve
	// ignoring case, as under SQL Server's default collation.
	Schema, Name string
	// Columns in ordinal order.
	Columns []ColumnDef
	// Key names the primary key columns in index order. The fake allows
	// nullable key columns (SQL Server does not) and orders NULL first.
	Key []string
	// Rows are loaded into the new table in one commit, as Load loads
	// them, before CDC is enabled: rows written before the capture
	// instance existed, which no change stream carries and only a snapshot
	// reads. Each row must fit the columns (see Row) and no two may have
	// equal keys under the key columns' collations; otherwise CreateTable
	// returns an error naming the row (Rows[i]) and creates nothing. The
	// load is a commit, so a pending FailNext(OpCommit) fails it. Nil or
	// empty means an empty table and no commit.
	Rows []Row
	// KeyIndexName names the primary key's index; empty means
	// "PK_<Name>".
	KeyIndexName string
	// KeyNonclustered makes the primary key a nonclustered index. With no
	// clustered index among Indexes either, the table is a heap
	// (source.CaptureInstance.Heap).
	KeyNonclustered bool
	// Keyless models a table with no primary key and no unique index: Key
	// then only addresses rows inside the fake (Tx.Update, Tx.Delete, Get,
	// as SQL Server's row locator would), and capture instances report no
	// key and no key index, as sys.sp_cdc_help_change_data_capture does
	// for such a table (FACTS.md F18), so a snapshot reads it as one
	// range. It is a heap unless an index in Indexes is clustered.
	Keyless bool
	// Indexes are the table's other indexes: a snapshot can split on the
	// leading column of any of them (source.CaptureInstance.SplitOn).
	Indexes []IndexDef
	// CaptureInstance, when not empty, enables CDC on the new table under
	// this name once Rows are loaded, capturing every column, as
	// EnableCDC(Schema, Name, CaptureInstance) does: the instance's
	// start_lsn is the LSN the next commit gets. A name another capture
	// instance has is an error, and nothing is created. Empty means CDC
	// is not enabled (call EnableCDC, to capture only some columns for
	// example).
	CaptureInstance string
}

// IndexDef declares an index of a table besides its primary key. A read
// through it sorts the table's rows into its order once per committed
// version of the table, so a long read while commits land pays that per
// page.
type IndexDef struct {
	// Name is the index's name, unique within the table.
	Name string
	// Columns are its key columns in order.
	Columns []string
	// Unique declares a unique index. The fake does not enforce it:
	// declaring it over values that repeat is the test's mistake.
	Unique bool
	// Clustered makes it the table's clustered index; the primary key must
	// then be KeyNonclustered (or the table Keyless).
	Clustered bool
}

// Row is one row's values in column order: int64, bool, keyrange.Decimal,
// float64, string, []byte, time.Time, keyrange.UUID, or nil for NULL.
type Row []any

// TableInfo describes a table.
type TableInfo struct {
	// Schema and Name name the table as it was created.
	Schema, Name string
	// Columns are every column in ordinal order, collations visible, each
	// with its column_id (source.Column.ID) as sys.columns shows it.
	Columns []source.Column
	// ObjectID is the table's object id (sys.objects.object_id), which a
	// rename keeps (FACTS.md F93).
	ObjectID int64
	// Identity names the identity column; empty when there is none.
	Identity string
	// Key names the primary key columns in index order.
	Key []string
	// KeyColumns are the key columns as keyrange orders them.
	KeyColumns []keyrange.Column
	// KeyIndexes are the key columns' positions in Columns.
	KeyIndexes []int
}

// Stats counts what reads of a table did since the DB was created or
// ResetStats was called.
type Stats struct {
	// RangeReads is the number of ReadRange calls.
	RangeReads int64
	// Pages is the number of pages (record batches) ReadRange produced.
	Pages int64
	// RowsExamined is the rows ReadRange's index seeks read: every row in a
	// piece's seek range (Piece.InSeek), whether or not its guard kept it.
	RowsExamined int64
	// RowsReturned is the rows ReadRange returned.
	RowsReturned int64
	// Seeks is the number of SeekKey calls.
	Seeks int64
	// KeysExamined is the keys SeekKey read, including the first key of
	// each piece its merge opened but did not return.
	KeysExamined int64
}

type tableStats struct {
	rangeReads, pages, rowsExamined, rowsReturned, seeks, keysExamined atomic.Int64
}

// table is a table's definition and its current rows.
type table struct {
	schema, name string
	cols         []source.Column
	ids          []int   // column_id of each column (sys.columns)
	nextID       int     // the last column_id given
	lay          *layout // cols and ids, as the current rowset's rows follow them
	identity     int     // the identity column's position; -1 when none
	identNext    int64   // the last identity value given
	hidden       []bool  // collation hidden from capture instances
	keyNames     []string
	keyIdx       []int
	keyCols      []keyrange.Column
	order        keyOrder
	rows         atomic.Pointer[rowset]
	skew         int64             // guarded by DB.mu
	aliases      map[string]string // ColumnDef.Alias by column name
	keyless      bool              // Key only addresses rows: no index SQL Server would show
	indexes      []*index
	pk           *index // the primary key's index; nil when keyless
	objectID     int64  // sys.objects.object_id: kept by a rename (FACTS.md F93)
	instances    []*instance
	stats        tableStats
}

func (t *table) String() string { return t.schema + "." + t.name }

// keyOf returns the key values of vals.
func (t *table) keyOf(vals []any) keyrange.Tuple {
	k := make(keyrange.Tuple, len(t.keyIdx))
	for i, j := range t.keyIdx {
		k[i] = vals[j]
	}
	return k
}

// newRow builds a row from checked values, normalizing its key.
func (t *table) newRow(vals []any) *row {
	key := make([]any, len(t.keyIdx))
	for i, j := range t.keyIdx {
		key[i] = t.order[i].normalize(vals[j])
	}
	return &row{key: key, vals: vals}
}

// DB is an in-memory SQL Server database with CDC. It is safe for
// concurrent use and implements source.Source.
type DB struct {
	opts Options

	mu        sync.RWMutex
	tables    map[string]*table // by lower-case "schema.table"
	instances []*instance       // in creation order
	next      lsn.LSN           // the next commit's LSN
	lastLSN   lsn.LSN           // the last LSN assigned (commit or seqval); zero when none
	commits   int64
	gen       uint64
	clock     time.Time
	mapping   []lsnTime // cdc.lsn_time_mapping: commits with captured changes
	captured  lsn.LSN   // the capture job's position: everything at or below it is processed
	sinceJob  int
	replica   lsn.LSN // SetReplicaMaxLSN; zero: reads see the primary
	dbts      uint64  // the last rowversion given (@@DBTS)

	captureErrors []CaptureError // sys.dm_cdc_errors
	objects       int64          // object ids given
	lastCreated   time.Time      // the newest instance's create_date

	faultMu   sync.Mutex
	failNext  map[Op]error
	readFault *readFault
	pageHook  func(context.Context, Page) error
}

// lsnTime is one row of cdc.lsn_time_mapping.
type lsnTime struct {
	lsn  lsn.LSN
	ts   time.Time
	idle bool // a progress row: no transaction (tran_id 0x00), ts zero for NULL
}

type readFault struct {
	remaining int64
	err       error
}

var _ source.Source = (*DB)(nil)

// New returns an empty database.
func New(opts Options) *DB {
	if opts.FirstLSN.IsZero() {
		opts.FirstLSN = lsn.LSN{0x00, 0x00, 0x00, 0x2A, 0x00, 0x00, 0x0F, 0x38, 0x00, 0x01}
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.Tick == 0 {
		opts.Tick = time.Second
	}
	if opts.CaptureEvery <= 0 {
		opts.CaptureEvery = 1
	}
	if opts.DefaultCollation == "" {
		opts.DefaultCollation = DefaultCollation
	}
	return &DB{
		opts:     opts,
		tables:   map[string]*table{},
		next:     opts.FirstLSN,
		clock:    opts.Start,
		failNext: map[Op]error{},
	}
}

func tableKey(schema, name string) string { return strings.ToLower(schema + "." + name) }

// CreateTable adds a table and, as def asks, loads its Rows in one commit
// and enables CDC on it as def.CaptureInstance: one call sets up what a
// bootstrap test needs. It does all of that or nothing. Errors name what is
// wrong: a type source.ParseType refuses, duplicate column names, a key
// column that does not exist or whose type cannot be ordered, a table that
// exists, a row that does not fit the columns or repeats a key, a capture
// instance name that is taken.
func (db *DB) CreateTable(def TableDef) error {
	name := def.Schema + "." + def.Name
	if def.Schema == "" || def.Name == "" {
		return fmt.Errorf("fake: create table %q: schema and name are required", name)
	}
	if len(def.Columns) == 0 {
		return fmt.Errorf("fake: create table %s: no columns", name)
	}
	if len(def.Key) == 0 {
		return fmt.Errorf("fake: create table %s: no primary key (the fake needs one to order rows)", name)
	}
	t := &table{schema: def.Schema, name: def.Name, identity: -1}
	seen := map[string]bool{}
	for _, cd := range def.Columns {
		c, err := db.column(name, cd)
		if err != nil {
			return err
		}
		if seen[strings.ToLower(c.Name)] {
			return fmt.Errorf("fake: create table %s: column %q declared twice", name, c.Name)
		}
		seen[strings.ToLower(c.Name)] = true
		if cd.Identity {
			switch {
			case t.identity >= 0:
				return fmt.Errorf("fake: create table %s: columns %q and %q are both identity columns: a table has one at most", name, t.cols[t.identity].Name, c.Name)
			case !identityType(c) || c.Nullable || c.Computed:
				return fmt.Errorf("fake: create table %s: identity column %q must be NOT NULL, not computed, and an integer or decimal of scale 0 (it is %s)", name, c.Name, c.Declared())
			}
			t.identity = len(t.cols)
		}
		if isRowversion(c) && c.Nullable {
			return fmt.Errorf("fake: create table %s: rowversion column %q is NOT NULL", name, c.Name)
		}
		t.cols = append(t.cols, c)
		t.nextID++
		t.ids = append(t.ids, t.nextID)
		t.hidden = append(t.hidden, cd.HideCollation)
		if cd.Alias != "" {
			if t.aliases == nil {
				t.aliases = map[string]string{}
			}
			t.aliases[c.Name] = cd.Alias
		}
	}
	t.lay = &layout{cols: t.cols, ids: t.ids}
	for _, k := range def.Key {
		j := -1
		for i, c := range t.cols {
			if c.Name == k {
				j = i
			}
		}
		if j < 0 {
			return fmt.Errorf("fake: create table %s: key column %q is not a column", name, k)
		}
		for _, prev := range t.keyIdx {
			if prev == j {
				return fmt.Errorf("fake: create table %s: key column %q listed twice", name, k)
			}
		}
		if t.cols[j].Computed {
			return fmt.Errorf("fake: create table %s: key column %q is computed: CDC writes NULL for computed columns in change rows", name, k)
		}
		if isRowversion(t.cols[j]) {
			return fmt.Errorf("fake: create table %s: key column %q is a rowversion, which every update changes", name, k)
		}
		kc := t.cols[j].KeyColumn()
		if kc.Kind == keyrange.KindUnsupported {
			return fmt.Errorf("fake: create table %s: key column %q has type %s, which cannot be a key", name, k, t.cols[j].Declared())
		}
		t.keyNames = append(t.keyNames, k)
		t.keyIdx = append(t.keyIdx, j)
		t.keyCols = append(t.keyCols, kc)
		t.order = append(t.order, newKeyPart(kc))
	}
	if err := t.defineIndexes(def); err != nil {
		return err
	}
	t.rows.Store(&rowset{lay: t.lay})
	load, err := t.defRows(def.Rows)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if old, ok := db.tables[tableKey(def.Schema, def.Name)]; ok {
		return fmt.Errorf("fake: create table %s: table %s exists", name, old)
	}
	var in *instance
	if def.CaptureInstance != "" {
		for _, o := range db.instances {
			if o.name == def.CaptureInstance {
				return fmt.Errorf("fake: create table %s: CaptureInstance %q exists (on %s)", name, o.name, o.t)
			}
		}
		if in, err = db.newInstanceLocked(t, def.CaptureInstance, nil); err != nil {
			return err
		}
	}
	if len(load) > 0 {
		if err := db.fault(OpCommit); err != nil {
			return fmt.Errorf("fake: create table %s: loading Rows: %w", name, err)
		}
	}
	db.tables[tableKey(def.Schema, def.Name)] = t
	db.objects++
	t.objectID = 245575000 + 16*db.objects
	if len(load) > 0 {
		if _, err := db.commitLocked(load); err != nil {
			delete(db.tables, tableKey(def.Schema, def.Name))
			return fmt.Errorf("fake: create table %s: loading Rows: %w", name, err)
		}
	}
	if in != nil {
		db.addInstanceLocked(in)
	}
	return nil
}

// defRows checks the Rows of a TableDef for t, a table not yet added: each
// must fit t's columns, and no two keys may be equal in t's key order. It
// returns them as insert statements in the order given.
func (t *table) defRows(rows []Row) ([]stmt, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	stmts := make([]stmt, len(rows))
	keys := make([][]any, len(rows))
	byKey := make([]int, len(rows))
	for i, r := range rows {
		vals, err := t.checkRowAt(r, i)
		if err != nil {
			return nil, err
		}
		if j := t.identity; j >= 0 {
			// The commit would give it the same value: the key check
			// below needs it now.
			if vals[j] == nil {
				t.identNext++
				if vals[j], err = convertValue(t, t.identNext, source.Column{Type: "bigint"}, t.cols[j]); err != nil {
					return nil, err
				}
			} else if n, err := identityNumber(vals[j]); err == nil {
				t.identNext = max(t.identNext, n)
			}
		}
		stmts[i] = stmt{kind: opInsert, t: t, lay: t.lay, vals: vals}
		keys[i] = t.newRow(vals).key
		byKey[i] = i
	}
	slices.SortStableFunc(byKey, func(a, b int) int { return t.order.compare(keys[a], keys[b]) })
	// Among equal keys (adjacent, in input order), report the earliest
	// repeat, against the first row with its key.
	first, dup := -1, -1
	for j := 1; j < len(byKey); j++ {
		a, b := byKey[j-1], byKey[j]
		if t.order.compare(keys[a], keys[b]) == 0 && (dup < 0 || b < dup) {
			first, dup = a, b
		}
	}
	if dup >= 0 {
		return nil, fmt.Errorf("%s: key %v violates the primary key: it equals the key %v of Rows[%d] under %s",
			t.rowPrefix(dup), describeKey(t.keyOf(stmts[dup].vals)), describeKey(t.keyOf(stmts[first].vals)), first, t.describeOrder())
	}
	return stmts, nil
}

func (db *DB) column(table string, cd ColumnDef) (source.Column, error) {
	if cd.Name == "" {
		return source.Column{}, fmt.Errorf("fake: table %s: a column has no name", table)
	}
	c, err := source.ParseType(cd.Type)
	if err != nil {
		return c, fmt.Errorf("fake: table %s, column %q: %w", table, cd.Name, err)
	}
	c.Name, c.Nullable, c.Computed = cd.Name, cd.Nullable, cd.Computed
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "text", "ntext":
		c.Collation = cd.Collation
		if c.Collation == "" {
			c.Collation = db.opts.DefaultCollation
		}
	default:
		if cd.Collation != "" {
			return c, fmt.Errorf("fake: table %s, column %q: type %s takes no collation", table, cd.Name, c.Declared())
		}
	}
	return c, nil
}

// Table describes a table.
func (db *DB) Table(schema, name string) (TableInfo, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return TableInfo{}, err
	}
	cols := append([]source.Column(nil), t.cols...)
	for j := range cols {
		cols[j].ID = t.ids[j]
	}
	identity := ""
	if t.identity >= 0 {
		identity = t.cols[t.identity].Name
	}
	return TableInfo{
		Schema:     t.schema,
		Name:       t.name,
		ObjectID:   t.objectID,
		Identity:   identity,
		Columns:    cols,
		Key:        append([]string(nil), t.keyNames...),
		KeyColumns: append([]keyrange.Column(nil), t.keyCols...),
		KeyIndexes: append([]int(nil), t.keyIdx...),
	}, nil
}

func (db *DB) tableLocked(schema, name string) (*table, error) {
	t, ok := db.tables[tableKey(schema, name)]
	if !ok {
		return nil, fmt.Errorf("fake: table %s.%s does not exist", schema, name)
	}
	return t, nil
}

// Rows returns the committed rows of a table in key order (a copy), for
// test oracles.
func (db *DB) Rows(schema, name string) ([]Row, error) {
	db.mu.RLock()
	t, err := db.tableLocked(schema, name)
	db.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	rs := t.rows.Load()
	out := make([]Row, 0, rs.n)
	rs.all(func(r *row) bool {
		out = append(out, append(Row(nil), r.vals...))
		return true
	})
	return out, nil
}

// Get returns the committed row with the given key (compared under the key
// columns' collations), and whether it exists.
func (db *DB) Get(schema, name string, key []any) (Row, bool, error) {
	db.mu.RLock()
	t, err := db.tableLocked(schema, name)
	db.mu.RUnlock()
	if err != nil {
		return nil, false, err
	}
	nk, err := t.normalizeKey(key)
	if err != nil {
		return nil, false, err
	}
	rs := t.rows.Load()
	p := rs.search(func(r *row) bool { return t.order.compare(r.key, nk) >= 0 })
	if p == rs.end() || t.order.compare(rs.at(p).key, nk) != 0 {
		return nil, false, nil
	}
	return append(Row(nil), rs.at(p).vals...), true, nil
}

func (t *table) normalizeKey(key []any) ([]any, error) {
	if len(key) != len(t.keyIdx) {
		return nil, fmt.Errorf("fake: table %s: key has %d values for %d key columns %v", t, len(key), len(t.keyIdx), t.keyNames)
	}
	nk, err := normalizeTuple(t.keyCols, t.order, 0, key)
	if err != nil {
		return nil, fmt.Errorf("fake: table %s: %w", t, err)
	}
	return nk, nil
}

// SetRowCountSkew makes RowCount (sp_spaceused) report the table's row
// count plus delta (never below zero), as stale metadata does.
func (db *DB) SetRowCountSkew(schema, name string, delta int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return err
	}
	t.skew = delta
	return nil
}

// Stats returns the read counters of a table.
func (db *DB) Stats(schema, name string) (Stats, error) {
	db.mu.RLock()
	t, err := db.tableLocked(schema, name)
	db.mu.RUnlock()
	if err != nil {
		return Stats{}, err
	}
	s := &t.stats
	return Stats{
		RangeReads:   s.rangeReads.Load(),
		Pages:        s.pages.Load(),
		RowsExamined: s.rowsExamined.Load(),
		RowsReturned: s.rowsReturned.Load(),
		Seeks:        s.seeks.Load(),
		KeysExamined: s.keysExamined.Load(),
	}, nil
}

// ResetStats zeroes the read counters of every table.
func (db *DB) ResetStats() {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, t := range db.tables {
		s := &t.stats
		for _, c := range []*atomic.Int64{&s.rangeReads, &s.pages, &s.rowsExamined, &s.rowsReturned, &s.seeks, &s.keysExamined} {
			c.Store(0)
		}
	}
}

// Op names an operation FailNext can fail.
type Op string

// The operations FailNext can fail.
const (
	OpCaptureInstance Op = "CaptureInstance"
	OpListInstances   Op = "ListCaptureInstances"
	OpMaxLSN          Op = "MaxLSN"
	OpMinLSN          Op = "MinLSN"
	OpLSNTime         Op = "LSNTime"
	OpIntKeyBounds    Op = "IntKeyBounds"
	OpRowCount        Op = "RowCount"
	OpSeekKey         Op = "SeekKey"
	OpReadRange       Op = "ReadRange"
	OpReadChanges     Op = "ReadChanges"
	OpChangeAccess    Op = "ChangeAccess"
	OpDDLHistory      Op = "DDLHistory"
	OpCommit          Op = "Commit"
)

// FailNext makes the next call of op return err (wrapped, naming the
// operation); later calls succeed again. A failed commit changes nothing.
func (db *DB) FailNext(op Op, err error) {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	db.failNext[op] = err
}

// FailReadAfter makes ReadRange fail once rows more rows have been
// returned, counted across every reader of the DB from now: the reader that
// would return the next row returns err from Err instead (after returning
// the rows up to the limit). The fault fires once.
func (db *DB) FailReadAfter(rows int64, err error) {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	db.readFault = &readFault{remaining: rows, err: err}
}

// ClearFaults removes every pending fault.
func (db *DB) ClearFaults() {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	clear(db.failNext)
	db.readFault = nil
}

// ErrInjected is a ready-made error for FailNext, FailReadAfter and the
// MemSink faults; the errors they cause wrap it, so errors.Is finds it.
var ErrInjected = errors.New("fake: injected fault")

func (db *DB) fault(op Op) error {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	err, ok := db.failNext[op]
	if !ok {
		return nil
	}
	delete(db.failNext, op)
	return fmt.Errorf("fake: %s: %w", op, err)
}

// reserveRows takes up to want rows from the read fault's budget; it
// returns the rows allowed, or the fault's error once the budget is spent.
func (db *DB) reserveRows(want int) (int, error) {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	f := db.readFault
	if f == nil {
		return want, nil
	}
	if f.remaining <= 0 {
		db.readFault = nil
		return 0, fmt.Errorf("fake: ReadRange: %w", f.err)
	}
	n := int(min(int64(want), f.remaining))
	f.remaining -= int64(n)
	return n, nil
}

// unreserveRows returns rows a page reserved but did not read.
func (db *DB) unreserveRows(n int) {
	if n <= 0 {
		return
	}
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	if db.readFault != nil {
		db.readFault.remaining += int64(n)
	}
}

// Page describes a page ReadRange has just read, for a page hook.
type Page struct {
	// Schema and Table name the table read.
	Schema, Table string
	// CaptureInstance is the instance the read was asked for.
	CaptureInstance string
	// Range is the index of the keyrange.Range read.
	Range int
	// Number counts the pages of this read, from 1.
	Number int
	// Rows is the number of rows on the page.
	Rows int
}

// SetPageHook installs f, called after every page of every ReadRange, before
// the page is returned, with no lock of the DB held: f may begin and commit
// transactions, whose changes later pages of a READ COMMITTED read see. An
// error from f fails the read. A nil f removes the hook.
func (db *DB) SetPageHook(f func(ctx context.Context, p Page) error) {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	db.pageHook = f
}

func (db *DB) hook() func(context.Context, Page) error {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	return db.pageHook
}

// Load inserts rows into a table in one transaction and returns its LSN.
func (db *DB) Load(schema, name string, rows ...Row) (lsn.LSN, error) {
	tx := db.Begin()
	tx.stmts = make([]stmt, 0, len(rows))
	for _, r := range rows {
		if err := tx.Insert(schema, name, r); err != nil {
			tx.Rollback()
			return lsn.LSN{}, err
		}
	}
	return tx.Commit()
}
