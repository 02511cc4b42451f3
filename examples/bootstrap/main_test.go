package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

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
// its own check still proves the latest image equals the source.
func TestRunCreatesTableWithFeatures(t *testing.T) {
	dir := t.TempDir()
	cfg := config{target: dir, rows: 3000, partitions: 2, progress: time.Hour,
		create: delta.CreateOptions{PartitionBy: []string{"region"}, Features: []string{"deletionVectors", "inCommitTimestamp", "rowTracking"}}}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "check:    latest image of "+dir+" equals the source table") {
		t.Fatalf("no passing check:\n%s", &out)
	}
	table, err := delta.Open(context.Background(), dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	p, _ := table.Protocol(context.Background())
	files, _ := table.Files(context.Background())
	if p.MinWriterVersion != 7 || len(files) == 0 || !strings.HasPrefix(files[0].Path, "region=") {
		t.Fatalf("protocol %+v, first file %v", p, files[0].Path)
	}
}
