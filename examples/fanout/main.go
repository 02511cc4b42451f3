// Command fanout takes a whole snapshot as a coordinator and N worker
// processes: the coordinator plans (snapshot.NewPlan), starts one worker
// subprocess of itself per partition with the partition's task as JSON on
// stdin, collects each worker's result (a sink.Part, JSON on stdout),
// retries a failed partition, and commits every part in one Delta commit
// (snapshot.Commit). The table then holds exactly what snapshot.Take of the
// same source would have written, which the program checks at the end:
//
//	go run ./examples/fanout                          # demo source -> $TMPDIR/cdcsnap-fanout/orders
//	go run ./examples/fanout -partitions 8 -rows 500000
//	go run ./examples/fanout -crash-worker 2          # worker 2 dies after writing; retried
//
// The same three steps run one by one, as an orchestrator runs them (each
// step is a process of its own; every one opens the same -target):
//
//	go build -o fanout ./examples/fanout
//	./fanout plan -target /data/orders > plan.json          # nothing if the table holds a snapshot
//	./fanout worker -target /data/orders -plan plan.json -partition 0 > part-0.json
//	./fanout worker -target /data/orders -plan plan.json -partition 1 > part-1.json   # ... one per range
//	./fanout commit -target /data/orders -plan plan.json part-*.json
//	./fanout commit -target /data/orders -plan plan.json     # or: the parts the workers recorded
//
// The plan is recorded with the table (snapshot.Prepare) and every worker
// records its Part there as it finishes (snapshot.Execute), so a
// coordinator restarted midway resumes: "fanout plan" prints the same plan
// and names the partitions left, and the coordinator starts workers only
// for those.
//
// A worker also reads Tasks as JSON lines on stdin and prints one Part line
// per task (fanout worker < tasks.jsonl), which is how the coordinator
// starts its subprocesses and how Spark's RDD.pipe runs them:
// examples/spark plans on the driver ("fanout plan -tasks tasks.jsonl"),
// pipes one task line per RDD partition through "fanout worker" on the
// executors, collects the Part lines and runs "fanout commit
// -with-recorded parts.jsonl".
//
// # The source every worker reads
//
// Each process builds the same demo database from -seed and -rows: the
// embedded fake CDC database is in-memory, so a deterministic build is its
// stand-in for "every worker connects to the same SQL Server". With
// CDCSNAP_SOURCE_DSN (or CDCSNAP_SOURCE_DSN_FILE, a file that holds the
// DSN) in every process's environment, every step reads that SQL Server
// instead (source/sqlserver; -capture-instance, -server-time-zone). The
// DSN is never a flag, never in a task, and errors name the server with
// its password redacted. The plan's LSN and ranges are the only state the
// workers share, and the plan carries them.
//
// # The shared bucket
//
// Workers write their data files straight into the Delta table (-target):
// here a local folder every process can reach, in production an object
// store URL (s3://bucket/bronze/orders, gs://..., azblob://...) that every
// worker and the coordinator open with blobstore.Open. A worker's files stay
// invisible until the coordinator commits them: a worker that dies after
// writing leaves orphan files that no Delta reader sees and that no commit
// ever references (the retry writes new ones), and that Delta's VACUUM
// removes once they are older than the retention period.
//
// # Under a real orchestrator
//
// The three steps have serializable hand-offs, so any scheduler can run
// the workers:
//
//  1. The coordinator (a Job, a CronJob, a Temporal workflow, a Spark
//     driver) runs "fanout plan": snapshot.Prepare, which finds the
//     snapshot (a rerun stops here) or the partial one an earlier
//     coordinator left, or plans and records a new one. It stores the
//     plan JSON where workers can read it: a ConfigMap mounted as
//     plan.json, or s3://bucket/fanout/<plan id>/plan.json.
//  2. One task per partition. On Kubernetes, an Indexed Job with
//     completions = len(plan.Ranges), whose pods run "fanout worker
//     -target s3://bucket/bronze/orders -plan /plan/plan.json": without
//     -partition, a worker takes $JOB_COMPLETION_INDEX, which the Job
//     controller sets in each pod. k8s/snapshot-jobs.yaml is that layout
//     (workers, then a suspended commit Job; the DSN from a Secret
//     file), and a test decodes it strictly into the Kubernetes API
//     types and runs its commands. Each worker records its Part with
//     the table as it finishes (and prints it, for an orchestrator that
//     collects results: a Temporal activity, Spark). The first attempt of
//     a partition to record a complete Part wins: a retry after that
//     reports the recorded Part, and every other attempt's files are
//     never referenced.
//  3. When every index has succeeded, the coordinator runs "fanout commit
//     -plan plan.json" (the recorded parts), or with part files (JSON
//     lines; - is stdin): one snapshot.CommitUsable (Plan.CheckUsable,
//     then Commit). It refuses parts of another plan and names a missing
//     or duplicate partition; a second commit of the same plan (a retried
//     coordinator) returns the committed snapshot and commits nothing; if
//     the coordinator dies after committing, "fanout plan" finds the
//     snapshot and plans nothing.
//
// Workers need the same source credentials and the bucket's; the
// coordinator needs both too. Nothing else is shared: no lock, no
// database of jobs.
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
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" // s3://, gs://, azblob:// targets
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// config is the coordinator's configuration.
type config struct {
	target      string
	instance    string
	source      SourceSpec
	partitions  int
	minPartRows int64 // -min-partition-rows; 0: no minimum
	parallel    int
	retries     int
	resnapshot  bool
	verify      bool
	verbose     bool
	crashWorker int // partition whose first worker crashes after writing; -1: none
	// faults injects a fault into the first attempt of a partition (tests).
	faults map[int]Fault
	// exe is the worker executable; empty means this program.
	exe string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if os.Getenv(workerEnv) == "1" {
		os.Exit(workerMain(ctx))
	}
	if err := cli(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "fanout:", err)
		}
		os.Exit(1)
	}
}

// run is the coordinator.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	db, _, closeSrc, err := openSource(ctx, cfg.source, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
	if cfg.source.SQLServer {
		fmt.Fprintf(stdout, "source:  SQL Server ($%s or $%s), capture instance %s\n", envDSN, envDSNFile, cfg.instance)
	} else {
		fmt.Fprintf(stdout, "source:  demo fake CDC database %s.%s, %d rows (seed %d), built by every process\n", demoSchema, demoTable, cfg.source.Rows, cfg.source.Seed)
	}
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
		fmt.Fprintf(stdout, "exists:  %s already holds a snapshot of %s at LSN %s (version %d); nothing to do\n", cfg.target, cfg.instance, existing.LSN, existing.Version)
		return nil
	}
	plan := prep.Plan
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return fmt.Errorf("plan to JSON: %w", err)
	}
	fmt.Fprintf(stdout, "plan:    %s at LSN %s, %s ranges: %d partitions (plan %s, %d bytes of JSON)\n", plan.CaptureInstance, plan.LSN, plan.Strategy, len(plan.Ranges), plan.ID, len(planJSON))
	if prep.Resumed {
		fmt.Fprintf(stdout, "resume:  an earlier run recorded %d of the %d partitions; %d left to read\n", len(prep.Done), len(plan.Ranges), len(prep.Todo))
	}

	start := time.Now()
	results, err := runWorkers(ctx, cfg, plan, prep.Todo, stderr)
	if err != nil {
		return err
	}
	parts := append([]sink.Part(nil), prep.Done...)
	for _, r := range results {
		parts = append(parts, r.part)
		var retried string
		if r.attempts > 1 {
			retried = fmt.Sprintf(" after %d attempts (%s)", r.attempts, strings.Join(r.failures, "; "))
		}
		fmt.Fprintf(stdout, "worker:  partition %d %s: %d rows, %d bytes%s\n", r.part.Partition, plan.Ranges[r.part.Partition], r.part.Rows, r.part.Bytes, retried)
	}
	res, err := snapshot.CommitUsable(ctx, db, table, plan, parts, logger)
	if err != nil {
		return err
	}
	if res.Existing {
		fmt.Fprintf(stdout, "exists:  another snapshot of %s landed first (LSN %s, version %d); these parts stay invisible\n", cfg.instance, res.LSN, res.Version)
		return nil
	}
	files, err := table.Files(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "commit:  %d rows at LSN %s in one commit: %s version %d, %d data files, %s\n", res.Rows, res.LSN, cfg.target, res.Version, len(files), time.Since(start).Round(time.Millisecond))
	from, err := res.StreamFrom()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stream:  start after %s (first LSN to read: %s)\n", res.LSN, from)
	if !cfg.verify {
		return nil
	}
	keys, diff, err := compareWithTake(ctx, db, table, cfg.instance)
	if err != nil {
		return err
	}
	if len(diff) > 0 {
		return fmt.Errorf("the fan-out table's latest image differs from a Take of the same source:\n%s", strings.Join(diff, "\n"))
	}
	fmt.Fprintf(stdout, "check:   latest image equals a snapshot.Take of the same source (%d keys)\n", keys)
	return nil
}

// prepare finds the snapshot the table already holds (a rerun reads
// nothing, as Take does), or the partial snapshot an earlier coordinator
// left (its workers' recorded parts are not read again), or records a new
// plan with the table (snapshot.Prepare).
func prepare(ctx context.Context, db source.Source, table sink.Sink, cfg config, logger *slog.Logger) (*snapshot.Prepared, error) {
	least := cfg.minPartRows
	if least == 0 {
		least = -1 // no minimum
	}
	return snapshot.Prepare(ctx, db, table, snapshot.Options{CaptureInstance: cfg.instance, Partitions: cfg.partitions, MinPartitionRows: least, Resnapshot: cfg.resnapshot, RunOptions: snapshot.RunOptions{Logger: logger}})
}

// result is one partition's outcome.
type result struct {
	part     sink.Part
	attempts int
	failures []string
}

// runWorkers runs one worker process per partition of todo, cfg.parallel
// at once (0: all), retrying each failed partition up to cfg.retries
// times. The first partition that fails for good cancels the rest.
func runWorkers(ctx context.Context, cfg config, plan *snapshot.Plan, todo []int, stderr io.Writer) ([]result, error) {
	exe := cfg.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding this program to start workers: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(todo)
	if n == 0 {
		return nil, nil
	}
	parallel := cfg.parallel
	if parallel <= 0 || parallel > n {
		parallel = n
	}
	results := make([]result, n)
	errs := make([]error, n)
	sem := make(chan struct{}, parallel)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	// The slot is taken here, not in the goroutine, so partitions start in
	// plan order: with -parallel 1 a failure leaves every earlier partition
	// recorded, which is what a rerun resumes from.
	for k, i := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[k] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &results[k]
			for attempt := 0; attempt <= cfg.retries; attempt++ {
				task := Task{Plan: plan, Partition: i, Attempt: attempt, Target: cfg.target, Source: cfg.source}
				if attempt == 0 {
					task.Fault = cfg.faults[i]
					if cfg.crashWorker == i {
						task.Fault = CrashAfterWrite
					}
				}
				r.attempts = attempt + 1
				part, err := startWorker(ctx, exe, task)
				if err == nil {
					r.part = part
					return
				}
				if ctx.Err() != nil {
					errs[k] = ctx.Err()
					return
				}
				r.failures = append(r.failures, fmt.Sprintf("attempt %d: %v", attempt+1, err))
				mu.Lock()
				fmt.Fprintf(stderr, "fanout: partition %d, attempt %d failed: %v\n", i, attempt+1, err)
				mu.Unlock()
				errs[k] = err
			}
			cancel()
		})
	}
	wg.Wait()
	var first error
	for k, err := range errs {
		if err != nil && results[k].part.PlanID == "" {
			if !errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("partition %d failed %d times: %w", todo[k], results[k].attempts, err)
			}
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return nil, first
	}
	return results, nil
}

// startWorker runs one worker process with task on stdin and returns the
// Part it printed.
func startWorker(ctx context.Context, exe string, task Task) (sink.Part, error) {
	in, err := json.Marshal(task)
	if err != nil {
		return sink.Part{}, fmt.Errorf("task to JSON: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "worker")
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return sink.Part{}, fmt.Errorf("worker process: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var part sink.Part
	if err := json.Unmarshal(out.Bytes(), &part); err != nil {
		return sink.Part{}, fmt.Errorf("worker result %q: %w", out.String(), err)
	}
	return part, nil
}

// compareWithTake takes the same source with snapshot.Take into an
// in-memory Delta table and compares the latest images of both tables.
func compareWithTake(ctx context.Context, db source.Source, table *delta.Table, instance string) (int, []string, error) {
	ref, err := blobstore.Open(ctx, "mem://", delta.Options{})
	if err != nil {
		return 0, nil, err
	}
	defer ref.Close()
	if _, err := snapshot.Take(ctx, db, ref, snapshot.Options{CaptureInstance: instance, Partitions: 1}); err != nil {
		return 0, nil, fmt.Errorf("reference Take: %w", err)
	}
	want, err := tableImage(ctx, db, ref, instance)
	if err != nil {
		return 0, nil, err
	}
	got, err := tableImage(ctx, db, table, instance)
	if err != nil {
		return 0, nil, err
	}
	return want.Len(), want.Diff(got, 10), nil
}

// tableImage reads a Delta table's rows into a latest image of capture
// instance instance.
func tableImage(ctx context.Context, src source.Source, table *delta.Table, instance string) (*snapshot.Image, error) {
	ci, err := src.CaptureInstance(ctx, instance)
	if err != nil {
		return nil, err
	}
	key, err := ci.KeyColumns()
	if err != nil {
		return nil, err
	}
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := table.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	if err := snapshot.ReadImage(ctx, im, rr, true); err != nil {
		return nil, fmt.Errorf("reading the Delta table back: %w", err)
	}
	return im, nil
}
