package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// tree lists every file under dir with its size and modification time
// ("" when dir does not exist): two equal trees mean nothing was written.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %d\n", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// otherTable makes dir a Delta table holding a snapshot of another capture
// instance whose region column is an int, which sales_orders' varchar
// region cannot share.
func otherTable(t *testing.T, dir string) {
	t.Helper()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "regions", Key: []string{"region"}, CaptureInstance: "dbo_regions",
		Columns: []fake.ColumnDef{{Name: "region", Type: "int"}, {Name: "name", Type: "nvarchar(20)"}},
		Rows:    []fake.Row{{int64(1), "north"}}}); err != nil {
		t.Fatal(err)
	}
	table, err := blobstore.Open(t.Context(), dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	if _, _, err := snapshot.Bootstrap(t.Context(), db, table, snapshot.Options{CaptureInstance: "dbo_regions"}); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput runs the main job in-process on each wrong turn of a first
// day: the exit code, the first line on stderr (what is wrong and what to
// do) and that nothing was written to the target.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		prepare func(t *testing.T, dir string) // the target before the run; nil: absent
		code    int
		first   string // prefix of the first line on stderr
		more    []string
	}{
		{name: "rows 0", args: []string{"-rows", "0"}, code: exitUsage,
			first: "bootstrap: -rows 0: the demo table needs at least 1 row"},
		{name: "rows -5", args: []string{"-rows", "-5"}, code: exitUsage,
			first: "bootstrap: -rows -5: the demo table needs at least 1 row"},
		{name: "capture instance without dsn", args: []string{"-capture-instance", "dbo_nope"}, code: exitUsage,
			first: "bootstrap: -capture-instance names a capture instance on SQL Server: add -dsn sqlserver://... (the demo's only instance is sales_orders)"},
		{name: "dsn without capture instance", args: []string{"-dsn", "sqlserver://u:p@127.0.0.1:1?database=x"}, code: exitUsage,
			first: "bootstrap: -dsn needs -capture-instance NAME"},
		{name: "rows with dsn", args: []string{"-dsn", "sqlserver://u:p@127.0.0.1:1?database=x", "-capture-instance", "dbo_x", "-rows", "5"}, code: exitUsage,
			first: "bootstrap: -rows sizes the demo table: with -dsn the table is the server's"},
		{name: "partitions 100000", args: []string{"-partitions", "100000"}, code: exitUsage,
			first: "bootstrap: -partitions 100000: want 1 to 1024"},
		{name: "partitions 0", args: []string{"-partitions", "0"}, code: exitUsage,
			first: "bootstrap: -partitions 0: want 1 to 1024"},
		{name: "min partition rows -1", args: []string{"-min-partition-rows", "-1"}, code: exitUsage,
			first: "bootstrap: -min-partition-rows -1: want 0 (no minimum) or more"},
		{name: "tables without many", args: []string{"-tables", "3"}, code: exitUsage,
			first: "bootstrap: -tables is for many instances: add -instances, -schemas or -match"},
		{name: "plan with resnapshot", args: []string{"-plan", "-resnapshot"}, code: exitUsage,
			first: "bootstrap: -plan with -resnapshot"},
		{name: "stray argument", args: []string{"bronze2"}, code: exitUsage,
			first: `bootstrap: unexpected argument "bronze2": every setting is a flag`},
		{name: "unknown flag", args: []string{"-row", "5"}, code: exitUsage,
			first: "flag provided but not defined: -row"},
		{name: "unrelated files", args: []string{"-rows", "10"}, code: exitFailed,
			prepare: func(t *testing.T, dir string) {
				os.MkdirAll(filepath.Join(dir, "photos"), 0o777)
				os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o666)
			},
			first: "bootstrap: -target DIR holds 2 entries (notes.txt, photos/) and no _delta_log: it is not a Delta table",
			more:  []string{"choose another -target"}},
		{name: "junk delta log", args: []string{"-rows", "10"}, code: exitFailed,
			prepare: func(t *testing.T, dir string) {
				os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o777)
				os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte("hello\n"), 0o666)
			},
			first: "bootstrap: delta: table DIR: not a Delta table, or a damaged one: log file _delta_log/00000000000000000000.json: ",
			more:  []string{"nothing was written: move it away or choose another -target"}},
		{name: "table of another schema", args: []string{"-rows", "10"}, code: exitFailed, prepare: otherTable,
			first: "bootstrap: -target DIR holds a table whose columns sales_orders cannot share; nothing was written: give it a table of its own (-target <a new folder or URL>)",
			more:  []string{`column "region": the table has type integer, the records string`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bronze")
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			before := tree(t, dir)
			var out, errOut bytes.Buffer
			code := runMain(t.Context(), append([]string{"-target", dir, "-progress", "1h"}, tc.args...), &out, &errOut)
			first, _, _ := strings.Cut(errOut.String(), "\n")
			if code != tc.code || !strings.HasPrefix(first, strings.ReplaceAll(tc.first, "DIR", dir)) {
				t.Errorf("exit %d, first line %q; want exit %d and %q\nstdout:\n%s", code, first, tc.code, tc.first, &out)
			}
			for _, m := range tc.more {
				if m = strings.ReplaceAll(m, "DIR", dir); !strings.Contains(first, m) {
					t.Errorf("first line lacks %q: %s", m, first)
				}
			}
			if after := tree(t, dir); after != before {
				t.Errorf("the target changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestInterruptAndResume: a Ctrl-C mid-read (the context canceled, as
// main's signal handler does) commits nothing and says how to resume;
// a rerun with other -partitions says it resumes the earlier plan, and
// -discard-partial plans anew.
func TestInterruptAndResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bronze")
	code, stderr := interrupted(t, dir, 5000, 8)
	if last := lastLine(stderr); code != exitInterrupted || !strings.HasPrefix(last, "bootstrap: interrupted: nothing was committed; rerun the same command to resume") {
		t.Fatalf("exit %d, last line %q", code, last)
	}
	if v := tableVersion(t, dir); v != -1 {
		t.Fatalf("the interrupted run committed version %d", v)
	}
	var out, errOut bytes.Buffer
	if code := runMain(t.Context(), []string{"-target", dir, "-rows", "5000", "-partitions", "2", "-min-partition-rows", "0", "-progress", "1h"}, &out, &errOut); code != exitOK {
		t.Fatalf("rerun: exit %d\n%s\n%s", code, &out, &errOut)
	}
	for _, want := range []string{
		"partial:  an interrupted run left a partial snapshot of sales_orders at LSN 0x",
		", 8 partitions, ",
		"resuming its plan, not -partitions 2; -discard-partial starts over",
		"delta:    " + dir + " version 0, ",
		"check:    latest image of " + dir + " equals the source table",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rerun output lacks %q:\n%s", want, &out)
		}
	}
}

// TestDiscardPartial: -discard-partial abandons the partial snapshot an
// interrupted run left and takes the snapshot with this run's -partitions.
func TestDiscardPartial(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bronze")
	if code, _ := interrupted(t, dir, 5000, 8); code != exitInterrupted {
		t.Fatalf("exit %d", code)
	}
	var out, errOut bytes.Buffer
	if code := runMain(t.Context(), []string{"-target", dir, "-rows", "5000", "-partitions", "2", "-min-partition-rows", "0", "-discard-partial", "-progress", "1h"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, &out, &errOut)
	}
	for _, want := range []string{"; discarding it (-discard-partial): its files are never committed", ", 2 partitions\n", "check:    latest image of"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if strings.Contains(out.String(), "resumed:") {
		t.Errorf("-discard-partial resumed:\n%s", &out)
	}
}

// interrupted runs the main job on a -rows demo into dir and cancels it,
// as main's Ctrl-C handler does, when the first progress line is written
// (-progress 1ns: a line per batch), so the read is under way; it returns
// the job's exit code and stderr.
func interrupted(t *testing.T, dir string, rows, partitions int) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var once sync.Once
	var errOut bytes.Buffer
	stderr := writerFunc(func(p []byte) (int, error) {
		once.Do(cancel)
		return errOut.Write(p)
	})
	var out bytes.Buffer
	code := runMain(ctx, []string{"-target", dir, "-rows", fmt.Sprint(rows), "-partitions", fmt.Sprint(partitions), "-min-partition-rows", "0", "-progress", "1ns"}, &out, stderr)
	return code, errOut.String()
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func tableVersion(t *testing.T, dir string) int64 {
	t.Helper()
	table, err := blobstore.Open(t.Context(), dir, delta.Options{})
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

// TestCheckSharedTable: the main job's check compares only the capture
// instance it bootstrapped. The target already holds another instance's
// snapshot with the same columns and keys that collide with the demo's (a
// shared bronze table); the job's check passes, as reconcile.Run on the
// same table does.
func TestCheckSharedTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bronze")
	db := fake.New(fake.Options{})
	var rows []fake.Row
	for i := range 50 {
		rows = append(rows, fake.Row{demoRegions[i%len(demoRegions)], int64(i + 1), "archived", nil, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), nil, false, keyrange.UUID{byte(i)}})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "sales", Name: "orders_2024", Key: []string{"region", "order_id"}, Columns: demoColumns,
		Rows: rows, CaptureInstance: "sales_orders_2024"}); err != nil {
		t.Fatal(err)
	}
	table, err := blobstore.Open(t.Context(), dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := snapshot.Bootstrap(t.Context(), db, table, snapshot.Options{CaptureInstance: "sales_orders_2024"}); err != nil {
		t.Fatal(err)
	}
	table.Close()

	var out, errOut bytes.Buffer
	if code := runMain(t.Context(), []string{"-target", dir, "-rows", "3000", "-progress", "1h"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, &out, &errOut)
	}
	if !strings.Contains(out.String(), "check:    latest image of "+dir+" equals the source table (3000 keys)") {
		t.Errorf("no passing check:\n%s", &out)
	}
	// The other instance's rows are still there, and reconcile agrees.
	table, err = blobstore.Open(t.Context(), dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	rep, err := reconcile.Run(t.Context(), db, table, reconcile.Options{CaptureInstance: "sales_orders_2024"})
	if err != nil || !rep.Clean() {
		t.Fatalf("reconcile of the other instance: %v %+v", err, rep)
	}
}

// TestPlanOnly: -plan prints the instance, its key, access, the target's
// state and the plan, reads no row (the demo database's counters) and
// writes nothing, for a new target, one with a partial snapshot and one
// with a snapshot.
func TestPlanOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bronze")
	plan := func(want ...string) {
		t.Helper()
		before := tree(t, dir)
		var out, errOut bytes.Buffer
		if code := runMain(t.Context(), []string{"-target", dir, "-rows", "5000", "-min-partition-rows", "1000", "-plan"}, &out, &errOut); code != exitOK {
			t.Fatalf("-plan: exit %d\n%s\n%s", code, &out, &errOut)
		}
		want = append(want,
			"plan only: no row read, nothing written\n",
			"instance: sales_orders on table sales.orders (8 captured columns, start_lsn 0x",
			"key:      region, order_id (unique clustered index PK_orders)\n",
			"access:   ",
			"may read the changes: yes (",
			"the change table: SELECT granted)\n",
			"demo:     the demo database counted 0 range reads and 0 rows returned; planning made ")
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-plan output lacks %q:\n%s", w, &out)
			}
		}
		if after := tree(t, dir); after != before {
			t.Errorf("-plan changed the target:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
	plan("target:   "+dir+": new; a run creates the Delta table\n",
		"plan:     L0 0x", " if the run started now (commit time 2026-12-01T08:00:",
		"          ~5,000 rows by metadata in 4 keyset partitions\n",
		"          range 0 [-inf, [", "          range 3 [[")

	if code, _ := interrupted(t, dir, 5000, 3); code != exitInterrupted {
		t.Fatalf("exit %d", code)
	}
	var out bytes.Buffer
	plan("partial:  partial snapshot at LSN 0x", ": a run resumes it and reads the ", "partitions left; -discard-partial starts over",
		" (recorded by the interrupted run)", "in 3 keyset partitions")

	if code := runMain(t.Context(), []string{"-target", dir, "-rows", "5000", "-min-partition-rows", "0", "-progress", "1h"}, &out, &out); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, &out)
	}
	plan("target:   " + dir + " holds a snapshot of sales_orders at LSN 0x")
}

// TestSmallTableOnePartition: a table smaller than -min-partition-rows by
// its metadata row count is read as one partition and written as one
// data file (a 2-row table was two), and the job says why it did not use
// -partitions; a larger one gets one partition per -min-partition-rows.
func TestSmallTableOnePartition(t *testing.T) {
	for _, tc := range []struct {
		rows, minRows string
		files         int
		line          string
	}{
		{"2", "10000", 1, "partitions: 1, not 4: the table holds ~2 rows by metadata, and a partition gets at least 10,000 (-min-partition-rows)"},
		{"3000", "1000", 3, "partitions: 3, not 4: the table holds ~3,000 rows by metadata, and a partition gets at least 1,000 (-min-partition-rows)"},
		{"3000", "0", 4, ""},
	} {
		dir := filepath.Join(t.TempDir(), "bronze")
		var out, errOut bytes.Buffer
		if code := runMain(t.Context(), []string{"-target", dir, "-rows", tc.rows, "-min-partition-rows", tc.minRows, "-progress", "1h"}, &out, &errOut); code != exitOK {
			t.Fatalf("exit %d\n%s\n%s", code, &out, &errOut)
		}
		want := fmt.Sprintf("delta:    %s version 0, %d data files", dir, tc.files)
		if !strings.Contains(out.String(), want) || (tc.line != "" && !strings.Contains(out.String(), tc.line+"\n")) || (tc.line == "" && strings.Contains(out.String(), "partitions: ")) {
			t.Errorf("-rows %s -min-partition-rows %s: want %q and %q:\n%s", tc.rows, tc.minRows, want, tc.line, &out)
		}
	}
}

// TestREADMEPlanOutput: README's plan-only output (the plancheck block) is
// what `go run ./examples/bootstrap -plan` prints, line for line, but for
// the time the demo took to build.
func TestREADMEPlanOutput(t *testing.T) {
	block := testenv.READMEBlock(t, "plancheck")
	want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(block), "```\n"), "\n```")
	t.Chdir(t.TempDir()) // -target's default, ./bronze, as README shows it
	var out, errOut bytes.Buffer
	if code := runMain(t.Context(), []string{"-plan"}, &out, &errOut); code != exitOK {
		t.Fatalf("-plan: exit %d\n%s\n%s", code, &out, &errOut)
	}
	built := regexp.MustCompile(`\(built in [0-9.]+m?s\)`)
	got := built.ReplaceAllString(strings.TrimSpace(out.String()), "(built in …)")
	if want = built.ReplaceAllString(want, "(built in …)"); got != want {
		t.Errorf("README's plan-only output differs from the job's; README.md's plancheck block should read:\n%s", &out)
	}
}

// TestManySmallTablesFewPartitions: with -instances, -min-partition-rows
// reaches every table through the library (snapshot.Options.
// MinPartitionRows): three demo tables of 50, 100 and 150 rows are each
// one partition by default, and four (-partitions) with no minimum.
func TestManySmallTablesFewPartitions(t *testing.T) {
	for _, tc := range []struct {
		minRows string
		want    string
	}{{"10000", ", 1 partitions\n"}, {"0", ", 4 partitions\n"}} {
		var out, errOut bytes.Buffer
		args := []string{"-instances", "all", "-demo-tables", "3", "-rows", "300", "-partitions", "4", "-min-partition-rows", tc.minRows,
			"-target", filepath.Join(t.TempDir(), "{schema}", "{table}"), "-progress", "1h"}
		if code := runMain(t.Context(), args, &out, &errOut); code != exitOK {
			t.Fatalf("%q: exit %d\n%s\n%s", args, code, &out, &errOut)
		}
		if n := strings.Count(out.String(), tc.want); n != 3 || !strings.Contains(out.String(), "tables:   3 selected, 3 snapshotted") {
			t.Errorf("-min-partition-rows %s: %d tables end %q, want 3:\n%s", tc.minRows, n, tc.want, &out)
		}
	}
}
