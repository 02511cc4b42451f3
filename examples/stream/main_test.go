package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRun runs the pipeline for a few seconds into a local Delta table:
// one data loss, a re-snapshot, and a clean reconcile at the end.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	cfg := config{table: dir, rows: 300, interval: 50 * time.Millisecond, duration: 2 * time.Second, lossAfter: 700 * time.Millisecond, seed: 7}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"data loss: changes from", "re-snapshotted at", "clean true", "1 data losses"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
