package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func TestMain(m *testing.M) {
	// The coordinator under test starts this test binary as its workers.
	if os.Getenv(workerEnv) == "1" {
		os.Exit(workerMain(context.Background()))
	}
	goleak.VerifyTestMain(m)
}

var (
	seedFlag  = flag.Uint64("seed", 0, "seed of TestFanoutEqualsTake (0: from the clock)")
	casesFlag = flag.Int("cases", 12, "cases of TestFanoutEqualsTake")
)

func testConfig(t *testing.T, rows, partitions int) config {
	return config{
		target:      filepath.Join(t.TempDir(), "bronze"),
		instance:    demoInstance,
		source:      SourceSpec{Seed: 7, Rows: rows},
		partitions:  partitions,
		retries:     2,
		verify:      true,
		crashWorker: -1,
		exe:         os.Args[0],
	}
}

func TestRun(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 5000, 4)
	var out, errOut bytes.Buffer
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"keyset ranges: 4 partitions", "commit:  5003 rows", "version 0", "check:   latest image equals a snapshot.Take"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if got := strings.Count(out.String(), "worker:  partition"); got != 4 {
		t.Errorf("%d worker lines, want 4:\n%s", got, &out)
	}

	// A rerun finds the snapshot and starts no worker.
	out.Reset()
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if !strings.Contains(out.String(), "already holds a snapshot of sales_orders") || strings.Contains(out.String(), "worker:") {
		t.Errorf("rerun output:\n%s", &out)
	}
	if v := version(t, cfg.target); v != 0 {
		t.Errorf("after the rerun the table is at version %d, want 0", v)
	}
}

func version(t *testing.T, target string) int64 {
	t.Helper()
	table, err := blobstore.Open(t.Context(), target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	v, err := table.Version(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dataFiles returns the Parquet files in the table's folder (committed or
// not) and the ones the table's latest version references.
func dataFiles(t *testing.T, target string) (onDisk, committed map[string]bool) {
	t.Helper()
	onDisk, committed = map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "_delta_log" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, err := filepath.Rel(target, p)
			if err != nil {
				return err
			}
			onDisk[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	table, err := blobstore.Open(t.Context(), target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	files, err := table.Files(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		committed[f.Path] = true
	}
	return onDisk, committed
}

// tableRows counts the rows a Delta reader sees.
func tableRows(t *testing.T, target string) int64 {
	t.Helper()
	table, err := blobstore.Open(t.Context(), target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	rr, err := table.ReadAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWorkerFailureRetried: partition 1's first worker dies after writing
// (and recording) its files, partition 2's fails its read; both are
// retried, the commit holds every row once, and the files of partition 1's
// retry, which found the first attempt's recorded part, are orphans no
// reader sees.
func TestWorkerFailureRetried(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 4000, 4)
	cfg.faults = map[int]Fault{1: CrashAfterWrite, 2: FailRead}
	var out, errOut bytes.Buffer
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"partition 1, attempt 1 failed", "crash-after-write", "partition 2, attempt 1 failed", "fail-read"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, &errOut)
		}
	}
	if !strings.Contains(out.String(), "check:   latest image equals") {
		t.Errorf("output:\n%s", &out)
	}
	if n := tableRows(t, cfg.target); n != 4003 {
		t.Errorf("the table holds %d rows, want the source's 4003 once each", n)
	}
	onDisk, committed := dataFiles(t, cfg.target)
	var orphans []string
	for f := range onDisk {
		if !committed[f] {
			orphans = append(orphans, f)
		}
	}
	for f := range committed {
		if !onDisk[f] {
			t.Errorf("committed file %s is not in the folder", f)
		}
	}
	if len(orphans) == 0 {
		t.Errorf("no orphan file: the crashed worker's files should be in the folder, uncommitted (on disk %v, committed %v)", onDisk, committed)
	}
	if len(committed) != 4 {
		t.Errorf("%d committed files, want one per partition: %v", len(committed), committed)
	}
}

// TestCoordinatorRestartResumes: a run whose partition 2 fails for good
// commits nothing; the coordinator run again resumes the recorded plan,
// starts workers only for the partitions not recorded, and commits the
// whole table once.
func TestCoordinatorRestartResumes(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 4000, 4)
	cfg.retries = 0
	cfg.parallel = 1
	cfg.faults = map[int]Fault{2: FailRead}
	var out, errOut bytes.Buffer
	if err := run(ctx, cfg, &out, &errOut); err == nil {
		t.Fatal("the first run succeeded despite partition 2's failure")
	}
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := table.FindPartial(ctx, demoInstance)
	table.Close()
	if err != nil || len(p.Parts) == 0 || len(p.Parts) == 4 {
		t.Fatalf("after the failed run the table records %+v, %v; want some partitions, not all", p, err)
	}
	cfg.faults = nil
	out.Reset()
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("second run: %v\n%s\n%s", err, &out, &errOut)
	}
	want := fmt.Sprintf("resume:  an earlier run recorded %d of the 4 partitions; %d left to read", len(p.Parts), 4-len(p.Parts))
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "plan "+p.PlanID) {
		t.Fatalf("second run output lacks %q and plan %s:\n%s", want, p.PlanID, &out)
	}
	if n := strings.Count(out.String(), "worker:  partition"); n != 4-len(p.Parts) {
		t.Fatalf("the second run started %d workers, want %d:\n%s", n, 4-len(p.Parts), &out)
	}
	if !strings.Contains(out.String(), "check:   latest image equals") || tableRows(t, cfg.target) != 4003 {
		t.Fatalf("the resumed table is not the source:\n%s", &out)
	}
}

// TestWorkerFailsForGood: a partition that fails on every attempt fails
// the run, and nothing is committed.
func TestWorkerFailsForGood(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 2000, 3)
	cfg.retries = 0
	cfg.faults = map[int]Fault{2: CrashAfterWrite}
	var out, errOut bytes.Buffer
	err := run(ctx, cfg, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "partition 2 failed 1 times") {
		t.Fatalf("run = %v, want partition 2's failure", err)
	}
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	if snap, err := table.FindSnapshot(ctx, demoInstance); !errors.Is(err, sink.ErrNotFound) {
		t.Errorf("after a failed fan-out FindSnapshot = %+v, %v; want sink.ErrNotFound", snap, err)
	}
}

// workerParts runs one worker process per partition of plan.
func workerParts(t *testing.T, cfg config, plan *snapshot.Plan) []sink.Part {
	t.Helper()
	parts := make([]sink.Part, len(plan.Ranges))
	for i := range parts {
		p, err := startWorker(t.Context(), cfg.exe, Task{Plan: plan, Partition: i, Target: cfg.target, Source: cfg.source})
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		parts[i] = p
	}
	return parts
}

// TestCommitChecksParts: Commit refuses parts of another plan and names a
// missing or duplicate partition; a second Commit of the same plan and a
// Commit of a second plan after it are no-ops that return the committed
// snapshot.
func TestCommitChecksParts(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 3000, 3)
	db, err := newDemo(cfg.source)
	if err != nil {
		t.Fatal(err)
	}
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	opts := snapshot.Options{CaptureInstance: demoInstance, Partitions: cfg.partitions, MinPartitionRows: -1}
	planA, err := snapshot.NewPlan(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	planB, err := snapshot.NewPlan(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if planA.ID == planB.ID {
		t.Fatalf("two plans share the id %s", planA.ID)
	}
	partsA, partsB := workerParts(t, cfg, planA), workerParts(t, cfg, planB)

	mixed := append([]sink.Part(nil), partsA...)
	mixed[1] = partsB[1]
	dup := append(append([]sink.Part(nil), partsA...), partsA[0])
	swapped := append([]sink.Part(nil), partsA...)
	swapped[2] = partsA[1]
	for _, c := range []struct {
		name  string
		parts []sink.Part
		want  []string
	}{
		{"all parts of another plan", partsB, []string{"belongs to plan " + fmt.Sprintf("%q", planB.ID), planA.ID}},
		{"one part of another plan", mixed, []string{"partition 1", planB.ID}},
		{"missing partition", partsA[:2], []string{"no part for partition 2"}},
		{"duplicate partition", dup, []string{"two parts for partition 0"}},
		{"a partition given twice, another missing", swapped, []string{"two parts for partition 1"}},
		{"no parts", nil, []string{"no part for partition 0"}},
	} {
		res, err := snapshot.Commit(ctx, table, planA, c.parts, nil)
		if err == nil {
			t.Errorf("%s: Commit = %+v, want an error", c.name, res)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Commit error %q does not name %q", c.name, err, w)
			}
		}
	}
	if _, err := table.FindSnapshot(ctx, demoInstance); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("after refused commits FindSnapshot = %v, want sink.ErrNotFound", err)
	}

	// Parts that traveled as JSON once more commit.
	b, err := json.Marshal(partsA)
	if err != nil {
		t.Fatal(err)
	}
	var again []sink.Part
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	res, err := snapshot.Commit(ctx, table, planA, again, nil)
	if err != nil || res.Existing || res.Rows != 3003 || res.LSN != planA.LSN {
		t.Fatalf("Commit(plan A) = %+v, %v; want 3003 rows at %s", res, err, planA.LSN)
	}
	// A second commit of the same plan is a no-op returning the snapshot.
	res2, err := snapshot.Commit(ctx, table, planA, partsA, nil)
	if err != nil || !res2.Existing || res2.Version != res.Version || res2.LSN != res.LSN {
		t.Errorf("second Commit(plan A) = %+v, %v; want Existing at version %d", res2, err, res.Version)
	}
	// So is a commit of another plan of the same instance.
	res3, err := snapshot.Commit(ctx, table, planB, partsB, nil)
	if err != nil || !res3.Existing || res3.Version != res.Version {
		t.Errorf("Commit(plan B) after plan A = %+v, %v; want Existing at version %d", res3, err, res.Version)
	}
	if v := version(t, cfg.target); v != res.Version {
		t.Errorf("table version %d, want %d: nothing committed after plan A", v, res.Version)
	}
	if n := tableRows(t, cfg.target); n != 3003 {
		t.Errorf("table holds %d rows, want 3003 (plan B's parts invisible)", n)
	}
	// A rerun of Take finds the fan-out's snapshot.
	tres, err := snapshot.Take(ctx, db, table, opts)
	if err != nil || !tres.Existing || tres.LSN != planA.LSN {
		t.Errorf("Take after the fan-out = %+v, %v; want the existing snapshot at %s", tres, err, planA.LSN)
	}
}

// TestFanoutEqualsTake is the property: for random demo sources and
// partition counts, a fan-out whose workers each build their own source,
// get the plan as JSON and return their parts as JSON, commits a table
// whose latest image (and row count) equals a Take of the same source.
// Workers run in-process here (TestRun and the others start processes).
func TestFanoutEqualsTake(t *testing.T) {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	r := rand.New(rand.NewPCG(s, 3))
	ctx := t.Context()
	for c := range *casesFlag {
		spec := SourceSpec{Seed: r.Uint64(), Rows: r.IntN(3000)}
		if c%4 == 0 {
			spec.Rows = r.IntN(3)
		}
		partitions := 1 + r.IntN(9)
		name := fmt.Sprintf("case %d (seed %d, %d rows, %d partitions)", c, spec.Seed, spec.Rows, partitions)
		dir := t.TempDir()
		fanTarget, takeTarget := filepath.Join(dir, "fanout"), filepath.Join(dir, "take")

		coord, err := newDemo(spec)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := snapshot.NewPlan(ctx, coord, snapshot.Options{CaptureInstance: demoInstance, Partitions: partitions, MinPartitionRows: -1})
		if err != nil {
			t.Fatalf("%s: NewPlan: %v", name, err)
		}
		parts := make([]sink.Part, len(plan.Ranges))
		for _, i := range r.Perm(len(plan.Ranges)) {
			task := roundTrip(t, Task{Plan: plan, Partition: i, Target: fanTarget, Source: spec})
			p, _, err := execute(ctx, sources{}, task)
			if err != nil {
				t.Fatalf("%s: worker %d: %v", name, i, err)
			}
			parts[i] = roundTrip(t, p)
		}
		fan, err := blobstore.Open(ctx, fanTarget, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := snapshot.Commit(ctx, fan, plan, parts, nil)
		if err != nil {
			fan.Close()
			t.Fatalf("%s: Commit: %v", name, err)
		}

		take, err := blobstore.Open(ctx, takeTarget, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tres, err := snapshot.Take(ctx, coord, take, snapshot.Options{CaptureInstance: demoInstance, Partitions: 1 + r.IntN(5), MinPartitionRows: -1})
		if err != nil {
			t.Fatalf("%s: Take: %v", name, err)
		}
		if res.LSN != tres.LSN || !res.CommitTS.Equal(tres.CommitTS) || res.Rows != tres.Rows {
			t.Errorf("%s: fan-out %+v, Take %+v: want the same LSN, commit time and rows", name, res, tres)
		}
		fanIm, err := tableImage(ctx, coord, fan, demoInstance)
		if err != nil {
			t.Fatal(err)
		}
		takeIm, err := tableImage(ctx, coord, take, demoInstance)
		if err != nil {
			t.Fatal(err)
		}
		ci, err := coord.CaptureInstance(ctx, demoInstance)
		if err != nil {
			t.Fatal(err)
		}
		srcIm, err := snapshot.SourceImage(ctx, coord, ci)
		if err != nil {
			t.Fatal(err)
		}
		if d := takeIm.Diff(fanIm, 5); len(d) > 0 {
			t.Errorf("%s: the fan-out's latest image differs from Take's:\n%s", name, strings.Join(d, "\n"))
		}
		if d := srcIm.Diff(fanIm, 5); len(d) > 0 || fanIm.Len() != spec.Rows+3 {
			t.Errorf("%s: the fan-out's latest image (%d keys) differs from the source (%d rows):\n%s", name, fanIm.Len(), spec.Rows+3, strings.Join(d, "\n"))
		}
		fan.Close()
		take.Close()
		if n := tableRows(t, fanTarget); n != int64(spec.Rows+3) {
			t.Errorf("%s: the fan-out table holds %d rows, want %d", name, n, spec.Rows+3)
		}
	}
}

// roundTrip sends v through JSON, as between processes.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T to JSON: %v", v, err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%T from JSON %s: %v", v, b, err)
	}
	return out
}

// TestWorkerBadInput: a worker names what is wrong with its task.
func TestWorkerBadInput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"not json", "reading task 1 from stdin"},
		{"", "no task on stdin"},
		{`{"partition": 0, "planz": {}}`, `unknown field "planz"`},
		{`{"partition": 0}`, "task 1 has no plan"},
	} {
		var out bytes.Buffer
		err := worker(t.Context(), strings.NewReader(c.in), &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("worker(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
	db, err := newDemo(SourceSpec{Seed: 1, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := snapshot.NewPlan(t.Context(), db, snapshot.Options{CaptureInstance: demoInstance, Partitions: 2, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = execute(t.Context(), sources{}, Task{Plan: plan, Partition: 5, Target: t.TempDir(), Source: SourceSpec{Seed: 1, Rows: 10}})
	if err == nil || !strings.Contains(err.Error(), "partition 5 does not exist") {
		t.Errorf("execute(partition 5 of %d) = %v, want an error naming it", len(plan.Ranges), err)
	}
}

// TestSteps runs the three steps as separate commands, as an orchestrator
// does: plan, one worker per partition (in any order), commit.
func TestSteps(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	target := filepath.Join(dir, "table")
	common := []string{"-target", target, "-seed", "3", "-rows", "2500"}
	cmd := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := cli(ctx, args, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	planJSON, _, err := cmd(append([]string{"plan", "-partitions", "3", "-min-partition-rows", "0"}, common...)...)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var plan snapshot.Plan
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil || len(plan.Ranges) != 3 {
		t.Fatalf("plan printed %q (%v), want a plan of 3 ranges", planJSON, err)
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	var partFiles []string
	for _, i := range []int{2, 0, 1} {
		if i == 1 {
			// The orchestrator restarts: plan again resumes the same
			// plan and says which partitions are left.
			again, errOut, err := cmd(append([]string{"plan", "-partitions", "3", "-min-partition-rows", "0"}, common...)...)
			if err != nil || again != planJSON || !strings.Contains(errOut, "partitions [0 2] are recorded; run workers for [1]") {
				t.Fatalf("plan after two workers = %q, %q, %v; want the same plan, resumed", again, errOut, err)
			}
		}
		out, _, err := cmd(append([]string{"worker", "-plan", planFile, "-partition", fmt.Sprint(i)}, common...)...)
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		f := filepath.Join(dir, fmt.Sprintf("part-%d.json", i))
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		partFiles = append(partFiles, f)
	}
	if _, _, err := cmd(append(append([]string{"commit", "-plan", planFile}, common...), partFiles[:2]...)...); err == nil || !strings.Contains(err.Error(), "no part for partition 1") {
		t.Errorf("commit without partition 1 = %v, want an error naming it", err)
	}
	// With no part files, commit takes the parts the workers recorded.
	out, _, err := cmd(append([]string{"commit", "-plan", planFile}, common...)...)
	if err != nil || !strings.Contains(out, "committed: 2503 rows of sales_orders at LSN "+plan.LSN.String()) {
		t.Fatalf("commit = %q, %v", out, err)
	}
	out, _, err = cmd(append(append([]string{"commit", "-plan", planFile}, common...), partFiles...)...)
	if err != nil || !strings.Contains(out, "exists:") {
		t.Errorf("second commit = %q, %v; want the existing snapshot, nothing committed", out, err)
	}
	out, errOut, err := cmd(append([]string{"plan"}, common...)...)
	if err != nil || out != "" || !strings.Contains(errOut, "already holds a snapshot") {
		t.Errorf("plan after the commit = %q, %q, %v; want no plan", out, errOut, err)
	}
	if _, _, err := cmd(append([]string{"worker", "-plan", planFile, "-partition", "3"}, common...)...); err == nil || !strings.Contains(err.Error(), "partition 3 does not exist") {
		t.Errorf("worker -partition 3 = %v, want an error naming it", err)
	}
	if _, _, err := cmd("commit", "-target", target); err == nil || !strings.Contains(err.Error(), "-plan is required") {
		t.Errorf("commit without -plan = %v", err)
	}
	if _, _, err := cmd("frobnicate"); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command = %v", err)
	}
}
