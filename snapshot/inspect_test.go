package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// inspectDB is a captured table of 2000 rows keyed by (region, id):
// keyset planning, which seeks keys, and a partial snapshot to find.
func inspectDB(t *testing.T) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	var rows []fake.Row
	for i := range 2000 {
		rows = append(rows, fake.Row{fmt.Sprintf("r%d", i%7), int64(i), fmt.Sprint("v", i)})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"region", "id"}, CaptureInstance: "dbo_t", Rows: rows,
		Columns: []fake.ColumnDef{{Name: "region", Type: "varchar(8)"}, {Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)"}}}); err != nil {
		t.Fatal(err)
	}
	return db
}

// inspect runs snapshot.Inspect and checks what it must never do: read a
// row of the table (the fake's read counters) or write to the sink (its
// commits and partial records are as they were).
func inspect(t *testing.T, db *fake.DB, dst *fake.MemSink, opts snapshot.Options) *snapshot.Inspection {
	t.Helper()
	ctx := context.Background()
	partialBefore, errBefore := dst.FindPartial(ctx, opts.CaptureInstance)
	commits := len(dst.Commits())
	db.ResetStats()
	in, err := snapshot.Inspect(ctx, db, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Stats("dbo", "t")
	if err != nil {
		t.Fatal(err)
	}
	if st.RangeReads != 0 || st.RowsReturned != 0 || st.RowsExamined != 0 || st.Pages != 0 {
		t.Errorf("Inspect read rows: %+v", st)
	}
	partialAfter, errAfter := dst.FindPartial(ctx, opts.CaptureInstance)
	if len(dst.Commits()) != commits || !reflect.DeepEqual(partialBefore, partialAfter) || (errBefore == nil) != (errAfter == nil) {
		t.Errorf("Inspect wrote to the sink: %d commits (was %d), partial %v %v (was %v %v)", len(dst.Commits()), commits, partialAfter.PlanID, errAfter, partialBefore.PlanID, errBefore)
	}
	return in
}

// TestInspect follows a table through its states: new (the plan a run
// would read, the same a Take then reads), a partial snapshot (resumed,
// with the partitions left; abandoned with DiscardPartial), a snapshot
// (nothing to read), and a login that may not read the changes. Inspect
// never reads a row or writes to the sink.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	db := inspectDB(t)
	dst := fake.NewMemSink()
	opts := snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1}

	in := inspect(t, db, dst, opts)
	if in.Existing != nil || in.Partial != nil || in.Resumed || in.Plan == nil || in.ChangesErr != nil || in.Instance == nil || in.Instance.Name != "dbo_t" {
		t.Fatalf("new target: %+v", in)
	}
	if p := in.Plan; p.Strategy != "keyset" || len(p.Ranges) != 4 || p.EstimatedRows != 2000 || len(in.Todo) != 4 || p.Recorded {
		t.Fatalf("new target's plan: %s, %d ranges, ~%d rows, todo %v, recorded %v", p.Strategy, len(p.Ranges), p.EstimatedRows, in.Todo, p.Recorded)
	}
	if st, _ := db.Stats("dbo", "t"); st.Seeks == 0 {
		t.Error("keyset planning made no key seeks: the counters do not see Inspect's reads")
	}

	// A Take that fails part way leaves a partial snapshot.
	db.FailReadAfter(900, fake.ErrInjected)
	if _, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1, Parallelism: 1}); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("Take: %v", err)
	}
	db.ClearFaults()
	in = inspect(t, db, dst, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 2, MinPartitionRows: -1})
	if in.Partial == nil || !in.Resumed || in.PartialUnusable != "" || len(in.Plan.Ranges) != 4 || len(in.Done) == 0 || len(in.Done)+len(in.Todo) != 4 {
		t.Fatalf("partial: %+v", in)
	}
	discard := inspect(t, db, dst, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 2, MinPartitionRows: -1, DiscardPartial: true})
	if discard.Partial == nil || discard.Resumed || !strings.Contains(discard.PartialUnusable, "DiscardPartial") || len(discard.Plan.Ranges) != 2 {
		t.Fatalf("partial with DiscardPartial: resumed %v, unusable %q, %d ranges", discard.Resumed, discard.PartialUnusable, len(discard.Plan.Ranges))
	}
	// The run resumes what Inspect said: the plan's partitions left.
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 2, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.PartitionsResumed != len(in.Done) || res.Partitions != 4 || res.LSN != in.Plan.LSN {
		t.Fatalf("Take after Inspect: %+v; Inspect said %d done at %s", res, len(in.Done), in.Plan.LSN)
	}

	in = inspect(t, db, dst, opts)
	if in.Existing == nil || in.Existing.LSN != res.LSN || in.Plan != nil || in.Partial != nil || in.Instance == nil || len(in.Instance.Key) != 2 {
		t.Fatalf("after the snapshot: %+v", in)
	}

	// A login that may not read the changes does not see the capture
	// instance (sys.sp_cdc_help_change_data_capture lists only those it
	// may read: FACTS.md F01, F19): Inspect fails as the run would.
	if err := db.DenyChanges("dbo_t"); err != nil {
		t.Fatal(err)
	}
	db.ResetStats()
	if _, err := snapshot.Inspect(ctx, db, fake.NewMemSink(), opts); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("changes denied: %v", err)
	}
}

// TestInspectRefusesWhatTakeRefuses: options Take refuses, and a capture
// instance that does not exist, fail Inspect the same way.
func TestInspectRefusesWhatTakeRefuses(t *testing.T) {
	db := inspectDB(t)
	for _, opts := range []snapshot.Options{{}, {CaptureInstance: "dbo_t", Partitions: -1}, {CaptureInstance: "dbo_nope"}} {
		_, err := snapshot.Inspect(context.Background(), db, fake.NewMemSink(), opts)
		_, terr := snapshot.Take(context.Background(), db, fake.NewMemSink(), opts)
		if err == nil || terr == nil || errors.Is(err, snapshot.ErrInvalidOptions) != errors.Is(terr, snapshot.ErrInvalidOptions) || errors.Is(err, sink.ErrNotFound) != errors.Is(terr, sink.ErrNotFound) {
			t.Errorf("%+v: Inspect %v, Take %v", opts, err, terr)
		}
	}
}

// TestInspectChecksTheChangeTable: a login in the instance's gating role
// that may not read its change table (fake.DB.DenyChangeTable; FACTS.md
// F11, F86) is told so by Inspect, which reads no row and no change (the
// fake's counters, and a fault armed on the next change read that is still
// armed afterwards), with the error the stream's change reads then fail
// with. A source that cannot check leaves ChangesChecked false.
func TestInspectChecksTheChangeTable(t *testing.T) {
	ctx := context.Background()
	db := inspectDB(t)
	opts := snapshot.Options{CaptureInstance: "dbo_t", Partitions: 4, MinPartitionRows: -1}
	if in := inspect(t, db, fake.NewMemSink(), opts); in.ChangesErr != nil || !in.ChangesChecked {
		t.Fatalf("granted: ChangesErr %v, checked %v; want nil, true", in.ChangesErr, in.ChangesChecked)
	}
	if err := db.DenyChangeTable("dbo_t"); err != nil {
		t.Fatal(err)
	}
	armed := errors.New("a change read")
	db.FailNext(fake.OpReadChanges, armed)
	in := inspect(t, db, fake.NewMemSink(), opts)
	if !errors.Is(in.ChangesErr, fake.ErrChangeTableDenied) || !in.ChangesChecked || !strings.Contains(in.ChangesErr.Error(), "GRANT SELECT ON cdc.[dbo_t_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>") {
		t.Fatalf("change table denied: ChangesErr %v, checked %v; want fake.ErrChangeTableDenied naming the grant", in.ChangesErr, in.ChangesChecked)
	}
	if in.Plan == nil || len(in.Plan.Ranges) != 4 {
		t.Errorf("change table denied: plan %+v; want the plan, as before", in.Plan)
	}
	if _, err := db.ReadChanges(ctx, in.Instance, in.Instance.StartLSN, in.Instance.StartLSN); !errors.Is(err, armed) {
		t.Fatalf("Inspect read changes: the fault armed on the next change read is gone (%v)", err)
	}
	if _, err := db.ReadChanges(ctx, in.Instance, in.Instance.StartLSN, in.Instance.StartLSN); !errors.Is(err, fake.ErrChangeTableDenied) {
		t.Errorf("ReadChanges after DenyChangeTable: %v, want what Inspect said", err)
	}

	unchecked, err := snapshot.Inspect(ctx, struct{ source.Source }{db}, fake.NewMemSink(), opts)
	if err != nil || unchecked.ChangesErr != nil || unchecked.ChangesChecked {
		t.Errorf("a source without ChangeAccess: %v, ChangesErr %v, checked %v; want no error and unchecked", err, unchecked.ChangesErr, unchecked.ChangesChecked)
	}
	if err := db.GrantChangeTable("dbo_t"); err != nil {
		t.Fatal(err)
	}
	if in := inspect(t, db, fake.NewMemSink(), opts); in.ChangesErr != nil {
		t.Errorf("granted again: %v", in.ChangesErr)
	}
}
