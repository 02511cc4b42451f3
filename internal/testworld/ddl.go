package testworld

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// The DDL property (issue 32): random DDL (drop, add, retype, re-add, a
// second capture instance, the switch to it, the old one disabled)
// interleaved with random DML, whole and chunked snapshots, polls and
// crashes, against a brute-force oracle of what SQL Server documents
// (source/sqlserver/FACTS.md F59-F67). The oracle: the bronze table's keys
// are the source table's, and in each key's latest image (from the newest
// snapshot on), every column the writing capture instance captures and the
// table still has (matched by column_id) equals the source's, and every
// column it captures that the table had dropped by then is NULL. A column
// an instance does not capture is not its to tell: CDC writes nothing of
// it (F59).

// MemAppender is a MemSink as snapshot.Poll and Switch take it: it appends
// as snapshot.Appender asks and passes on the sink's schema check
// (sink.Checker), table schema (snapshot.TableSchemaer) and last batch
// (snapshot.BatchFinder).
type MemAppender struct{ *fake.MemSink }

// AppendChanges implements snapshot.Appender.
func (m MemAppender) AppendChanges(ctx context.Context, ci string, batch int64, rr array.RecordReader) (int64, error) {
	c, err := m.MemSink.AppendChanges(ctx, ci, batch, rr)
	return c.Version, err
}

// ddlType is a column type the DDL property uses: a value generator and
// the types ALTER COLUMN may move it to (a widening, a narrowing or a
// change of length; the fake refuses one whose values do not fit).
type ddlType struct {
	decl    string
	val     func(r *rand.Rand) any
	retypes []string
}

var ddlTypes = map[string]ddlType{
	"int":    {"int", func(r *rand.Rand) any { return int64(r.IntN(2000) - 1000) }, []string{"bigint"}},
	"bigint": {"bigint", func(r *rand.Rand) any { return int64(r.IntN(2000) - 1000) }, []string{"int"}},
	// The widened types fill their whole width (C2): a read cast to the
	// old width would truncate or round their values (FACTS.md F92).
	// They are not narrowed again: change rows that do not fit a
	// narrowing stop the capture job (F62), which this property does not
	// model (fake TestNarrowingStopsTheCaptureJobUntilTheInstanceIsDisabled
	// does).
	"varchar(10)":  {"varchar(10)", func(r *rand.Rand) any { return Word(r, "abcXYZ", 8) }, []string{"varchar(20)", "nvarchar(10)"}},
	"varchar(20)":  {"varchar(20)", func(r *rand.Rand) any { return Word(r, "abcXYZ", 18) }, nil}, // with up to two trailing spaces
	"nvarchar(10)": {"nvarchar(10)", func(r *rand.Rand) any { return runeWord(r, 10) }, []string{"nvarchar(20)"}},
	"nvarchar(20)": {"nvarchar(20)", func(r *rand.Rand) any { return runeWord(r, 20) }, nil},
	"decimal(10,2)": {"decimal(10,2)", func(r *rand.Rand) any {
		return keyrange.Decimal(fmt.Sprintf("%d.%02d", r.IntN(20000)-10000, r.IntN(100)))
	}, []string{"decimal(12,2)", "decimal(12,4)"}},
	"decimal(12,4)": {"decimal(12,4)", func(r *rand.Rand) any {
		return keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(200000000)-100000000, r.IntN(10000)))
	}, nil},
	"decimal(12,2)": {"decimal(12,2)", func(r *rand.Rand) any {
		return keyrange.Decimal(fmt.Sprintf("%d.%02d", r.IntN(20000)-10000, r.IntN(100)))
	}, []string{"decimal(10,2)"}},
}

// runeWord returns 1 to n characters, some outside ASCII.
func runeWord(r *rand.Rand, n int) string {
	rs := []rune("aäbçΣz")
	out := make([]rune, 1+r.IntN(n))
	for i := range out {
		out[i] = rs[r.IntN(len(rs))]
	}
	return string(out)
}

// DDLOptions shape a DDL run.
type DDLOptions struct {
	// Case numbers the case in failure messages.
	Case int
	// Steps is the number of random operations.
	Steps int
	// Identity makes the key a numeric(18,0) IDENTITY and adds a
	// rowversion column (FACTS.md F64).
	Identity bool
	// CaptureEvery makes the capture job lag: it catches up only after
	// every CaptureEvery commits or DDL (fake.Options.CaptureEvery), so
	// sys.fn_cdc_get_max_lsn and the captured types trail the table,
	// which always shows what is committed (FACTS.md F06, F62). Zero
	// means after each.
	CaptureEvery int
	// SingletonKeyUpdates runs the fake under trace flag 8207
	// (fake.Options.SingletonKeyUpdates): an update that moves a row to
	// another key, which dml makes when the key is not an identity, is
	// logged as an update-before of the old key and an update-after of
	// the new one (FACTS.md F14).
	SingletonKeyUpdates bool
	// Serve returns the source the library reads db through: db itself,
	// or source/sqlserver over TDS. Nil means db.
	Serve func(db *fake.DB) source.Source
}

// ddlRun is one random case of the DDL property.
type ddlRun struct {
	t            testing.TB
	r            *rand.Rand
	ctx          context.Context
	db           *fake.DB
	src          source.Source
	dst          *fake.MemSink
	opts         DDLOptions
	names        int                                // columns named so far
	instances    int                                // capture instances enabled after the first
	types        map[int]string                     // column_id -> its type now
	dropped      map[int]lsn.LSN                    // column_id -> the LSN of its DROP
	cur          string                             // the capture instance the stream reads
	next         lsn.LSN                            // the first LSN the stream reads next
	batch        int64                              // the stream's last batch id
	from         lsn.LSN                            // the newest snapshot's LSN: the image starts there
	typeWidening bool                               // the sink's table widens types
	left         map[string]lsn.LSN                 // capture instance -> the first LSN the stream read from its successor
	began        map[string]lsn.LSN                 // capture instance -> the first LSN the stream read from it
	owed         map[string]string                  // change rows the bronze table must hold (changeKey) -> their instance
	enabled      map[string]*source.CaptureInstance // each instance as enabled: its columns outlive it (F59)
	log          []string                           // what happened, for a failure's message
}

const ddlTable = "t"

// RunDDL runs one random case of the DDL property with r and fails t with
// the case's history when the oracle does not hold.
func RunDDL(t testing.TB, r *rand.Rand, opts DDLOptions) {
	t.Helper()
	d := &ddlRun{t: t, r: r, ctx: context.Background(), opts: opts, types: map[int]string{}, dropped: map[int]lsn.LSN{}, left: map[string]lsn.LSN{},
		began: map[string]lsn.LSN{}, owed: map[string]string{}, enabled: map[string]*source.CaptureInstance{}, dst: fake.NewMemSink()}
	defer func() { d.dst.Close() }()
	d.db = fake.New(fake.Options{ReportChangeTableTypes: r.IntN(2) == 0, SingletonKeyUpdates: opts.SingletonKeyUpdates, CaptureEvery: opts.CaptureEvery})
	key := fake.ColumnDef{Name: "id", Type: "int"}
	if opts.Identity {
		key = fake.ColumnDef{Name: "id", Type: "numeric(18,0)", Identity: true}
	}
	cols := []fake.ColumnDef{key}
	if opts.Identity {
		cols = append(cols, fake.ColumnDef{Name: "rv", Type: "rowversion"})
	}
	for range 1 + r.IntN(3) {
		cols = append(cols, d.newColumn())
	}
	d.cur = "dbo_t"
	if err := d.db.CreateTable(fake.TableDef{Schema: "dbo", Name: ddlTable, Columns: cols, Key: []string{"id"}, CaptureInstance: d.cur}); err != nil {
		t.Fatal(err)
	}
	info, err := d.db.Table("dbo", ddlTable)
	if err != nil {
		t.Fatal(err)
	}
	d.enabled[d.cur] = d.instance(d.cur)
	for _, c := range info.Columns {
		d.types[c.ID] = c.Declared()
	}
	d.src = d.db
	if opts.Serve != nil {
		d.src = opts.Serve(d.db)
	}
	for range r.IntN(30) {
		d.dml()
	}
	d.typeWidening = r.IntN(3) == 0
	d.dst.SetTypeWidening(d.typeWidening)
	d.snapshot(d.cur, false)
	for range opts.Steps {
		switch x := r.IntN(100); {
		case x < 45:
			d.dml()
		case x < 60:
			d.poll()
		case x < 66:
			d.addColumn()
		case x < 72:
			d.dropColumn()
		case x < 79:
			d.retype()
		case x < 82:
			d.readd()
		case x < 87:
			d.enableSecond()
		case x < 93:
			d.switchInstance()
		case x < 96:
			d.disableOld()
		default:
			d.snapshot(d.cur, true)
		}
	}
	d.catchUp()
	d.owe(d.cur, d.next)
	d.check()
}

// catchUp runs the capture job and polls until the stream has read every
// commit: a poll the bronze table refuses takes a new snapshot, whose DML
// between pages commits after the job ran, and the oracle compares the
// table with the source only once the stream has read that DML too.
func (d *ddlRun) catchUp() {
	d.db.RunCaptureJob()
	d.poll()
	for tries := 0; ; tries++ {
		d.db.RunCaptureJob()
		maxLSN, err := d.db.MaxLSN(d.ctx)
		if err != nil {
			d.fatalf("%v", err)
		}
		if maxLSN.Less(d.next) {
			return
		}
		if tries == 10 {
			d.fatalf("the stream at %s does not catch up with the max LSN %s", d.next, maxLSN)
		}
		d.poll()
	}
}

func (d *ddlRun) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *ddlRun) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("case %d: %s\nhistory:\n  %s", d.opts.Case, fmt.Sprintf(format, args...), strings.Join(d.log, "\n  "))
}

// newColumn declares a nullable column of a random type, with a new name.
func (d *ddlRun) newColumn() fake.ColumnDef {
	d.names++
	decls := []string{"int", "bigint", "varchar(10)", "nvarchar(10)", "decimal(10,2)"}
	return fake.ColumnDef{Name: fmt.Sprintf("c%d", d.names), Type: decls[d.r.IntN(len(decls))], Nullable: true}
}

func (d *ddlRun) table() fake.TableInfo {
	info, err := d.db.Table("dbo", ddlTable)
	if err != nil {
		d.fatalf("%v", err)
	}
	return info
}

// row returns a random row of the table's columns now, id as given (nil:
// the identity's next).
func (d *ddlRun) rowWith(r *rand.Rand, info fake.TableInfo, id any) fake.Row {
	row := make(fake.Row, len(info.Columns))
	for j, c := range info.Columns {
		switch {
		case c.Name == "id":
			row[j] = id
		case c.Type == "rowversion" || r.IntN(5) == 0:
		default:
			row[j] = ddlTypes[c.Declared()].val(r)
		}
	}
	return row
}

// dml commits a transaction of one to four inserts, updates and deletes;
// without an identity key, some updates move their row to a new key.
func (d *ddlRun) dml() { d.dmlWith(d.r) }

// dmlWith is dml drawing from r.
func (d *ddlRun) dmlWith(r *rand.Rand) {
	info := d.table()
	rows, err := d.db.Rows("dbo", ddlTable)
	if err != nil {
		d.fatalf("%v", err)
	}
	tx := d.db.Begin()
	var ops []string
	used := map[string]bool{}
	for range 1 + r.IntN(4) {
		op := r.IntN(3)
		var key any
		if len(rows) > 0 {
			key = rows[r.IntN(len(rows))][0]
		}
		if used[fmt.Sprint(key)] {
			continue
		}
		used[fmt.Sprint(key)] = true
		switch {
		case op == 0 || key == nil:
			var id any
			if !d.opts.Identity {
				id = int64(r.IntN(60))
				if slices.ContainsFunc(rows, func(r fake.Row) bool { return r[0] == id }) || used[fmt.Sprint(id)] {
					continue
				}
				used[fmt.Sprint(id)] = true
			}
			row := d.rowWith(r, info, id)
			ops = append(ops, fmt.Sprintf("ins %v", row))
			err = tx.Insert("dbo", ddlTable, row)
		case op == 1:
			to := key
			if nk := int64(r.IntN(60)); !d.opts.Identity && r.IntN(3) == 0 && !used[fmt.Sprint(nk)] &&
				!slices.ContainsFunc(rows, func(r fake.Row) bool { return r[0] == nk }) {
				to = nk
				used[fmt.Sprint(nk)] = true
			}
			row := d.rowWith(r, info, to)
			ops = append(ops, fmt.Sprintf("upd %v->%v", key, row))
			err = tx.Update("dbo", ddlTable, []any{key}, row)
		default:
			ops = append(ops, fmt.Sprintf("del %v", key))
			err = tx.Delete("dbo", ddlTable, []any{key})
		}
		if err != nil {
			d.fatalf("dml: %v", err)
		}
	}
	at, err := tx.Commit()
	if err != nil {
		d.fatalf("dml commit: %v", err)
	}
	maxLSN, _ := d.db.MaxLSN(d.ctx)
	d.logf("DML at %s: %s (max LSN %s)", at, strings.Join(ops, ", "), maxLSN)
}

// appender is the stream's sink.
func (d *ddlRun) appender() snapshot.Appender { return MemAppender{d.dst} }

// poll streams the current instance up to the max LSN, as one batch;
// one time in eight the sink's commit fails first and the poll is
// retried. Whether the bronze table can take the instance's columns is
// decided by fit (the oracle): when it cannot, the poll must stop with a
// *SchemaChangeError that names the columns (and the retype's DDL and
// LSN, when a retype made them unfit), writing nothing; the user's way on
// is then taken (recover) and it flows.
func (d *ddlRun) poll() {
	d.batch++
	if d.r.IntN(8) == 0 {
		d.dst.FailNextCommit(fake.ErrInjected)
		res, err := snapshot.Poll(d.ctx, d.src, d.appender(), d.cur, d.next, snapshot.PollOptions{BatchID: d.batch})
		// Nothing new to read appends nothing; the schema check comes
		// before the commit: a refused schema is no fault.
		if !errors.Is(err, fake.ErrInjected) && !errors.Is(err, snapshot.ErrSchemaChange) && (err != nil || res.Appended) {
			d.fatalf("poll with a failing commit: %v (appended %v)", err, res.Appended)
		}
		d.dst.FailNextCommit(nil)
	}
	fit, bad := d.fit()
	before := len(d.dst.Commits())
	res, err := snapshot.Poll(d.ctx, d.src, d.appender(), d.cur, d.next, snapshot.PollOptions{BatchID: d.batch})
	var sc *snapshot.SchemaChangeError
	switch {
	case errors.As(err, &sc):
		if after := len(d.dst.Commits()); after != before {
			d.fatalf("a refused batch committed: %d commits, were %d", after, before)
		}
		if fit == fitOK {
			d.fatalf("poll refused a schema the table takes: %v", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			d.fatalf("the schema change error does not name column %s: %v", bad, err)
		}
		for _, dl := range sc.DDL {
			if !strings.Contains(err.Error(), dl.LSN.String()) || !strings.Contains(err.Error(), dl.Command) {
				d.fatalf("the schema change error does not name the DDL %q at %s: %v", dl.Command, dl.LSN, err)
			}
		}
		d.logf("poll %s from %s: stopped on column %s (%d DDL named)", d.cur, d.next, bad, len(sc.DDL))
		if d.recover(fit) {
			d.poll() // the stream goes on from the new table's snapshot
			return
		}
		if res, err = snapshot.Poll(d.ctx, d.src, d.appender(), d.cur, d.next, snapshot.PollOptions{BatchID: d.batch}); err != nil {
			d.fatalf("poll after type widening: %v", err)
		}
	case err != nil:
		d.fatalf("poll %s from %s: %v", d.cur, d.next, err)
	case fit != fitOK && res.Appended:
		d.fatalf("poll appended a batch whose column %s the table cannot take", bad)
	}
	d.logf("poll %s from %s: %d rows, next %s", d.cur, d.next, res.Rows, res.Next)
	d.next = res.Next
}

// How the bronze table takes the current instance's columns.
const (
	fitOK    = iota
	fitWiden // a column is wider than the table's: type widening takes it
	fitClash // a column has another kind of type: a new table
)

// fit is the oracle of whether the bronze table takes the current
// instance's columns, by name (Delta's rule, as holds says), and the first
// column it cannot take.
func (d *ddlRun) fit() (int, string) {
	table, _ := d.dst.ArrowSchema(d.ctx)
	// As the library sees the instance: over the wire the change table's
	// types (FACTS.md F64) may be another answer than the fake's.
	ci, _ := d.src.CaptureInstance(d.ctx, d.cur)
	if table == nil || ci == nil {
		return fitOK, ""
	}
	worst, bad := fitOK, ""
	for _, c := range ci.Columns {
		t, err := c.ArrowType()
		if err != nil {
			d.fatalf("%v", err)
		}
		i := slices.IndexFunc(table.Fields(), func(f arrow.Field) bool { return strings.EqualFold(f.Name, c.Name) })
		if i < 0 {
			continue // new to the table: added as a nullable column
		}
		have := table.Field(i).Type
		switch {
		case holds(have, t):
		case holds(t, have) && d.typeWidening:
		case holds(t, have):
			if worst == fitOK {
				worst, bad = fitWiden, c.Name
			}
		default:
			return fitClash, c.Name
		}
	}
	return worst, bad
}

// recover takes the user's way on after a refusal: type widening on the
// table for a widening, else a new bronze table with a new snapshot of the
// current instance (true: the stream moved there).
func (d *ddlRun) recover(fit int) bool {
	if fit == fitWiden {
		d.dst.SetTypeWidening(true)
		d.typeWidening = true
		d.logf("type widening on")
		return false
	}
	d.dst.Close()
	d.dst = fake.NewMemSink()
	d.owed = map[string]string{} // the rows owed were the old table's
	d.typeWidening = d.r.IntN(3) == 0
	d.dst.SetTypeWidening(d.typeWidening)
	d.logf("a new bronze table")
	d.snapshot(d.cur, false)
	return true
}

// snapshot takes a whole or chunked snapshot of ci (a re-snapshot when
// again), with DML between its pages, and moves the stream after it; the
// image starts at its LSN. An instance that lacks a column the bronze
// table has writes none: its rows read it as NULL.
func (d *ddlRun) snapshot(ci string, again bool) {
	if fit, _ := d.fit(); fit != fitOK && ci == d.cur {
		// The bronze table cannot take a column: a snapshot is refused
		// before anything is read.
		_, _, err := snapshot.Bootstrap(d.ctx, d.src, d.dst, snapshot.Options{CaptureInstance: ci, Resnapshot: again})
		if d.pending(err) {
			// A captured type lags the table's: refused before that.
			d.snapshot(ci, again)
			return
		}
		if !errors.Is(err, fake.ErrSchema) {
			d.fatalf("a snapshot with a column the table cannot take: %v", err)
		}
		d.logf("snapshot of %s refused", ci)
		if d.recover(fit) {
			return
		}
	}
	stop := d.dmlBetweenPages()
	defer stop()
	if d.r.IntN(2) == 0 {
		opts := snapshot.Options{CaptureInstance: ci, Partitions: 1 + d.r.IntN(4), MinPartitionRows: -1, Resnapshot: again, ReadOptions: snapshot.ReadOptions{BatchRows: 1 + d.r.IntN(7)}}
		from, res, err := snapshot.Bootstrap(d.ctx, d.src, d.dst, opts)
		for tries := 0; errors.Is(err, snapshot.ErrStale) && tries < 3; tries++ {
			from, res, err = snapshot.Bootstrap(d.ctx, d.src, d.dst, opts)
		}
		if d.snapshotAgain(ci, again, err, stop) {
			return
		}
		if err != nil {
			d.fatalf("snapshot of %s: %v", ci, err)
		}
		d.cur, d.next, d.from = ci, from, res.LSN
		d.began[ci] = from
		d.logf("whole snapshot of %s at %s: %d rows", ci, res.LSN, res.Rows)
		return
	}
	opts := snapshot.BackfillOptions{CaptureInstance: ci, Chunks: 1 + d.r.IntN(4), Resnapshot: again, ReadOptions: snapshot.ReadOptions{BatchRows: 1 + d.r.IntN(7)}}
	from, res, err := snapshot.BootstrapBackfill(d.ctx, d.src, d.dst, opts)
	if d.snapshotAgain(ci, again, err, stop) {
		return
	}
	if err != nil {
		d.fatalf("chunked snapshot of %s: %v", ci, err)
	}
	d.cur, d.next, d.from = ci, from, res.LSN
	d.began[ci] = from
	for range d.r.IntN(3) {
		d.dml()
	}
	if d.r.IntN(3) == 0 {
		// DDL while the chunked snapshot is open (C3): its waves must
		// read a dropped column as NULL and stop on a changed type; DML
		// after it fills a widened column's new width.
		d.ddlStep()
		for range d.r.IntN(3) {
			d.dml()
		}
	}
	opts.Resnapshot = false
	res, err = snapshot.Backfill(d.ctx, d.src, d.dst, opts)
	for tries := 0; errors.Is(err, snapshot.ErrColumnsChanged) && tries < 3; tries++ {
		var ce *snapshot.ColumnsChangedError
		errors.As(err, &ce)
		if ce == nil {
			d.fatalf("backfill of %s: %v", ci, err)
		}
		d.logf("backfill of %s stopped: pending %v, replan %v: %v", ci, ce.Pending, ce.Replan, err)
		if ce.Pending {
			d.db.RunCaptureJob() // the user's way: retry once the job has run
			// The captured types are the table's now: the bronze table
			// may not take them.
			if fit, _ := d.fit(); fit != fitOK && d.recover(fit) {
				return
			}
		}
		if ce.Replan {
			// The user's way: a new chunked snapshot, which reads the
			// columns as they are now, if the bronze table takes them.
			if fit, _ := d.fit(); fit != fitOK && d.recover(fit) {
				return
			}
			opts.Resnapshot = true
		}
		res, err = snapshot.Backfill(d.ctx, d.src, d.dst, opts)
		opts.Resnapshot = false
		if err == nil && ce.Replan {
			d.from = res.LSN // the image starts at the new snapshot
		}
	}
	if err != nil {
		d.fatalf("backfill of %s: %v", ci, err)
	}
	d.logf("chunked snapshot of %s at %s: %d chunks", ci, res.LSN, res.Chunks)
}

// pending reports whether err says a captured type lags the table's
// (the capture job has not reached an ALTER COLUMN) and, if so, takes
// the user's way: it runs the capture job, so the snapshot can be retried
// in the captured types the job reached, which the bronze table may not
// take (fit).
func (d *ddlRun) pending(err error) bool {
	var ce *snapshot.ColumnsChangedError
	if !errors.As(err, &ce) || !ce.Pending {
		return false
	}
	d.logf("snapshot refused until the capture job runs: %v", err)
	d.db.RunCaptureJob()
	if errs := d.db.CaptureErrors(); len(errs) > 0 {
		d.fatalf("the capture job stopped: %v", errs) // this property makes no narrowing the change rows do not fit
	}
	return true
}

// snapshotAgain reports whether a lagging capture job explains err, and
// if so stops the DML between pages and takes the snapshot again: the
// snapshot was refused because a captured type lags the table's (pending
// runs the job), or because the job passed a retype during the read (DML
// between pages runs it) and the bronze table refuses the new captured
// type (the user's way on is taken first: recover).
func (d *ddlRun) snapshotAgain(ci string, again bool, err error, stop func()) bool {
	if d.pending(err) {
		stop()
		d.snapshot(ci, again) // in the captured types the job reached
		return true
	}
	if !errors.Is(err, fake.ErrSchema) {
		return false
	}
	fit, bad := d.fit()
	if fit == fitOK {
		return false
	}
	stop()
	d.logf("snapshot of %s refused: the capture job retyped column %s during the read", ci, bad)
	if !d.recover(fit) {
		d.snapshot(ci, again)
	}
	return true
}

// ddlStep runs one random DDL on the table: add, drop or retype.
func (d *ddlRun) ddlStep() {
	switch d.r.IntN(3) {
	case 0:
		d.addColumn()
	case 1:
		d.dropColumn()
	default:
		d.retype()
	}
}

// dmlBetweenPages commits DML after some pages of a read.
func (d *ddlRun) dmlBetweenPages() func() {
	r := rand.New(rand.NewPCG(d.r.Uint64(), 7))
	var mu sync.Mutex // partitions read in parallel: one transaction at a time
	d.db.SetPageHook(func(context.Context, fake.Page) error {
		mu.Lock()
		defer mu.Unlock()
		if r.IntN(3) == 0 {
			d.dmlWith(r)
		}
		return nil
	})
	return func() { d.db.SetPageHook(nil) }
}

func (d *ddlRun) addColumn() {
	c := d.newColumn()
	at, err := d.db.AddColumn("dbo", ddlTable, c)
	if err != nil {
		d.fatalf("add %s: %v", c.Name, err)
	}
	info := d.table()
	id := info.Columns[len(info.Columns)-1].ID
	d.types[id] = info.Columns[len(info.Columns)-1].Declared()
	d.logf("ADD %s %s (id %d) at %s", c.Name, c.Type, id, at)
}

// droppable returns a random column that is neither the key nor the
// rowversion, or false.
func (d *ddlRun) droppable() (source.Column, bool) {
	info := d.table()
	var cs []source.Column
	for _, c := range info.Columns {
		if c.Name != "id" && c.Type != "rowversion" {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return source.Column{}, false
	}
	return cs[d.r.IntN(len(cs))], true
}

func (d *ddlRun) dropColumn() {
	c, ok := d.droppable()
	if !ok {
		return
	}
	at, err := d.db.DropColumn("dbo", ddlTable, c.Name)
	if err != nil {
		d.fatalf("drop %s: %v", c.Name, err)
	}
	d.dropped[c.ID] = at
	d.logf("DROP %s (id %d) at %s", c.Name, c.ID, at)
}

// readd drops a column and adds one of the same name: another column.
func (d *ddlRun) readd() {
	c, ok := d.droppable()
	if !ok {
		return
	}
	at, err := d.db.DropColumn("dbo", ddlTable, c.Name)
	if err != nil {
		d.fatalf("drop %s: %v", c.Name, err)
	}
	d.dropped[c.ID] = at
	nc := d.newColumn()
	nc.Name = c.Name
	if _, err := d.db.AddColumn("dbo", ddlTable, nc); err != nil {
		d.fatalf("re-add %s: %v", c.Name, err)
	}
	info := d.table()
	id := info.Columns[len(info.Columns)-1].ID
	d.types[id] = nc.Type
	d.logf("DROP and ADD %s %s (id %d, was %d) at %s", c.Name, nc.Type, id, c.ID, at)
}

// retype alters a column to one of its type's retypes; one whose values
// do not fit is refused by the fake and changes nothing.
func (d *ddlRun) retype() {
	c, ok := d.droppable()
	if !ok {
		return
	}
	ts := ddlTypes[c.Declared()].retypes
	if len(ts) == 0 {
		return
	}
	to := ts[d.r.IntN(len(ts))]
	at, err := d.db.AlterColumn("dbo", ddlTable, fake.ColumnDef{Name: c.Name, Type: to, Nullable: true})
	if err != nil {
		d.logf("ALTER %s %s -> %s refused: %v", c.Name, c.Declared(), to, err)
		return
	}
	d.types[c.ID] = to
	d.logf("ALTER %s %s -> %s (id %d) at %s", c.Name, c.Declared(), to, c.ID, at)
}

// holds reports whether a bronze column of Arrow type table takes values
// of type rec without widening: Delta's rule as sink/delta's widens states
// it (PROTOCOL.md "Type Widening"), restated: the same type, or rec
// narrower: an integer of fewer bits; float32 for float64; an integer of
// 32 bits or fewer for float64; an integer for a decimal with at least 10
// integer digits (20 for a 64-bit one); a decimal with no more integer
// digits and no more scale.
func holds(table, rec arrow.DataType) bool {
	if arrow.TypeEqual(table, rec) {
		return true
	}
	bits := map[arrow.Type]int{arrow.INT16: 16, arrow.INT32: 32, arrow.INT64: 64}
	br, recInt := bits[rec.ID()]
	switch t := table.(type) {
	case *arrow.Decimal128Type:
		if recInt {
			return int(t.Precision-t.Scale) >= map[bool]int{false: 10, true: 20}[br == 64]
		}
		if rd, ok := rec.(*arrow.Decimal128Type); ok {
			return rd.Scale <= t.Scale && rd.Precision-rd.Scale <= t.Precision-t.Scale
		}
		return false
	}
	if bt, ok := bits[table.ID()]; ok {
		return recInt && br < bt
	}
	if table.ID() == arrow.FLOAT64 {
		return rec.ID() == arrow.FLOAT32 || recInt && br <= 32
	}
	return false
}

func (d *ddlRun) enableSecond() {
	list, err := d.db.ListCaptureInstances(d.ctx)
	if err != nil {
		d.fatalf("%v", err)
	}
	if len(list) >= 2 {
		return
	}
	d.instances++
	name := fmt.Sprintf("dbo_t_v%d", d.instances+1)
	// Half the time a change lands just below the new instance's start
	// and the stream switches before it polls past it: the switch alone
	// must then read the old instance up to S - 1 (C1).
	early := d.r.IntN(2) == 0
	if early {
		d.oneChange()
	}
	ci, err := d.db.EnableCDC("dbo", ddlTable, name)
	if err != nil {
		d.fatalf("enable %s: %v", name, err)
	}
	d.enabled[name] = ci
	d.logf("enable %s at %s, columns %v", name, ci.StartLSN, columnNames(ci))
	if early {
		d.dml()
		d.db.RunCaptureJob()
		d.switchInstance()
	}
}

// oneChange commits a transaction of one row change: its start_lsn is
// the last LSN the fake assigned.
func (d *ddlRun) oneChange() {
	info := d.table()
	rows, err := d.db.Rows("dbo", ddlTable)
	if err != nil {
		d.fatalf("%v", err)
	}
	tx := d.db.Begin()
	if len(rows) > 0 {
		key := rows[d.r.IntN(len(rows))][0]
		err = tx.Update("dbo", ddlTable, []any{key}, d.rowWith(d.r, info, key))
	} else {
		var id any
		if !d.opts.Identity {
			id = int64(d.r.IntN(60))
		}
		err = tx.Insert("dbo", ddlTable, d.rowWith(d.r, info, id))
	}
	if err != nil {
		d.fatalf("one change: %v", err)
	}
	if _, err := tx.Commit(); err != nil {
		d.fatalf("one change: %v", err)
	}
}

func columnNames(ci *source.CaptureInstance) []string {
	var out []string
	for _, c := range ci.Columns {
		out = append(out, fmt.Sprintf("%s#%d", c.Name, c.ID))
	}
	return out
}

// switchInstance moves the stream to the table's newer instance, one time
// in four through a failed commit first (a crash, then the rerun).
func (d *ddlRun) switchInstance() {
	list, err := d.db.ListCaptureInstances(d.ctx)
	if err != nil {
		d.fatalf("%v", err)
	}
	var to string
	cur := d.instance(d.cur)
	for _, ci := range list {
		if ci.Name != d.cur && (cur == nil || cur.StartLSN.Less(ci.StartLSN)) {
			to = ci.Name
		}
	}
	if to == "" {
		return
	}
	d.batch++
	opts := snapshot.SwitchOptions{From: d.cur, To: to, BatchID: d.batch}
	if d.r.IntN(4) == 0 {
		d.dst.FailNextCommit(fake.ErrInjected)
		_, err := snapshot.Switch(d.ctx, d.src, d.appender(), d.next, opts)
		d.dst.FailNextCommit(nil)
		if err != nil && !errors.Is(err, fake.ErrInjected) && !errors.Is(err, snapshot.ErrSchemaChange) && !errors.Is(err, snapshot.ErrSwitchNotReady) {
			d.fatalf("switch with a failing commit: %v", err)
		}
	}
	res, err := snapshot.Switch(d.ctx, d.src, d.appender(), d.next, opts)
	if errors.Is(err, snapshot.ErrSwitchNotReady) {
		d.logf("switch %s -> %s: not ready (no commit since it was enabled)", d.cur, to)
		return
	}
	if errors.Is(err, snapshot.ErrSchemaChange) {
		// A's last changes, in A's types, do not fit.
		fit, _ := d.fit()
		if fit == fitOK {
			d.fatalf("switch refused a schema the table takes: %v", err)
		}
		if d.recover(fit) {
			return
		}
		res, err = snapshot.Switch(d.ctx, d.src, d.appender(), d.next, opts)
	}
	if err != nil {
		d.fatalf("switch %s -> %s from %s: %v", d.cur, to, d.next, err)
	}
	d.logf("switch %s -> %s at %s: %d rows of %s, next %s", d.cur, to, res.At, res.Last.Rows, d.cur, res.Next)
	d.left[d.cur] = res.Next
	d.owe(d.cur, res.Next)
	d.cur, d.next = res.To, res.Next
	d.began[res.To] = res.Next
}

// changeKey names a change row as the bronze table stamps it.
func changeKey(at, seq string, op int64) string { return fmt.Sprintf("%s/%s/%d", at, seq, op) }

// owe records that every change row of instance ci from where the stream
// began reading it up to below to must be in the bronze table: the stream
// read ci over that span, whatever it read after (C1). It reads the
// change table now, before the instance can be disabled.
func (d *ddlRun) owe(ci string, to lsn.LSN) {
	in := d.instance(ci)
	from, ok := d.began[ci]
	if in == nil || !ok || !from.Less(to) {
		return
	}
	last, err := to.Prev()
	if err != nil {
		d.fatalf("%v", err)
	}
	held, err := d.db.ChangeRows(d.ctx, in, from, last)
	if err != nil {
		d.fatalf("change rows of %s from %s to %s: %v", ci, from, last, err)
	}
	for _, c := range held {
		d.owed[changeKey(c.StartLSN.String(), c.Seqval.String(), int64(c.Operation))] = ci
	}
}

// disableOld disables the instance the stream no longer reads.
func (d *ddlRun) disableOld() {
	list, err := d.db.ListCaptureInstances(d.ctx)
	if err != nil {
		d.fatalf("%v", err)
	}
	for _, ci := range list {
		if ci.Name != d.cur {
			if err := d.db.DisableCDC(ci.Name); err != nil {
				d.fatalf("disable %s: %v", ci.Name, err)
			}
			d.logf("disable %s", ci.Name)
		}
	}
}

// check holds the bronze table to the oracle.
func (d *ddlRun) check() {
	rows, err := d.dst.Rows()
	if err != nil {
		d.fatalf("%v", err)
	}
	d.checkChanges(rows)
	latest := LatestImage(rows, d.from.String())
	srcRows, err := d.db.Rows("dbo", ddlTable)
	if err != nil {
		d.fatalf("%v", err)
	}
	info := d.table()
	want := map[string]fake.Row{}
	for _, r := range srcRows {
		want[number(r[0])] = r
	}
	for k := range want {
		if _, ok := latest[k]; !ok {
			d.fatalf("key %s is in the source and not in the bronze image", k)
		}
	}
	captured := map[string]*source.CaptureInstance{}
	for k, b := range latest {
		src, ok := want[k]
		if !ok {
			d.fatalf("key %s is in the bronze image (from %v at %v) and not in the source", k, b[sink.ColCaptureInstance], b[sink.ColStartLSN])
		}
		name, _ := b[sink.ColCaptureInstance].(string)
		ci, seen := captured[name]
		if !seen {
			// A disabled instance's columns are those it was enabled
			// with: captured columns never change (F59).
			if ci = d.instance(name); ci == nil {
				ci = d.enabled[name]
			}
			captured[name] = ci
		}
		if ci == nil {
			d.fatalf("key %s: its bronze row names capture instance %q, which was never enabled", k, name)
		}
		at, _ := b[sink.ColStartLSN].(string)
		for _, c := range ci.Columns {
			if c.Computed {
				continue
			}
			j := slices.IndexFunc(info.Columns, func(tc source.Column) bool { return tc.ID == c.ID })
			if j < 0 {
				if dl, ok := d.dropped[c.ID]; ok && at > dl.String() && b[c.Name] != nil {
					d.fatalf("key %s: column %s (id %d) was dropped at %s, and its row at %s from %s holds %v, not NULL", k, c.Name, c.ID, dl, at, name, b[c.Name])
				}
				continue
			}
			if !sameValue(b[c.Name], src[j]) {
				d.fatalf("key %s, column %s (id %d): the bronze image holds %v (row at %s from %s), the source %v", k, c.Name, c.ID, b[c.Name], at, name, src[j])
			}
		}
	}
	d.logf("checked %d keys", len(want))
}

// checkChanges holds the change rows to the switch: each change of the
// source is in the bronze table once, from the instance that held it
// (_capture_instance), an instance the stream left holds no row at or
// above where the stream moved on, and every change row of each instance
// the stream read over its span is there (owe).
func (d *ddlRun) checkChanges(rows []map[string]any) {
	defer func() {
		for k, ci := range d.owed {
			d.fatalf("change %s of %s, which the stream read over, is not in the bronze table", k, ci)
		}
	}()
	seen := map[string]string{}
	for _, r := range rows {
		op, _ := r[sink.ColOperation].(int64)
		if op == 0 {
			continue
		}
		at, _ := r[sink.ColStartLSN].(string)
		seq, _ := r[sink.ColSeqval].(string)
		ci, _ := r[sink.ColCaptureInstance].(string)
		delete(d.owed, changeKey(at, seq, op))
		k := fmt.Sprintf("%s/%s/%d/%s", at, seq, op, number(r["id"]))
		if other, ok := seen[k]; ok {
			d.fatalf("change %s is in the bronze table twice, from %s and %s", k, other, ci)
		}
		seen[k] = ci
		if l, ok := d.left[ci]; ok && at >= l.String() {
			d.fatalf("change %s came from %s, which the stream left at %s", k, ci, l)
		}
		if in := d.instance(ci); in != nil {
			l, err := lsn.Parse(at)
			if err != nil {
				d.fatalf("%v", err)
			}
			held, err := d.db.ChangeRows(d.ctx, in, l, l)
			if err != nil {
				d.fatalf("%v", err)
			}
			if !slices.ContainsFunc(held, func(c fake.ChangeRow) bool { return c.Seqval.String() == seq && int64(c.Operation) == op }) {
				d.fatalf("change %s is stamped %s, whose change table does not hold it", k, ci)
			}
		}
	}
}

// instance describes a capture instance that exists, else nil.
func (d *ddlRun) instance(name string) *source.CaptureInstance {
	ci, err := d.db.CaptureInstance(d.ctx, name)
	if err != nil {
		return nil
	}
	return ci
}

// LatestImage returns each key's latest bronze row among rows with
// _start_lsn at or above from, by (_start_lsn, _command_id, _seqval,
// _operation), NULLs first: a delete (1) or an update-before (3) removes
// the key. An update that keeps its key logs its after image (4) at the
// before image's position, so it follows and wins; an update of the key
// under trace flag 8207 logs the old key in the before image only
// (FACTS.md F14), which must remove it.
func LatestImage(rows []map[string]any, from string) map[string]map[string]any {
	order := func(r map[string]any) (string, int64, bool, string, bool, int64) {
		lsnS, _ := r[sink.ColStartLSN].(string)
		cmd, hasCmd := r[sink.ColCommandID].(int64)
		seq, hasSeq := r[sink.ColSeqval].(string)
		op, _ := r[sink.ColOperation].(int64)
		return lsnS, cmd, hasCmd, seq, hasSeq, op
	}
	var kept []map[string]any
	for _, r := range rows {
		if s, _ := r[sink.ColStartLSN].(string); s >= from {
			kept = append(kept, r)
		}
	}
	slices.SortStableFunc(kept, func(a, b map[string]any) int {
		la, ca, hca, sa, hsa, oa := order(a)
		lb, cb, hcb, sb, hsb, ob := order(b)
		if c := cmp.Compare(la, lb); c != 0 {
			return c
		}
		if c := cmpNull(hca, hcb, func() int { return cmp.Compare(ca, cb) }); c != 0 {
			return c
		}
		if c := cmpNull(hsa, hsb, func() int { return cmp.Compare(sa, sb) }); c != 0 {
			return c
		}
		return cmp.Compare(oa, ob)
	})
	out := map[string]map[string]any{}
	for _, r := range kept {
		k := number(r["id"])
		switch op, _ := r[sink.ColOperation].(int64); op {
		case 1, 3:
			delete(out, k)
		default:
			out[k] = r
		}
	}
	return out
}

func cmpNull(a, b bool, both func() int) int {
	switch {
	case a && b:
		return both()
	case a:
		return 1
	case b:
		return -1
	}
	return 0
}

// number is a numeric value's canonical text: an int64 or a decimal
// (keyrange.Decimal, "7", "7.00") as the same number.
func number(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprint(x)
	case keyrange.Decimal:
		r, ok := new(big.Rat).SetString(string(x))
		if ok {
			return r.RatString()
		}
	}
	return fmt.Sprint(v)
}

// sameValue compares a bronze value with a source value: numbers by value
// (a column retyped between int, bigint and decimal reads back as any of
// them), strings exactly, bytes by content.
func sameValue(bronze, src any) bool {
	if bronze == nil || src == nil {
		return bronze == nil && src == nil
	}
	switch x := src.(type) {
	case int64, keyrange.Decimal:
		return number(bronze) == number(x)
	case []byte:
		b, ok := bronze.([]byte)
		return ok && bytes.Equal(b, x)
	}
	return bronze == src
}
