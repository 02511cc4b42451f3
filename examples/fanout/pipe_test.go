package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func runCLI(ctx context.Context, stdin string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := cli(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestPipeProtocol runs the steps as a Spark driver does (examples/spark):
// plan -tasks writes one task per line for the partitions left, a worker
// reads task lines on stdin and prints one Part line per task (RDD.pipe),
// and commit takes the collected lines, with the recorded parts of a
// resumed plan.
func TestPipeProtocol(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	target := filepath.Join(dir, "table")
	common := []string{"-target", target, "-seed", "5", "-rows", "3000"}
	tasksFile := filepath.Join(dir, "tasks.jsonl")
	planJSON, _, err := runCLI(ctx, "", append([]string{"plan", "-partitions", "4", "-min-partition-rows", "0", "-tasks", tasksFile}, common...)...)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, tasksFile)
	if len(lines) != 4 {
		t.Fatalf("plan -tasks wrote %d lines, want 4", len(lines))
	}
	for i, l := range lines {
		var task Task
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&task); err != nil || task.Partition != i || task.Target != target || task.Plan == nil || task.Source.Rows != 3000 {
			t.Fatalf("task line %d = %q (%v)", i, l, err)
		}
	}

	// Partition 1 runs alone first: a Spark job that died after one task.
	out, _, err := runCLI(ctx, lines[1]+"\n", "worker")
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("worker of one task = %q, %v; want one Part line", out, err)
	}
	// The driver runs again: plan resumes and lists the three left.
	again, errOut, err := runCLI(ctx, "", append([]string{"plan", "-partitions", "4", "-min-partition-rows", "0", "-tasks", tasksFile}, common...)...)
	if err != nil || again != planJSON || !strings.Contains(errOut, "run workers for [0 2 3]") {
		t.Fatalf("plan again = %q, %q, %v", again, errOut, err)
	}
	left := readLines(t, tasksFile)
	if len(left) != 3 {
		t.Fatalf("resumed plan -tasks wrote %d lines, want 3", len(left))
	}
	// One worker process takes two tasks, as one RDD partition of two
	// elements would: two Part lines, in order.
	out, errOut, err = runCLI(ctx, left[0]+"\n"+left[1]+"\n", "worker")
	if err != nil {
		t.Fatalf("worker of two tasks: %v", err)
	}
	// The process opens its source once: the second task reuses it.
	if timings := strings.Split(strings.TrimSpace(errOut), "\n"); len(timings) != 2 || !strings.Contains(timings[1], "source opened in 0.000s,") || strings.Contains(timings[0], "source opened in 0.000s,") {
		t.Errorf("worker timings %q, want the source opened by the first task only", timings)
	}
	var got []int
	for l := range strings.Lines(out) {
		var p sink.Part
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("worker line %q: %v", l, err)
		}
		got = append(got, p.Partition)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("worker of tasks 0 and 2 printed parts %v", got)
	}
	last, _, err := runCLI(ctx, left[2], "worker")
	if err != nil {
		t.Fatalf("worker of task 3: %v", err)
	}
	collected := out + last // what the driver collects: partitions 0, 2, 3

	// The collected parts alone lack partition 1, which the first run
	// recorded: commit names it, and -with-recorded takes it.
	if _, _, err := runCLI(ctx, collected, append(append([]string{"commit", "-plan", planFile}, common...), "-")...); err == nil || !strings.Contains(err.Error(), "no part for partition 1") {
		t.Fatalf("commit of 3 of 4 parts = %v, want an error naming partition 1", err)
	}
	res, _, err := runCLI(ctx, collected, append(append([]string{"commit", "-plan", planFile, "-with-recorded"}, common...), "-")...)
	if err != nil || !strings.Contains(res, "committed: 3003 rows of sales_orders") {
		t.Fatalf("commit -with-recorded = %q, %v", res, err)
	}
	if v := version(t, target); v != 0 {
		t.Errorf("table at version %d after one commit", v)
	}
	if n := tableRows(t, target); n != 3003 {
		t.Errorf("table holds %d rows, want 3003", n)
	}
	// The driver reruns its commit (it died before seeing the answer):
	// the snapshot is there, nothing is committed.
	res, _, err = runCLI(ctx, collected, append(append([]string{"commit", "-plan", planFile, "-with-recorded"}, common...), "-")...)
	if err != nil || !strings.Contains(res, "exists:") {
		t.Errorf("a rerun of commit -with-recorded = %q, %v; want the existing snapshot", res, err)
	}

	// A resnapshot plan whose records are gone (dropped as stale, say)
	// must not pass for committed: the table's snapshot is the one it
	// replaces, though at the same LSN.
	replan, _, err := runCLI(ctx, "", append([]string{"plan", "-partitions", "2", "-min-partition-rows", "0", "-resnapshot"}, common...)...)
	if err != nil {
		t.Fatalf("plan -resnapshot: %v", err)
	}
	var p2 snapshot.Plan
	if err := json.Unmarshal([]byte(replan), &p2); err != nil || p2.Replaces != p2.LSN {
		t.Fatalf("resnapshot plan %q (%v): want one replacing the snapshot at its own LSN", replan, err)
	}
	table, err := blobstore.Open(ctx, target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	if err := table.DropPartial(ctx, p2.CaptureInstance, p2.ID); err != nil {
		t.Fatal(err)
	}
	replanFile := filepath.Join(dir, "replan.json")
	if err := os.WriteFile(replanFile, []byte(replan), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLI(ctx, "", append([]string{"commit", "-plan", replanFile}, common...)...); err == nil || !errors.Is(err, sink.ErrNotFound) {
		t.Errorf("commit of a dropped resnapshot plan = %q, %v; want the missing records' error", out, err)
	}

	// A rerun of the driver: no plan, an empty task file.
	out, _, err = runCLI(ctx, "", append([]string{"plan", "-partitions", "4", "-min-partition-rows", "0", "-tasks", tasksFile}, common...)...)
	if b, _ := os.ReadFile(tasksFile); err != nil || out != "" || len(b) != 0 {
		t.Errorf("plan after the commit = %q, tasks %q, %v; want nothing", out, b, err)
	}
}

// TestWorkerStopsAtFirstFailure: a worker of several tasks prints the
// parts it finished and exits with the first failure's error.
func TestWorkerStopsAtFirstFailure(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 2000, 3)
	db, err := newDemo(cfg.source)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: demoInstance, Partitions: 3, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for i, fault := range []Fault{"", FailRead, ""} {
		if err := enc.Encode(Task{Plan: plan, Partition: i, Target: cfg.target, Source: cfg.source, Fault: fault}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	var errOut bytes.Buffer
	err = worker(ctx, &in, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "injected read failure") {
		t.Fatalf("worker = %v, want the injected failure", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 || !strings.Contains(out.String(), `"partition":0`) {
		t.Errorf("worker printed %q, want partition 0's part only", &out)
	}
	if !strings.HasPrefix(errOut.String(), "fanout worker: partition 0 (attempt 0): ") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("worker's stderr %q, want one timing line for partition 0", &errOut)
	}
	if _, _, err := execute(ctx, sources{}, Task{Plan: plan, Partition: 0, Target: cfg.target, Source: cfg.source, Fault: "explode"}); err == nil || !strings.Contains(err.Error(), `unknown fault "explode"`) {
		t.Errorf("unknown fault = %v", err)
	}
}

// TestSQLServerSource runs the coordinator, its worker processes and the
// verification against the demo database served over TDS
// (internal/tdsfake), so every read goes through go-mssqldb and
// source/sqlserver; the DSN reaches the workers only through the
// environment and never shows in any output.
func TestSQLServerSource(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, 4000, 3)
	db, srv := serveDemo(t, cfg.source)
	dsn := srv.DSN("cdcsnap")
	const password = "fake-Passw0rd" // tdsfake's login
	if !strings.Contains(dsn, password) {
		t.Fatalf("DSN %q does not hold the password this test looks for", dsn)
	}
	t.Setenv(envDSN, dsn)
	cfg.source = SourceSpec{SQLServer: true, ServerTimeZone: "UTC"}
	var out, errOut bytes.Buffer
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"source:  SQL Server", "commit:  4003 rows", "check:   latest image equals a snapshot.Take"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	// The table equals a Take of the fake itself, read without the wire.
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	keys, diff, err := compareWithTake(ctx, db, table, demoInstance)
	if err != nil || len(diff) > 0 || keys != 4003 {
		t.Errorf("against a Take of the fake: %d keys, %v, %v", keys, diff, err)
	}

	// A wrong password: the error names the server, not the secret.
	bad := strings.Replace(dsn, password, "Wr0ng-Secret-pw", 1)
	t.Setenv(envDSN, bad)
	_, stderr, err := runCLI(ctx, "", "plan", "-target", filepath.Join(t.TempDir(), "t"))
	if err == nil {
		t.Fatal("plan with a wrong password succeeded")
	}
	for _, s := range []string{out.String(), errOut.String(), stderr, err.Error()} {
		if strings.Contains(s, password) || strings.Contains(s, "Wr0ng-Secret-pw") {
			t.Errorf("a password shows in %q", s)
		}
	}
}

// TestSourceEnvironment: the DSN comes from the environment or a file it
// names, never both; a task and the environment must agree on the source.
func TestSourceEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dsn")
	if err := os.WriteFile(file, []byte("  sqlserver://u:pw@127.0.0.1:1?database=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dsn, file, want, err string }{
		{"", "", "", ""},
		{"sqlserver://a", "", "sqlserver://a", ""},
		{"", file, "sqlserver://u:pw@127.0.0.1:1?database=x", ""},
		{"sqlserver://a", file, "", "both CDCSNAP_SOURCE_DSN and CDCSNAP_SOURCE_DSN_FILE are set"},
		{"", empty, "", "is empty"},
		{"", filepath.Join(dir, "missing"), "", "CDCSNAP_SOURCE_DSN_FILE: open"},
	} {
		t.Setenv(envDSN, c.dsn)
		t.Setenv(envDSNFile, c.file)
		got, err := dsnFromEnv()
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("dsn %q, file %q: got %q, %v; want %q, %q", c.dsn, c.file, got, err, c.want, c.err)
		}
	}
	t.Setenv(envDSNFile, "")
	t.Setenv(envDSN, "")
	if _, _, _, err := openSource(t.Context(), SourceSpec{SQLServer: true}, nil); err == nil || !strings.Contains(err.Error(), "neither CDCSNAP_SOURCE_DSN nor CDCSNAP_SOURCE_DSN_FILE is set") {
		t.Errorf("a SQL Server task without a DSN = %v", err)
	}
	t.Setenv(envDSN, "sqlserver://a")
	if _, _, _, err := openSource(t.Context(), SourceSpec{Rows: 1}, nil); err == nil || !strings.Contains(err.Error(), "the source is the demo database, but") {
		t.Errorf("a demo task with a DSN set = %v", err)
	}
	if _, _, err := runCLI(t.Context(), "", "export", "-o", filepath.Join(dir, "x.parquet")); err == nil || !strings.Contains(err.Error(), "only the demo database can be exported") {
		t.Errorf("export with a SQL Server source = %v", err)
	}
}

// serveDemo builds the demo database of spec and serves it over TDS until
// the test ends.
func serveDemo(t *testing.T, spec SourceSpec) (*fake.DB, *tdsfake.Server) {
	t.Helper()
	db, err := newDemo(spec)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tdsfake.Start(t.Context(), db, tdsfake.Options{NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return db, srv
}
