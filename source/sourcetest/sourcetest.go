// Package sourcetest is a conformance suite for implementations of
// source.Source. A source runs it in one line from its own tests, giving
// the source and the hooks that change the database behind it:
//
//	func TestConformance(t *testing.T) {
//		sourcetest.Run(t, sourcetest.Harness{Source: src, CreateTable: create, Commit: commit})
//	}
//
// The suite creates its own tables through Harness.CreateTable (names
// start with Harness.Prefix and are unique within a Run), writes to them
// through Harness.Commit, and checks what the source.Source contract
// states: capture-instance names resolve exactly first, then ignoring case
// (*source.NotFoundError naming what exists, *source.AmbiguousError on a
// case-sensitive database); MinLSN is false until the capture job reaches
// a new instance and within [start_lsn, first commit] after; MaxLSN only
// grows and covers every commit; LSNTime maps a commit's LSN to its time in
// UTC (zero for an LSN that is no commit's, as the function answers NULL);
// IntKeyBounds and RowCount; SeekKey returns the (k+1)-th key at or after
// from, under the key columns' collations; ReadRange returns exactly the
// rows of a range, in ArrowSchema(ci.Columns), batches capped by
// BatchRows, so that every row lies in exactly one of consecutive ranges
// built by keyrange.FromBounds, also when ranges are read concurrently,
// and a canceled context fails the read; capture instances list the
// table's non-unique indexes (Table.Indexes), and split on a column of one
// of them (source.CaptureInstance.SplitOn), whose values repeat, SeekKey
// returns a bound above from and ranges still read every row once, NULLs
// in the first;
// ReadChanges returns a commit's changes in (start LSN, command id, seqval,
// operation) order in ChangeSchema(ci.Columns), and a *source.DataLossError
// below the minimum LSN.
//
// Expected results are computed from the rows the suite wrote, ordered by
// keyrange.Compare (SQL Server's ORDER BY): the suite is the executable
// statement of where a source must agree with that model.
//
// # Against SQL Server
//
// The hooks of a real database run DDL and DML:
// source/sqlserver/integration/conformance_test.go is the harness for SQL
// Server (CREATE TABLE, INSERT in one transaction, sys.sp_cdc_enable_table;
// DML then a wait for the capture job; sys.sp_cdc_cleanup_change_table),
// run by integration/run.sh or wherever CDCSNAP_MSSQL_DSN is set.
package sourcetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// Column declares a column of a table the suite creates.
type Column struct {
	// Name is the column name.
	Name string
	// Type is the declared SQL Server type ("bigint", "varchar(10)",
	// "decimal(18,4)", "datetime2(7)").
	Type string
	// Collation is the collation of a string column; empty for others.
	Collation string
	// Nullable allows NULL.
	Nullable bool
}

// Table declares a table the suite creates.
type Table struct {
	// Schema and Name name the table.
	Schema, Name string
	// Columns are the columns in ordinal order.
	Columns []Column
	// Key names the primary key's columns in index order; the capture
	// instance's index is the primary key.
	Key []string
	// Indexes are nonclustered indexes created with the table, which
	// allow duplicates.
	Indexes []Index
}

// Index declares a nonclustered index that is not unique.
type Index struct {
	// Name is the index's name.
	Name string
	// Columns are its key columns in order.
	Columns []string
}

// Row is one row's values in column order, in the Go types of the fake
// (fake.Row): int64, bool, keyrange.Decimal, float64, string, []byte,
// time.Time (UTC), or nil for NULL.
type Row []any

// Op is the kind of a Change.
type Op int

// The kinds of Change.
const (
	// Insert adds Change.Row.
	Insert Op = iota
	// Update replaces the row whose key is Change.Key with Change.Row
	// (the suite never changes a key).
	Update
	// Delete removes the row whose key is Change.Key.
	Delete
)

// Change is one statement of a transaction the suite commits.
type Change struct {
	// Op says what the statement does.
	Op Op
	// Key is the key of the row updated or deleted, in key order.
	Key []any
	// Row is the new row of an insert or update, in column order.
	Row Row
}

// Harness connects the suite to the source under test and the database
// behind it.
type Harness struct {
	// Source is the source under test. It reads the database the hooks
	// write.
	Source source.Source

	// CreateTable creates the table tb with its primary key and its
	// Indexes (nonclustered, not unique), inserts rows
	// (possibly none) in one transaction, and then enables CDC on it as
	// the capture instance called instance, capturing every column, with
	// no further commit: the database is quiet afterwards until Commit.
	CreateTable func(ctx context.Context, tb Table, instance string, rows []Row) error

	// Commit applies changes to tb in one transaction and returns its
	// commit LSN once the capture job has processed it (MaxLSN is at
	// least that LSN and the changes are in the change table).
	Commit func(ctx context.Context, tb Table, changes []Change) (lsn.LSN, error)

	// Cleanup, optional, is retention cleanup: it purges the changes of
	// instance below low and raises its minimum LSN to low, as
	// sys.sp_cdc_cleanup_change_table does. Nil skips the checks that need
	// it.
	Cleanup func(ctx context.Context, instance string, low lsn.LSN) error

	// CaseSensitive says the database can hold capture instances whose
	// names differ only in case (a case-sensitive database collation); the
	// suite then checks *source.AmbiguousError.
	CaseSensitive bool

	// Prefix starts every table and capture-instance name the suite
	// creates; empty means "sourcetest_". Use a fresh one per run against
	// a database that outlives the run.
	Prefix string
}

// Run runs the conformance suite. Subtests run one after another, each on
// tables of its own.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Source == nil || h.CreateTable == nil || h.Commit == nil {
		t.Fatal("sourcetest: Harness.Source, CreateTable and Commit are required")
	}
	if h.Prefix == "" {
		h.Prefix = "sourcetest_"
	}
	s := &suite{h: h}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"CaptureInstanceNames", s.testNames},
		{"AmbiguousNames", s.testAmbiguous},
		{"MinMaxLSN", s.testMinMaxLSN},
		{"LSNTime", s.testLSNTime},
		{"IntKeyBounds", s.testIntKeyBounds},
		{"RowCount", s.testRowCount},
		{"SeekKey", s.testSeekKey},
		{"ReadRange", s.testReadRange},
		{"SplitColumn", s.testSplitColumn},
		{"ReadChanges", s.testReadChanges},
		{"DataLoss", s.testDataLoss},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	h Harness
	n int // tables created so far
}

// fixture is a table the suite created, with the rows it holds now.
type fixture struct {
	tb       Table
	instance string
	ci       *source.CaptureInstance
	key      []keyrange.Column
	keyIdx   []int
	idIdx    int // the unique bigint column "id"
	rows     map[int64]Row
}

// newName returns a fresh table name.
func (s *suite) newName(what string) string {
	s.n++
	return fmt.Sprintf("%s%s%d", s.h.Prefix, what, s.n)
}

// create creates a table through the harness and resolves its instance.
func (s *suite) create(t *testing.T, tb Table, instance string, rows []Row) *fixture {
	t.Helper()
	ctx := t.Context()
	if instance == "" {
		instance = tb.Name
	}
	if err := s.h.CreateTable(ctx, tb, instance, rows); err != nil {
		t.Fatalf("Harness.CreateTable(%s.%s as %q, %d rows): %v", tb.Schema, tb.Name, instance, len(rows), err)
	}
	ci, err := s.h.Source.CaptureInstance(ctx, instance)
	if err != nil {
		t.Fatalf("CaptureInstance(%q) just after creating it: %v", instance, err)
	}
	f := &fixture{tb: tb, instance: instance, ci: ci, idIdx: -1, rows: map[int64]Row{}}
	for i, c := range tb.Columns {
		if c.Name == "id" {
			f.idIdx = i
		}
	}
	if f.idIdx < 0 {
		t.Fatalf("sourcetest: table %s has no id column", tb.Name)
	}
	f.key, err = ci.KeyColumns()
	if err != nil {
		t.Fatalf("capture instance %q: KeyColumns: %v", instance, err)
	}
	for _, k := range tb.Key {
		for i, c := range tb.Columns {
			if c.Name == k {
				f.keyIdx = append(f.keyIdx, i)
			}
		}
	}
	for _, r := range rows {
		f.rows[r[f.idIdx].(int64)] = r
	}
	return f
}

// commit commits changes through the harness and tracks the rows.
func (s *suite) commit(t *testing.T, f *fixture, changes ...Change) lsn.LSN {
	t.Helper()
	l, err := s.h.Commit(t.Context(), f.tb, changes)
	if err != nil {
		t.Fatalf("Harness.Commit(%s, %d changes): %v", f.tb.Name, len(changes), err)
	}
	if l.IsZero() {
		t.Fatalf("Harness.Commit(%s, %d changes) returned the zero LSN", f.tb.Name, len(changes))
	}
	for _, c := range changes {
		switch c.Op {
		case Insert, Update:
			f.rows[c.Row[f.idIdx].(int64)] = c.Row
		case Delete:
			for id, r := range f.rows {
				if same, _ := keyrange.CompareTuples(f.key, f.keyOf(r), c.Key); same == 0 {
					delete(f.rows, id)
				}
			}
		}
	}
	return l
}

func (f *fixture) keyOf(r Row) keyrange.Tuple {
	k := make(keyrange.Tuple, len(f.keyIdx))
	for i, j := range f.keyIdx {
		k[i] = r[j]
	}
	return k
}

// sorted returns the live rows in key order.
func (f *fixture) sorted(t *testing.T) []Row {
	t.Helper()
	out := make([]Row, 0, len(f.rows))
	for _, r := range f.rows {
		out = append(out, r)
	}
	var err error
	slices.SortFunc(out, func(a, b Row) int {
		c, e := keyrange.CompareTuples(f.key, f.keyOf(a), f.keyOf(b))
		if e != nil {
			err = e
		}
		return c
	})
	if err != nil {
		t.Fatalf("ordering the suite's rows: %v", err)
	}
	return out
}

// ordersTable has one bigint key (negative, sparse) and varied nullable
// columns.
func (s *suite) ordersTable() Table {
	return Table{Schema: "dbo", Name: s.newName("orders"), Key: []string{"id"}, Columns: []Column{
		{Name: "id", Type: "bigint"},
		{Name: "name", Type: "nvarchar(40)", Collation: "Latin1_General_CI_AS", Nullable: true},
		{Name: "amount", Type: "decimal(18,4)", Nullable: true},
		{Name: "at", Type: "datetime2(7)", Nullable: true},
	}}
}

func orderRow(id int64, name string) Row {
	var amount, at any
	if id%3 != 0 {
		small := id % 1_000_000_007
		amount = keyrange.Decimal(fmt.Sprintf("%d.%04d", small*7, (small*31+99990)%10000))
		at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(small%100_000) * 1234567 * time.Microsecond)
	}
	var n any
	if name != "" {
		n = name
	}
	return Row{id, n, amount, at}
}

// orderIDs are sparse, skewed and partly negative.
var orderIDs = []int64{-900, -7, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 1 << 40}

func orderRows() []Row {
	rows := make([]Row, len(orderIDs))
	for i, id := range orderIDs {
		name := fmt.Sprintf("Order %d — Zoë", id)
		if i%5 == 4 {
			name = ""
		}
		rows[i] = orderRow(id, name)
	}
	return rows
}

// regionsTable has a composite key: a case-insensitive varchar and an int.
func (s *suite) regionsTable() Table {
	return Table{Schema: "dbo", Name: s.newName("regions"), Key: []string{"region", "n"}, Columns: []Column{
		{Name: "region", Type: "varchar(12)", Collation: "SQL_Latin1_General_CP1_CI_AS"},
		{Name: "n", Type: "int"},
		{Name: "id", Type: "bigint"},
		{Name: "val", Type: "nvarchar(20)", Collation: "Latin1_General_CI_AS", Nullable: true},
	}}
}

// regionNames are distinct under the case-insensitive, space-padding
// collation, in mixed case and with trailing spaces.
var regionNames = []string{"amer", "APAC", "Emea ", "latam", "North", "oceania  ", "South"}

func regionRows() []Row {
	var rows []Row
	id := int64(1)
	for i, r := range regionNames {
		for j := range 3 + i%3 {
			var val any
			if j%2 == 0 {
				val = fmt.Sprintf("v%d-%d", i, j)
			}
			rows = append(rows, Row{r, int64(j * 10), id, val})
			id++
		}
	}
	return rows
}

func (s *suite) testNames(t *testing.T) {
	ctx := t.Context()
	tb := s.ordersTable()
	instance := s.h.Prefix + "Orders_" + tb.Name
	f := s.create(t, tb, instance, orderRows())
	ci := f.ci
	if ci.Name != instance {
		t.Errorf("CaptureInstance(%q).Name = %q, want the stored name", instance, ci.Name)
	}
	if !strings.EqualFold(ci.SourceSchema, tb.Schema) || !strings.EqualFold(ci.SourceTable, tb.Name) {
		t.Errorf("CaptureInstance(%q) source table = %s.%s, want %s.%s", instance, ci.SourceSchema, ci.SourceTable, tb.Schema, tb.Name)
	}
	if ci.StartLSN.IsZero() {
		t.Errorf("CaptureInstance(%q).StartLSN is zero", instance)
	}
	if !slices.Equal(ci.Key, tb.Key) {
		t.Errorf("CaptureInstance(%q).Key = %v, want the primary key %v", instance, ci.Key, tb.Key)
	}
	checkColumns(t, instance, ci.Columns, tb.Columns)

	for _, name := range []string{strings.ToUpper(instance), strings.ToLower(instance)} {
		got, err := s.h.Source.CaptureInstance(ctx, name)
		if err != nil {
			t.Errorf("CaptureInstance(%q) (the name %q in another case): %v", name, instance, err)
			continue
		}
		if got.Name != instance {
			t.Errorf("CaptureInstance(%q).Name = %q, want the stored name %q", name, got.Name, instance)
		}
	}

	missing := s.h.Prefix + "no_such_instance"
	_, err := s.h.Source.CaptureInstance(ctx, missing)
	var nf *source.NotFoundError
	switch {
	case err == nil:
		t.Errorf("CaptureInstance(%q) of a missing instance: no error", missing)
	case !errors.Is(err, source.ErrNotFound) || !errors.As(err, &nf):
		t.Errorf("CaptureInstance(%q) = %v, want a *source.NotFoundError wrapping source.ErrNotFound", missing, err)
	default:
		if nf.Name != missing {
			t.Errorf("NotFoundError.Name = %q, want %q", nf.Name, missing)
		}
		if !slices.Contains(nf.Available, instance) {
			t.Errorf("NotFoundError.Available = %v, want it to name the existing %q", nf.Available, instance)
		}
		if !strings.Contains(err.Error(), instance) {
			t.Errorf("error %q does not name the existing instance %q", err, instance)
		}
	}
}

// checkColumns compares the captured columns with the declared ones.
func checkColumns(t *testing.T, instance string, got []source.Column, want []Column) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("capture instance %q has %d columns %v, want %d", instance, len(got), got, len(want))
		return
	}
	for i, w := range want {
		d, err := source.ParseType(w.Type)
		if err != nil {
			t.Fatalf("sourcetest: column %q: %v", w.Name, err)
		}
		g := got[i]
		if g.Name != w.Name || g.Type != d.Type || g.Length != d.Length || g.Precision != d.Precision || g.Scale != d.Scale || g.Nullable != w.Nullable {
			t.Errorf("capture instance %q column %d = %+v (%s), want %q %s nullable=%v", instance, i, g, g.Declared(), w.Name, d.Declared(), w.Nullable)
		}
		if w.Collation != "" && g.Collation != "" && !strings.EqualFold(g.Collation, w.Collation) {
			t.Errorf("capture instance %q column %q collation = %q, want %q (or empty when not visible)", instance, g.Name, g.Collation, w.Collation)
		}
	}
}

func (s *suite) testAmbiguous(t *testing.T) {
	if !s.h.CaseSensitive {
		t.Skip("Harness.CaseSensitive is false: the database cannot hold names that differ only in case")
	}
	ctx := t.Context()
	base := s.h.Prefix + "Amb" + fmt.Sprint(s.n+1)
	lower, upper := strings.ToLower(base), strings.ToUpper(base)
	s.create(t, s.ordersTable(), lower, nil)
	s.create(t, s.ordersTable(), upper, nil)
	for _, exact := range []string{lower, upper} {
		ci, err := s.h.Source.CaptureInstance(ctx, exact)
		if err != nil {
			t.Errorf("CaptureInstance(%q) with %q and %q existing: %v (the exact name wins)", exact, lower, upper, err)
		} else if ci.Name != exact {
			t.Errorf("CaptureInstance(%q).Name = %q, want the exact match", exact, ci.Name)
		}
	}
	_, err := s.h.Source.CaptureInstance(ctx, base)
	var amb *source.AmbiguousError
	if !errors.As(err, &amb) {
		t.Fatalf("CaptureInstance(%q) with %q and %q existing = %v, want a *source.AmbiguousError", base, lower, upper, err)
	}
	if !slices.Contains(amb.Matches, lower) || !slices.Contains(amb.Matches, upper) {
		t.Errorf("AmbiguousError.Matches = %v, want both %q and %q", amb.Matches, lower, upper)
	}
}

func (s *suite) testMinMaxLSN(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	maxBefore := s.maxLSN(t, lsn.LSN{})
	f := s.create(t, s.ordersTable(), "", orderRows())
	start := f.ci.StartLSN
	// A new instance on a quiet database: NULL until the capture job
	// reaches start_lsn, or start_lsn and above.
	if min, ok, err := src.MinLSN(ctx, f.instance); err != nil {
		t.Fatalf("MinLSN(%q) of a new instance: %v", f.instance, err)
	} else if ok && min.Less(start) {
		t.Errorf("MinLSN(%q) of a new instance = %s, below its start_lsn %s", f.instance, min, start)
	}
	m0 := s.maxLSN(t, maxBefore)
	c1 := s.commit(t, f, Change{Op: Insert, Row: orderRow(100_000, "first")})
	if c1.Less(start) {
		t.Errorf("the first commit after enabling (%s) is below the instance's start_lsn %s", c1, start)
	}
	m1 := s.maxLSN(t, m0)
	if m1.Less(c1) {
		t.Errorf("MaxLSN = %s after the capture job processed a commit at %s", m1, c1)
	}
	min, ok, err := src.MinLSN(ctx, f.instance)
	switch {
	case err != nil:
		t.Fatalf("MinLSN(%q): %v", f.instance, err)
	case !ok:
		t.Errorf("MinLSN(%q) is NULL after the capture job processed a commit (%s) past its start_lsn %s", f.instance, c1, start)
	case min.Less(start) || c1.Less(min):
		t.Errorf("MinLSN(%q) = %s, want within [start_lsn %s, first commit %s]", f.instance, min, start, c1)
	}
	c2 := s.commit(t, f, Change{Op: Delete, Key: []any{int64(100_000)}})
	if !c1.Less(c2) {
		t.Errorf("commit LSNs %s then %s: want increasing", c1, c2)
	}
	m2 := s.maxLSN(t, m1)
	if m2.Less(c2) {
		t.Errorf("MaxLSN = %s after a commit at %s", m2, c2)
	}
	for range 3 {
		m2 = s.maxLSN(t, m2)
	}
	if min2, ok, err := src.MinLSN(ctx, f.instance); err != nil || !ok || min2 != min {
		t.Errorf("MinLSN(%q) after a second commit = %s, %v, %v; want %s unchanged (no cleanup ran)", f.instance, min2, ok, err, min)
	}
}

// maxLSN returns MaxLSN and checks it did not go below prev.
func (s *suite) maxLSN(t *testing.T, prev lsn.LSN) lsn.LSN {
	t.Helper()
	m, err := s.h.Source.MaxLSN(t.Context())
	if err != nil {
		t.Fatalf("MaxLSN: %v", err)
	}
	if m.Less(prev) {
		t.Errorf("MaxLSN went back from %s to %s", prev, m)
	}
	return m
}

func (s *suite) testLSNTime(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	f := s.create(t, s.ordersTable(), "", nil)
	c1 := s.commit(t, f, Change{Op: Insert, Row: orderRow(1, "a")})
	c2 := s.commit(t, f, Change{Op: Insert, Row: orderRow(2, "b")})
	at := func(l lsn.LSN) time.Time {
		t.Helper()
		ts, err := src.LSNTime(ctx, l)
		if err != nil {
			t.Fatalf("LSNTime(%s): %v", l, err)
		}
		if !ts.IsZero() && ts.Location() != time.UTC {
			t.Errorf("LSNTime(%s) = %s: want UTC", l, ts)
		}
		return ts
	}
	t1, t2 := at(c1), at(c2)
	if t1.IsZero() || t2.IsZero() {
		t.Fatalf("LSNTime of commits %s and %s = %s and %s: want their commit times", c1, c2, t1, t2)
	}
	if t2.Before(t1) {
		t.Errorf("LSNTime(%s) = %s is before LSNTime(%s) = %s", c2, t2, c1, t1)
	}
	// An LSN that is no commit's has no commit time: the function returns
	// NULL for it (source/sqlserver FACTS.md F08).
	if p, err := c2.Prev(); err == nil && c1.Less(p) {
		if tp := at(p); !tp.IsZero() {
			t.Errorf("LSNTime(%s), between commits %s and %s, = %s: want the zero time (no commit at it)", p, c1, c2, tp)
		}
	}
	if n, err := c2.Next(); err == nil {
		if tn := at(n); !tn.IsZero() {
			t.Errorf("LSNTime(%s), above the commit %s, = %s: want the zero time (no commit at it)", n, c2, tn)
		}
	}
	if tz := at(lsn.LSN{}); !tz.IsZero() {
		t.Errorf("LSNTime(the zero LSN) = %s: want the zero time (no commit at it)", tz)
	}
}

func (s *suite) testIntKeyBounds(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	empty := s.create(t, s.ordersTable(), "", nil)
	if lo, hi, ok, err := src.IntKeyBounds(ctx, empty.ci); err != nil || ok {
		t.Errorf("IntKeyBounds of an empty table = %d, %d, %v, %v; want ok false", lo, hi, ok, err)
	}
	f := s.create(t, s.ordersTable(), "", orderRows())
	check := func(when string, wantLo, wantHi int64) {
		t.Helper()
		lo, hi, ok, err := src.IntKeyBounds(ctx, f.ci)
		if err != nil || !ok || lo != wantLo || hi != wantHi {
			t.Errorf("%s: IntKeyBounds = %d, %d, %v, %v; want %d, %d, true", when, lo, hi, ok, err, wantLo, wantHi)
		}
	}
	check("after loading", orderIDs[0], orderIDs[len(orderIDs)-1])
	s.commit(t, f, Change{Op: Delete, Key: []any{orderIDs[0]}}, Change{Op: Insert, Row: orderRow(1<<50, "big")})
	check("after deleting the lowest key and inserting a higher one", orderIDs[1], 1<<50)
}

func (s *suite) testRowCount(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	empty := s.create(t, s.ordersTable(), "", nil)
	if n, err := src.RowCount(ctx, empty.ci); err != nil || n != 0 {
		t.Errorf("RowCount of an empty table = %d, %v; want 0", n, err)
	}
	f := s.create(t, s.regionsTable(), "", regionRows())
	if n, err := src.RowCount(ctx, f.ci); err != nil || n != int64(len(f.rows)) {
		t.Errorf("RowCount after loading %d rows = %d, %v", len(f.rows), n, err)
	}
	s.commit(t, f,
		Change{Op: Insert, Row: Row{"zulu", int64(1), int64(9001), nil}},
		Change{Op: Insert, Row: Row{"zulu", int64(2), int64(9002), "x"}},
		Change{Op: Delete, Key: []any{"amer", int64(0)}})
	if n, err := src.RowCount(ctx, f.ci); err != nil || n != int64(len(f.rows)) {
		t.Errorf("RowCount after two inserts and a delete = %d, %v; want %d", n, err, len(f.rows))
	}
}

func (s *suite) testSeekKey(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	f := s.create(t, s.regionsTable(), "", regionRows())
	rows := f.sorted(t)
	seek := func(from keyrange.Tuple, k int64, want keyrange.Tuple) {
		t.Helper()
		got, ok, err := src.SeekKey(ctx, f.ci, source.ReadCommitted, from, k)
		switch {
		case err != nil:
			t.Errorf("SeekKey(from %v, k %d): %v", []any(from), k, err)
		case want == nil && ok:
			t.Errorf("SeekKey(from %v, k %d) = %v, want ok false (fewer keys remain)", []any(from), k, []any(got))
		case want != nil && !ok:
			t.Errorf("SeekKey(from %v, k %d): ok false, want %v", []any(from), k, []any(want))
		case want != nil:
			if c, err := keyrange.CompareTuples(f.key, got, want); err != nil || c != 0 {
				t.Errorf("SeekKey(from %v, k %d) = %v, want %v (%v)", []any(from), k, []any(got), []any(want), err)
			}
		}
	}
	at := func(i int) keyrange.Tuple {
		if i >= len(rows) {
			return nil
		}
		return f.keyOf(rows[i])
	}
	for k := range len(rows) + 2 {
		seek(nil, int64(k), at(k))
	}
	for i := 0; i < len(rows); i += 3 {
		for _, k := range []int{0, 1, 4, len(rows)} {
			seek(at(i), int64(k), at(i+k))
		}
		// The same key in another case and without its trailing spaces
		// is equal under the collation.
		from := keyrange.Tuple{strings.ToUpper(strings.TrimRight(at(i)[0].(string), " ")), at(i)[1]}
		seek(from, 0, at(i))
		// A key between two stored ones: the next stored one.
		between := keyrange.Tuple{at(i)[0], at(i)[1].(int64) + 5}
		seek(between, 0, at(i+1))
	}
}

func (s *suite) testReadRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, mk := range []struct {
		name  string
		table func() Table
		rows  func() []Row
	}{
		{"int-key", s.ordersTable, orderRows},
		{"composite-ci-key", s.regionsTable, regionRows},
	} {
		t.Run(mk.name, func(t *testing.T) {
			f := s.create(t, mk.table(), "", mk.rows())
			want, err := source.ArrowSchema(f.ci.Columns)
			if err != nil {
				t.Fatalf("ArrowSchema(%q columns): %v", f.instance, err)
			}
			whole := s.read(t, f, keyrange.Range{}, 0, want)
			if len(whole) != len(f.rows) {
				t.Errorf("ReadRange of the whole table returned %d rows, want %d", len(whole), len(f.rows))
			}
			sorted := f.sorted(t)
			for c := range 12 {
				ranges := keyrange.FromBounds(f.randomBounds(t, r, sorted, c))
				s.checkRanges(t, f, ranges, want, 1+r.IntN(5), c%2 == 1)
			}
			// After changes, a read sees the committed rows.
			s.commit(t, f, f.someChanges(sorted)...)
			s.checkRanges(t, f, keyrange.FromBounds(f.randomBounds(t, r, f.sorted(t), 3)), want, 2, false)
			s.checkCanceled(t, f)
		})
	}
}

// testSplitColumn: a capture instance lists its table's indexes; split on
// a nullable column of a non-unique index whose values repeat (and compare
// equal across case and trailing spaces under the column's collation),
// SeekKey returns the smallest key at or above the (k+1)-th at or after
// from and above from (the contract for a key that is not unique), and
// ranges cut at such bounds read every row exactly once, NULLs in the
// first; IntKeyBounds of an integer split column is its MIN and MAX.
func (s *suite) testSplitColumn(t *testing.T) {
	ctx := t.Context()
	src := s.h.Source
	tb := Table{Schema: "dbo", Name: s.newName("splits"), Key: []string{"id"},
		Columns: []Column{{Name: "id", Type: "bigint"}, {Name: "grp", Type: "varchar(10)", Collation: "Latin1_General_CI_AS", Nullable: true},
			{Name: "n", Type: "int", Nullable: true}},
		Indexes: []Index{{Name: "IX_" + s.h.Prefix + "grp", Columns: []string{"grp"}}, {Name: "IX_" + s.h.Prefix + "n", Columns: []string{"n", "grp"}}}}
	groups := []any{nil, "a", "A ", "b", "B", "c", "d  ", "D"}
	var rows []Row
	for i := range 64 {
		var n any
		if i%5 != 0 {
			n = int64(i%7 - 3)
		}
		rows = append(rows, Row{int64(i*7 - 100), groups[(i*i+i/3)%len(groups)], n})
	}
	f := s.create(t, tb, "", rows)
	found := 0
	for _, ix := range f.ci.Indexes {
		if ix.Name == tb.Indexes[0].Name || ix.Name == tb.Indexes[1].Name {
			found++
			if ix.Unique || ix.Clustered {
				t.Errorf("index %s described as unique %v, clustered %v: it is neither", ix.Name, ix.Unique, ix.Clustered)
			}
		}
	}
	if found != 2 {
		t.Fatalf("capture instance %q lists indexes %+v: want %s and %s among them", f.instance, f.ci.Indexes, tb.Indexes[0].Name, tb.Indexes[1].Name)
	}
	schema, err := source.ArrowSchema(f.ci.Columns)
	if err != nil {
		t.Fatal(err)
	}
	for j, col := range []string{"grp", "n"} {
		split, err := f.ci.SplitOn(col)
		if err != nil {
			t.Fatalf("SplitOn(%q): %v", col, err)
		}
		if split.UniqueKey() {
			t.Fatalf("SplitOn(%q) claims a unique key", col)
		}
		sf := *f
		sf.ci, sf.keyIdx = split, []int{1 + j}
		if sf.key, err = split.KeyColumns(); err != nil {
			t.Fatal(err)
		}
		kc := sf.key[0]
		cmpv := func(a, b any) int {
			c, err := keyrange.Compare(kc, a, b)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		var vals []any
		for _, r := range rows {
			vals = append(vals, r[1+j])
		}
		slices.SortStableFunc(vals, cmpv)
		oracle := func(from keyrange.Tuple, k int) (any, bool) {
			var at []any
			for _, v := range vals {
				if from == nil || cmpv(v, from[0]) >= 0 {
					at = append(at, v)
				}
			}
			if len(at) <= k {
				return nil, false
			}
			var lo any
			if from != nil {
				lo = from[0]
			}
			for _, w := range vals {
				if cmpv(w, at[k]) >= 0 && cmpv(w, lo) > 0 {
					return w, true
				}
			}
			return nil, false
		}
		froms := []keyrange.Tuple{nil, {nil}}
		for _, v := range vals {
			if v != nil {
				froms = append(froms, keyrange.Tuple{v})
			}
		}
		for i, from := range froms {
			if i > 2 && i%4 != 0 {
				continue
			}
			for _, k := range []int{0, 1, 3, 9, 30, len(rows)} {
				got, ok, err := src.SeekKey(ctx, split, source.ReadCommitted, from, int64(k))
				want, wok := oracle(from, k)
				switch {
				case err != nil:
					t.Errorf("split on %s: SeekKey(from %v, %d): %v", col, []any(from), k, err)
				case ok != wok:
					t.Errorf("split on %s: SeekKey(from %v, %d) ok %v (%v), want %v (%v)", col, []any(from), k, ok, []any(got), wok, want)
				case ok && cmpv(got[0], want) != 0:
					t.Errorf("split on %s: SeekKey(from %v, %d) = %v, want %v", col, []any(from), k, []any(got), want)
				}
			}
		}
		for _, parts := range []int{2, 3, 6} {
			ranges, err := keyrange.NTile(ctx, seekerOf{src, split}, int64(len(rows)), parts)
			if err != nil {
				t.Fatalf("split on %s: NTile: %v", col, err)
			}
			s.checkRanges(t, &sf, ranges, schema, 5, parts == 3)
			for _, rg := range ranges[1:] {
				for id, r := range sf.read(t, s, rg, schema) {
					if r[1+j] == nil {
						t.Errorf("split on %s: row id %d with a NULL %s read by %s, not the first range", col, id, col, rg)
					}
				}
			}
		}
	}
	n, _ := f.ci.SplitOn("n")
	lo, hi, ok, err := src.IntKeyBounds(ctx, n)
	if err != nil || !ok || lo != -3 || hi != 3 {
		t.Errorf("IntKeyBounds split on n = %d, %d, %v, %v; want -3, 3", lo, hi, ok, err)
	}
}

// seekerOf adapts a source and capture instance to keyrange.Seeker.
type seekerOf struct {
	src source.Source
	ci  *source.CaptureInstance
}

func (k seekerOf) SeekKey(ctx context.Context, from keyrange.Tuple, n int64) (keyrange.Tuple, bool, error) {
	return k.src.SeekKey(ctx, k.ci, source.ReadCommitted, from, n)
}

func (f *fixture) read(t *testing.T, s *suite, rg keyrange.Range, schema *arrow.Schema) map[int64]Row {
	t.Helper()
	return s.read(t, f, rg, 0, schema)
}

// checkCanceled reads with a canceled context: the read must fail, from
// ReadRange or from the reader's Err, and not return every row as if it
// had succeeded.
func (s *suite) checkCanceled(t *testing.T, f *fixture) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rr, err := s.h.Source.ReadRange(ctx, f.ci, keyrange.Range{}, source.ReadOptions{BatchRows: 1})
	if err != nil {
		return
	}
	defer rr.Release()
	for rr.Next() {
	}
	if rr.Err() == nil {
		t.Errorf("ReadRange(%q) with a canceled context: no error from ReadRange or the reader's Err", f.instance)
	}
}

// someChanges inserts one row, updates one and deletes one.
func (f *fixture) someChanges(sorted []Row) []Change {
	upd := slices.Clone(sorted[1])
	upd[len(upd)-1] = nil
	if f.idIdx == 0 {
		return []Change{
			{Op: Insert, Row: orderRow(1<<41, "new")},
			{Op: Update, Key: f.keyOf(sorted[1]), Row: orderRow(upd[0].(int64), "updated")},
			{Op: Delete, Key: f.keyOf(sorted[2])},
		}
	}
	return []Change{
		{Op: Insert, Row: Row{"MIDDLE", int64(5), int64(7777), "new"}},
		{Op: Update, Key: f.keyOf(sorted[1]), Row: upd},
		{Op: Delete, Key: f.keyOf(sorted[2])},
	}
}

// randomBounds returns sorted, distinct split points: stored keys, keys
// between them, and (for a string column) stored keys in another case.
func (f *fixture) randomBounds(t *testing.T, r *rand.Rand, sorted []Row, c int) []keyrange.Tuple {
	t.Helper()
	var bounds []keyrange.Tuple
	n := c % 6
	for range n {
		k := f.keyOf(sorted[r.IntN(len(sorted))])
		switch v := k[len(k)-1].(type) {
		case int64:
			if r.IntN(3) == 0 {
				k[len(k)-1] = v + 1
			}
		}
		if s, ok := k[0].(string); ok && r.IntN(2) == 0 {
			k[0] = strings.ToUpper(strings.TrimRight(s, " "))
		}
		bounds = append(bounds, k)
	}
	var err error
	slices.SortFunc(bounds, func(a, b keyrange.Tuple) int {
		c, e := keyrange.CompareTuples(f.key, a, b)
		if e != nil {
			err = e
		}
		return c
	})
	bounds = slices.CompactFunc(bounds, func(a, b keyrange.Tuple) bool {
		c, _ := keyrange.CompareTuples(f.key, a, b)
		return c == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	return bounds
}

// checkRanges reads every range (concurrently when parallel) and checks
// each returned exactly the rows it contains, so every row was read once.
func (s *suite) checkRanges(t *testing.T, f *fixture, ranges []keyrange.Range, schema *arrow.Schema, batchRows int, parallel bool) {
	t.Helper()
	got := make([]map[int64]Row, len(ranges))
	if parallel {
		var wg sync.WaitGroup
		for i, rg := range ranges {
			wg.Go(func() { got[i] = s.read(t, f, rg, batchRows, schema) })
		}
		wg.Wait()
	} else {
		for i, rg := range ranges {
			got[i] = s.read(t, f, rg, batchRows, schema)
		}
	}
	seen := map[int64]int{}
	for i, rg := range ranges {
		for id := range got[i] {
			if prev, ok := seen[id]; ok {
				t.Errorf("row id %d read by %s and by %s", id, ranges[prev], rg)
			}
			seen[id] = i
			row, ok := f.rows[id]
			if !ok {
				t.Errorf("%s returned row id %d, which the table does not hold", rg, id)
				continue
			}
			if in, err := rg.Contains(f.key, f.keyOf(row)); err != nil || !in {
				t.Errorf("%s returned row id %d, key %v, outside the range (%v)", rg, id, f.keyOf(row), err)
			}
		}
	}
	for id, row := range f.rows {
		if _, ok := seen[id]; !ok {
			t.Errorf("row id %d, key %v, was read by none of the ranges %v", id, f.keyOf(row), ranges)
		}
	}
}

// read reads one range, checking the schema, batch sizes and values, and
// returns its rows by id.
func (s *suite) read(t *testing.T, f *fixture, rg keyrange.Range, batchRows int, schema *arrow.Schema) map[int64]Row {
	rr, err := s.h.Source.ReadRange(t.Context(), f.ci, rg, source.ReadOptions{BatchRows: batchRows})
	if err != nil {
		t.Errorf("ReadRange(%q, %s): %v", f.instance, rg, err)
		return nil
	}
	defer rr.Release()
	if !rr.Schema().Equal(schema) {
		t.Errorf("ReadRange(%q, %s) schema:\n%s\nwant source.ArrowSchema(ci.Columns):\n%s", f.instance, rg, rr.Schema(), schema)
		return nil
	}
	out := map[int64]Row{}
	for rr.Next() {
		rec := rr.RecordBatch()
		if !rec.Schema().Equal(schema) {
			t.Errorf("ReadRange(%q, %s): a batch has schema %s, want %s", f.instance, rg, rec.Schema(), schema)
			return nil
		}
		if batchRows > 0 && rec.NumRows() > int64(batchRows) {
			t.Errorf("ReadRange(%q, %s, BatchRows %d): a batch of %d rows", f.instance, rg, batchRows, rec.NumRows())
		}
		for i := range int(rec.NumRows()) {
			row, err := rowAt(rec, i)
			if err != nil {
				t.Errorf("ReadRange(%q, %s): %v", f.instance, rg, err)
				return nil
			}
			id, ok := row[f.idIdx].(int64)
			if !ok {
				t.Errorf("ReadRange(%q, %s): id %v is not an integer", f.instance, rg, row[f.idIdx])
				continue
			}
			if _, dup := out[id]; dup {
				t.Errorf("ReadRange(%q, %s) returned row id %d twice", f.instance, rg, id)
			}
			out[id] = row
			if want, ok := f.rows[id]; ok {
				if d := diffRow(f.ci.Columns, want, row); d != "" {
					t.Errorf("ReadRange(%q, %s): row id %d: %s", f.instance, rg, id, d)
				}
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Errorf("ReadRange(%q, %s): reader error %v", f.instance, rg, err)
	}
	return out
}

func rowAt(rec arrow.RecordBatch, i int) (Row, error) {
	row := make(Row, rec.NumCols())
	for j := range row {
		v, err := fake.ArrowValue(rec.Column(j), i)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.Schema().Field(j).Name, err)
		}
		row[j] = v
	}
	return row, nil
}

// diffRow describes how got differs from want, "" when equal: decimals by
// value, timestamps to the microsecond, everything else exactly.
func diffRow(cols []source.Column, want, got Row) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	for j, c := range cols {
		w, g := want[j], got[j]
		if w == nil || g == nil {
			if w != g {
				return fmt.Sprintf("column %q = %v, want %v", c.Name, g, w)
			}
			continue
		}
		same := false
		switch wv := w.(type) {
		case keyrange.Decimal:
			cmp, err := keyrange.Compare(keyrange.Column{Name: c.Name, Kind: keyrange.KindDecimal}, wv, g)
			same = err == nil && cmp == 0
		case time.Time:
			gv, ok := g.(time.Time)
			same = ok && gv.Equal(wv.Truncate(time.Microsecond))
		case []byte:
			gv, ok := g.([]byte)
			same = ok && bytes.Equal(gv, wv)
		default:
			same = w == g
		}
		if !same {
			return fmt.Sprintf("column %q = %v (%T), want %v (%T)", c.Name, g, g, w, w)
		}
	}
	return ""
}

// change is one change row as ReadChanges returns it.
type change struct {
	row       Row
	op        int64
	startLSN  string
	seqval    string
	commandID any
	commitTS  time.Time
}

func (s *suite) readChanges(t *testing.T, f *fixture, from, to lsn.LSN) []change {
	t.Helper()
	rr, err := s.h.Source.ReadChanges(t.Context(), f.ci, from, to)
	if err != nil {
		t.Fatalf("ReadChanges(%q, %s, %s): %v", f.instance, from, to, err)
	}
	defer rr.Release()
	want, err := source.ChangeSchema(f.ci.Columns)
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Schema().Equal(want) {
		t.Fatalf("ReadChanges schema:\n%s\nwant source.ChangeSchema(ci.Columns):\n%s", rr.Schema(), want)
	}
	n := len(f.ci.Columns)
	var out []change
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			row, err := rowAt(rec, i)
			if err != nil {
				t.Fatalf("ReadChanges: %v", err)
			}
			c := change{row: row[:n], commandID: row[n+3]}
			c.op, _ = row[n].(int64)
			c.startLSN, _ = row[n+1].(string)
			c.seqval, _ = row[n+2].(string)
			c.commitTS, _ = row[n+4].(time.Time)
			out = append(out, c)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("ReadChanges(%q, %s, %s): reader error %v", f.instance, from, to, err)
	}
	return out
}

// compareChanges orders change rows as the contract does: (start LSN,
// command id NULL first, seqval, operation).
func compareChanges(a, b change) int {
	if c := strings.Compare(a.startLSN, b.startLSN); c != 0 {
		return c
	}
	ac, aok := a.commandID.(int64)
	bc, bok := b.commandID.(int64)
	switch {
	case aok && bok:
		if c := cmp.Compare(ac, bc); c != 0 {
			return c
		}
	case aok != bok:
		if aok {
			return 1
		}
		return -1
	}
	if c := strings.Compare(a.seqval, b.seqval); c != 0 {
		return c
	}
	return cmp.Compare(a.op, b.op)
}

func (s *suite) testReadChanges(t *testing.T) {
	ctx := t.Context()
	f := s.create(t, s.ordersTable(), "", orderRows())
	c1 := s.commit(t, f, Change{Op: Insert, Row: orderRow(100, "hundred")})
	old3 := f.rows[3]
	c2 := s.commit(t, f,
		Change{Op: Update, Key: []any{int64(3)}, Row: orderRow(3, "three, updated")},
		Change{Op: Delete, Key: []any{int64(8)}},
		Change{Op: Insert, Row: orderRow(101, "hundred and one")})
	c3 := s.commit(t, f, Change{Op: Update, Key: []any{int64(101)}, Row: orderRow(101, "101 again")})
	min, ok, err := s.h.Source.MinLSN(ctx, f.instance)
	if err != nil || !ok {
		t.Fatalf("MinLSN(%q) after commits = %s, %v, %v", f.instance, min, ok, err)
	}
	all := s.readChanges(t, f, min, c3)
	type want struct {
		lsn lsn.LSN
		op  int64
		row Row
	}
	wants := []want{
		{c1, 2, orderRow(100, "hundred")},
		{c2, 3, old3}, {c2, 4, orderRow(3, "three, updated")},
		{c2, 1, nil}, // id 8's deleted row
		{c2, 2, orderRow(101, "hundred and one")},
		{c3, 3, orderRow(101, "hundred and one")}, {c3, 4, orderRow(101, "101 again")},
	}
	if len(all) != len(wants) {
		t.Fatalf("ReadChanges(%s, %s) returned %d changes, want %d", min, c3, len(all), len(wants))
	}
	for i := 1; i < len(all); i++ {
		if compareChanges(all[i-1], all[i]) > 0 {
			t.Errorf("ReadChanges: change %d (%s op %d) sorts after change %d (%s op %d): want (start LSN, command id, seqval, operation) order", i-1, all[i-1].startLSN, all[i-1].op, i, all[i].startLSN, all[i].op)
		}
	}
	for i, w := range wants {
		g := all[i]
		if g.startLSN != w.lsn.String() || g.op != w.op {
			t.Errorf("change %d: LSN %s op %d, want %s op %d", i, g.startLSN, g.op, w.lsn, w.op)
		}
		if w.row != nil {
			if d := diffRow(f.ci.Columns, w.row, g.row); d != "" {
				t.Errorf("change %d (%s op %d): %s", i, g.startLSN, g.op, d)
			}
		} else if id, _ := g.row[0].(int64); id != 8 {
			t.Errorf("change %d: the delete's row has id %v, want 8", i, g.row[0])
		}
		if ts, err := s.h.Source.LSNTime(ctx, w.lsn); err == nil && !g.commitTS.Equal(ts) {
			t.Errorf("change %d: _commit_ts %s, want LSNTime(%s) = %s", i, g.commitTS, w.lsn, ts)
		}
		if _, err := lsn.Parse(g.seqval); err != nil {
			t.Errorf("change %d: _seqval %q: %v", i, g.seqval, err)
		}
	}
	// An update's before and after images share their seqval.
	for _, p := range [][2]int{{1, 2}, {5, 6}} {
		if all[p[0]].seqval != all[p[1]].seqval {
			t.Errorf("update images %d and %d: seqvals %s and %s, want equal", p[0], p[1], all[p[0]].seqval, all[p[1]].seqval)
		}
	}
	// One commit's interval holds exactly its changes.
	if only := s.readChanges(t, f, c2, c2); len(only) != 4 {
		t.Errorf("ReadChanges(%s, %s) returned %d changes, want commit %s's 4", c2, c2, len(only), c2)
	}
	maxLSN := s.maxLSN(t, c3)
	if tail := s.readChanges(t, f, c2, maxLSN); len(tail) != 6 {
		t.Errorf("ReadChanges(%s, MaxLSN %s) returned %d changes, want 6", c2, maxLSN, len(tail))
	}
	// from > to is an empty reader, not an error.
	if none := s.readChanges(t, f, c3, c1); len(none) != 0 {
		t.Errorf("ReadChanges(%s, %s), an empty interval, returned %d changes", c3, c1, len(none))
	}
	// Above the max LSN the read is refused, never cut short: a caller
	// would take the LSNs above it as read.
	var behind *source.ReplicaBehindError
	if rr, err := s.h.Source.ReadChanges(ctx, f.ci, c2, lsn.Max); !errors.As(err, &behind) || behind.Have != maxLSN {
		if rr != nil {
			rr.Release()
		}
		t.Errorf("ReadChanges(%s, %s) above the max LSN %s: %v, want a *source.ReplicaBehindError having the max LSN", c2, lsn.Max, maxLSN, err)
	}
}

func (s *suite) testDataLoss(t *testing.T) {
	ctx := t.Context()
	f := s.create(t, s.ordersTable(), "", orderRows())
	c1 := s.commit(t, f, Change{Op: Insert, Row: orderRow(100, "x")})
	c2 := s.commit(t, f, Change{Op: Insert, Row: orderRow(101, "y")})
	below, err := f.ci.StartLSN.Prev()
	if err != nil {
		t.Fatal(err)
	}
	s.wantDataLoss(t, f, below, c2)
	if s.h.Cleanup == nil {
		t.Log("Harness.Cleanup is nil: retention cleanup not checked")
		return
	}
	if err := s.h.Cleanup(ctx, f.instance, c2); err != nil {
		t.Fatalf("Harness.Cleanup(%q, %s): %v", f.instance, c2, err)
	}
	min, ok, err := s.h.Source.MinLSN(ctx, f.instance)
	if err != nil || !ok || min.Less(c2) {
		t.Errorf("MinLSN(%q) after cleanup to %s = %s, %v, %v; want at least %s", f.instance, c2, min, ok, err, c2)
	}
	s.wantDataLoss(t, f, c1, c2)
	if rest := s.readChanges(t, f, c2, c2); len(rest) != 1 {
		t.Errorf("ReadChanges(%s, %s) after cleanup to %s returned %d changes, want 1", c2, c2, c2, len(rest))
	}
}

func (s *suite) wantDataLoss(t *testing.T, f *fixture, from, to lsn.LSN) {
	t.Helper()
	rr, err := s.h.Source.ReadChanges(t.Context(), f.ci, from, to)
	if err == nil {
		rr.Release()
		t.Errorf("ReadChanges(%q, from %s below the minimum LSN): no error, want a *source.DataLossError", f.instance, from)
		return
	}
	var dl *source.DataLossError
	if !errors.Is(err, source.ErrDataLoss) || !errors.As(err, &dl) {
		t.Errorf("ReadChanges(%q, from %s below the minimum LSN) = %v, want a *source.DataLossError wrapping source.ErrDataLoss", f.instance, from, err)
		return
	}
	if dl.Requested != from || !from.Less(dl.MinLSN) {
		t.Errorf("DataLossError = %+v: want Requested %s and a MinLSN above it", dl, from)
	}
}

// FakeHarness drives a fake.DB: its hooks create tables, commit and clean
// up through the fake's own API, and src is the source under test: the DB
// itself, a wrapper of it, or a source that reads it another way (such as
// source/sqlserver through a TDS front end of the fake). The fake holds
// names that differ only in case, as a case-sensitive database does.
func FakeHarness(db *fake.DB, src source.Source) Harness {
	return Harness{
		Source: src,
		CreateTable: func(ctx context.Context, tb Table, instance string, rows []Row) error {
			def := fake.TableDef{Schema: tb.Schema, Name: tb.Name, Key: tb.Key}
			for _, ix := range tb.Indexes {
				def.Indexes = append(def.Indexes, fake.IndexDef{Name: ix.Name, Columns: ix.Columns})
			}
			for _, c := range tb.Columns {
				def.Columns = append(def.Columns, fake.ColumnDef{Name: c.Name, Type: c.Type, Collation: c.Collation, Nullable: c.Nullable})
			}
			if err := db.CreateTable(def); err != nil {
				return err
			}
			if len(rows) > 0 {
				load := make([]fake.Row, len(rows))
				for i, r := range rows {
					load[i] = fake.Row(r)
				}
				if _, err := db.Load(tb.Schema, tb.Name, load...); err != nil {
					return err
				}
			}
			_, err := db.EnableCDC(tb.Schema, tb.Name, instance)
			return err
		},
		Commit: func(ctx context.Context, tb Table, changes []Change) (lsn.LSN, error) {
			tx := db.Begin()
			for _, c := range changes {
				var err error
				switch c.Op {
				case Insert:
					err = tx.Insert(tb.Schema, tb.Name, fake.Row(c.Row))
				case Update:
					err = tx.Update(tb.Schema, tb.Name, c.Key, fake.Row(c.Row))
				case Delete:
					err = tx.Delete(tb.Schema, tb.Name, c.Key)
				}
				if err != nil {
					tx.Rollback()
					return lsn.LSN{}, err
				}
			}
			return tx.Commit()
		},
		Cleanup: func(ctx context.Context, instance string, low lsn.LSN) error {
			return db.Cleanup(instance, low)
		},
		CaseSensitive: true,
	}
}
