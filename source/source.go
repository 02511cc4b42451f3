// Package source defines what a snapshot needs from a CDC database: the
// Source interface, the capture instance and its columns, and the errors a
// source returns. source/sqlserver implements it on SQL Server; package
// fake implements it in memory, behaving like SQL Server where it matters.
package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
)

// ErrNotFound means the capture instance does not exist (or the login
// cannot see it).
var ErrNotFound = errors.New("capture instance not found")

// ErrDataLoss means changes were asked for below the capture instance's
// minimum LSN: retention cleanup has purged them (SQL Server error 313).
// Errors that wrap it are *DataLossError.
var ErrDataLoss = errors.New("changes purged by CDC retention (data loss)")

// NotFoundError names the capture instance asked for and those that exist.
// It wraps ErrNotFound.
type NotFoundError struct {
	Name      string
	Available []string
}

// Error implements error.
func (e *NotFoundError) Error() string {
	if len(e.Available) == 0 {
		return fmt.Sprintf("capture instance %q not found: the database has no capture instances", e.Name)
	}
	return fmt.Sprintf("capture instance %q not found; the database has: %s", e.Name, strings.Join(e.Available, ", "))
}

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// AmbiguousError means a name matches two or more capture instances
// ignoring case, and none exactly (a case-sensitive database can hold
// dbo_Orders and dbo_ORDERS).
type AmbiguousError struct {
	Name    string
	Matches []string
}

// Error implements error.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("capture instance %q is ambiguous: it matches %s ignoring case", e.Name, strings.Join(e.Matches, " and "))
}

// AccessError means a capture instance the source described cannot be read
// now: SQL Server answers sys.fn_cdc_get_min_lsn with 0x00… for an
// instance that does not exist (dropped, sys.sp_cdc_disable_table), for a
// caller who may not read its changes (not in its gating role, or without
// SELECT on a captured column), and, as the seed implementation reports,
// for an instance enabled so recently that the capture job has not
// processed its start yet; it does not say which (FACTS.md F07). It wraps
// ErrNotFound.
type AccessError struct {
	CaptureInstance string
	// Reason says what the source saw.
	Reason string
}

// Error implements error.
func (e *AccessError) Error() string {
	return fmt.Sprintf("capture instance %q cannot be read: %s (dropped; or the login may not read its changes; or enabled so recently that the capture job has not processed its start: then retry once it has run)", e.CaptureInstance, e.Reason)
}

// Unwrap returns ErrNotFound.
func (e *AccessError) Unwrap() error { return ErrNotFound }

// DataLossError reports a change read from below the minimum LSN. It wraps
// ErrDataLoss.
type DataLossError struct {
	CaptureInstance string
	// Requested is the first LSN asked for.
	Requested lsn.LSN
	// MinLSN is the capture instance's minimum LSN now.
	MinLSN lsn.LSN
}

// Error implements error.
func (e *DataLossError) Error() string {
	return fmt.Sprintf("capture instance %q: changes from %s requested but the minimum LSN is %s: %v", e.CaptureInstance, e.Requested, e.MinLSN, ErrDataLoss)
}

// Unwrap returns ErrDataLoss.
func (e *DataLossError) Unwrap() error { return ErrDataLoss }

// Resolve picks the capture instance called name among names, as SQL
// Server's lookups do under a case-insensitive database collation: the exact
// name first, else the one name equal to it ignoring case. None is a
// *NotFoundError, two or more an *AmbiguousError.
func Resolve(name string, names []string) (string, error) {
	var folded []string
	for _, n := range names {
		if n == name {
			return n, nil
		}
		if strings.EqualFold(n, name) {
			folded = append(folded, n)
		}
	}
	switch len(folded) {
	case 1:
		return folded[0], nil
	case 0:
		return "", &NotFoundError{Name: name, Available: names}
	default:
		return "", &AmbiguousError{Name: name, Matches: folded}
	}
}

// Isolation is the isolation level a snapshot reads under. NOLOCK (READ
// UNCOMMITTED) is deliberately absent: a dirty read can keep a row that a
// rollback removes, and no change row would ever correct it.
type Isolation int

const (
	// ReadCommitted is the default.
	ReadCommitted Isolation = iota
	// Snapshot reads a transactionally consistent view (the database must
	// allow snapshot isolation).
	Snapshot
)

// String implements fmt.Stringer.
func (i Isolation) String() string {
	if i == Snapshot {
		return "SNAPSHOT"
	}
	return "READ COMMITTED"
}

// CaptureInstance describes one CDC capture instance.
type CaptureInstance struct {
	// Name is the instance's name as the database stores it.
	Name string `json:"name"`
	// SourceSchema and SourceTable name the captured table.
	SourceSchema string `json:"source_schema"`
	SourceTable  string `json:"source_table"`
	// StartLSN is the instance's first LSN (start_lsn of
	// sys.sp_cdc_help_change_data_capture): zero while it is NULL ("the
	// low endpoint has not been established"), raised by change data
	// cleanup (FACTS.md F02, F20, F66). It orders no two instances: see
	// CreateDate.
	StartLSN lsn.LSN `json:"start_lsn"`
	// CreateDate is when the instance was enabled (create_date of
	// sys.sp_cdc_help_change_data_capture), zero when the source does not
	// tell: of a table's two instances the one created later is the newer
	// (FACTS.md F66).
	CreateDate time.Time `json:"create_date,omitzero"`
	// ObjectID is the object id of the captured table (source_object_id),
	// zero when the source does not tell. CDC follows the object, not its
	// name: a table renamed with sp_rename keeps its id and its capture
	// instances, and another table may take its old name (FACTS.md F93).
	// A source reads the table by name and returns no row of a table
	// whose id is another.
	ObjectID int64 `json:"source_object_id,omitempty"`
	// Columns are the captured columns in ordinal order.
	Columns []Column `json:"columns"`
	// Key names the columns of the instance's unique index, in index order
	// (index_column_list); empty when the instance has none. A copy made
	// by SplitOn has one column of another index instead, unique or not.
	Key []string `json:"key"`
	// KeyIndex describes the index Key comes from, when the source knows
	// it.
	KeyIndex *Index `json:"key_index,omitempty"`
	// Indexes are the table's B-tree indexes a range read can seek on
	// (sys.indexes types 1 and 2, neither disabled, hypothetical nor
	// filtered), clustered first, then by name; nil when the source does
	// not know them (a login that may not see the table's metadata, or a
	// plan written before indexes were described). See SplitOn.
	Indexes []Index `json:"indexes,omitempty"`
	// Heap is true when the source saw that the table has no clustered
	// index (sys.indexes index_id 0): its rows have no order to seek
	// on, so a range read of a nonclustered index costs a lookup per row.
	// False also when the source does not know.
	Heap bool `json:"heap,omitempty"`
}

// Index describes one index of a capture instance's table.
type Index struct {
	// Name is the index's name (sys.indexes.name; index_name of
	// sys.sp_cdc_help_change_data_capture for the instance's own).
	Name string `json:"name"`
	// Columns are the index's key columns in key order (not its included
	// columns); nil when the source did not read them.
	Columns []string `json:"columns,omitempty"`
	// Unique is true for a unique index, primary key or unique
	// constraint. The index of a capture instance's own key is always
	// unique; a split column's index need not be (see SplitOn and
	// CaptureInstance.UniqueKey).
	Unique bool `json:"unique"`
	// Clustered is true for the table's clustered index: a key range of it
	// is one seek that reads only its rows. A range of a nonclustered index
	// is a seek plus a key lookup per row, or a scan of the table.
	Clustered bool `json:"clustered"`
}

// ErrNoSplitIndex means a split column asked for is not the leading
// column of any index the source described (see SplitOn).
var ErrNoSplitIndex = errors.New("no index leads with the split column")

// UniqueKey reports whether ci's key identifies one row: true unless
// KeyIndex says otherwise, because the index is not unique or because the
// key is only a prefix of its columns (a SplitOn copy). Sources seek on a
// key that is not unique so that ranges stay complementary and every seek
// moves past the duplicates of its start (see Source.SeekKey).
func (ci *CaptureInstance) UniqueKey() bool {
	ix := ci.KeyIndex
	return ix == nil || ix.Unique && len(ci.Key) >= len(ix.Columns)
}

// SplitOn returns a copy of ci whose key is the one column called column
// and whose KeyIndex is the index that seeks on it: among Indexes whose
// first key column is column, the clustered one, else the one with the
// fewest columns, a unique one first (then by name). The copy reads, plans and
// seeks by that column with the Source methods as the original does by its
// key; keys of a non-unique column repeat, and a source's ranges over it
// still hold every row exactly once (NULLs in the first). The column must
// be captured and not computed (CDC writes NULL for a computed column);
// no index leading with it is an error wrapping ErrNoSplitIndex (a range
// of an unindexed column scans the whole table per range).
func (ci *CaptureInstance) SplitOn(column string) (*CaptureInstance, error) {
	c, ok := ci.Column(column)
	if !ok {
		return nil, fmt.Errorf("capture instance %q: split column %q is not captured", ci.Name, column)
	}
	if c.Computed {
		return nil, fmt.Errorf("capture instance %q: split column %q is computed: CDC writes NULL for it in change rows", ci.Name, column)
	}
	best := -1
	better := func(a, b Index) bool {
		if a.Clustered != b.Clustered {
			return a.Clustered // no key lookup per row
		}
		if len(a.Columns) != len(b.Columns) {
			return len(a.Columns) < len(b.Columns) // narrower entries
		}
		if a.Unique != b.Unique {
			return a.Unique
		}
		return a.Name < b.Name
	}
	for i, ix := range ci.Indexes {
		if len(ix.Columns) == 0 || ix.Columns[0] != column {
			continue
		}
		if best < 0 || better(ix, ci.Indexes[best]) {
			best = i
		}
	}
	if best < 0 {
		var lead []string
		for _, ix := range ci.Indexes {
			if len(ix.Columns) > 0 {
				lead = append(lead, ix.Columns[0])
			}
		}
		return nil, fmt.Errorf("capture instance %q: split column %q: %w (indexes lead with: %s)", ci.Name, column, ErrNoSplitIndex, strings.Join(lead, ", "))
	}
	ix := ci.Indexes[best]
	ix.Columns = slices.Clone(ix.Columns)
	cp := *ci
	cp.Key = []string{column}
	cp.KeyIndex = &ix
	return &cp, nil
}

// KeyColumns returns the key as keyrange needs it.
func (ci *CaptureInstance) KeyColumns() ([]keyrange.Column, error) {
	out := make([]keyrange.Column, 0, len(ci.Key))
	for _, k := range ci.Key {
		c, ok := ci.Column(k)
		if !ok {
			return nil, fmt.Errorf("capture instance %q: key column %q is not captured", ci.Name, k)
		}
		out = append(out, c.KeyColumn())
	}
	return out, nil
}

// Column returns the captured column called name (exact match).
func (ci *CaptureInstance) Column(name string) (Column, bool) {
	for _, c := range ci.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// ReadOptions says how to read a range of the table.
type ReadOptions struct {
	// Isolation is the transaction isolation level.
	Isolation Isolation
	// BatchRows caps the rows per record batch; zero means the source's
	// default.
	BatchRows int
	// NotBefore, when not zero, is a max LSN the plan saw (the
	// sys.fn_cdc_get_max_lsn() value L0 was taken from): the read must
	// see a database at least that recent. A source whose connections can
	// land on different replicas (a readable secondary behind an
	// availability group listener with read-only routing, each replica
	// with its own redo lag) checks it on the connection that reads, and
	// returns a *ReplicaBehindError instead of a state older than the
	// plan's, whose rows the stream, starting after L0, would never bring.
	// Zero checks nothing.
	NotBefore lsn.LSN
}

// ErrTransient marks a read that failed with an error that reading again
// can get past (a deadlock victim, a lock time-out, a broken connection, a
// failover) and that the source could not get past in place: its own
// retries were spent, or it had handed out rows a read from the start would
// hand out again. Package snapshot reads such a partition (or chunk) again
// from its start, the files it wrote never committed.
var ErrTransient = errors.New("transient read error")

// ErrReplicaBehind means a read landed on a replica that has not yet
// applied the log up to the LSN the read must see (ReadOptions.NotBefore,
// or the upper bound of a change read). Errors that wrap it are
// *ReplicaBehindError; retrying later, or on another connection, can
// succeed.
var ErrReplicaBehind = errors.New("the replica read from is behind the LSN the read must reach")

// ReplicaBehindError reports a read refused because its replica's max LSN
// is below the LSN it must reach: ReadOptions.NotBefore for a range read,
// the upper bound for a change read. It wraps ErrReplicaBehind.
type ReplicaBehindError struct {
	CaptureInstance string
	// Need is the LSN the read must reach; Have is the replica's
	// sys.fn_cdc_get_max_lsn() (zero for NULL).
	Need, Have lsn.LSN
}

// Error implements error.
func (e *ReplicaBehindError) Error() string {
	return fmt.Sprintf("capture instance %q: the replica read from has max LSN %s, below %s: %v", e.CaptureInstance, e.Have, e.Need, ErrReplicaBehind)
}

// Unwrap returns ErrReplicaBehind.
func (e *ReplicaBehindError) Unwrap() error { return ErrReplicaBehind }

// Source is a CDC database as a snapshot uses it. Implementations must be
// safe for concurrent use: partitions are read in parallel.
type Source interface {
	// CaptureInstance resolves name (see Resolve) and describes the
	// instance. Errors: *NotFoundError (wrapping ErrNotFound),
	// *AmbiguousError.
	CaptureInstance(ctx context.Context, name string) (*CaptureInstance, error)

	// MaxLSN returns sys.fn_cdc_get_max_lsn(): the highest LSN of any
	// committed change captured so far.
	MaxLSN(ctx context.Context) (lsn.LSN, error)

	// MinLSN returns sys.fn_cdc_get_min_lsn(ci) and true, or false when the
	// function returns NULL, as it does for a new instance until the
	// capture job reaches its start_lsn. The zero LSN, which SQL Server
	// returns for an instance that does not exist or that the caller may
	// not read, is an *AccessError (or a *NotFoundError), never "no
	// changes yet".
	MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error)

	// LSNTime returns sys.fn_cdc_map_lsn_to_time(l) as an instant in UTC:
	// the commit time of the commit at l, the tran_end_time of l's row of
	// cdc.lsn_time_mapping, and the zero time when l is no commit's LSN
	// (the function returns NULL then: a new instance's start_lsn - 1, an
	// LSN between two commits, one the capture job has not mapped yet).
	// The max LSN is a commit's, or a row the capture job writes to mark
	// its progress in a quiet period (no transaction: tran_id 0x00), whose
	// time no documentation defines; LSNTime answers it as the function
	// does. SQL Server keeps the server's local wall clock; a source
	// converts it in the server's zone.
	LSNTime(ctx context.Context, l lsn.LSN) (time.Time, error)

	// IntKeyBounds returns MIN and MAX of the single integer key column of
	// ci's source table. ok is false when the table is empty or every key is
	// NULL.
	IntKeyBounds(ctx context.Context, ci *CaptureInstance) (min, max int64, ok bool, err error)

	// RowCount returns the table's row count from metadata (sp_spaceused):
	// cheap, and allowed to be stale.
	RowCount(ctx context.Context, ci *CaptureInstance) (int64, error)

	// SeekKey returns the key k rows after from (see keyrange.Seeker), read
	// under iso with a TOP (k + 1) per seekable piece of [from, +inf).
	// When keys repeat (ci.UniqueKey false) the (k+1)-th key v can equal
	// from, and a bound equal to from would plan an empty range and make
	// no progress: SeekKey then returns the smallest key that is both at
	// or above v and above from (a nil from counts as NULL, so the bound
	// is never NULL and NULL keys stay in the first range), and ok is false
	// when there is none. Ranges cut at such bounds still hold every row
	// exactly once; a run of one value longer than k stays in one range.
	SeekKey(ctx context.Context, ci *CaptureInstance, iso Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error)

	// ReadRange streams the current rows of ci's source table whose key lies
	// in r, as the UNION ALL of r's seekable pieces (keyrange.Pieces), in
	// record batches of the captured columns (ArrowSchema of ci.Columns).
	// The caller releases the reader; an error during the read is its Err.
	// package snapshot reads ahead: it calls the reader's Next (and Err)
	// from a goroutine other than ReadRange's caller, one call at a time,
	// after reading Schema once; batches must stay valid while retained.
	// It cancels ctx when it releases a reader before its end, so the read
	// stops; a reader that ran to its end is released with ctx live.
	ReadRange(ctx context.Context, ci *CaptureInstance, r keyrange.Range, opts ReadOptions) (array.RecordReader, error)

	// ReadChanges streams the changes of ci with from <= __$start_lsn <= to,
	// in ChangeSchema(ci.Columns), ordered by (__$start_lsn, __$command_id,
	// __$seqval, __$operation) (a source that cannot read __$command_id,
	// such as cdc.fn_cdc_get_all_changes_<ci>, leaves it NULL and orders by
	// the rest), with updates as before (3) and after (4) images. from below
	// the instance's minimum LSN is a *DataLossError, as is a minimum LSN
	// that cleanup raised above from while the changes were read; an
	// instance the caller may no longer read is an *AccessError; an empty
	// interval (from > to), or an instance whose minimum LSN is still NULL,
	// is an empty reader. The read covers all of [from, to] or fails: a to
	// above the max LSN of what the read reaches (a readable secondary
	// behind the one to was taken from, an LSN not captured yet) is a
	// *ReplicaBehindError whose Have says how far it could read, never a
	// shorter read.
	ReadChanges(ctx context.Context, ci *CaptureInstance, from, to lsn.LSN) (array.RecordReader, error)
}
