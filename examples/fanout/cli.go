package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

const usage = `usage:
  fanout [flags]                      coordinator: plan, one worker process per partition, commit
  fanout plan [flags] > plan.json     step 1: print the plan (nothing if the table holds a snapshot)
  fanout worker [flags] > part.json   step 2: one partition; the Task JSON on stdin, or -plan and -partition
  fanout commit [flags] part.json...  step 3: commit the workers' parts (-plan plan.json)
`

// cli runs the command line: the coordinator with no subcommand, or one
// step of the split as an orchestrator runs it.
func cli(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("fanout "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage, "\nflags:\n")
		fs.PrintDefaults()
	}
	cfg := config{crashWorker: -1}
	fs.StringVar(&cfg.target, "target", filepath.Join(os.TempDir(), "cdcsnap-fanout", "orders"), "Delta table URL every process can reach: a folder, s3://, gs:// or azblob://")
	fs.Uint64Var(&cfg.source.Seed, "seed", 42, "seed of the demo database every process builds")
	fs.IntVar(&cfg.source.Rows, "rows", 100_000, "rows in the demo table")
	fs.BoolVar(&cfg.verbose, "v", false, "log decisions to stderr")
	var (
		planFile  string
		partition int
	)
	switch cmd {
	case "", "plan":
		fs.IntVar(&cfg.partitions, "partitions", 4, "partitions to plan: one worker each")
		fs.BoolVar(&cfg.resnapshot, "resnapshot", false, "take a new snapshot even if the table holds one")
		if cmd == "" {
			fs.IntVar(&cfg.parallel, "parallel", 0, "workers running at once; 0 means all")
			fs.IntVar(&cfg.retries, "retries", 2, "times a failed partition is retried")
			fs.BoolVar(&cfg.verify, "verify", true, "check the table against a snapshot.Take of the same source")
			fs.IntVar(&cfg.crashWorker, "crash-worker", -1, "partition whose first worker crashes after writing its files (to show a retry)")
		}
	case "worker", "commit":
		fs.StringVar(&planFile, "plan", "", "the plan's JSON file (fanout plan's output)")
		if cmd == "worker" {
			fs.IntVar(&partition, "partition", -1, "the partition to write, for example $JOB_COMPLETION_INDEX (with -plan)")
		}
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	switch cmd {
	case "":
		return run(ctx, cfg, stdout, stderr)
	case "plan":
		return planCmd(ctx, cfg, stdout, stderr, logger)
	case "worker":
		if planFile == "" {
			return worker(ctx, stdin, stdout)
		}
		plan, err := readPlan(planFile)
		if err != nil {
			return err
		}
		task, err := json.Marshal(Task{Plan: plan, Partition: partition, Target: cfg.target, Source: cfg.source})
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		return worker(ctx, strings.NewReader(string(task)), stdout)
	default:
		if planFile == "" {
			return errors.New("commit: -plan is required")
		}
		return commitCmd(ctx, cfg, planFile, fs.Args(), stdout, logger)
	}
}

// planCmd prints the plan's JSON, or nothing (and a note on stderr) when
// the table already holds a snapshot.
func planCmd(ctx context.Context, cfg config, stdout, stderr io.Writer, logger *slog.Logger) error {
	db, err := newDemo(cfg.source)
	if err != nil {
		return err
	}
	table, err := delta.Open(ctx, cfg.target, delta.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer table.Close()
	prep, err := prepare(ctx, db, table, cfg, logger)
	if err != nil {
		return err
	}
	if existing := prep.Existing; existing != nil {
		fmt.Fprintf(stderr, "fanout plan: %s already holds a snapshot of %s at LSN %s (version %d); nothing to plan\n", cfg.target, demoInstance, existing.LSN, existing.Version)
		return nil
	}
	if prep.Resumed {
		fmt.Fprintf(stderr, "fanout plan: resuming plan %s: partitions %v are recorded; run workers for %v\n", prep.Plan.ID, donePartitions(prep.Done), prep.Todo)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(prep.Plan); err != nil {
		return fmt.Errorf("plan: writing JSON: %w", err)
	}
	return nil
}

func donePartitions(parts []sink.Part) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = p.Partition
	}
	return out
}

// commitCmd commits the parts in files (each one Part's JSON, as a worker
// prints it) for the plan in planFile; with no files, the parts the
// workers recorded with the table (snapshot.Prepare's Done, all of them).
func commitCmd(ctx context.Context, cfg config, planFile string, files []string, stdout io.Writer, logger *slog.Logger) error {
	plan, err := readPlan(planFile)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return commitRecorded(ctx, cfg, plan, stdout, logger)
	}
	parts := make([]sink.Part, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if err := json.Unmarshal(b, &parts[i]); err != nil {
			return fmt.Errorf("commit: part file %s: %w", f, err)
		}
	}
	table, err := delta.Open(ctx, cfg.target, delta.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer table.Close()
	return commitParts(ctx, cfg, table, plan, parts, stdout, logger)
}

// commitRecorded commits the parts recorded with the table for plan.
func commitRecorded(ctx context.Context, cfg config, plan *snapshot.Plan, stdout io.Writer, logger *slog.Logger) error {
	table, err := delta.Open(ctx, cfg.target, delta.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer table.Close()
	p, err := table.FindPartial(ctx, plan.CaptureInstance)
	if err != nil {
		return fmt.Errorf("commit: no part files given, and the table records no partial snapshot: %w", err)
	}
	if p.PlanID != plan.ID {
		return fmt.Errorf("commit: the table's partial snapshot is plan %s, not %s", p.PlanID, plan.ID)
	}
	return commitParts(ctx, cfg, table, plan, p.Parts, stdout, logger)
}

func commitParts(ctx context.Context, cfg config, table *delta.Table, plan *snapshot.Plan, parts []sink.Part, stdout io.Writer, logger *slog.Logger) error {
	db, err := newDemo(cfg.source)
	if err != nil {
		return err
	}
	res, err := snapshot.CommitUsable(ctx, db, table, plan, parts, logger)
	if err != nil {
		return err
	}
	if res.Existing {
		fmt.Fprintf(stdout, "exists: %s holds a snapshot of %s at LSN %s (version %d); committed nothing\n", cfg.target, plan.CaptureInstance, res.LSN, res.Version)
		return nil
	}
	fmt.Fprintf(stdout, "committed: %d rows of %s at LSN %s, %s version %d\n", res.Rows, plan.CaptureInstance, res.LSN, cfg.target, res.Version)
	return nil
}

func readPlan(file string) (*snapshot.Plan, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the plan: %w", err)
	}
	var plan snapshot.Plan
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, fmt.Errorf("plan file %s: %w", file, err)
	}
	return &plan, nil
}
