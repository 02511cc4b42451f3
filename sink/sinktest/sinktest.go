// Package sinktest is a conformance suite for implementations of
// sink.Sink. A sink runs it in one line from its own tests:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sink.Sink { return mysink.New(t.TempDir()) })
//	}
//
// Each subtest calls newSink once and must get a fresh, empty sink: no
// snapshot of any capture instance, nothing shared with another subtest's
// sink. Subtests run one after another (several drive their own sink from
// many goroutines at once); newSink may use t (t.TempDir, t.Cleanup)
// freely, and a cleanup registered there runs when the subtest ends.
//
// The suite checks what the sink.Sink contract states: writes stay
// invisible until CommitSnapshot, which makes every part visible at once;
// FindSnapshot matches capture-instance names ignoring case; a snapshot of
// an instance that landed first wins, and a later CommitSnapshot of the
// same instance returns it with an error wrapping sink.ErrSnapshotExists,
// also under concurrent commits; a failed write leaves nothing and a rerun
// recovers; parts of another plan are refused; an empty snapshot commits.
// A sink that can read its committed rows back implements RowReader, and
// the suite then checks the rows themselves, not only their count.
//
// A sink that also stores chunked snapshots (sink.ChunkSink) runs
// RunChunked, and one that records partial whole snapshots so a rerun
// resumes them (sink.PartialSink) runs RunPartial.
//
// Info, Records, EmptyBatch and LSN build the plans and bronze records the
// suite writes, for a sink's own further tests.
package sinktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
)

// RowReader is implemented by sinks that can read the rows of a committed
// snapshot back. When the sink under test implements it, the suite checks
// that a snapshot holds exactly the rows written for it (as a multiset, in
// any order and any batching), and no row of a refused or failed write.
type RowReader interface {
	// ReadSnapshotRows returns the rows of the snapshot FindSnapshot would
	// return for captureInstance (the name matched ignoring case), or an
	// error wrapping sink.ErrNotFound. Every column of the bronze schema the
	// rows were written in must be present, by name, holding the values
	// written (a dictionary-encoded column, or another string or timestamp
	// unit, compares by value). The caller releases the reader.
	ReadSnapshotRows(ctx context.Context, captureInstance string) (array.RecordReader, error)
}

// suiteCase is one subtest of a suite.
type suiteCase[S any] struct {
	name string
	fn   func(t *testing.T, s S)
}

// runSuite runs each case as a subtest on a fresh sink from newSink.
func runSuite[S any](t *testing.T, newSink func(t *testing.T) S, cases []suiteCase[S]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t)
			if any(s) == nil {
				t.Fatal("newSink returned nil")
			}
			tc.fn(t, s)
		})
	}
}

// batchRows is the batch size of the records the suite writes.
const batchRows = 128

// Run runs the conformance suite against the sinks newSink returns, one
// fresh, empty sink per subtest.
func Run(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	t.Helper()
	runSuite(t, newSink, []suiteCase[sink.Sink]{
		{"AtomicCommit", testAtomicCommit},
		{"FindIgnoresCase", testFindIgnoresCase},
		{"SecondSnapshotRefused", testSecondSnapshotRefused},
		{"ConcurrentCommitsOneWins", testConcurrentCommitsOneWins},
		{"ConcurrentInstances", testConcurrentInstances},
		{"FailedWriteLeavesNothing", testFailedWriteLeavesNothing},
		{"ForeignPartsRefused", testForeignPartsRefused},
		{"EmptySnapshot", testEmptySnapshot},
	})
}

// span is the ids [from, to) one partition writes.
type span struct{ from, to int64 }

func (s span) rows() int64 { return s.to - s.from }

func total(spans []span) int64 {
	var n int64
	for _, s := range spans {
		n += s.rows()
	}
	return n
}

// write writes one partition per span and checks each Part describes its
// write.
func write(t *testing.T, s sink.Sink, info sink.Info, spans []span) []sink.Part {
	t.Helper()
	parts := make([]sink.Part, len(spans))
	for i, sp := range spans {
		p, err := writeOne(t.Context(), s, info, i, sp)
		if err != nil {
			t.Fatalf("WritePartition(%q, plan %s, partition %d, ids %d..%d): %v", info.CaptureInstance, info.PlanID, i, sp.from, sp.to-1, err)
		}
		checkPart(t, p, info, i, sp.rows())
		parts[i] = p
	}
	return parts
}

func writeOne(ctx context.Context, s sink.Sink, info sink.Info, i int, sp span) (sink.Part, error) {
	rr, err := Records(memory.DefaultAllocator, info, sp.from, sp.to, batchRows)
	if err != nil {
		return sink.Part{}, err
	}
	defer rr.Release()
	return s.WritePartition(ctx, info, i, rr)
}

func checkPart(t *testing.T, p sink.Part, info sink.Info, partition int, rows int64) {
	t.Helper()
	if p.Partition != partition {
		t.Errorf("WritePartition(partition %d): Part.Partition = %d, want %d", partition, p.Partition, partition)
	}
	if p.PlanID != info.PlanID {
		t.Errorf("WritePartition(partition %d): Part.PlanID = %q, want Info.PlanID %q", partition, p.PlanID, info.PlanID)
	}
	if p.Rows != rows {
		t.Errorf("WritePartition(partition %d): Part.Rows = %d, want the %d rows written", partition, p.Rows, rows)
	}
}

// wantNotFound checks FindSnapshot(ci) fails with sink.ErrNotFound.
func wantNotFound(t *testing.T, s sink.Sink, ci, when string) {
	t.Helper()
	snap, err := s.FindSnapshot(t.Context(), ci)
	switch {
	case err == nil:
		t.Errorf("%s: FindSnapshot(%q) found a snapshot (LSN %s, %d rows), want an error wrapping sink.ErrNotFound", when, ci, snap.LSN, snap.Rows)
	case !errors.Is(err, sink.ErrNotFound):
		t.Errorf("%s: FindSnapshot(%q) = %v, want an error wrapping sink.ErrNotFound", when, ci, err)
	}
}

// find returns FindSnapshot(ci), failing the test on error.
func find(t *testing.T, s sink.Sink, ci, when string) sink.Snapshot {
	t.Helper()
	snap, err := s.FindSnapshot(t.Context(), ci)
	if err != nil {
		t.Fatalf("%s: FindSnapshot(%q): %v", when, ci, err)
	}
	return snap
}

// checkSnapshot checks snap records info's snapshot holding rows rows.
func checkSnapshot(t *testing.T, what string, snap sink.Snapshot, info sink.Info, rows int64) {
	t.Helper()
	if snap.CaptureInstance != info.CaptureInstance {
		t.Errorf("%s: CaptureInstance = %q, want %q (the name as the snapshot's Info gave it)", what, snap.CaptureInstance, info.CaptureInstance)
	}
	if snap.LSN != info.LSN {
		t.Errorf("%s: LSN = %s, want %s", what, snap.LSN, info.LSN)
	}
	got, want := snap.CommitTS.UTC().Truncate(time.Microsecond), info.CommitTS.UTC().Truncate(time.Microsecond)
	if !got.Equal(want) {
		t.Errorf("%s: CommitTS = %s, want %s (compared in UTC to the microsecond)", what, snap.CommitTS.UTC().Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if snap.Rows != rows && snap.Rows != -1 {
		t.Errorf("%s: Rows = %d, want %d (or -1 for unknown)", what, snap.Rows, rows)
	}
}

// jsonParts sends parts through JSON, as fan-out does between processes.
func jsonParts(t *testing.T, parts []sink.Part) []sink.Part {
	t.Helper()
	b, err := json.Marshal(parts)
	if err != nil {
		t.Fatalf("marshaling parts to JSON (a Part must travel between processes): %v", err)
	}
	var out []sink.Part
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshaling parts from JSON %s: %v", b, err)
	}
	return out
}

func testAtomicCommit(t *testing.T, s sink.Sink) {
	ctx := t.Context()
	info := Info("dbo_Orders", LSN(0x1000))
	spans := []span{{1, 401}, {401, 650}, {650, 1001}}
	parts := write(t, s, info, spans)

	wantNotFound(t, s, info.CaptureInstance, "after WritePartition, before CommitSnapshot")

	// Parts travel as JSON and arrive in any order.
	shipped := jsonParts(t, parts)
	slices.Reverse(shipped)
	snap, err := s.CommitSnapshot(ctx, info, shipped)
	if err != nil {
		t.Fatalf("CommitSnapshot(%q, %d parts): %v", info.CaptureInstance, len(parts), err)
	}
	checkSnapshot(t, "CommitSnapshot's snapshot", snap, info, total(spans))

	found := find(t, s, info.CaptureInstance, "after CommitSnapshot")
	checkSnapshot(t, "FindSnapshot after CommitSnapshot", found, info, total(spans))
	if found.Version != snap.Version {
		t.Errorf("FindSnapshot: Version = %d, want %d, the version CommitSnapshot returned", found.Version, snap.Version)
	}
	checkRows(t, s, info.CaptureInstance, info, spans)
}

func testFindIgnoresCase(t *testing.T, s sink.Sink) {
	orders := Info("dbo_Orders", LSN(0x2000))
	commit(t, s, orders, []span{{1, 301}})
	customers := Info("dbo_Customers", LSN(0x2100))
	commit(t, s, customers, []span{{1, 51}})

	for _, name := range []string{"dbo_Orders", "DBO_ORDERS", "dbo_orders"} {
		got := find(t, s, name, "a rerun with another spelling of the name")
		checkSnapshot(t, fmt.Sprintf("FindSnapshot(%q)", name), got, orders, 300)
	}
	got := find(t, s, "DBO_customers", "the second instance")
	checkSnapshot(t, `FindSnapshot("DBO_customers")`, got, customers, 50)
	for _, name := range []string{"dbo_Order", "dbo_Orders2", "sales_Orders"} {
		wantNotFound(t, s, name, "another instance name")
	}
}

// commit writes and commits info's snapshot, failing the test on error.
func commit(t *testing.T, s sink.Sink, info sink.Info, spans []span) sink.Snapshot {
	t.Helper()
	parts := write(t, s, info, spans)
	snap, err := s.CommitSnapshot(t.Context(), info, parts)
	if err != nil {
		t.Fatalf("CommitSnapshot(%q, LSN %s): %v", info.CaptureInstance, info.LSN, err)
	}
	return snap
}

func testSecondSnapshotRefused(t *testing.T, s sink.Sink) {
	ctx := t.Context()
	first := Info("dbo_Orders", LSN(0x3000))
	second := Info("DBO_ORDERS", LSN(0x3100)) // a newer LSN, another plan
	firstParts := write(t, s, first, []span{{1, 201}, {201, 301}})
	secondParts := write(t, s, second, []span{{1, 501}})

	won, err := s.CommitSnapshot(ctx, first, firstParts)
	if err != nil {
		t.Fatalf("CommitSnapshot(first): %v", err)
	}
	// The first snapshot landed while the second plan was being written:
	// the contract says the second commit returns the first, commits
	// nothing, and wraps ErrSnapshotExists.
	got, err := s.CommitSnapshot(ctx, second, secondParts)
	if !errors.Is(err, sink.ErrSnapshotExists) {
		t.Fatalf("CommitSnapshot(%q) after %q landed meanwhile = %v, want an error wrapping sink.ErrSnapshotExists", second.CaptureInstance, first.CaptureInstance, err)
	}
	checkSnapshot(t, "the snapshot CommitSnapshot returns with ErrSnapshotExists", got, first, 300)
	if got.Version != won.Version {
		t.Errorf("the snapshot returned with ErrSnapshotExists has Version %d, want the first's %d", got.Version, won.Version)
	}
	found := find(t, s, second.CaptureInstance, "after the refused commit")
	checkSnapshot(t, "FindSnapshot after the refused commit", found, first, 300)
	checkRows(t, s, second.CaptureInstance, first, []span{{1, 201}, {201, 301}})

	// A resnapshot names the snapshot it replaces (sink.Info.Replaces): it
	// commits while that is still the newest, and becomes the newest.
	third := Info("dbo_orders", LSN(0x3200))
	third.Replaces = first.LSN
	resnap, err := s.CommitSnapshot(ctx, third, write(t, s, third, []span{{1, 101}}))
	if err != nil {
		t.Fatalf("CommitSnapshot of a resnapshot replacing %s: %v", first.LSN, err)
	}
	checkSnapshot(t, "a resnapshot's CommitSnapshot", resnap, third, 100)
	found = find(t, s, first.CaptureInstance, "after a resnapshot")
	checkSnapshot(t, "FindSnapshot after a resnapshot (the newest)", found, third, 100)
	checkRows(t, s, first.CaptureInstance, third, []span{{1, 101}})

	// A second resnapshot that still names the first snapshot lost the race
	// to the third: refused, and it returns the third.
	fourth := Info("DBO_Orders", LSN(0x3300))
	fourth.Replaces = first.LSN
	got, err = s.CommitSnapshot(ctx, fourth, write(t, s, fourth, []span{{1, 11}}))
	if !errors.Is(err, sink.ErrSnapshotExists) {
		t.Fatalf("CommitSnapshot of a stale resnapshot (replaces %s, newest is %s) = %v, want ErrSnapshotExists", first.LSN, third.LSN, err)
	}
	checkSnapshot(t, "the snapshot a stale resnapshot's refused CommitSnapshot returns", got, third, 100)
}

func testConcurrentCommitsOneWins(t *testing.T, s sink.Sink) {
	const n = 8
	names := []string{"dbo_Orders", "DBO_ORDERS", "dbo_orders", "Dbo_Orders"}
	infos := make([]sink.Info, n)
	spans := make([][]span, n)
	for i := range n {
		infos[i] = Info(names[i%len(names)], LSN(0x4000+uint64(i)))
		rows := int64(100 + 10*i) // each plan has its own row count
		spans[i] = []span{{1, 1 + rows/2}, {1 + rows/2, 1 + rows}}
	}
	snaps := make([]sink.Snapshot, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			ctx := t.Context()
			parts := make([]sink.Part, len(spans[i]))
			for j, sp := range spans[i] {
				p, err := writeOne(ctx, s, infos[i], j, sp)
				if err != nil {
					errs[i] = fmt.Errorf("WritePartition(plan %d, partition %d): %w", i, j, err)
					return
				}
				parts[j] = p
			}
			snaps[i], errs[i] = s.CommitSnapshot(ctx, infos[i], parts)
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("CommitSnapshot of plans %d (LSN %s) and %d (LSN %s) of the same instance both succeeded, want exactly one", winner, infos[winner].LSN, i, infos[i].LSN)
		case err == nil:
			winner = i
		case !errors.Is(err, sink.ErrSnapshotExists):
			t.Errorf("plan %d: %v, want nil or an error wrapping sink.ErrSnapshotExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d concurrent commits of one instance succeeded: %v", n, errors.Join(errs...))
	}
	want := infos[winner]
	for i, err := range errs {
		if i != winner && errors.Is(err, sink.ErrSnapshotExists) {
			checkSnapshot(t, fmt.Sprintf("plan %d's refused CommitSnapshot", i), snaps[i], want, total(spans[winner]))
		}
	}
	for _, name := range names {
		found := find(t, s, name, "after concurrent commits")
		checkSnapshot(t, fmt.Sprintf("FindSnapshot(%q) after concurrent commits", name), found, want, total(spans[winner]))
	}
	checkRows(t, s, want.CaptureInstance, want, spans[winner])
}

func testConcurrentInstances(t *testing.T, s sink.Sink) {
	const n = 8
	infos := make([]sink.Info, n)
	rows := make([]int64, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		infos[i] = Info(fmt.Sprintf("dbo_Table%d", i), LSN(0x5000+uint64(i)))
		rows[i] = int64(50 + 7*i)
		wg.Go(func() {
			<-start
			ctx := t.Context()
			p, err := writeOne(ctx, s, infos[i], 0, span{1, 1 + rows[i]})
			if err != nil {
				errs[i] = fmt.Errorf("WritePartition(%q): %w", infos[i].CaptureInstance, err)
				return
			}
			if _, err := s.CommitSnapshot(ctx, infos[i], []sink.Part{p}); err != nil {
				errs[i] = fmt.Errorf("CommitSnapshot(%q): %w", infos[i].CaptureInstance, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent snapshot of another instance %d: %v", i, err)
		}
	}
	for i, info := range infos {
		found := find(t, s, strings.ToUpper(info.CaptureInstance), "after concurrent commits of different instances")
		checkSnapshot(t, fmt.Sprintf("FindSnapshot(%q)", info.CaptureInstance), found, info, rows[i])
		checkRows(t, s, info.CaptureInstance, info, []span{{1, 1 + rows[i]}})
	}
}

// errReader is the error failingReader reports.
var errReader = errors.New("sinktest: the source failed mid-partition")

// failingReader yields the first batches of rr, then stops with errReader,
// as a source read that fails after some rows does.
type failingReader struct {
	array.RecordReader
	batches int
	err     error
}

func (r *failingReader) Next() bool {
	if r.err != nil {
		return false
	}
	if r.batches == 0 {
		r.err = errReader
		return false
	}
	r.batches--
	return r.RecordReader.Next()
}

func (r *failingReader) Err() error { return r.err }

func testFailedWriteLeavesNothing(t *testing.T, s sink.Sink) {
	ctx := t.Context()
	failed := Info("dbo_Orders", LSN(0x6000))
	if _, err := writeOne(ctx, s, failed, 0, span{1, 301}); err != nil {
		t.Fatalf("WritePartition(partition 0): %v", err)
	}
	rr, err := Records(memory.DefaultAllocator, failed, 301, 1001, batchRows)
	if err != nil {
		t.Fatal(err)
	}
	fr := &failingReader{RecordReader: rr, batches: 1}
	part, err := s.WritePartition(ctx, failed, 1, fr)
	rr.Release()
	switch {
	case err != nil:
		// The contract: nothing it wrote may ever become visible.
	case fr.Err() != nil:
		// The sink did not report the reader's error; the caller sees it
		// in rr.Err() and does not commit (snapshot.Execute checks both).
		t.Logf("WritePartition returned nil (Part.Rows %d) for a reader whose Err() is %v; the caller checks Err() and does not commit", part.Rows, fr.Err())
	default:
		t.Fatal("the failing reader reported no error; the suite is broken")
	}
	wantNotFound(t, s, failed.CaptureInstance, "after a failed WritePartition, without a commit")

	// A rerun starts over: a new plan at a new LSN, every partition again.
	rerun := Info("dbo_Orders", LSN(0x6100))
	spans := []span{{1, 301}, {301, 1001}}
	snap := commit(t, s, rerun, spans)
	checkSnapshot(t, "the rerun's CommitSnapshot", snap, rerun, total(spans))
	found := find(t, s, rerun.CaptureInstance, "after the rerun")
	checkSnapshot(t, "FindSnapshot after the rerun", found, rerun, total(spans))
	checkRows(t, s, rerun.CaptureInstance, rerun, spans)
}

func testForeignPartsRefused(t *testing.T, s sink.Sink) {
	ctx := t.Context()
	a := Info("dbo_Orders", LSN(0x7000))
	b := Info("dbo_Orders", LSN(0x7000)) // the same snapshot, another plan
	aParts := write(t, s, a, []span{{1, 101}, {101, 201}})
	bParts := write(t, s, b, []span{{1, 101}, {101, 201}})

	cases := []struct {
		what  string
		parts []sink.Part
	}{
		{"every part from another plan", aParts},
		{"one part from another plan", []sink.Part{bParts[0], aParts[1]}},
	}
	for _, c := range cases {
		snap, err := s.CommitSnapshot(ctx, b, c.parts)
		switch {
		case err == nil:
			t.Errorf("CommitSnapshot(plan %s) with %s succeeded (LSN %s, %d rows), want an error", b.PlanID, c.what, snap.LSN, snap.Rows)
		case errors.Is(err, sink.ErrSnapshotExists):
			t.Errorf("CommitSnapshot(plan %s) with %s = %v, want an error about the parts, not ErrSnapshotExists (no snapshot exists)", b.PlanID, c.what, err)
		}
		wantNotFound(t, s, b.CaptureInstance, "after CommitSnapshot refused "+c.what)
	}

	// Refusals commit nothing: a proper commit still works.
	rerun := Info("dbo_Orders", LSN(0x7100))
	spans := []span{{1, 151}}
	commit(t, s, rerun, spans)
	found := find(t, s, rerun.CaptureInstance, "after a proper commit")
	checkSnapshot(t, "FindSnapshot after a proper commit", found, rerun, 150)
	checkRows(t, s, rerun.CaptureInstance, rerun, spans)
}

func testEmptySnapshot(t *testing.T, s sink.Sink) {
	t.Run("NoBatches", func(t *testing.T) {
		info := Info("dbo_Empty", LSN(0x8000))
		snap := commit(t, s, info, []span{{1, 1}})
		checkSnapshot(t, "CommitSnapshot of an empty snapshot", snap, info, 0)
		found := find(t, s, info.CaptureInstance, "after committing an empty snapshot")
		checkSnapshot(t, "FindSnapshot of an empty snapshot", found, info, 0)
		checkRows(t, s, info.CaptureInstance, info, nil)
	})
	t.Run("ZeroRowBatch", func(t *testing.T) {
		ctx := t.Context()
		info := Info("dbo_Empty2", LSN(0x8100))
		rr, err := EmptyBatch(memory.DefaultAllocator, info)
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		p, err := s.WritePartition(ctx, info, 0, rr)
		if err != nil {
			t.Fatalf("WritePartition of one zero-row batch: %v", err)
		}
		checkPart(t, p, info, 0, 0)
		snap, err := s.CommitSnapshot(ctx, info, []sink.Part{p})
		if err != nil {
			t.Fatalf("CommitSnapshot of an empty snapshot: %v", err)
		}
		checkSnapshot(t, "CommitSnapshot of an empty snapshot", snap, info, 0)
		found := find(t, s, info.CaptureInstance, "after committing an empty snapshot")
		checkSnapshot(t, "FindSnapshot of an empty snapshot", found, info, 0)
		checkRows(t, s, info.CaptureInstance, info, nil)
	})
}

// checkRows compares the rows the sink reads back for ci, when it is a
// RowReader, with the rows of spans written for info.
func checkRows(t *testing.T, s sink.Sink, ci string, info sink.Info, spans []span) {
	t.Helper()
	r, ok := s.(RowReader)
	if !ok {
		return
	}
	want := map[string]int{}
	for _, sp := range spans {
		rr, err := Records(memory.DefaultAllocator, info, sp.from, sp.to, batchRows)
		if err != nil {
			t.Fatal(err)
		}
		err = canonicalRows(rr, info.Schema, want)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	rr, err := r.ReadSnapshotRows(t.Context(), ci)
	if err != nil {
		t.Errorf("ReadSnapshotRows(%q): %v", ci, err)
		return
	}
	got := map[string]int{}
	err = canonicalRows(rr, info.Schema, got)
	rr.Release()
	if err != nil {
		t.Errorf("ReadSnapshotRows(%q): %v", ci, err)
		return
	}
	compareRows(t, fmt.Sprintf("ReadSnapshotRows(%q)", ci), fmt.Sprintf("LSN %s", info.LSN), got, want)
}

// compareRows reports rows missing from got or unexpected in it, as
// multisets of canonical row text; hint says what was wanted.
func compareRows(t *testing.T, what, hint string, got, want map[string]int) {
	t.Helper()
	var missing, extra []string
	var nGot, nWant int
	for row, n := range want {
		nWant += n
		for range n - got[row] {
			missing = append(missing, row)
		}
	}
	for row, n := range got {
		nGot += n
		for range n - want[row] {
			extra = append(extra, row)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		t.Errorf("%s: %d rows, want %d (%s); %d missing, first: %v; %d unexpected, first: %v",
			what, nGot, nWant, hint, len(missing), firstN(missing, 3), len(extra), firstN(extra, 3))
	}
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// canonicalRows adds each row of rr to rows as text: the columns of schema
// in its order, found in rr by name, each value printed canonically.
func canonicalRows(rr array.RecordReader, schema *arrow.Schema, rows map[string]int) error {
	idx := make([]int, schema.NumFields())
	for i, f := range schema.Fields() {
		found := rr.Schema().FieldIndices(f.Name)
		if len(found) != 1 {
			return fmt.Errorf("the rows read back have %d columns named %q, want 1 (schema %s)", len(found), f.Name, rr.Schema())
		}
		idx[i] = found[0]
	}
	var sb strings.Builder
	for rr.Next() {
		rec := rr.RecordBatch()
		for r := range int(rec.NumRows()) {
			sb.Reset()
			for i, f := range schema.Fields() {
				if i > 0 {
					sb.WriteString(" ")
				}
				sb.WriteString(f.Name)
				sb.WriteString("=")
				v, err := cell(rec.Column(idx[i]), r)
				if err != nil {
					return fmt.Errorf("column %q: %w", f.Name, err)
				}
				sb.WriteString(v)
			}
			rows[sb.String()]++
		}
	}
	return rr.Err()
}

// cell prints value i of a canonically: strings quoted, timestamps as UTC
// RFC 3339, dictionaries as their values.
func cell(a arrow.Array, i int) (string, error) {
	if a.IsNull(i) {
		return "NULL", nil
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return cell(a.Dictionary(), a.GetValueIndex(i))
	case *array.String:
		return strconv.Quote(a.Value(i)), nil
	case *array.LargeString:
		return strconv.Quote(a.Value(i)), nil
	case *array.StringView:
		return strconv.Quote(a.Value(i)), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano), nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), nil
	default:
		return a.ValueStr(i), nil
	}
}
