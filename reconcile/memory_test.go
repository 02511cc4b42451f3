package reconcile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// genSource is a table computed from the row number, holding nothing per
// row: row i has id i+1 and values derived from it. It serves what a whole
// snapshot and a reconcile read; the embedded Source (nil) stands for the
// methods neither calls.
type genSource struct {
	source.Source
	rows   int64
	ci     source.CaptureInstance
	schema *arrow.Schema
}

func newGenSource(t testing.TB, rows int64) *genSource {
	cols := []source.Column{
		{Name: "id", Type: "bigint"},
		{Name: "note", Type: "nvarchar", Length: 60, Collation: "Latin1_General_CI_AS", Nullable: true},
		{Name: "amount", Type: "bigint", Nullable: true},
	}
	s, err := source.ArrowSchema(cols)
	if err != nil {
		t.Fatal(err)
	}
	l := lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 1}
	return &genSource{rows: rows, schema: s, ci: source.CaptureInstance{Name: "dbo_big", SourceSchema: "dbo", SourceTable: "big", StartLSN: l, Columns: cols, Key: []string{"id"}}}
}

func (g *genSource) CaptureInstance(_ context.Context, name string) (*source.CaptureInstance, error) {
	n, err := source.Resolve(name, []string{g.ci.Name})
	if err != nil {
		return nil, err
	}
	ci := g.ci
	ci.Name = n
	return &ci, nil
}

func (g *genSource) MaxLSN(context.Context) (lsn.LSN, error) { return g.ci.StartLSN.Next() }
func (g *genSource) MinLSN(context.Context, string) (lsn.LSN, bool, error) {
	return g.ci.StartLSN, true, nil
}
func (g *genSource) LSNTime(context.Context, lsn.LSN) (time.Time, error) {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil
}
func (g *genSource) IntKeyBounds(context.Context, *source.CaptureInstance) (int64, int64, bool, error) {
	return 1, g.rows, g.rows > 0, nil
}
func (g *genSource) RowCount(context.Context, *source.CaptureInstance) (int64, error) {
	return g.rows, nil
}

// index is the row number of the first key at or above t (nil: 0).
func (g *genSource) index(t keyrange.Tuple) int64 {
	if t == nil || t[0] == nil {
		return 0
	}
	return min(max(t[0].(int64)-1, 0), g.rows)
}

func (g *genSource) SeekKey(_ context.Context, _ *source.CaptureInstance, _ source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	if i := g.index(from) + k; i < g.rows {
		return keyrange.Tuple{i + 1}, true, nil
	}
	return nil, false, nil
}

func (g *genSource) ReadRange(_ context.Context, _ *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	end := g.rows
	if r.Upper != nil {
		end = g.index(r.Upper)
	}
	batch := int64(opts.BatchRows)
	if batch <= 0 {
		batch = 8192
	}
	gr := &genReader{g: g, next: g.index(r.Lower), end: end, batch: batch}
	gr.refs.Store(1)
	return gr, nil
}

type genReader struct {
	g         *genSource
	next, end int64
	batch     int64
	cur       arrow.RecordBatch
	refs      atomic.Int64
}

func (r *genReader) Retain() { r.refs.Add(1) }
func (r *genReader) Release() {
	if r.refs.Add(-1) == 0 && r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}
func (r *genReader) Schema() *arrow.Schema          { return r.g.schema }
func (r *genReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *genReader) Record() arrow.RecordBatch      { return r.cur }
func (r *genReader) Err() error                     { return nil }
func (r *genReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.next >= r.end {
		return false
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, r.g.schema)
	defer b.Release()
	ids, notes, amounts := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.StringBuilder), b.Field(2).(*array.Int64Builder)
	for i := r.next; i < min(r.next+r.batch, r.end); i++ {
		h := uint64(i+1) * 0x9E3779B97F4A7C15
		ids.Append(i + 1)
		notes.Append("note " + strconv.FormatUint(h>>40, 36))
		amounts.Append(int64(h >> 44))
	}
	r.next = min(r.next+r.batch, r.end)
	r.cur = b.NewRecordBatch()
	return true
}

// TestMemoryTilesVersusWhole measures the peak live heap and the peak RSS
// of one reconcile of a generated table in a local Delta table. It runs
// only when CDCSNAP_RECONCILE_MEMORY_ROWS is set, once per process (peak
// RSS only grows), in the mode CDCSNAP_RECONCILE_MEMORY_MODE says:
// "tiles" (the table read tile by tile through its files' statistics, the
// default) or "whole" (the table's image held at once). The table is
// written once into CDCSNAP_RECONCILE_MEMORY_DIR (default: a temporary
// folder) and reused. CDCSNAP_RECONCILE_MEMORY_TILES sets Tiles (default:
// one per 40,000 rows). For example:
//
//	CDCSNAP_RECONCILE_MEMORY_ROWS=10000000 CDCSNAP_RECONCILE_MEMORY_DIR=/tmp/rm10m \
//	  go test -run TestMemoryTilesVersusWhole -v -timeout 60m ./reconcile/
func TestMemoryTilesVersusWhole(t *testing.T) {
	rows, err := strconv.ParseInt(os.Getenv("CDCSNAP_RECONCILE_MEMORY_ROWS"), 10, 64)
	if err != nil || rows <= 0 {
		t.Skip("set CDCSNAP_RECONCILE_MEMORY_ROWS to measure")
	}
	mode := os.Getenv("CDCSNAP_RECONCILE_MEMORY_MODE")
	if mode == "" {
		mode = "tiles"
	}
	tiles := int(max(rows/40_000, 1))
	if v := os.Getenv("CDCSNAP_RECONCILE_MEMORY_TILES"); v != "" {
		if tiles, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	dir := os.Getenv("CDCSNAP_RECONCILE_MEMORY_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, fmt.Sprintf("rows-%d", rows))
	ctx := context.Background()
	src := newGenSource(t, rows)
	// 1 MiB files: a tile's keys lie in a few of them.
	tb, err := delta.Open(ctx, dir, delta.Options{TargetFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := tb.FindSnapshot(ctx, src.ci.Name); err != nil {
		start := time.Now()
		if _, err := snapshot.Take(ctx, src, tb, snapshot.Options{CaptureInstance: src.ci.Name, Partitions: 8, MinPartitionRows: -1}); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d rows in %s", rows, time.Since(start).Round(time.Millisecond))
	}
	files, err := tb.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, f := range files {
		size += f.Size
	}
	var dst reconcile.RowReader = tb
	if mode == "whole" {
		dst = wholeOnly{tb}
	}
	runtime.GC()
	base := heapLive()
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				peak = max(peak, heapLive())
			}
		}
	})
	start := time.Now()
	rep, err := reconcile.Run(ctx, src, dst, reconcile.Options{CaptureInstance: src.ci.Name, Tiles: tiles})
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var target int64
	for _, tl := range rep.Tiles {
		target += tl.TargetRows
	}
	if !rep.Clean() || target != rows {
		t.Fatalf("report not clean (%d target rows of %d): %d differing tiles", target, rows, len(rep.DifferingTiles()))
	}
	t.Logf("mode %s: %d rows, %d tiles (Parallel 4), %d files (%d MiB): %s; peak live heap %d MiB above %d MiB before; peak RSS %s",
		mode, rows, len(rep.Tiles), len(files), size>>20, elapsed.Round(time.Millisecond), (peak-base)>>20, base>>20, peakRSS())
}

// heapLive is the live heap marked by the last garbage collection.
func heapLive() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// peakRSS is the process's VmHWM from /proc/self/status.
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
