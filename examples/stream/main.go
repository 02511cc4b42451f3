// Command stream runs the whole pipeline against the embedded fake CDC
// database: it bootstraps a Delta table with a snapshot, then polls the
// change stream into it, appending each poll's changes as one batch with
// its progress, while a goroutine commits random changes at the source and
// once runs retention cleanup past the stream's position. The stream then
// sees source.ErrDataLoss, re-snapshots the instance and continues after
// the new snapshot. On SIGINT (or after -duration) it stops the changes,
// drains the stream, and reconciles the table's rows since the newest
// snapshot with the source.
//
//	go run ./examples/stream -table /tmp/orders -duration 5s
//
// With -chunked the snapshots are chunked (snapshot.Backfill), read a wave
// per poll next to the stream; that needs a table that implements
// sink.ChunkSink.
//
// Downstream of a re-snapshot, rebuild from the newest snapshot: apply only
// the rows whose _start_lsn is at or above its LSN (the final reconcile
// does exactly that with reconcile.Options.From).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" // s3://, gs://, azblob:// targets
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// config is the command line.
type config struct {
	table     string
	rows      int
	interval  time.Duration
	duration  time.Duration
	lossAfter time.Duration
	chunked   bool
	seed      uint64
	verbose   bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.table, "table", "", "Delta table folder or URL (default: a new temporary folder)")
	flag.IntVar(&cfg.rows, "rows", 2000, "rows in the demo table")
	flag.DurationVar(&cfg.interval, "interval", 200*time.Millisecond, "poll interval")
	flag.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: run until SIGINT)")
	flag.DurationVar(&cfg.lossAfter, "data-loss-after", 2*time.Second, "run retention cleanup past the stream once after this long (0: never)")
	flag.BoolVar(&cfg.chunked, "chunked", false, "take chunked snapshots (the table must implement sink.ChunkSink)")
	flag.Uint64Var(&cfg.seed, "seed", 0, "seed of the random changes (0: from the clock)")
	flag.BoolVar(&cfg.verbose, "v", false, "debug logging (default: warnings only)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

const ci = "dbo_orders"

// run is the program; it returns when ctx is done (or cfg.duration passed)
// and the stream has drained.
func run(ctx context.Context, cfg config, w io.Writer) error {
	out := &lockedWriter{w: w} // the changes goroutine reports too
	level := slog.LevelWarn
	if cfg.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if cfg.table == "" {
		dir, err := os.MkdirTemp("", "cdcsnap-stream-")
		if err != nil {
			return err
		}
		cfg.table = dir
	}
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	db, err := demoDB(cfg.rows)
	if err != nil {
		return err
	}
	table, err := blobstore.Open(context.WithoutCancel(ctx), cfg.table, delta.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("opening the Delta table %s: %w", cfg.table, err)
	}
	defer table.Close()
	fmt.Fprintf(out, "table %s, seed %d\n", cfg.table, cfg.seed)

	p := &pipeline{db: db, table: table, log: log, out: out, cfg: cfg}
	work := context.WithoutCancel(ctx) // the pipeline's own calls finish cleanly after SIGINT
	if err := p.bootstrap(work); err != nil {
		return err
	}

	// The source keeps changing meanwhile.
	var wg sync.WaitGroup
	changes, stopChanges := context.WithCancel(ctx)
	defer stopChanges()
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.change(changes, rand.New(rand.NewPCG(cfg.seed, 1)))
	}()

	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	for loop := true; loop; {
		select {
		case <-ctx.Done():
			loop = false
		case <-tick.C:
			if err := p.poll(work); err != nil {
				stopChanges()
				wg.Wait()
				return err
			}
		}
	}
	fmt.Fprintln(out, "stopping: draining the stream")
	stopChanges()
	wg.Wait()
	if err := p.finish(work); err != nil {
		return err
	}
	return p.reconcile(work)
}

// pipeline is the stream's state.
type pipeline struct {
	db    *fake.DB
	table *delta.Table
	log   *slog.Logger
	out   io.Writer
	cfg   config

	next   lsn.LSN // the stream's next LSN
	newest lsn.LSN // the newest snapshot's LSN (downstream rebuilds from it)
	batch  int64
	rows   int64
	polls  int
	losses int
	pollMu sync.Mutex // a poll never runs between purge's commit and its cleanup
}

func (p *pipeline) chunkSink() (sink.ChunkSink, error) {
	var s any = p.table
	cs, ok := s.(sink.ChunkSink)
	if !ok {
		return nil, errors.New("-chunked: this Delta table does not implement sink.ChunkSink yet")
	}
	return cs, nil
}

func (p *pipeline) backfillOptions(resnapshot bool) snapshot.BackfillOptions {
	return snapshot.BackfillOptions{CaptureInstance: ci, ChunkRows: 500, WaveChunks: 2, MaxWaves: 1, Resnapshot: resnapshot, RunOptions: snapshot.RunOptions{Logger: p.log}}
}

func (p *pipeline) bootstrap(ctx context.Context) error {
	start := time.Now()
	if p.cfg.chunked {
		cs, err := p.chunkSink()
		if err != nil {
			return err
		}
		from, res, err := snapshot.BootstrapBackfill(ctx, p.db, cs, p.backfillOptions(false))
		if err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		p.next, p.newest = from, res.LSN
		fmt.Fprintf(p.out, "chunked snapshot opened at %s (%d chunks); streaming from %s\n", res.LSN, res.Chunks, from)
		return nil
	}
	opts := snapshot.Options{CaptureInstance: ci, Partitions: 4, RunOptions: snapshot.RunOptions{Logger: p.log}, Progress: func(pr snapshot.Progress) {
		if pr.PartitionsDone == pr.Partitions {
			fmt.Fprintf(p.out, "snapshot: %d rows in %d partitions, %s\n", pr.Rows, pr.Partitions, pr.Elapsed.Round(time.Millisecond))
		}
	}}
	from, res, err := snapshot.Bootstrap(ctx, p.db, p.table, opts)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	p.next, p.newest = from, res.LSN
	fmt.Fprintf(p.out, "snapshot at %s (existing %v, version %d) in %s; streaming from %s\n", res.LSN, res.Existing, res.Version, time.Since(start).Round(time.Millisecond), from)
	return nil
}

// poll appends the changes since the last poll (and, for a chunked
// snapshot, reads one more wave of it).
func (p *pipeline) poll(ctx context.Context) error {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	opts := snapshot.PollOptions{BatchID: p.batch + 1, Logger: p.log}
	if p.cfg.chunked {
		cs, err := p.chunkSink()
		if err != nil {
			return err
		}
		if _, err := snapshot.Backfill(ctx, p.db, cs, p.backfillOptions(false)); err != nil {
			return fmt.Errorf("backfill wave: %w", err)
		}
		opts.OnDataLoss = snapshot.BackfillOnDataLoss(p.db, cs, p.backfillOptions(false))
	} else {
		opts.OnDataLoss = snapshot.ResnapshotOnDataLoss(p.db, p.table, snapshot.Options{CaptureInstance: ci, RunOptions: snapshot.RunOptions{Logger: p.log}})
	}
	res, err := snapshot.Poll(ctx, p.db, p.table, ci, p.next, opts)
	if err != nil {
		return err
	}
	p.polls++
	if res.DataLoss != nil {
		p.losses++
		p.newest, _ = res.Next.Prev()
		fmt.Fprintf(p.out, "data loss: changes from %s were purged (min LSN %s); re-snapshotted at %s, streaming from %s\n",
			res.DataLoss.Requested, res.DataLoss.MinLSN, p.newest, res.Next)
	}
	if res.Appended {
		p.batch++
		p.rows += res.Rows
		fmt.Fprintf(p.out, "batch %d: %s..%s, %d change rows, table version %d (%d rows streamed in all)\n", p.batch, res.From, res.To, res.Rows, res.Version, p.rows)
	}
	p.next = res.Next
	return nil
}

// finish drains the stream (and completes a chunked snapshot).
func (p *pipeline) finish(ctx context.Context) error {
	if p.cfg.chunked {
		cs, err := p.chunkSink()
		if err != nil {
			return err
		}
		o := p.backfillOptions(false)
		o.MaxWaves = 0
		if _, err := snapshot.Backfill(ctx, p.db, cs, o); err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
	}
	return p.poll(ctx)
}

func (p *pipeline) reconcile(ctx context.Context) error {
	rep, err := reconcile.Run(ctx, p.db, p.table, reconcile.Options{CaptureInstance: ci, Tiles: 8, From: p.newest, MaxDifferences: 10, Logger: p.log})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	fmt.Fprintf(p.out, "done: %d polls, %d batches, %d change rows, %d data losses; reconcile from %s: clean %v (%d tiles)\n",
		p.polls, p.batch, p.rows, p.losses, p.newest, rep.Clean(), len(rep.Tiles))
	for _, d := range rep.Differences {
		fmt.Fprintln(p.out, "  ", d)
	}
	if !rep.Clean() {
		return errors.New("the table does not match the source")
	}
	return nil
}

// change commits random inserts, updates and deletes until ctx is done,
// and once (after cfg.lossAfter) purges every change up to the max LSN, as
// retention cleanup does when a stream falls too far behind.
func (p *pipeline) change(ctx context.Context, r *rand.Rand) {
	start := time.Now()
	lost := p.cfg.lossAfter <= 0
	for ctx.Err() == nil {
		tx := p.db.Begin()
		id := int64(r.IntN(p.cfg.rows * 2))
		var err error
		switch r.IntN(3) {
		case 0:
			err = tx.Insert("dbo", "orders", fake.Row{id, fmt.Sprint("new ", r.IntN(1000)), int64(r.IntN(100))})
		case 1:
			err = tx.Update("dbo", "orders", []any{id}, fake.Row{id, fmt.Sprint("upd ", r.IntN(1000)), int64(r.IntN(100))})
		default:
			err = tx.Delete("dbo", "orders", []any{id})
		}
		if err == nil {
			_, err = tx.Commit() // a duplicate insert or a missing row fails: skip it
		} else {
			tx.Rollback()
		}
		if err != nil {
			p.log.Debug("change skipped", "err", err)
		}
		if !lost && time.Since(start) > p.cfg.lossAfter {
			lost = true
			p.purge()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1+r.IntN(5)) * time.Millisecond):
		}
	}
}

// purge commits two changes and then purges every change below the second, with no
// poll in between: the stream's next LSN is then below the minimum LSN.
func (p *pipeline) purge() {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	// Two commits: cleanup keeps the changes at its watermark, so the
	// stream (at or below the first) is below the second.
	var at lsn.LSN
	var err error
	for i := range 2 {
		tx := p.db.Begin()
		id := int64(p.cfg.rows*2 + 1 + i) // above every random id
		if err = tx.Insert("dbo", "orders", fake.Row{id, "before the purge", nil}); err == nil {
			at, err = tx.Commit()
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = p.db.Cleanup("", at)
	}
	if err != nil {
		p.log.Warn("retention cleanup failed", "err", err)
		return
	}
	fmt.Fprintf(p.out, "retention cleanup: changes below %s purged\n", at)
}

// demoDB is the embedded fake: dbo.orders with CDC enabled and rows rows.
func demoDB(rows int) (*fake.DB, error) {
	db := fake.New(fake.Options{Now: func() time.Time { return time.Now().UTC() }})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"}, {Name: "note", Type: "nvarchar(40)", Nullable: true}, {Name: "qty", Type: "int", Nullable: true},
	}, Key: []string{"id"}}); err != nil {
		return nil, err
	}
	if _, err := db.EnableCDC("dbo", "orders", ci); err != nil {
		return nil, err
	}
	batch := make([]fake.Row, 0, rows)
	for i := range rows {
		batch = append(batch, fake.Row{int64(i * 2), fmt.Sprint("order ", i), int64(i % 7)})
	}
	if len(batch) > 0 {
		if _, err := db.Load("dbo", "orders", batch...); err != nil {
			return nil, err
		}
	}
	return db, nil
}

var _ source.Source = (*fake.DB)(nil)

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
