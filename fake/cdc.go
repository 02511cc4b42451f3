package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// MaxInstancesPerTable is SQL Server's limit of capture instances per table.
const MaxInstancesPerTable = 2

// instance is a capture instance and its change table.
type instance struct {
	name     string
	t        *table
	ids      []int           // captured columns' column_ids, fixed for the instance's life (FACTS.md F59)
	cols     []source.Column // captured columns as the instance reports them; replaced, never changed in place
	ct       []source.Column // their types in the change table (F64); replaced, never changed in place
	key      []string
	keyIndex *index // @index_name's index; nil: the primary key
	start    lsn.LSN
	min      lsn.LSN
	changes  []*change    // in (start_lsn, command_id, seqval, operation) order; values in ct's types
	ddl      []source.DDL // the DDL history (F65)
	denied   bool         // the login may not read the instance's changes
	noCT     bool         // the login may not read the instance's change table (DenyChangeTable)
	created  time.Time    // create_date: when it was enabled
	// pending are the type changes of captured columns (ALTER COLUMN) the
	// capture job has not reached, in LSN order: the change table's
	// column takes the new type when the job reaches the DDL (F62).
	pending []retype
}

// retype is an ALTER COLUMN of a captured column, pending until the
// capture job reaches it.
type retype struct {
	lsn lsn.LSN
	i   int           // the column's position among the instance's
	ct  source.Column // its new change-table type
	rep source.Column // its new reported type
	cmd string
}

// ctNow returns the change table's column types as the capture job
// writes a change committed now: with every pending type change applied,
// since the job applies a DDL before the changes logged after it.
func (in *instance) ctNow() []source.Column {
	if len(in.pending) == 0 {
		return in.ct
	}
	ct := slices.Clone(in.ct)
	for _, r := range in.pending {
		ct[r.i] = r.ct
	}
	return ct
}

// CaptureError is one row of sys.dm_cdc_errors: an error the capture
// job's log scan met (FACTS.md F62).
type CaptureError struct {
	// Number is the error's number: 2628 (string or binary data would be
	// truncated) or 8115 (arithmetic overflow).
	Number int
	// Message says what failed.
	Message string
	// LSN is the DDL the scan could not get past.
	LSN lsn.LSN
}

// EnableCDC creates a capture instance on a table, as
// sys.sp_cdc_enable_table does: it captures the named columns (all when
// none are named), its key is the table's primary key, and its start_lsn is
// the LSN the next commit will get. An empty name means "<schema>_<table>".
// A table holds at most two instances; names must differ exactly (two that
// differ only in case model a case-sensitive database).
func (db *DB) EnableCDC(schema, name, instanceName string, columns ...string) (*source.CaptureInstance, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return nil, err
	}
	in, err := db.newInstanceLocked(t, instanceName, columns)
	if err != nil {
		return nil, err
	}
	db.addInstanceLocked(in)
	return in.describe(db), nil
}

// EnableCDCOn is EnableCDC with sys.sp_cdc_enable_table's @index_name:
// the instance's key is the columns of the table's unique index indexName,
// which "takes precedence over any defined primary key columns" (FACTS.md
// F18).
func (db *DB) EnableCDCOn(schema, name, instanceName, indexName string, columns ...string) (*source.CaptureInstance, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.tableLocked(schema, name)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(t.indexes, func(ix *index) bool { return ix.name == indexName })
	if i < 0 || !t.indexes[i].unique {
		return nil, fmt.Errorf("fake: enable CDC on %s: @index_name %q names no unique index of the table", t, indexName)
	}
	in, err := db.newInstanceLocked(t, instanceName, columns)
	if err != nil {
		return nil, err
	}
	in.key, in.keyIndex = slices.Clone(t.indexes[i].colNames), t.indexes[i]
	for _, k := range in.key {
		if j := t.columnIndex(k); j < 0 || !slices.Contains(in.ids, t.ids[j]) {
			return nil, fmt.Errorf("fake: enable CDC on %s: index column %q is not captured", t, k)
		}
	}
	db.addInstanceLocked(in)
	return in.describe(db), nil
}

// newInstanceLocked checks and builds, but does not add, a capture instance
// of t as EnableCDC describes; db.mu must be held.
func (db *DB) newInstanceLocked(t *table, instanceName string, columns []string) (*instance, error) {
	if instanceName == "" {
		instanceName = t.schema + "_" + t.name
	}
	for _, in := range db.instances {
		if in.name == instanceName {
			return nil, fmt.Errorf("fake: enable CDC on %s: capture instance %q exists (on %s)", t, instanceName, in.t)
		}
	}
	if len(t.instances) >= MaxInstancesPerTable {
		return nil, fmt.Errorf("fake: enable CDC on %s as %q: the table already has %d capture instances (%s and %s)",
			t, instanceName, len(t.instances), t.instances[0].name, t.instances[1].name)
	}
	in := &instance{name: instanceName, t: t}
	if !t.keyless {
		in.key = append([]string(nil), t.keyNames...)
	}
	var idx []int
	if len(columns) == 0 {
		for i := range t.cols {
			idx = append(idx, i)
		}
	}
	for _, c := range columns {
		j := -1
		for i, tc := range t.cols {
			if tc.Name == c || j < 0 && strings.EqualFold(tc.Name, c) {
				j = i
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("fake: enable CDC on %s: captured column %q is not a column of the table", t, c)
		}
		if slices.Contains(idx, j) {
			return nil, fmt.Errorf("fake: enable CDC on %s: column %q listed twice", t, c)
		}
		idx = append(idx, j)
	}
	sort.Ints(idx)
	for _, j := range idx {
		c := t.cols[j]
		if t.hidden[j] {
			c.Collation = ""
		}
		ct := changeTableType(c, j == t.identity)
		if db.opts.ReportChangeTableTypes {
			c = ct
		}
		in.ids = append(in.ids, t.ids[j])
		in.cols = append(in.cols, c)
		in.ct = append(in.ct, ct)
	}
	return in, nil
}

// addInstanceLocked enables in from the next commit on; db.mu must be held
// for writing.
func (db *DB) addInstanceLocked(in *instance) {
	in.start, in.min = db.next, db.next
	// create_date is a datetime (1/300 s): instances enabled in one tick
	// of the fake clock still get dates apart.
	in.created = db.clock.Truncate(time.Millisecond)
	if !db.lastCreated.Before(in.created) {
		in.created = db.lastCreated.Add(10 * time.Millisecond)
	}
	db.lastCreated = in.created
	in.t.instances = append(in.t.instances, in)
	db.instances = append(db.instances, in)
}

// DisableCDC drops a capture instance and its change table, as
// sys.sp_cdc_disable_table does. The name resolves as CaptureInstance's.
func (db *DB) DisableCDC(instanceName string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	in, err := db.instanceLocked(instanceName)
	if err != nil {
		return err
	}
	drop := func(list []*instance) []*instance {
		out := list[:0:0]
		for _, x := range list {
			if x != in {
				out = append(out, x)
			}
		}
		return out
	}
	in.t.instances = drop(in.t.instances)
	db.instances = drop(db.instances)
	return nil
}

// describe describes in as SQL Server does (db.mu held): its captured
// columns with the types it reports and their column_ids (FACTS.md F59),
// the table's nullability where the table still has the column, Dropped
// where it does not (F60, F61).
//
// A column whose table type is not the captured one is CastOnRead, as
// source/sqlserver reads it; unless that is an identity's or a
// rowversion's change-table type (F64), the table's type is its
// PendingType: an ALTER COLUMN the capture job has not reached (F62).
func (in *instance) describe(db *DB) *source.CaptureInstance {
	cols := append([]source.Column(nil), in.cols...)
	for i := range cols {
		cols[i].ID = in.ids[i]
		j := in.t.lay.position(in.ids[i])
		if j < 0 {
			cols[i].Dropped, cols[i].Nullable = true, true
			continue
		}
		tc := in.t.cols[j]
		cols[i].Nullable = tc.Nullable
		same := tc.Declared() == cols[i].Declared()
		cols[i].CastOnRead = j == in.t.identity || !same
		if !same && j != in.t.identity && !isRowversion(tc) {
			cols[i].PendingType = tc.Declared()
		}
	}
	ci := &source.CaptureInstance{
		Name:         in.name,
		SourceSchema: in.t.schema,
		SourceTable:  in.t.name,
		StartLSN:     in.startLSN(db),
		CreateDate:   in.created,
		ObjectID:     in.t.objectID,
		Columns:      cols,
		Key:          append([]string(nil), in.key...),
	}
	ci.Indexes, ci.Heap = in.t.describeIndexes()
	switch {
	case in.keyIndex != nil:
		ix := in.keyIndex.describe()
		ci.KeyIndex = &ix
	case in.key != nil && in.t.pk != nil:
		ix := in.t.pk.describe()
		ci.KeyIndex = &ix
	}
	return ci
}

// startLSN is the instance's start_lsn as sys.sp_cdc_help_change_data_capture
// shows it: its first LSN, raised by cleanup (FACTS.md F20); zero (NULL)
// until the capture job has passed it when Options.NullStartLSN asks so
// (F02). db.mu must be held.
func (in *instance) startLSN(db *DB) lsn.LSN {
	if db.opts.NullStartLSN && db.captured.Less(in.start) {
		return lsn.LSN{}
	}
	return in.min
}

// instanceLocked resolves name among every capture instance.
func (db *DB) instanceLocked(name string) (*instance, error) {
	return db.resolveLocked(name, false)
}

// resolveLocked resolves name among the capture instances, only those the
// login may read when visible is set (what sys.sp_cdc_help_change_data_capture
// lists: FACTS.md F01).
func (db *DB) resolveLocked(name string, visible bool) (*instance, error) {
	var names []string
	for _, in := range db.instances {
		if !visible || !in.denied {
			names = append(names, in.name)
		}
	}
	got, err := source.Resolve(name, names)
	if err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	for _, in := range db.instances {
		if in.name == got {
			return in, nil
		}
	}
	return nil, fmt.Errorf("fake: capture instance %q vanished", got)
}

// readableLocked resolves a capture instance whose changes the caller
// reads: one that does not exist, or that the login may not read, is what
// sys.fn_cdc_get_min_lsn answers with 0x00… for (FACTS.md F07), a
// *source.AccessError.
func (db *DB) readableLocked(name string) (*instance, error) {
	in, err := db.instanceLocked(name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("fake: %w", &source.AccessError{CaptureInstance: name, Reason: "sys.fn_cdc_get_min_lsn returned 0x00000000000000000000 (no such capture instance)"})
	case in.denied:
		return nil, fmt.Errorf("fake: %w", &source.AccessError{CaptureInstance: name, Reason: "sys.fn_cdc_get_min_lsn returned 0x00000000000000000000 (the login may not read it)"})
	}
	return in, nil
}

// DenyChanges takes away the login's right to read a capture instance's
// changes, as dropping it from the instance's gating role or revoking
// SELECT on a captured column does (FACTS.md F19):
// sys.sp_cdc_help_change_data_capture stops listing it, so CaptureInstance
// returns a *source.NotFoundError, and sys.fn_cdc_get_min_lsn returns
// 0x00…, so MinLSN and ReadChanges return a *source.AccessError. The
// table's rows stay readable (that is SELECT on the table). GrantChanges
// gives the right back.
func (db *DB) DenyChanges(instanceName string) error {
	return db.setInstance(instanceName, func(in *instance) { in.denied = true })
}

// GrantChanges undoes DenyChanges.
func (db *DB) GrantChanges(instanceName string) error {
	return db.setInstance(instanceName, func(in *instance) { in.denied = false })
}

// setInstance applies set to the named capture instance under the lock.
func (db *DB) setInstance(name string, set func(*instance)) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	in, err := db.instanceLocked(name)
	if err != nil {
		return err
	}
	set(in)
	return nil
}

// ErrChangeTableDenied is wrapped by the errors of ReadChanges and
// ChangeAccess for a capture instance whose change table the login may not
// read (DenyChangeTable), as source/sqlserver's wrap
// sqlserver.ErrChangeTableDenied by default.
var ErrChangeTableDenied = errors.New("fake: the login may not read the change table")

// DenyChangeTable takes away the login's SELECT on a capture instance's
// change table, cdc.[<instance>_CT], and nothing else: the instance stays
// listed and its minimum LSN readable (the gating role and the captured
// columns are granted), but ReadChanges fails with an error wrapping
// ErrChangeTableDenied, as source/sqlserver's does by default (FACTS.md
// F11, F54). internal/tdsfake answers a read of that change table with
// error 229. GrantChangeTable gives it back.
func (db *DB) DenyChangeTable(instanceName string) error {
	return db.setInstance(instanceName, func(in *instance) { in.noCT = true })
}

// GrantChangeTable undoes DenyChangeTable.
func (db *DB) GrantChangeTable(instanceName string) error {
	return db.setInstance(instanceName, func(in *instance) { in.noCT = false })
}

// changeTableDenied is the error of a read of in's change table after
// DenyChangeTable.
func changeTableDenied(in *instance) error {
	return fmt.Errorf("%w cdc.[%s_CT]: GRANT SELECT ON cdc.[%[2]s_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>", ErrChangeTableDenied, in.name)
}

// ChangeAccess tells, reading no change, what ReadChanges of ci would fail
// with for want of a grant (snapshot.ChangeAccessChecker): a
// *source.AccessError for an instance the login may not read
// (DenyChanges) or that is gone, an error wrapping ErrChangeTableDenied
// after DenyChangeTable, else nil.
func (db *DB) ChangeAccess(ctx context.Context, ci *source.CaptureInstance) (denied, err error) {
	if err := db.enter(ctx, OpChangeAccess); err != nil {
		return nil, err
	}
	if ci == nil {
		return nil, fmt.Errorf("fake: nil capture instance")
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.readableLocked(ci.Name)
	switch {
	case err != nil:
		return err, nil
	case in.noCT:
		return changeTableDenied(in), nil
	}
	return nil, nil
}

// RunCaptureJob lets the capture job catch up with every commit so far: the
// change tables, fn_cdc_get_max_lsn and fn_cdc_map_lsn_to_time show them,
// and an instance whose start_lsn the job has passed gets a valid minimum
// LSN. Without Options.ManualCapture the job also runs on its own after
// commits (Options.CaptureEvery).
func (db *DB) RunCaptureJob() {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.runCaptureJobLocked()
}

// runCaptureJobLocked lets the capture job process the log up to the last
// LSN given: each pending type change it passes alters the change table's
// column and converts its stored values (FACTS.md F62). A value the new
// type cannot hold stops the job before that DDL, as the log scan fails
// with error 2628 or 8115 (sys.dm_cdc_errors, "Known issues and errors
// with CDC"): max LSN stays below the DDL, its DDL history row is not
// posted, and every run fails there again until the instance is disabled
// (sys.sp_cdc_disable_table; then enabled again).
func (db *DB) runCaptureJobLocked() {
	db.sinceJob = 0
	target := db.lastLSN
	for {
		var in *instance
		for _, x := range db.instances {
			if len(x.pending) > 0 && !target.Less(x.pending[0].lsn) && (in == nil || x.pending[0].lsn.Less(in.pending[0].lsn)) {
				in = x
			}
		}
		if in == nil {
			break
		}
		r := in.pending[0]
		if err := in.applyRetype(r); err != nil {
			number := 8115
			switch r.ct.Type {
			case "char", "varchar", "nchar", "nvarchar", "binary", "varbinary":
				number = 2628
			}
			db.captureErrors = append(db.captureErrors, CaptureError{Number: number, Message: err.Error(), LSN: r.lsn})
			if prev, err := r.lsn.Prev(); err == nil && db.captured.Less(prev) {
				db.captured = prev
			}
			return
		}
		in.pending = in.pending[1:]
	}
	db.captured = target
}

// applyRetype alters the change table's column as r says, converting the
// values of the changes logged before r (those after it were written in
// the new type); nothing changes when one does not fit.
func (in *instance) applyRetype(r retype) error {
	old := in.ct[r.i]
	conv := make([]any, len(in.changes))
	for k, chg := range in.changes {
		if !chg.lsn.Less(r.lsn) {
			conv[k] = chg.vals[r.i]
			continue
		}
		v, err := convertValue(in.t, chg.vals[r.i], old, r.ct)
		if err != nil {
			return fmt.Errorf("fake: capture job: %s: the change table %s_CT cannot take the change at %s: %w", r.cmd, in.name, chg.lsn, err)
		}
		conv[k] = v
	}
	in.ct, in.cols = slices.Clone(in.ct), slices.Clone(in.cols)
	in.ct[r.i], in.cols[r.i] = r.ct, r.rep
	for k, chg := range in.changes {
		cp := *chg
		cp.vals = slices.Clone(chg.vals)
		cp.vals[r.i] = conv[k]
		in.changes[k] = &cp
	}
	return nil
}

// CaptureErrors returns the errors the capture job met, oldest first, as
// sys.dm_cdc_errors shows them (see RunCaptureJob).
func (db *DB) CaptureErrors() []CaptureError {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return slices.Clone(db.captureErrors)
}

// NextLSN returns the LSN the next commit will get (the start_lsn a capture
// instance enabled now would have).
func (db *DB) NextLSN() lsn.LSN {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.next
}

// Cleanup is CDC retention cleanup (sys.sp_cdc_cleanup_change_table): it
// purges the change rows below lowWatermark from the named capture instance,
// or from every instance when name is empty, and raises their start_lsn,
// and so their minimum LSN, to lowWatermark (FACTS.md F07, F20). A watermark at or below an instance's minimum changes
// nothing; one above fn_cdc_get_max_lsn is an error, as on SQL Server.
func (db *DB) Cleanup(name string, lowWatermark lsn.LSN) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	list := db.instances
	if name != "" {
		in, err := db.instanceLocked(name)
		if err != nil {
			return err
		}
		list = []*instance{in}
	}
	if max := db.maxLSNLocked(); max.Less(lowWatermark) {
		return fmt.Errorf("fake: cleanup to %s: the low water mark is above the maximum LSN %s", lowWatermark, max)
	}
	for _, in := range list {
		if !in.min.Less(lowWatermark) {
			continue
		}
		i := sort.Search(len(in.changes), func(i int) bool { return !in.changes[i].lsn.Less(lowWatermark) })
		in.changes = append([]*change(nil), in.changes[i:]...)
		in.min = lowWatermark
	}
	return nil
}

func (db *DB) maxLSNLocked() lsn.LSN {
	i := sort.Search(len(db.mapping), func(i int) bool { return db.captured.Less(db.mapping[i].lsn) })
	if i == 0 {
		return lsn.LSN{}
	}
	return db.mapping[i-1].lsn
}

// CaptureInstance implements source.Source: the name resolves exactly, then
// ignoring case.
func (db *DB) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	if err := db.enter(ctx, OpCaptureInstance); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.resolveLocked(name, true)
	if err != nil {
		return nil, err
	}
	return in.describe(db), nil
}

// ListCaptureInstances lists the capture instances the login may read, in
// creation order, as sys.sp_cdc_help_change_data_capture without arguments
// does (FACTS.md F01): an instance after DenyChanges is left out. Each has
// what the procedure's row holds, Name, SourceSchema, SourceTable,
// StartLSN and Key, and no Columns, as source/sqlserver returns them;
// CaptureInstance describes one fully. It implements database.Lister.
func (db *DB) ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error) {
	if err := db.enter(ctx, OpListInstances); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []source.CaptureInstance
	for _, in := range db.instances {
		if in.denied {
			continue
		}
		out = append(out, source.CaptureInstance{
			Name:         in.name,
			SourceSchema: in.t.schema,
			SourceTable:  in.t.name,
			StartLSN:     in.startLSN(db),
			CreateDate:   in.created,
			ObjectID:     in.t.objectID,
			Key:          append([]string(nil), in.key...),
		})
	}
	return out, nil
}

// enter checks the context and any injected fault of op.
func (db *DB) enter(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: %s: %w", op, err)
	}
	return db.fault(op)
}

// MaxLSN implements source.Source: the highest commit LSN with captured
// changes that the capture job has processed; zero when none.
func (db *DB) MaxLSN(ctx context.Context) (lsn.LSN, error) {
	if err := db.enter(ctx, OpMaxLSN); err != nil {
		return lsn.LSN{}, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.maxLSNLocked(), nil
}

// MinLSN implements source.Source: false until the capture job has
// processed past the instance's start_lsn, then its minimum LSN (start_lsn,
// raised by Cleanup). An instance that does not exist (dropped since it
// was described) or that the login may not read (DenyChanges) is a
// *source.AccessError, as SQL Server's 0x00… answer is.
func (db *DB) MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error) {
	if err := db.enter(ctx, OpMinLSN); err != nil {
		return lsn.LSN{}, false, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.readableLocked(ci)
	if err != nil {
		return lsn.LSN{}, false, err
	}
	if db.captured.Less(in.start) {
		return lsn.LSN{}, false, nil
	}
	return in.min, true, nil
}

// LSNTime implements source.Source as sys.fn_cdc_map_lsn_to_time answers,
// from cdc.lsn_time_mapping (source/sqlserver/FACTS.md F08): the commit
// time of l when the capture job has mapped a commit at exactly l; zero
// time for any other LSN.
func (db *DB) LSNTime(ctx context.Context, l lsn.LSN) (time.Time, error) {
	if err := db.enter(ctx, OpLSNTime); err != nil {
		return time.Time{}, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.captured.Less(l) {
		return time.Time{}, nil
	}
	i := sort.Search(len(db.mapping), func(i int) bool { return !db.mapping[i].lsn.Less(l) })
	if i == len(db.mapping) || db.mapping[i].lsn != l {
		return time.Time{}, nil
	}
	return db.mapping[i].ts, nil
}

// lookup finds the instance ci names (exactly, then ignoring case).
func (db *DB) lookup(ci *source.CaptureInstance) (*instance, error) {
	if ci == nil {
		return nil, fmt.Errorf("fake: nil capture instance")
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.instanceLocked(ci.Name)
}

// ReadChanges implements source.Source, reading the change table: the
// changes the capture job has processed with from <= __$start_lsn <= to, in
// (start_lsn, command_id, seqval, operation) order, _command_id set. from
// below the instance's minimum LSN (its start_lsn until the capture job
// reaches it, then as Cleanup raises it) is a *source.DataLossError, and so
// is a Cleanup above from while the reader is read. A dropped instance, or
// one the login may not read, is a *source.AccessError; one whose change
// table the login may not read (DenyChangeTable), an error wrapping
// ErrChangeTableDenied. A to above the max
// LSN (or above SetReplicaMaxLSN's) is a *source.ReplicaBehindError, as
// source/sqlserver refuses a read it cannot take to its end: never a
// shorter read.
func (db *DB) ReadChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (array.RecordReader, error) {
	if err := db.enter(ctx, OpReadChanges); err != nil {
		return nil, err
	}
	if ci == nil {
		return nil, fmt.Errorf("fake: nil capture instance")
	}
	db.mu.RLock()
	in, err := db.readableLocked(ci.Name)
	var conv func([]any) ([]any, error)
	if err == nil && in.noCT {
		err = changeTableDenied(in)
	}
	if err == nil {
		conv, err = in.converter(ci.Columns)
	}
	db.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	// The columns the caller named, in the types it described (a read of
	// the change table casts a column to it, FACTS.md F64).
	cols := ci.Columns
	schema, err := source.ChangeSchema(cols)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadChanges %s: %w", in.name, err)
	}
	db.mu.RLock()
	if from.Less(in.min) {
		err := &source.DataLossError{CaptureInstance: in.name, Requested: from, MinLSN: in.min}
		db.mu.RUnlock()
		return nil, fmt.Errorf("fake: ReadChanges: %w", err)
	}
	if !to.Less(from) {
		have := db.maxLSNLocked()
		if !db.replica.IsZero() && db.replica.Less(have) {
			have = db.replica
		}
		if have.Less(to) {
			db.mu.RUnlock()
			return nil, &source.ReplicaBehindError{CaptureInstance: in.name, Need: to, Have: have}
		}
	}
	changes := changesBetween(in.changes, from, to)
	db.mu.RUnlock()
	enc, err := newEncoder(cols)
	if err != nil {
		return nil, fmt.Errorf("fake: ReadChanges %s: %w", in.name, err)
	}
	r := newReader(ctx, schema, func(rr *reader) (int, error) {
		if len(changes) == 0 {
			// SQL Server's cleanup deletes rows below the minimum it sets:
			// one above from now may have taken rows before they were read.
			db.mu.RLock()
			min := in.min
			db.mu.RUnlock()
			if from.Less(min) {
				return 0, fmt.Errorf("fake: ReadChanges: %w", &source.DataLossError{CaptureInstance: in.name, Requested: from, MinLSN: min})
			}
			return 0, nil
		}
		n := 0
		for len(changes) > 0 && n < DefaultBatchRows {
			c := changes[0]
			changes = changes[1:]
			vals := c.vals
			if conv != nil {
				// The change table's types to the reported ones (F64).
				if vals, err = conv(vals); err != nil {
					return n, fmt.Errorf("fake: ReadChanges %s: %w", in.name, err)
				}
			}
			if err := enc.appendRow(rr.rb, vals); err != nil {
				return n, err
			}
			enc.appendChangeMeta(rr.rb, len(cols), c)
			n++
		}
		return n, nil
	})
	return r, nil
}

// ChangeRow is one row of a capture instance's change table,
// cdc.[<capture instance>_CT]: the captured columns' values as the change
// table holds them, in its types (ChangeTableColumns; computed columns,
// the large objects CDC leaves out and columns the table no longer had are
// nil: FACTS.md F13, F60), and the row's metadata.
type ChangeRow struct {
	StartLSN, Seqval lsn.LSN
	// Operation is 1 delete, 2 insert, 3 update before, 4 update after.
	Operation int32
	// CommandID numbers the statements of the transaction.
	CommandID int32
	// CommitTS is the commit time (cdc.lsn_time_mapping), UTC.
	CommitTS time.Time
	Values   []any
}

// ChangeRows returns the change table's rows with from <= __$start_lsn <=
// to that the capture job has processed, in (start_lsn, command_id, seqval,
// operation) order. Unlike ReadChanges it checks nothing, as a query of the
// change table checks nothing: a front end modelling
// cdc.fn_cdc_get_all_changes_<capture instance> checks the interval itself
// (MinLSN, MaxLSN). A dropped instance, or one the login may not read, is a
// *source.AccessError.
func (db *DB) ChangeRows(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) ([]ChangeRow, error) {
	if err := db.enter(ctx, OpReadChanges); err != nil {
		return nil, err
	}
	if ci == nil {
		return nil, fmt.Errorf("fake: nil capture instance")
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.readableLocked(ci.Name)
	if err != nil {
		return nil, err
	}
	if db.captured.Less(to) {
		to = db.captured
	}
	var out []ChangeRow
	for _, c := range changesBetween(in.changes, from, to) {
		out = append(out, ChangeRow{StartLSN: c.lsn, Seqval: c.seqval, Operation: c.op, CommandID: c.cmd, CommitTS: c.ts, Values: append([]any(nil), c.vals...)})
	}
	return out, nil
}

// ChangeTableColumns returns the captured columns of a capture instance as
// its change table types them: the source's types, but int or bigint for
// an identity column and binary(8) for a rowversion (FACTS.md F64). A
// dropped instance, or one the login may not read, is a
// *source.AccessError.
func (db *DB) ChangeTableColumns(ctx context.Context, captureInstance string) ([]source.Column, error) {
	if err := db.enter(ctx, OpReadChanges); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	in, err := db.readableLocked(captureInstance)
	if err != nil {
		return nil, err
	}
	out := append([]source.Column(nil), in.ct...)
	for i := range out {
		out[i].ID, out[i].Nullable = in.ids[i], true
	}
	return out, nil
}

// changesBetween returns the changes (in LSN order) with from <= LSN <= to.
func changesBetween(changes []*change, from, to lsn.LSN) []*change {
	lo := sort.Search(len(changes), func(i int) bool { return !changes[i].lsn.Less(from) })
	hi := sort.Search(len(changes), func(i int) bool { return to.Less(changes[i].lsn) })
	return changes[lo:max(lo, hi)]
}

// CaptureInstanceNames returns the names of the capture instances the
// login may read, in creation order: those sys.sp_cdc_help_change_data_capture
// lists (FACTS.md F01).
func (db *DB) CaptureInstanceNames() []string {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []string
	for _, in := range db.instances {
		if !in.denied {
			out = append(out, in.name)
		}
	}
	return out
}
