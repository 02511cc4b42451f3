package sinktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memSink is a minimal correct sink, the suite's reference. bug, when set,
// breaks one rule, so a test can prove the suite notices.
type memSink struct {
	bug string

	mu     sync.Mutex
	seq    int
	staged map[string][]arrow.RecordBatch // by staging key
	snaps  map[string]memSnap             // by capture instance, lowercased
	ver    int64
}

type memSnap struct {
	snap   sink.Snapshot
	schema *arrow.Schema
	recs   []arrow.RecordBatch
}

type memPartData struct {
	Key string `json:"key"`
}

func newMemSink(bug string) *memSink {
	return &memSink{bug: bug, staged: map[string][]arrow.RecordBatch{}, snaps: map[string]memSnap{}}
}

// release frees every record the sink holds.
func (s *memSink) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, recs := range s.staged {
		for _, r := range recs {
			r.Release()
		}
	}
	for _, sn := range s.snaps {
		for _, r := range sn.recs {
			r.Release()
		}
	}
	s.staged, s.snaps = nil, nil
}

func (s *memSink) key(ci string) string {
	if s.bug == "caseSensitive" {
		return ci
	}
	return strings.ToLower(ci)
}

func (s *memSink) FindSnapshot(_ context.Context, ci string) (sink.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snaps[s.key(ci)]
	if !ok {
		return sink.Snapshot{}, fmt.Errorf("memsink: %q: %w", ci, sink.ErrNotFound)
	}
	return sn.snap, nil
}

func (s *memSink) WritePartition(ctx context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	var recs []arrow.RecordBatch
	var rows int64
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		rows += rec.NumRows()
	}
	err := rr.Err()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil && s.bug != "ignoresReaderError" {
		for _, r := range recs {
			r.Release()
		}
		return sink.Part{}, fmt.Errorf("memsink: partition %d: %w", partition, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	key := fmt.Sprintf("%s/%d/%d", info.PlanID, partition, s.seq)
	s.staged[key] = recs
	if s.bug == "visibleEarly" {
		s.snaps[s.key(info.CaptureInstance)] = memSnap{snap: sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS, Rows: -1}}
	}
	data, err := json.Marshal(memPartData{Key: key})
	if err != nil {
		return sink.Part{}, fmt.Errorf("memsink: %w", err)
	}
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: rows, Data: data}, nil
}

func (s *memSink) CommitSnapshot(_ context.Context, info sink.Info, parts []sink.Part) (sink.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn, ok := s.snaps[s.key(info.CaptureInstance)]; ok && sn.snap.LSN != info.Replaces && s.bug != "overwrites" {
		return sn.snap, fmt.Errorf("memsink: %q: %w", info.CaptureInstance, sink.ErrSnapshotExists)
	}
	var recs []arrow.RecordBatch
	var rows int64
	for _, p := range parts {
		var d memPartData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return sink.Snapshot{}, fmt.Errorf("memsink: part %d: %w", p.Partition, err)
		}
		staged, ok := s.staged[d.Key]
		if s.bug != "ignoresPlanID" && (p.PlanID != info.PlanID || !strings.HasPrefix(d.Key, info.PlanID+"/")) {
			return sink.Snapshot{}, fmt.Errorf("memsink: part %d belongs to plan %q, not %q", p.Partition, p.PlanID, info.PlanID)
		}
		if !ok {
			return sink.Snapshot{}, fmt.Errorf("memsink: part %d: no staged data %q", p.Partition, d.Key)
		}
		for _, r := range staged {
			r.Retain()
			recs = append(recs, r)
			rows += r.NumRows()
		}
	}
	if s.bug == "miscounts" {
		rows++
	}
	if old, ok := s.snaps[s.key(info.CaptureInstance)]; ok {
		for _, r := range old.recs {
			r.Release()
		}
	}
	s.ver++
	snap := sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS, Version: s.ver, Rows: rows}
	s.snaps[s.key(info.CaptureInstance)] = memSnap{snap: snap, schema: info.Schema, recs: recs}
	return snap, nil
}

func (s *memSink) ReadSnapshotRows(_ context.Context, ci string) (array.RecordReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snaps[s.key(ci)]
	if !ok || sn.schema == nil {
		return nil, fmt.Errorf("memsink: %q: %w", ci, sink.ErrNotFound)
	}
	recs := sn.recs
	if s.bug == "dropsBatch" && len(recs) > 0 {
		recs = recs[1:]
	}
	return array.NewRecordReader(sn.schema, recs)
}

var (
	_ sink.Sink          = (*memSink)(nil)
	_ sinktest.RowReader = (*memSink)(nil)
)

func TestMemSink(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		s := newMemSink("")
		t.Cleanup(s.release)
		return s
	})
}

// brokenEnv names the bug TestBrokenMemSink gives its sinks.
const brokenEnv = "SINKTEST_BROKEN_SINK"

// TestBrokenMemSink runs the suite on a sink with one bug; it only runs as
// the child process of TestSuiteCatchesBugs.
func TestBrokenMemSink(t *testing.T) {
	bug := os.Getenv(brokenEnv)
	if bug == "" {
		t.Skip("runs as a child of TestSuiteCatchesBugs")
	}
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		s := newMemSink(bug)
		t.Cleanup(s.release)
		return s
	})
}

// TestSuiteCatchesBugs proves each rule is checked: the suite fails on a
// sink that breaks it, in the subtest meant to catch it.
func TestSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary once per bug")
	}
	cases := []struct{ bug, subtest string }{
		{"caseSensitive", "FindIgnoresCase"},
		{"overwrites", "SecondSnapshotRefused"},
		{"overwrites", "ConcurrentCommitsOneWins"},
		{"visibleEarly", "AtomicCommit"},
		{"ignoresPlanID", "ForeignPartsRefused"},
		{"miscounts", "AtomicCommit"},
		{"miscounts", "EmptySnapshot"},
		{"dropsBatch", "AtomicCommit"},
		{"dropsBatch", "FailedWriteLeavesNothing"},
	}
	for _, c := range cases {
		t.Run(c.bug+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			expectSuiteFails(t, "TestBrokenMemSink", brokenEnv, c.bug, c.subtest)
		})
	}
	// A sink that ignores the reader's error but never commits is within
	// the contract (the caller checks Err()): the suite passes it.
	t.Run("ignoresReaderError", func(t *testing.T) {
		t.Parallel()
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenMemSink$/^FailedWriteLeavesNothing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), brokenEnv+"=ignoresReaderError")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the suite failed a sink that ignores the reader's error: %v\n%s", err, out)
		}
	})
}

func TestRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	info := sinktest.Info("dbo_Orders", sinktest.LSN(42))
	rr, err := sinktest.Records(mem, info, 1, 301, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Schema().Equal(info.Schema) {
		t.Fatalf("schema = %s, want %s", rr.Schema(), info.Schema)
	}
	var batches, rows, nullNames int
	for rr.Next() {
		rec := rr.RecordBatch()
		batches++
		rows += int(rec.NumRows())
		nullNames += rec.Column(1).NullN()
		if got := rec.Column(rec.Schema().FieldIndices(sink.ColSnapshot)[0]).(*array.String).Value(0); got != "0x0000000000000000002A" {
			t.Errorf("_snapshot = %s, want 0x0000000000000000002A", got)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if batches != 3 || rows != 300 || nullNames != 60 {
		t.Errorf("%d batches, %d rows, %d NULL names; want 3, 300, 60", batches, rows, nullNames)
	}

	if _, err := sinktest.Records(mem, sink.Info{Schema: arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int8}}, nil)}, 0, 1, 1); err == nil {
		t.Error("Records over a schema without id and name: no error")
	}
	empty, err := sinktest.EmptyBatch(mem, info)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Release()
	if !empty.Next() || empty.RecordBatch().NumRows() != 0 || empty.Next() {
		t.Error("EmptyBatch: want exactly one zero-row batch")
	}
}

func TestInfo(t *testing.T) {
	a, b := sinktest.Info("dbo_Orders", sinktest.LSN(1)), sinktest.Info("dbo_Orders", sinktest.LSN(2))
	if a.PlanID == b.PlanID || a.PlanID == "" {
		t.Errorf("plan ids %q and %q: want distinct, non-empty", a.PlanID, b.PlanID)
	}
	if a.CommitTS.Equal(b.CommitTS) || a.CommitTS.Location() != b.CommitTS.Location() || a.CommitTS.Nanosecond()%1000 != 0 {
		t.Errorf("commit times %s and %s: want distinct UTC times with microsecond precision", a.CommitTS, b.CommitTS)
	}
	if a.Schema == nil || a.Schema.NumFields() != 2+len(sink.MetadataFields()) {
		t.Errorf("schema %s: want id, name and the metadata columns", a.Schema)
	}
}

// expectSuiteFails re-runs the test binary's test (a suite run on a sink
// with bug, chosen by env) limited to subtest, and fails unless exactly
// that subtest fails.
func expectSuiteFails(t *testing.T, test, env, bug, subtest string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+test+"$/^"+subtest+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+bug)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the suite passed (or did not run: %v) on a sink with bug %q, want a failure in %s:\n%s", err, bug, subtest, out)
	}
	if want := "--- FAIL: " + test + "/" + subtest; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
