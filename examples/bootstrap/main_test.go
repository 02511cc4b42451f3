package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/localstore"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the main job on a small demo into a temporary table: it
// commits a snapshot, streams the changes made during the read, and its own
// check proves the latest image equals the source. A rerun reads nothing.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	cfg := config{target: dir, rows: 5000, partitions: 3, progress: time.Hour}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for _, want := range []string{
		"table sales.orders with 5000 rows",
		"snapshot: 5000 rows of sales_orders at LSN 0x",
		"version 0, 3 data files",
		"stream:   start after 0x",
		"change rows committed during the snapshot streamed from 0x",
		"delta version 1",
		"check:    latest image of " + dir + " equals the source table (5000 keys)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	// A rerun finds the snapshot before building a demo database (whose
	// rows the earlier run's snapshot never saw) and reads nothing.
	out.Reset()
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	for _, want := range []string{"snapshot exists: " + dir + " already holds a snapshot of sales_orders at LSN 0x", "version 0); read nothing", "stream:   start after 0x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rerun output lacks %q:\n%s", want, &out)
		}
	}
	for _, not := range []string{"demo source:", "check:", "earlier run of a different demo database"} {
		if strings.Contains(out.String(), not) {
			t.Errorf("rerun output has %q:\n%s", not, &out)
		}
	}
	// -resnapshot takes a new snapshot of a new demo database and says why
	// it cannot check the table against it.
	out.Reset()
	cfg.resnapshot = true
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("rerun with -resnapshot: %v", err)
	}
	for _, want := range []string{"demo source:", "snapshot: 5000 rows of sales_orders", "version 2,", "check:    skipped: the table also holds an earlier run's snapshot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-resnapshot output lacks %q:\n%s", want, &out)
		}
	}
}

func TestRunRefusesBadTarget(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), config{target: "unknown-scheme://x", rows: 10, partitions: 1}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "unknown-scheme") {
		t.Fatalf("got %v, want an error naming the URL scheme", err)
	}
}

func TestFormatProgress(t *testing.T) {
	for _, tc := range []struct {
		p    snapshot.Progress
		want string
	}{
		{snapshot.Progress{Rows: 1500, EstimatedRows: 3000, Partitions: 4, PartitionsDone: 1, Elapsed: time.Second},
			"1,500 rows of ~3,000 ( 50%)  1,500 rows/s  partitions 1/4  ETA 1s"},
		{snapshot.Progress{Rows: 4000, EstimatedRows: 3000, Partitions: 4, PartitionsDone: 3, Elapsed: 2 * time.Second},
			"4,000 rows of ~3,000 (100%)  2,000 rows/s  partitions 3/4"},
		{snapshot.Progress{Rows: 1234567, EstimatedRows: -1, Partitions: 1, Elapsed: time.Second},
			"1,234,567 rows  1,234,567 rows/s  partitions 0/1"},
		{snapshot.Progress{Rows: 9000, RowsResumed: 8000, EstimatedRows: 10000, Partitions: 10, PartitionsDone: 8, PartitionsResumed: 8, Elapsed: time.Second},
			"9,000 rows of ~10,000 ( 90%)  1,000 rows/s  partitions 8/10 (8 resumed)  ETA 1s"},
	} {
		if got := formatProgress(tc.p); got != tc.want {
			t.Errorf("formatProgress(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestRunCreatesTableWithFeatures: with -partition-by and -features the
// job creates a partitioned table with Databricks' default features, and
// its own check still proves the latest image equals the source, with
// -key-updates moving orders from one region (and partition) to another
// as updates logged 3 then 4.
func TestRunCreatesTableWithFeatures(t *testing.T) {
	dir := t.TempDir()
	cfg := config{target: dir, rows: 3000, partitions: 2, progress: time.Hour, keyUpdates: true,
		create: delta.CreateOptions{PartitionBy: []string{"region"}, Features: []string{"deletionVectors", "inCommitTimestamp", "rowTracking"}}}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "check:    latest image of "+dir+" equals the source table") {
		t.Fatalf("no passing check:\n%s", &out)
	}
	if !regexp.MustCompile(`changes:  [1-9][0-9]* orders moved to another region`).MatchString(out.String()) {
		t.Errorf("no key update:\n%s", &out)
	}
	s, err := (&deltalog.Log{URL: dir, Store: localstore.NewDir(dir), LocalRoot: dir}).Load(context.Background(), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := s.SortedFiles()
	if s.Protocol.MinWriterVersion != 7 || len(files) == 0 || !strings.HasPrefix(files[0].Path, "region=") {
		t.Fatalf("protocol %+v, %d files", s.Protocol, len(files))
	}
}

// TestRunMany runs the main job's many-instance mode on a small demo: every
// selected instance gets its own table from the template, the progress
// display covers the run, and the job's own check proves each table's
// latest image equals its source, as reconcile.RunAll then confirms. A rerun reads nothing; a template that
// sends two instances to one table is refused.
func TestRunMany(t *testing.T) {
	dir := t.TempDir()
	cfg := config{target: dir + "/{schema}/{table}", rows: 2100, partitions: 2, progress: time.Hour,
		many: manyConfig{instances: "all", tables: 2, connections: 3, demoTables: 6}}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for _, want := range []string{
		"demo source: fake CDC database, 6 tables in schemas sales, hr and ops with 2100 rows in all",
		"snapshot ops_t06 -> " + dir + "/ops/t06: 600 rows at LSN 0x",
		"snapshot sales_t01 -> " + dir + "/sales/t01: 100 rows at LSN 0x",
		"tables:   6 selected, 6 snapshotted (2,100 rows in ",
		"check:    6 tables streamed to the current LSN; the latest image of each equals its source table (2100 keys)",
		"verify:   reconcile.RunAll: 6 tables clean, ",
		" tiles, 2,100 source rows hashed against their Delta tables in ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	// Largest first.
	if i, j := strings.Index(out.String(), "ops_t06 ->"), strings.Index(out.String(), "sales_t01 ->"); i > j {
		t.Errorf("ops_t06 (600 rows) listed after sales_t01 (100 rows):\n%s", &out)
	}
	if !strings.Contains(errOut.String(), "tables 6/6  2,100 rows of ~2,100 (100%)") {
		t.Errorf("no final progress line for the run:\n%s", &errOut)
	}

	out.Reset()
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	for _, want := range []string{"exists   hr_t05 -> " + dir + "/hr/t05: snapshot at LSN 0x", "6 already done, 0 failed", "check:    skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rerun output lacks %q:\n%s", want, &out)
		}
	}

	// A schema and a pattern; a -target without placeholders gets
	// /{schema}/{table}.
	out.Reset()
	cfg = config{target: t.TempDir(), rows: 2100, partitions: 2, progress: time.Hour,
		many: manyConfig{schemas: "hr,ops", match: "*_t0[1-5]", tables: 2, connections: 2, demoTables: 6}}
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for _, want := range []string{"snapshot hr_t05 -> " + cfg.target + "/hr/t05", "snapshot ops_t03 -> ", "hr_t02 -> ", "tables:   3 selected, 3 snapshotted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}

	cfg.target = t.TempDir() + "/{schema}"
	err := run(context.Background(), cfg, &out, &errOut)
	if !errors.Is(err, database.ErrTargetCollision) {
		t.Fatalf("got %v, want database.ErrTargetCollision", err)
	}
}

// TestRunManyFailure: a listed instance that does not exist fails alone;
// the job reports it and returns the run's error.
func TestRunManyFailure(t *testing.T) {
	dir := t.TempDir()
	cfg := config{target: dir + "/{capture_instance}", rows: 600, partitions: 1, progress: time.Hour,
		many: manyConfig{instances: "sales_t01, nope", tables: 2, connections: 2, demoTables: 3}}
	var out, errOut bytes.Buffer
	err := run(context.Background(), cfg, &out, &errOut)
	var runErr *database.RunError
	if !errors.As(err, &runErr) || len(runErr.Failed) != 1 || runErr.Failed[0].CaptureInstance != "nope" {
		t.Fatalf("got %v, want a *database.RunError for nope", err)
	}
	for _, want := range []string{"snapshot sales_t01 -> " + dir + "/sales_t01: 100 rows", "failed   nope: ", "1 failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}

func TestFormatRunProgress(t *testing.T) {
	for _, tc := range []struct {
		p    database.Progress
		want string
	}{
		{database.Progress{Tables: 10, TablesDone: 2, TablesRunning: 4, Rows: 3000, EstimatedRows: 12000, Elapsed: time.Second},
			"tables 2/10 (4 running)  3,000 rows of ~12,000 ( 25%)  3,000 rows/s  ETA 3s"},
		{database.Progress{Tables: 10, TablesDone: 9, TablesExisting: 5, TablesFailed: 1, Rows: 5000, RowsResumed: 1000, EstimatedRows: 5000, Elapsed: 2 * time.Second},
			"tables 9/10 (5 done before, 1 failed)  5,000 rows of ~5,000 (100%)  2,000 rows/s"},
		{database.Progress{Tables: 3}, "tables 0/3  0 rows  0 rows/s"},
	} {
		if got := formatRunProgress(tc.p); got != tc.want {
			t.Errorf("formatRunProgress(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
