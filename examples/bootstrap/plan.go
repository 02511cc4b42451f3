package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// printPlan is -plan: what a run with the same flags would do, found with
// snapshot.Inspect, which reads no row and writes nothing.
func printPlan(ctx context.Context, src source.Source, table *delta.Table, cfg config, stdout io.Writer) error {
	in, err := snapshot.Inspect(ctx, src, table, cfg.snapshotOptions())
	if err != nil {
		return err
	}
	w := func(label, format string, a ...any) {
		if label != "" {
			label += ":"
		}
		fmt.Fprintf(stdout, "%-10s%s\n", label, fmt.Sprintf(format, a...))
	}
	fmt.Fprintln(stdout, "plan only: no row read, nothing written")
	ci := in.Instance
	w("instance", "%s on table %s.%s (%d captured columns, start_lsn %s)", ci.Name, ci.SourceSchema, ci.SourceTable, len(ci.Columns), ci.StartLSN)
	w("key", "%s", describeKey(ci))
	label := "access"
	if in.Plan != nil {
		w(label, "may read the key: yes (the plan's reads ran)")
		label = ""
	}
	switch {
	case in.ChangesErr != nil:
		w(label, "may read the changes: no — %v", in.ChangesErr)
	default:
		min := "min LSN none yet, the capture job has not reached this new instance"
		if in.MinLSNOK {
			min = "min LSN " + in.MinLSN.String()
		}
		table := "SELECT granted"
		if !in.ChangesChecked {
			table = "not checked by this source"
		}
		w(label, "may read the changes: yes (the gating role and the captured columns: %s; the change table: %s)", min, table)
	}
	switch {
	case in.Existing != nil && in.Plan == nil:
		w("target", "%s holds a snapshot of %s at LSN %s (version %d): a run reads nothing and the stream starts after it", cfg.target, cfg.instance, in.Existing.LSN, in.Existing.Version)
		return nil
	case in.Existing != nil:
		w("target", "%s holds a snapshot of %s at LSN %s (version %d), which the run replaces (-resnapshot)", cfg.target, cfg.instance, in.Existing.LSN, in.Existing.Version)
	default:
		version, err := table.Version(ctx)
		if err != nil {
			return err
		}
		if version < 0 {
			w("target", "%s: new; a run creates the Delta table", cfg.target)
		} else {
			w("target", "%s: Delta table at version %d, no snapshot of %s", cfg.target, version, cfg.instance)
		}
	}
	if p := in.Partial; p != nil {
		what := fmt.Sprintf("partial snapshot at LSN %s planned %s ago, %d partitions written", p.LSN, time.Since(p.Created).Round(time.Second), len(p.Parts))
		if in.Resumed {
			w("partial", "%s: a run resumes it and reads the %d partitions left; -discard-partial starts over", what, len(in.Todo))
		} else {
			w("partial", "%s: a run abandons it: %s", what, in.PartialUnusable)
		}
	}
	p := in.Plan
	l0 := "L0 " + p.LSN.String() + " if the run started now"
	if in.Resumed {
		l0 = "L0 " + p.LSN.String() + " (recorded by the interrupted run)"
	}
	rows := "an unknown number of rows"
	if p.EstimatedRows >= 0 {
		rows = "~" + groupDigits(p.EstimatedRows) + " rows by metadata"
	}
	w("plan", "%s (commit time %s), isolation %s", l0, formatTime(p.CommitTS), p.Isolation)
	noun := "partitions"
	if len(p.Ranges) == 1 {
		noun = "partition"
	}
	w("", "%s in %d %s %s", rows, len(p.Ranges), p.Strategy, noun)
	if p.Reason != "" {
		w("", "one range: %s", p.Reason)
	}
	for _, warning := range p.Warnings {
		w("", "warning: %s", warning)
	}
	todo := map[int]bool{}
	for _, i := range in.Todo {
		todo[i] = true
	}
	for _, r := range p.Ranges {
		note := ""
		if in.Resumed && !todo[r.Index] {
			note = "  (written; not read again)"
		}
		w("", "%s%s", r, note)
	}
	return nil
}

// describeKey says what the plan cuts: the key's columns and its index.
func describeKey(ci *source.CaptureInstance) string {
	if len(ci.Key) == 0 {
		return "none: the capture instance has no unique index"
	}
	s := strings.Join(ci.Key, ", ")
	if ix := ci.KeyIndex; ix != nil {
		kind := "nonclustered"
		if ix.Clustered {
			kind = "clustered"
		}
		unique := ""
		if ix.Unique {
			unique = "unique "
		}
		s += fmt.Sprintf(" (%s%s index %s)", unique, kind, ix.Name)
	}
	return s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
