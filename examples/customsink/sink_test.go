package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

func TestMain(m *testing.M) {
	// As a child of TestCommitRaceAcrossProcesses: commit once and exit.
	if dir := os.Getenv(raceDirEnv); dir != "" {
		os.Exit(raceChild(dir))
	}
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		// The rows the suite reads back come from mem: it checks that the
		// suite and the sink release every one of them.
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		t.Cleanup(func() { mem.AssertSize(t, 0) })
		s, err := NewFolderSink(t.TempDir(), mem)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestRun(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := t.Context()
	cfg := config{dir: t.TempDir(), captureInstance: "dbo_Orders", rows: 3001, partitions: 4}

	var out bytes.Buffer
	if err := run(ctx, cfg, mem, &out); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(cfg.dir, "_snapshots", "dbo_orders", "00000000000000000000.json")
	for _, want := range []string{"snapshot committed: " + manifest, "rows: 3001 in 4 partitions", "lsn: " + exampleLSN.String()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}

	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest: %v\n%s", err, b)
	}
	if m.Rows != 3001 || len(m.Files) != 4 || m.LSN != exampleLSN || m.UserMetadata.LSN != exampleLSN.String() || m.UserMetadata.Snapshot != "dbo_Orders" {
		t.Errorf("manifest: %+v", m)
	}

	// The rows read back are the rows generated, ids 1..3001, once each.
	s, err := NewFolderSink(cfg.dir, mem)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := s.ReadSnapshotRows(ctx, "DBO_ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var nullCustomers int
	for rr.Next() {
		rec := rr.RecordBatch()
		ids := rec.Column(0)
		for i := range ids.Len() {
			id, _ := strconv.ParseInt(ids.ValueStr(i), 10, 64)
			if seen[id] || id < 1 || id > 3001 {
				t.Errorf("id %d read twice or out of range", id)
			}
			seen[id] = true
		}
		nullCustomers += rec.Column(1).NullN()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Release()
	if len(seen) != 3001 || nullCustomers != 3001/7 {
		t.Errorf("read back %d ids and %d NULL customers, want 3001 and %d", len(seen), nullCustomers, 3001/7)
	}

	// A rerun finds the snapshot and writes nothing.
	out.Reset()
	if err := run(ctx, cfg, mem, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "snapshot exists: "+manifest) || !strings.Contains(out.String(), "rows: 3001") {
		t.Errorf("rerun output:\n%s", &out)
	}
	staged, err := filepath.Glob(filepath.Join(cfg.dir, "_staging", "*", "*.parquet"))
	if err != nil || len(staged) != 4 {
		t.Errorf("staged files after a rerun: %d (%v), want the 4 of the first run", len(staged), err)
	}
}

func TestRunRejectsFlags(t *testing.T) {
	if err := run(t.Context(), config{dir: t.TempDir(), partitions: 0}, memory.DefaultAllocator, &bytes.Buffer{}); err == nil {
		t.Error("run with 0 partitions: no error")
	}
}

func TestInstanceFile(t *testing.T) {
	for ci, want := range map[string]string{
		"dbo_Orders": "dbo_orders",
		"DBO_ORDERS": "dbo_orders",
		"../x":       "%2E%2E%2Fx",
		"a b.c":      "a%20b%2Ec",
	} {
		if got := instanceFile(ci); got != want {
			t.Errorf("instanceFile(%q) = %q, want %q", ci, got, want)
		}
	}
}

func TestWritePartitionRefusesBadInput(t *testing.T) {
	s, err := NewFolderSink(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	info := sinktest.Info("dbo_Orders", sinktest.LSN(1))
	rr, err := sinktest.Records(memory.DefaultAllocator, info, 1, 11, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	bad := info
	bad.PlanID = "../escape"
	if _, err := s.WritePartition(t.Context(), bad, 0, rr); err == nil {
		t.Error("WritePartition with plan id ../escape: no error")
	}
	other := info
	other.Schema = capturedSchema()
	if _, err := s.WritePartition(t.Context(), other, 0, rr); err == nil {
		t.Error("WritePartition with records in another schema: no error")
	}
}

const raceDirEnv = "CUSTOMSINK_RACE_DIR"

// raceChild writes and commits one snapshot of dbo_Orders in dir, at the
// LSN of its pid, and prints "won" or "lost <winner's LSN>".
func raceChild(dir string) int {
	ctx := context.Background()
	s, err := NewFolderSink(dir, nil)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	info := sinktest.Info("dbo_Orders", sinktest.LSN(uint64(os.Getpid())))
	rr, err := sinktest.Records(memory.DefaultAllocator, info, 1, 1001, 256)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	part, err := s.WritePartition(ctx, info, 0, rr)
	rr.Release()
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	// Wait for the go signal, so the commits race.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			os.Stderr.WriteString("no go signal within a minute")
			return 2
		}
	}
	snap, err := s.CommitSnapshot(ctx, info, []sink.Part{part})
	switch {
	case err == nil:
		os.Stdout.WriteString("won " + snap.LSN.String())
	case errors.Is(err, sink.ErrSnapshotExists):
		os.Stdout.WriteString("lost " + snap.LSN.String())
	default:
		os.Stderr.WriteString(err.Error())
		return 2
	}
	return 0
}

// TestCommitRaceAcrossProcesses proves put-if-absent across processes, not
// only goroutines: exactly one of several processes commits, and the
// others get its snapshot back.
func TestCommitRaceAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const n = 6
	dir := t.TempDir()
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), raceDirEnv+"="+dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				errs[i] = errors.New(err.Error() + ": " + stderr.String())
			}
			outs[i] = stdout.String()
		})
	}
	// Give the children time to stage their parts, then let them commit.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		staged, _ := filepath.Glob(filepath.Join(dir, "_staging", "*", "*.parquet"))
		if len(staged) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d children staged their parts within a minute", len(staged), n)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var winner string
	for _, o := range outs {
		if l, ok := strings.CutPrefix(o, "won "); ok {
			if winner != "" {
				t.Errorf("two processes committed: %s and %s", winner, l)
			}
			winner = l
		}
	}
	if winner == "" {
		t.Fatalf("no process committed: %q", outs)
	}
	for _, o := range outs {
		if l, ok := strings.CutPrefix(o, "lost "); ok && l != winner {
			t.Errorf("a losing process got LSN %s back, want the winner's %s", l, winner)
		}
	}
	s, err := NewFolderSink(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.FindSnapshot(t.Context(), "dbo_orders")
	if err != nil || snap.LSN.String() != winner || snap.Rows != 1000 {
		t.Errorf("FindSnapshot = %+v, %v; want the winner's LSN %s and 1000 rows", snap, err, winner)
	}
}
