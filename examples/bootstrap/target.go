package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// localFolder returns the folder of a target that is a local path or a
// file:// URL, as delta.Open reads it; ok is false for a bucket URL.
func localFolder(target string) (dir string, ok bool) {
	u, err := url.Parse(target)
	switch {
	case err != nil || u.Scheme == "" || len(u.Scheme) == 1: // "C:\..." on Windows
		return target, true
	case u.Scheme == "file":
		return u.Path, true
	}
	return "", false
}

// openTarget opens the Delta table at target, refusing a local folder
// that holds files but no _delta_log (the job never writes among files
// that are not a Delta table's) and a _delta_log that is not a Delta log,
// before anything is written. done must be called with the run's error:
// after a failure it removes the folder again if openTarget created it
// and it is still empty.
func openTarget(ctx context.Context, target string, opts delta.Options) (table *delta.Table, done func(error), err error) {
	dir, local := localFolder(target)
	created := false
	if local {
		entries, err := os.ReadDir(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			created = true
		case err != nil:
			return nil, nil, fmt.Errorf("-target %s: %w", target, err)
		case len(entries) > 0 && !hasEntry(entries, "_delta_log"):
			return nil, nil, fmt.Errorf("-target %s holds %s and no _delta_log: it is not a Delta table, and the job writes only into a new or empty folder or an existing Delta table; choose another -target",
				target, describeEntries(entries))
		}
	}
	table, err = blobstore.Open(ctx, target, opts)
	if err != nil {
		return nil, nil, err
	}
	done = func(error) {
		table.Close()
		if created {
			// Only when empty (a failure before any write, or -plan): a
			// table, or a partial snapshot's files for the rerun, stay.
			os.Remove(dir)
		}
	}
	if _, err := table.Version(ctx); err != nil {
		var corrupt *delta.CorruptLogError
		if errors.As(err, &corrupt) {
			err = fmt.Errorf("%w; nothing was written: move it away or choose another -target", err)
		}
		done(err)
		return nil, nil, err
	}
	return table, done, nil
}

func hasEntry(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

// describeEntries names a folder's first entries: "2 entries (a.txt, b/)".
func describeEntries(entries []os.DirEntry) string {
	var names []string
	for i, e := range entries {
		if i == 3 {
			names = append(names, "...")
			break
		}
		n := e.Name()
		if e.IsDir() {
			n += string(filepath.Separator)
		}
		names = append(names, n)
	}
	noun := "entries"
	if len(entries) == 1 {
		noun = "entry"
	}
	return fmt.Sprintf("%d %s (%s)", len(entries), noun, strings.Join(names, ", "))
}

// explain adds what to do to the errors a first run meets most.
func explain(err error, cfg config) error {
	var (
		schemaErr *delta.SchemaError
		notFound  *source.NotFoundError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notFound) && cfg.dsn != "":
		return fmt.Errorf("-capture-instance %s: no such capture instance, or this login may not read it (SQL Server lists only the capture instances a login may read: it must be in the instance's gating role and may SELECT every captured column; README, \"Against your SQL Server\"): %w", cfg.instance, err)
	case errors.As(err, &schemaErr):
		return fmt.Errorf("-target %s holds a table whose columns %s cannot share; nothing was written: give it a table of its own (-target <a new folder or URL>): %w", cfg.target, cfg.instance, err)
	}
	return err
}

// notePartial says, before the run, that the table holds a partial
// snapshot of the instance an interrupted run left, and what this run does
// with it: resume it (its plan, whatever -partitions now says), or discard
// it with -discard-partial. fit is how many partitions a new plan would
// have (fitPartitions). It returns whether there was one.
func notePartial(ctx context.Context, table *delta.Table, cfg config, fit int, stdout io.Writer) (bool, error) {
	p, err := table.FindPartial(ctx, cfg.instance)
	if errors.Is(err, sink.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	what := fmt.Sprintf("an interrupted run left a partial snapshot of %s at LSN %s (planned %s ago", cfg.instance, p.LSN, time.Since(p.Created).Round(time.Second))
	var plan snapshot.Plan
	if json.Unmarshal(p.Plan, &plan) == nil && len(plan.Ranges) > 0 {
		what += fmt.Sprintf(", %d partitions, %d written", len(plan.Ranges), len(p.Parts))
	}
	what += ")"
	switch {
	case cfg.discardPartial:
		fmt.Fprintf(stdout, "partial:  %s; discarding it (-discard-partial): its files are never committed\n", what)
	case len(plan.Ranges) > 0 && len(plan.Ranges) != fit:
		asked := fmt.Sprintf("-partitions %d", cfg.partitions)
		if fit != cfg.partitions {
			asked = fmt.Sprintf("the %d partitions of a new plan", fit)
		}
		fmt.Fprintf(stdout, "partial:  %s; resuming its plan, not %s; -discard-partial starts over\n", what, asked)
	default:
		fmt.Fprintf(stdout, "partial:  %s; resuming it; -discard-partial starts over\n", what)
	}
	return true, nil
}

// snapshotOptions are the snapshot options the flags ask for (for
// many instances, the template: without a capture instance).
func (cfg config) snapshotOptions() snapshot.Options {
	least := cfg.minPartRows
	if least == 0 {
		least = -1 // -min-partition-rows 0: no minimum
	}
	return snapshot.Options{
		CaptureInstance:  cfg.instance,
		Partitions:       cfg.partitions,
		MinPartitionRows: least,
		Resnapshot:       cfg.resnapshot,
		DiscardPartial:   cfg.discardPartial,
	}
}

// fitPartitions returns how many partitions the library cuts a new plan
// into (snapshot.Options.PartitionsFor: fewer than -partitions when the
// table's metadata row count is below -partitions × -min-partition-rows),
// saying so when they are fewer. It reads metadata only.
func fitPartitions(ctx context.Context, src source.Source, cfg config, stdout io.Writer) (int, error) {
	if cfg.partitions == 1 {
		return 1, nil
	}
	ci, err := src.CaptureInstance(ctx, cfg.instance)
	if err != nil {
		return 0, err
	}
	n, err := src.RowCount(ctx, ci)
	if err != nil || n < 0 {
		return cfg.partitions, nil
	}
	fit := cfg.snapshotOptions().PartitionsFor(n)
	if fit < cfg.partitions {
		fmt.Fprintf(stdout, "partitions: %d, not %d: the table holds ~%s rows by metadata, and a partition gets at least %s (-min-partition-rows)\n",
			fit, cfg.partitions, groupDigits(n), groupDigits(cfg.minPartRows))
	}
	return fit, nil
}
