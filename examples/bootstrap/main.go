// Command bootstrap is cdcsnap's main job: it takes a whole snapshot of a
// CDC capture instance into a Delta table and streams the changes that
// follow it, so the table converges to the source.
//
// With no flags it builds a demo fake CDC database (a few hundred thousand
// rows, a composite key, varied types), commits changes while the snapshot
// reads, snapshots into ./bronze, appends the changes after the snapshot's
// LSN, and checks that the table's latest image equals the source table:
//
//	go run ./examples/bootstrap
//	go run ./examples/bootstrap -target s3://bucket/bronze/orders -rows 1000000
//
// With -dsn it reads a real SQL Server instead (see source/sqlserver).
//
// With -instances, -schemas or -match it bootstraps many capture instances
// at once (package database), each into its own Delta table named by the
// -target template ({schema}, {table}, {capture_instance}; a -target
// without them gets /{schema}/{table} appended), -tables at a time within
// one budget of -connections source connections, largest first, with one
// progress display for the run. On the demo (-demo-tables tables of growing
// sizes) it then streams each table's changes and checks each image:
//
//	go run ./examples/bootstrap -instances all -target './bronze/{schema}/{table}' -tables 4 -connections 8
//	go run ./examples/bootstrap -schemas sales -match 'sales_t0*'
//	go run ./examples/bootstrap -dsn 'sqlserver://...' -instances dbo_orders,dbo_customers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/cdcsnap/cdcsnap/internal/mssqlconn"
	"github.com/cdcsnap/cdcsnap/internal/sourceparquet"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" // s3://, gs://, azblob:// targets
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

type config struct {
	target         string
	dsn            string
	serverTZ       string
	instance       string
	switchTo       string
	rows           int
	partitions     int
	minPartRows    int64 // fewest rows (by the metadata estimate) a partition gets; 0: no minimum
	resnapshot     bool
	discardPartial bool
	planOnly       bool
	verbose        bool
	progress       time.Duration
	sourceOut      string
	keyUpdates     bool
	create         delta.CreateOptions
	many           manyConfig
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	go func() {
		// A second Ctrl-C ends the process at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes of the job.
const (
	exitOK          = 0
	exitFailed      = 1   // the run failed; what to do is in the message
	exitUsage       = 2   // bad flags: nothing was read or written
	exitInterrupted = 130 // Ctrl-C (128 + SIGINT, as shells report it)
)

// runMain is the whole command: it parses args, runs the job, prints an
// error as one line (plus what to do) on stderr, and returns the exit code.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return exitUsage
	}
	err = run(ctx, cfg, stdout, stderr)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "bootstrap: interrupted: nothing was committed; rerun the same command to resume (partitions already written are kept and not read again)")
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "bootstrap:", err)
	return exitFailed
}

// parseArgs reads the flags and refuses, before any I/O, values that
// cannot work and flags the chosen mode would ignore.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.target, "target", "./bronze", "Delta table URL: a folder, file://, mem://, s3://, gs:// or azblob://")
	fs.StringVar(&cfg.dsn, "dsn", "", "SQL Server connection string (sqlserver://...); empty: the embedded demo fake")
	fs.StringVar(&cfg.serverTZ, "server-time-zone", "", "with -dsn: the SQL Server machine's IANA time zone (commit times are its local wall clock); empty: the zone SQL Server 2022 and Azure SQL name, else the server's current UTC offset, wrong across daylight saving time")
	fs.StringVar(&cfg.instance, "capture-instance", "", "with -dsn: the capture instance to snapshot (the demo's is "+demoInstance+")")
	fs.StringVar(&cfg.switchTo, "switch-to", "", "move the stream to this newer capture instance of the table at its start_lsn (snapshot.Switch; on the demo the job first adds a column and enables it)")
	fs.IntVar(&cfg.rows, "rows", 300_000, "rows in the demo fake's table (without -dsn)")
	fs.IntVar(&cfg.partitions, "partitions", 4, fmt.Sprintf("key ranges read in parallel (1 to %d; a small table gets fewer, see -min-partition-rows)", maxPartitions))
	fs.Int64Var(&cfg.minPartRows, "min-partition-rows", snapshot.DefaultMinPartitionRows, "fewest rows, by the table's metadata row count, worth a partition (and a data file) of their own: a smaller table gets fewer partitions; 0 keeps -partitions")
	fs.BoolVar(&cfg.resnapshot, "resnapshot", false, "take a new snapshot even if the table holds one")
	fs.BoolVar(&cfg.discardPartial, "discard-partial", false, "abandon a partial snapshot an interrupted run left in the table instead of resuming it (its files are never committed)")
	fs.BoolVar(&cfg.planOnly, "plan", false, "plan only: connect, check permissions, print the capture instance, its key, the plan and the table's state; read no row and write nothing")
	fs.BoolVar(&cfg.verbose, "v", false, "log decisions (partition strategy, commits) to stderr")
	fs.DurationVar(&cfg.progress, "progress", time.Second, "interval of plain progress lines when stderr is not a terminal")
	fs.StringVar(&cfg.sourceOut, "source-parquet", "", "also write the demo source table's final rows to this Parquet file (for checks with other readers)")
	fs.BoolVar(&cfg.keyUpdates, "key-updates", false, "the demo fake moves some orders to another region, logged as an update-before and an update-after as under SQL Server's trace flag 8207 (without -dsn)")
	partitionBy := fs.String("partition-by", "", "when the job creates the table: captured columns to partition it by, comma-separated (e.g. region)")
	features := fs.String("features", "", "when the job creates the table: Delta table features, comma-separated (e.g. deletionVectors,inCommitTimestamp,rowTracking, Databricks' defaults; see delta.CreateOptions)")
	fs.StringVar(&cfg.many.instances, "instances", "", "many instances: \"all\", or capture instances to bootstrap, comma-separated (each into its own table; see -target)")
	fs.StringVar(&cfg.many.schemas, "schemas", "", "many instances: only those of tables in these schemas, comma-separated")
	fs.StringVar(&cfg.many.match, "match", "", "many instances: only those whose names match these patterns, comma-separated (path.Match syntax, ignoring case: 'dbo_*')")
	fs.IntVar(&cfg.many.tables, "tables", 4, "many instances: tables bootstrapped at once")
	fs.IntVar(&cfg.many.connections, "connections", 8, "many instances: source connections in use at once, every table together (with -dsn, the pool's limit too)")
	fs.IntVar(&cfg.many.demoTables, "demo-tables", 24, "many instances: tables in the demo fake (without -dsn); -rows is their total")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every setting is a flag (-target %s, ...; -h lists them)", fs.Arg(0), fs.Arg(0))
	}
	cfg.create = delta.CreateOptions{PartitionBy: splitList(*partitionBy), Features: splitList(*features)}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return cfg, cfg.validate(set)
}

// maxPartitions bounds -partitions: each partition is a query and at least
// one data file, and more than this only adds overhead.
const maxPartitions = 1024

// validate refuses values that cannot work and flags the chosen mode
// would ignore; set holds the flags given on the command line.
func (cfg config) validate(set map[string]bool) error {
	demo, many := cfg.dsn == "", cfg.many.on()
	switch {
	case strings.TrimSpace(cfg.target) == "":
		return errors.New("-target is empty: name a folder or a bucket URL (s3://, gs://, azblob://)")
	case cfg.minPartRows < 0:
		return fmt.Errorf("-min-partition-rows %d: want 0 (no minimum) or more", cfg.minPartRows)
	case cfg.partitions < 1 || cfg.partitions > maxPartitions:
		return fmt.Errorf("-partitions %d: want 1 to %d (each partition is one query and at least one file)", cfg.partitions, maxPartitions)
	case demo && cfg.rows < 1:
		return fmt.Errorf("-rows %d: the demo table needs at least 1 row", cfg.rows)
	case cfg.progress <= 0:
		return fmt.Errorf("-progress %s: want a positive interval, such as 1s", cfg.progress)
	case many && (cfg.many.tables < 1 || cfg.many.connections < 1):
		return fmt.Errorf("-tables %d and -connections %d: want at least 1 each", cfg.many.tables, cfg.many.connections)
	case many && demo && cfg.many.demoTables < 1:
		return fmt.Errorf("-demo-tables %d: want at least 1", cfg.many.demoTables)
	case !demo && !many && strings.TrimSpace(cfg.instance) == "":
		return errors.New("-dsn needs -capture-instance NAME, the capture instance to snapshot (sys.sp_cdc_help_change_data_capture lists them), or -instances all")
	case cfg.planOnly && cfg.resnapshot:
		return errors.New("-plan with -resnapshot: -plan shows what a run would do; drop -resnapshot, or run without -plan")
	}
	// Flags the chosen mode would ignore: refused rather than ignored, so
	// a run never does something other than what was asked.
	type rule struct {
		flag, why string
		ignored   bool
	}
	for _, r := range []rule{
		{"capture-instance", "names a capture instance on SQL Server: add -dsn sqlserver://... (the demo's only instance is " + demoInstance + ")", demo && !many && cfg.instance != demoInstance},
		{"capture-instance", "is for one instance: with -instances, -schemas or -match, list instances with -instances", many},
		{"server-time-zone", "is SQL Server's zone: add -dsn sqlserver://...", demo},
		{"rows", "sizes the demo table: with -dsn the table is the server's", !demo},
		{"demo-tables", "sizes the many-instance demo: with -dsn the tables are the server's", !demo},
		{"demo-tables", "is for the many-instance demo: add -instances all", !many},
		{"source-parquet", "writes the demo's source table: it needs the one-table demo (no -dsn, no -instances)", !demo || many},
		{"key-updates", "changes the demo's source table: it needs the one-table demo (no -dsn, no -instances)", !demo || many},
		{"tables", "is for many instances: add -instances, -schemas or -match", !many},
		{"connections", "is for many instances: add -instances, -schemas or -match", !many},
		{"plan", "shows one capture instance's plan: drop -instances, -schemas and -match", many},
		{"discard-partial", "is for one capture instance: drop -instances, -schemas and -match", many},
		{"switch-to", "moves one capture instance's stream: drop -instances, -schemas and -match", many || cfg.planOnly},
	} {
		if r.ignored && set[r.flag] {
			return fmt.Errorf("-%s %s", r.flag, r.why)
		}
	}
	return nil
}

// newProgressPrinter shows progress on w: redrawn in place every 100 ms on
// a terminal, a plain line every interval otherwise.
func newProgressPrinter(w io.Writer, interval time.Duration) *progressPrinter {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	pp := &progressPrinter{w: w, tty: tty, interval: interval}
	if tty {
		pp.interval = 100 * time.Millisecond
	}
	return pp
}

// changeSource is what the job reads: the demo fake or SQL Server.
type changeSource = source.Source

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	pp := newProgressPrinter(stderr, cfg.progress)
	if cfg.dsn == "" {
		cfg.instance = demoInstance
	}
	if cfg.many.on() {
		return runMany(ctx, cfg, stdout, logger, pp)
	}
	table, done, err := openTarget(ctx, cfg.target, delta.Options{Logger: logger, Create: cfg.create})
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	err = runOne(ctx, cfg, table, stdout, logger, pp)
	return explain(err, cfg)
}

// runOne bootstraps one capture instance into table.
func runOne(ctx context.Context, cfg config, table *delta.Table, stdout io.Writer, logger *slog.Logger, pp *progressPrinter) error {
	var (
		src     changeSource
		demo    *demoDB
		earlier bool // the demo's table holds a snapshot of an earlier run
	)
	if cfg.dsn != "" {
		s, closeDB, err := mssqlconn.Open(ctx, cfg.dsn, cfg.serverTZ, logger)
		if err != nil {
			return err
		}
		defer closeDB()
		src = s
	} else {
		// The demo database lives in this process's memory: a snapshot in
		// the table came from an earlier run's database, which is gone.
		// Finding it is the rerun the library promises; building a new
		// demo only to read nothing would be wasted work.
		old, err := table.FindSnapshot(ctx, demoInstance)
		switch {
		case err == nil && !cfg.resnapshot && !cfg.planOnly:
			next, err := old.LSN.Next()
			if err != nil {
				return err
			}
			where := fmt.Sprintf("version %d", old.Version)
			if old.Version < 0 {
				where = "found from its rows: its txn record expired"
			}
			fmt.Fprintf(stdout, "snapshot exists: %s already holds a snapshot of %s at LSN %s (%s); read nothing\n", cfg.target, demoInstance, old.LSN, where)
			fmt.Fprintf(stdout, "stream:   start after %s (first LSN to read: %s)\n", old.LSN, next)
			fmt.Fprintln(stdout, "demo:     that snapshot's demo database lived in the memory of the run that took it; -target <new folder> runs the whole demo again")
			return nil
		case err == nil:
			earlier = true
		case !errors.Is(err, sink.ErrNotFound):
			return err
		}
		start := time.Now()
		demo, err = newDemo(cfg.rows, cfg.keyUpdates)
		if err != nil {
			return err
		}
		src = demo.db
		fmt.Fprintf(stdout, "demo source: fake CDC database, table %s with %d rows (built in %s)\n", demoTable, cfg.rows, time.Since(start).Round(time.Millisecond))
	}

	_, findErr := table.FindSnapshot(ctx, cfg.instance)
	reads := cfg.resnapshot || errors.Is(findErr, sink.ErrNotFound)
	fit := cfg.partitions
	if reads || cfg.planOnly {
		var err error
		if fit, err = fitPartitions(ctx, src, cfg, stdout); err != nil {
			return err
		}
	}
	if cfg.planOnly {
		if err := printPlan(ctx, src, table, cfg, stdout); err != nil {
			return err
		}
		if demo != nil {
			st, err := demo.db.Stats("sales", "orders")
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "demo:     the demo database counted %d range reads and %d rows returned; planning made %d key seeks (%d keys read)\n", st.RangeReads, st.RowsReturned, st.Seeks, st.KeysExamined)
		}
		fmt.Fprintln(stdout, "run:      the same command without -plan")
		return nil
	}
	partial := false
	if reads {
		var err error
		if partial, err = notePartial(ctx, table, cfg, fit, stdout); err != nil {
			return err
		}
	}
	if demo != nil {
		demo.changeDuringRead()
	}
	started := time.Now()
	opts := cfg.snapshotOptions()
	opts.Logger, opts.Progress = logger, pp.update
	from, res, err := snapshot.Bootstrap(ctx, src, table, opts)
	if demo != nil {
		demo.stopChanges()
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(started)
	files, err := table.Files(ctx)
	if err != nil {
		return err
	}
	if res.Existing {
		fmt.Fprintf(stdout, "snapshot exists: %s already holds a snapshot of %s at LSN %s (version %d); read nothing\n", cfg.target, cfg.instance, res.LSN, res.Version)
	} else {
		commitTS := "unknown"
		if !res.CommitTS.IsZero() {
			commitTS = res.CommitTS.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(stdout, "snapshot: %d rows of %s at LSN %s (commit time %s) in %s, %s rows/s, %d partitions\n",
			res.Rows, cfg.instance, res.LSN, commitTS, elapsed.Round(time.Millisecond),
			groupDigits(int64(float64(res.Rows)/elapsed.Seconds())), res.Partitions)
		switch {
		case res.Resumed:
			fmt.Fprintf(stdout, "resumed:  %d of the partitions (%d rows) were written by an earlier run and not read again\n", res.PartitionsResumed, res.RowsResumed)
		case partial && !cfg.discardPartial:
			fmt.Fprintln(stdout, "partial:  not resumed: it could no longer be used (-v logs why); this snapshot was planned anew")
		}
		fmt.Fprintf(stdout, "delta:    %s version %d, %d data files\n", cfg.target, res.Version, len(files))
	}
	fmt.Fprintf(stdout, "stream:   start after %s (first LSN to read: %s)\n", res.LSN, from)

	if demo == nil {
		if cfg.switchTo != "" {
			return switchStream(ctx, cfg, src, table, nil, from, 1, stdout)
		}
		return nil
	}
	// Stream what the demo committed during and after the snapshot, as the
	// caller's stream would: changes from `from` up to the current max LSN.
	to, err := demo.db.MaxLSN(ctx)
	if err != nil {
		return err
	}
	changes, err := appendChanges(ctx, src, table, cfg.instance, from, to)
	if err != nil {
		return err
	}
	version, err := table.Version(ctx)
	if err != nil {
		return err
	}
	if from.Compare(to) > 0 {
		fmt.Fprintf(stdout, "changes:  none committed after %s yet\n", res.LSN)
	} else {
		fmt.Fprintf(stdout, "changes:  %d change rows committed during the snapshot streamed from %s to %s, delta version %d\n", changes, from, to, version)
	}
	if demo != nil && demo.keyUpdates {
		fmt.Fprintf(stdout, "changes:  %d orders moved to another region, each logged as an update-before and an update-after (trace flag 8207)\n", demo.moved)
	}
	if cfg.switchTo != "" {
		next, err := to.Next()
		if err != nil {
			return err
		}
		if next.Less(from) {
			next = from
		}
		if err := switchStream(ctx, cfg, src, table, demo, next, 2, stdout); err != nil {
			return err
		}
	}
	if earlier {
		fmt.Fprintln(stdout, "check:    skipped: the table also holds an earlier run's snapshot and changes, of a demo database that no longer exists")
		return nil
	}
	keys, diff, err := demo.verify(ctx, table)
	if err != nil {
		return err
	}
	if len(diff) > 0 {
		return fmt.Errorf("the table's latest image differs from the source:\n%v", diff)
	}
	fmt.Fprintf(stdout, "check:    latest image of %s equals the source table (%d keys)\n", cfg.target, keys)
	if cfg.sourceOut != "" {
		current := demoInstance
		if cfg.switchTo != "" {
			current = cfg.switchTo // its columns: the table's after the schema change
		}
		if err := sourceparquet.Write(ctx, demo.db, current, cfg.sourceOut); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "source:   %s\n", cfg.sourceOut)
	}
	return nil
}

// appendChanges reads the changes in [from, to] and appends them as one
// stream batch (batch id 1: a rerun appends nothing twice).
func appendChanges(ctx context.Context, src source.Source, table *delta.Table, instance string, from, to lsn.LSN) (int64, error) {
	if from.Compare(to) > 0 {
		return 0, nil
	}
	rr, err := snapshot.Changes(ctx, src, instance, from, to, 1)
	if err != nil {
		return 0, err
	}
	counted := &countingReader{RecordReader: rr}
	defer counted.Release()
	if _, err := table.AppendChanges(ctx, instance, 1, counted); err != nil {
		return 0, err
	}
	return counted.rows, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
