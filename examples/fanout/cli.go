package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cdcsnap/cdcsnap/internal/sourceparquet"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

const usage = `usage:
  fanout [flags]                      coordinator: plan, one worker process per partition, commit
  fanout plan [flags] > plan.json     step 1: print the plan (nothing if the table holds a snapshot);
                                      -tasks FILE also writes one task per line for the partitions left
  fanout worker [flags] > parts.json  step 2: Task JSON lines on stdin, one Part JSON line out for each
                                      (Spark's RDD.pipe); or one partition with -plan and -partition
  fanout commit [flags] parts.json... step 3: commit the workers' parts (-plan plan.json; - is stdin)
  fanout export -o source.parquet     the demo table's rows as Parquet (for checks in other engines)

The source is the demo database, or the SQL Server whose connection string
is in $CDCSNAP_SOURCE_DSN (or in the file $CDCSNAP_SOURCE_DSN_FILE names) in
every process's environment: never on a command line.
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
	fs.StringVar(&cfg.source.ServerTimeZone, "server-time-zone", "", "with a SQL Server source: the server machine's IANA time zone; empty: its current UTC offset")
	var (
		planFile     string
		partition    int
		tasksFile    string
		withRecorded bool
		exportFile   string
	)
	switch cmd {
	case "", "plan":
		fs.StringVar(&cfg.instance, "capture-instance", demoInstance, "capture instance to snapshot")
		fs.IntVar(&cfg.partitions, "partitions", 4, "partitions to plan: one worker each")
		fs.Int64Var(&cfg.minPartRows, "min-partition-rows", snapshot.DefaultMinPartitionRows, "fewest rows, by the table's metadata row count, worth a partition of their own: a smaller table gets fewer partitions; 0 keeps -partitions")
		fs.BoolVar(&cfg.resnapshot, "resnapshot", false, "take a new snapshot even if the table holds one")
		if cmd == "plan" {
			fs.StringVar(&tasksFile, "tasks", "", "also write one worker task per line to this file, for the partitions left to read (Spark's RDD.pipe input)")
		}
		if cmd == "" {
			fs.IntVar(&cfg.parallel, "parallel", 0, "workers running at once; 0 means all")
			fs.IntVar(&cfg.retries, "retries", 2, "times a failed partition is retried")
			fs.BoolVar(&cfg.verify, "verify", true, "check the table against a snapshot.Take of the same source")
			fs.IntVar(&cfg.crashWorker, "crash-worker", -1, "partition whose first worker crashes after writing its files (to show a retry)")
		}
	case "worker", "commit":
		fs.StringVar(&planFile, "plan", "", "the plan's JSON file (fanout plan's output)")
		if cmd == "worker" {
			fs.IntVar(&partition, "partition", -1, "the partition to write (with -plan); unset: $"+completionIndexEnv+", as a Kubernetes Indexed Job sets it")
		} else {
			fs.BoolVar(&withRecorded, "with-recorded", false, "also commit the parts recorded with the table for partitions the files lack (a resumed plan)")
		}
	case "export":
		fs.StringVar(&exportFile, "o", "", "the Parquet file to write")
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	dsn, err := dsnFromEnv()
	if err != nil {
		return err
	}
	cfg.source.SQLServer = dsn != ""
	if cfg.source.SQLServer && cfg.verify {
		// A second whole read of a production table is not a check to
		// run by default; the demo's is cheap.
		cfg.verify = false
	}
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	switch cmd {
	case "":
		return run(ctx, cfg, stdout, stderr)
	case "plan":
		return planCmd(ctx, cfg, tasksFile, stdout, stderr, logger)
	case "export":
		return exportCmd(ctx, cfg, exportFile, logger)
	case "worker":
		if planFile == "" {
			return worker(ctx, stdin, stdout, stderr)
		}
		plan, err := readPlan(planFile)
		if err != nil {
			return err
		}
		if partition < 0 {
			if partition, err = completionIndex(); err != nil {
				return err
			}
		}
		task, err := json.Marshal(Task{Plan: plan, Partition: partition, Target: cfg.target, Source: cfg.source})
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		return worker(ctx, strings.NewReader(string(task)), stdout, stderr)
	default:
		if planFile == "" {
			return errors.New("commit: -plan is required")
		}
		return commitCmd(ctx, cfg, planFile, fs.Args(), withRecorded, stdin, stdout, logger)
	}
}

// planCmd prints the plan's JSON, or nothing (and a note on stderr) when
// the table already holds a snapshot; with tasksFile, it also writes there
// one Task per line for each partition left to read (none recorded yet).
func planCmd(ctx context.Context, cfg config, tasksFile string, stdout, stderr io.Writer, logger *slog.Logger) error {
	db, _, closeSrc, err := openSource(ctx, cfg.source, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer table.Close()
	prep, err := prepare(ctx, db, table, cfg, logger)
	if err != nil {
		return err
	}
	if existing := prep.Existing; existing != nil {
		fmt.Fprintf(stderr, "fanout plan: %s already holds a snapshot of %s at LSN %s (version %d); nothing to plan\n", cfg.target, cfg.instance, existing.LSN, existing.Version)
		if tasksFile != "" {
			return os.WriteFile(tasksFile, nil, 0o644)
		}
		return nil
	}
	if prep.Resumed {
		fmt.Fprintf(stderr, "fanout plan: resuming plan %s: partitions %v are recorded; run workers for %v\n", prep.Plan.ID, donePartitions(prep.Done), prep.Todo)
	}
	if tasksFile != "" {
		if err := writeTasks(tasksFile, cfg, prep.Plan, prep.Todo); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(prep.Plan); err != nil {
		return fmt.Errorf("plan: writing JSON: %w", err)
	}
	return nil
}

// writeTasks writes one Task per line to file, for the partitions of todo.
func writeTasks(file string, cfg config, plan *snapshot.Plan, todo []int) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // one line per value: no indent
	for _, i := range todo {
		if err := enc.Encode(Task{Plan: plan, Partition: i, Target: cfg.target, Source: cfg.source}); err != nil {
			return fmt.Errorf("plan: task %d to JSON: %w", i, err)
		}
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plan: writing the tasks: %w", err)
	}
	return nil
}

// exportCmd writes the demo table's rows to a Parquet file.
func exportCmd(ctx context.Context, cfg config, file string, logger *slog.Logger) error {
	if file == "" {
		return errors.New("export: -o is required")
	}
	if cfg.source.SQLServer {
		return fmt.Errorf("export: %w", errNotDemo)
	}
	db, _, closeSrc, err := openSource(ctx, cfg.source, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
	return sourceparquet.Write(ctx, db, demoInstance, file)
}

// completionIndexEnv is the variable the Kubernetes Job controller sets in
// each pod of an Indexed Job to the pod's completion index (Kubernetes
// docs, "Indexed Job"; the controllers/job-backoff-limit-per-index
// examples read it from the environment).
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// completionIndex returns the partition $JOB_COMPLETION_INDEX names.
func completionIndex() (int, error) {
	v, ok := os.LookupEnv(completionIndexEnv)
	if !ok {
		return 0, fmt.Errorf("worker: -plan needs -partition, or $%s", completionIndexEnv)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("worker: $%s is %q, not a partition index", completionIndexEnv, v)
	}
	return n, nil
}

func donePartitions(parts []sink.Part) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = p.Partition
	}
	return out
}

// commitCmd commits the parts in files (Part JSON values, one per line as
// workers print them; "-" is stdin) for the plan in planFile; with no
// files, the parts the workers recorded with the table (all of them); with
// withRecorded, the files' parts and the recorded parts of the partitions
// the files lack (a plan resumed after some workers had finished).
func commitCmd(ctx context.Context, cfg config, planFile string, files []string, withRecorded bool, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	plan, err := readPlan(planFile)
	if err != nil {
		return err
	}
	var parts []sink.Part
	for _, f := range files {
		var r io.Reader = stdin
		if f != "-" {
			file, err := os.Open(f)
			if err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			defer file.Close()
			r = file
		}
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		for {
			var p sink.Part
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("commit: part file %s: %w", f, err)
			}
			parts = append(parts, p)
		}
	}
	table, err := blobstore.Open(ctx, cfg.target, delta.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer table.Close()
	if len(files) == 0 || withRecorded {
		recorded, err := recordedParts(ctx, table, plan)
		if errors.Is(err, sink.ErrNotFound) {
			// No records: a rerun of a commit of this plan that landed
			// (the records go with the commit) says so: the newest
			// snapshot is at the plan's LSN and is not the one the plan
			// replaces (snapshot.Take's rule). Anything else (records
			// dropped as stale, another plan's snapshot) is the error.
			if snap, ferr := table.FindSnapshot(ctx, plan.CaptureInstance); ferr == nil && snap.LSN == plan.LSN && snap.LSN != plan.Replaces {
				fmt.Fprintf(stdout, "exists: %s holds a snapshot of %s at LSN %s (version %d); committed nothing\n", cfg.target, plan.CaptureInstance, snap.LSN, snap.Version)
				return nil
			}
			if len(files) > 0 {
				err = nil // commit the files' parts alone
			}
		}
		if err != nil {
			return err
		}
		given := map[int]bool{}
		for _, p := range parts {
			given[p.Partition] = true
		}
		for _, p := range recorded {
			if !given[p.Partition] {
				parts = append(parts, p)
			}
		}
	}
	return commitParts(ctx, cfg, table, plan, parts, stdout, logger)
}

// recordedParts returns the parts recorded with the table for plan.
func recordedParts(ctx context.Context, table *delta.Table, plan *snapshot.Plan) ([]sink.Part, error) {
	p, err := table.FindPartial(ctx, plan.CaptureInstance)
	if err != nil {
		return nil, fmt.Errorf("commit: the table records no partial snapshot: %w", err)
	}
	if p.PlanID != plan.ID {
		return nil, fmt.Errorf("commit: the table's partial snapshot is plan %s, not %s", p.PlanID, plan.ID)
	}
	return p.Parts, nil
}

func commitParts(ctx context.Context, cfg config, table *delta.Table, plan *snapshot.Plan, parts []sink.Part, stdout io.Writer, logger *slog.Logger) error {
	db, _, closeSrc, err := openSource(ctx, cfg.source, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
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
