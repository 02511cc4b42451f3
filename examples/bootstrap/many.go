package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlconn"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// manyConfig is the many-instance mode's part of the flags.
type manyConfig struct {
	instances   string // "all" or a comma-separated list
	schemas     string
	match       string
	tables      int
	connections int
	demoTables  int
}

// on reports whether the flags ask for many instances.
func (m manyConfig) on() bool { return m.instances != "" || m.schemas != "" || m.match != "" }

func (m manyConfig) selection() database.Selection {
	sel := database.Selection{Schemas: splitList(m.schemas), Patterns: splitList(m.match)}
	if !strings.EqualFold(strings.TrimSpace(m.instances), "all") {
		sel.Names = splitList(m.instances)
	}
	return sel
}

// manyTarget is the target template: -target as given when it has a
// placeholder, else -target/{schema}/{table}.
func manyTarget(target string) string {
	if strings.Contains(target, "{") {
		return target
	}
	return strings.TrimRight(target, "/") + "/{schema}/{table}"
}

// manyDemo is the many-instance demo: tables in the schemas sales, hr and
// ops with bigint, composite (varchar CI, bigint) and nvarchar keys, of
// growing sizes, all captured, with changes committed while they are read.
type manyDemo struct {
	db     *fake.DB
	mu     sync.Mutex
	rng    *rand.Rand
	tables []fake.TableInfo
}

func newManyDemo(tables, rows int) (*manyDemo, error) {
	if tables < 1 {
		return nil, fmt.Errorf("-demo-tables %d: want at least 1", tables)
	}
	d := &manyDemo{db: fake.New(fake.Options{Start: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Tick: 250 * time.Millisecond}), rng: rand.New(rand.NewPCG(42, 18))}
	weights := tables * (tables + 1) / 2
	for i := range tables {
		schema := []string{"sales", "hr", "ops"}[i%3]
		def := fake.TableDef{Schema: schema, Name: fmt.Sprintf("t%02d", i+1), CaptureInstance: fmt.Sprintf("%s_t%02d", schema, i+1)}
		note := fake.ColumnDef{Name: "note", Type: "nvarchar(40)", Nullable: true}
		n := rows * (i + 1) / weights // table i+1 of n holds a share growing with i
		switch i % 3 {
		case 0:
			def.Columns, def.Key = []fake.ColumnDef{{Name: "id", Type: "bigint"}, note}, []string{"id"}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{int64(k + 1), d.note()})
			}
		case 1:
			def.Columns = []fake.ColumnDef{{Name: "region", Type: "varchar(16)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "id", Type: "bigint"}, note}
			def.Key = []string{"region", "id"}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{demoRegions[k%len(demoRegions)], int64(k + 1), d.note()})
			}
		default:
			def.Columns, def.Key = []fake.ColumnDef{{Name: "code", Type: "nvarchar(20)"}, note}, []string{"code"}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{fmt.Sprintf("C-%07d", k), d.note()})
			}
		}
		if err := d.db.CreateTable(def); err != nil {
			return nil, err
		}
		info, err := d.db.Table(def.Schema, def.Name)
		if err != nil {
			return nil, err
		}
		d.tables = append(d.tables, info)
	}
	return d, nil
}

func (d *manyDemo) note() any {
	if d.rng.IntN(10) == 0 {
		return nil
	}
	return fmt.Sprintf("note %d", d.rng.IntN(100_000))
}

// changeDuringRead updates a random row of a random table after every 4th
// page read: each table's stream must carry what its snapshot missed.
func (d *manyDemo) changeDuringRead() {
	pages := 0
	d.db.SetPageHook(func(ctx context.Context, p fake.Page) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if pages++; pages%4 != 0 {
			return nil
		}
		info := d.tables[d.rng.IntN(len(d.tables))]
		rows, err := d.db.Rows(info.Schema, info.Name)
		if err != nil || len(rows) == 0 {
			return err
		}
		row := append(fake.Row(nil), rows[d.rng.IntN(len(rows))]...)
		key := make([]any, len(info.KeyIndexes))
		for i, j := range info.KeyIndexes {
			key[i] = row[j]
		}
		row[len(row)-1] = d.note()
		tx := d.db.Begin()
		if err := tx.Update(info.Schema, info.Name, key, row); err != nil {
			tx.Rollback()
			return err
		}
		_, err = tx.Commit()
		return err
	})
}

// runMany bootstraps many capture instances, each into its own Delta table
// named by the target template, with one progress display for the run.
// On the demo it then streams each table's changes and checks each image.
func runMany(ctx context.Context, cfg config, stdout io.Writer, logger *slog.Logger, pp *progressPrinter) error {
	m := cfg.many
	var (
		src  source.Source
		demo *manyDemo
	)
	if cfg.dsn != "" {
		// The pool holds the same budget as database.Bootstrap's
		// Connections, so nothing else opens more.
		s, closeDB, err := mssqlconn.OpenMaxConns(ctx, cfg.dsn, cfg.serverTZ, cmp.Or(m.connections, database.DefaultConnections), logger)
		if err != nil {
			return err
		}
		defer closeDB()
		src = s
	} else {
		start := time.Now()
		var err error
		if demo, err = newManyDemo(m.demoTables, cfg.rows); err != nil {
			return err
		}
		src = demo.db // a database.Lister, as *sqlserver.Source is
		fmt.Fprintf(stdout, "demo source: fake CDC database, %d tables in schemas sales, hr and ops with %d rows in all (built in %s)\n",
			m.demoTables, cfg.rows, time.Since(start).Round(time.Millisecond))
		demo.changeDuringRead()
	}
	template := manyTarget(cfg.target)
	started := time.Now()
	results, err := database.Bootstrap(ctx, src, database.Options{
		Select: m.selection(), Target: template, Tables: m.tables, Connections: m.connections,
		Open: func(ctx context.Context, target string) (sink.Sink, error) {
			return blobstore.Open(ctx, target, delta.Options{Logger: logger, Create: cfg.create})
		},
		Snapshot: snapshot.Options{Partitions: cfg.partitions, MinPartitionRows: cfg.snapshotOptions().MinPartitionRows, Resnapshot: cfg.resnapshot},
		Progress: pp.updateRun,
		Logger:   logger,
	})
	if demo != nil {
		demo.db.SetPageHook(nil)
	}
	var runErr *database.RunError
	if err != nil && !errors.As(err, &runErr) {
		return err
	}
	elapsed := time.Since(started)
	var rows int64
	var existing, failed int
	for _, r := range results {
		switch {
		case r.Err != nil:
			failed++
			fmt.Fprintf(stdout, "  failed   %s: %v\n", r.CaptureInstance, r.Err)
		case r.Snapshot.Existing:
			existing++
			fmt.Fprintf(stdout, "  exists   %s -> %s: snapshot at LSN %s; read nothing\n", r.CaptureInstance, r.Target, r.Snapshot.LSN)
		default:
			rows += r.Snapshot.Rows
			fmt.Fprintf(stdout, "  snapshot %s -> %s: %d rows at LSN %s, %d partitions\n", r.CaptureInstance, r.Target, r.Snapshot.Rows, r.Snapshot.LSN, r.Snapshot.Partitions)
		}
	}
	fmt.Fprintf(stdout, "tables:   %d selected, %d snapshotted (%s rows in %s, %s rows/s), %d already done, %d failed; template %s\n",
		len(results), len(results)-existing-failed, groupDigits(rows), elapsed.Round(time.Millisecond),
		groupDigits(int64(float64(rows)/elapsed.Seconds())), existing, failed, template)
	if demo == nil || err != nil {
		return err
	}
	if cfg.resnapshot {
		fmt.Fprintln(stdout, "check:    skipped: -resnapshot may have replaced snapshots of earlier runs' demo databases, which no longer exist")
		return nil
	}
	// Stream each table's changes from its own LSN and check its image, as
	// the one-table demo does; tables whose snapshot an earlier run took
	// came from a demo database that no longer exists.
	checked, keys := 0, 0
	to, err := demo.db.MaxLSN(ctx)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Snapshot.Existing {
			continue
		}
		n, err := streamAndVerify(ctx, demo.db, r, to, cfg.create)
		if err != nil {
			return fmt.Errorf("%s: %w", r.CaptureInstance, err)
		}
		checked++
		keys += n
	}
	if checked == 0 {
		fmt.Fprintln(stdout, "check:    skipped: every table holds an earlier run's snapshot, of a demo database that no longer exists")
		return nil
	}
	fmt.Fprintf(stdout, "check:    %d tables streamed to the current LSN; the latest image of each equals its source table (%d keys)\n", checked, keys)
	return reconcileAll(ctx, demo.db, results, m.tables, cfg.create, stdout)
}

// reconcileAll verifies the tables this run snapshotted with the library's
// own verifier, as a user would after a run: reconcile.RunAll, a few
// instances at a time, each Delta table read tile by tile through its
// files' key statistics.
func reconcileAll(ctx context.Context, src source.Source, results []database.Result, atOnce int, create delta.CreateOptions, stdout io.Writer) error {
	started := time.Now()
	var instances []reconcile.Instance
	for _, r := range results {
		if r.Err != nil || r.Snapshot.Existing {
			continue
		}
		table, err := blobstore.Open(ctx, r.Target, delta.Options{Create: create})
		if err != nil {
			return err
		}
		defer table.Close()
		instances = append(instances, reconcile.Instance{Source: src, Target: table, Options: reconcile.Options{CaptureInstance: r.CaptureInstance}})
	}
	res, err := reconcile.RunAll(ctx, instances, reconcile.DatabaseOptions{Instances: cmp.Or(atOnce, database.DefaultTables)})
	if err != nil {
		return err
	}
	var tiles int
	var rows int64
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("reconcile %s: %w", r.CaptureInstance, r.Err)
		}
		if !r.Clean() {
			return fmt.Errorf("reconcile %s: %d tiles differ: %v", r.CaptureInstance, len(r.Report.DifferingTiles()), r.Report.Differences)
		}
		tiles += len(r.Report.Tiles)
		for _, t := range r.Report.Tiles {
			rows += t.SourceRows
		}
	}
	fmt.Fprintf(stdout, "verify:   reconcile.RunAll: %d tables clean, %d tiles, %s source rows hashed against their Delta tables in %s\n",
		len(res), tiles, groupDigits(rows), time.Since(started).Round(time.Millisecond))
	return nil
}

// streamAndVerify appends r's changes after its snapshot up to `to` to its
// table and compares the table's latest image with the source's.
func streamAndVerify(ctx context.Context, db *fake.DB, r database.Result, to lsn.LSN, create delta.CreateOptions) (int, error) {
	table, err := blobstore.Open(ctx, r.Target, delta.Options{Create: create})
	if err != nil {
		return 0, err
	}
	defer table.Close()
	if _, err := appendChanges(ctx, db, table, r.CaptureInstance, r.StreamFrom, to); err != nil {
		return 0, err
	}
	keys, diff, err := verifyImage(ctx, db, r.CaptureInstance, table)
	if err != nil {
		return 0, err
	}
	if len(diff) > 0 {
		return 0, fmt.Errorf("the table's latest image differs from the source:\n%v", diff)
	}
	return keys, nil
}
