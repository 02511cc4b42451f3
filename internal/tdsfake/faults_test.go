package tdsfake_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// injector arms a random transient fault in about one read in rate (range
// reads, seeks and change reads, the statements the source retries), after
// a random number of rows below maxRows; the same statement with the same
// parameters at most twice, so that a partition read again from its start
// (source.ErrTransient) gets through within the snapshot's three attempts.
type injector struct {
	mu      sync.Mutex
	r       *rand.Rand
	rate    int
	maxRows int64
	armed   map[int32]int
	per     map[string]int
	// denied: the login may not read schema cdc's tables, which refuse
	// it (229) before any row; no fault is armed there (a refusal and a
	// fault in one response stand for nothing a server sends).
	denied atomic.Bool
}

func (in *injector) inject(req *tdsserver.Request) (tdsserver.Fault, bool) {
	q := req.SQL
	read := strings.Contains(q, " FROM [cdc].") || strings.HasSuffix(q, " ROWS FETCH NEXT 1 ROWS ONLY") ||
		strings.HasPrefix(q, "SELECT [") && !strings.Contains(q, "[sys].")
	if !read || in.denied.Load() && (strings.Contains(q, "_CT] AS [c]") || strings.Contains(q, "[lsn_time_mapping]")) {
		return tdsserver.Fault{}, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	stmt := q + fmt.Sprint(req.Params)
	if in.r.IntN(in.rate) != 0 || in.per[stmt] >= 2 {
		return tdsserver.Fault{}, false
	}
	if in.per == nil {
		in.per = map[string]int{}
	}
	in.per[stmt]++
	n := int32(0) // a dropped connection one time in four
	if ns := sqlserver.TransientNumbers(); in.r.IntN(4) > 0 {
		n = ns[in.r.IntN(len(ns))]
	}
	in.armed[n]++
	return tdsserver.TransientFault(n, in.r.Int64N(in.maxRows)), true
}

// resumes counts the source's log records of reads that went on after
// their last row.
type resumes struct{ ranges, changes atomic.Int64 }

func (c *resumes) Enabled(context.Context, slog.Level) bool { return true }
func (c *resumes) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *resumes) WithGroup(string) slog.Handler            { return c }
func (c *resumes) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.Contains(r.Message, "range read resumed"):
		c.ranges.Add(1)
	case strings.Contains(r.Message, "change read resumed"):
		c.changes.Add(1)
	}
	return nil
}

// retriesCounted sums MetricRetries.
func retriesCounted(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != sqlserver.MetricRetries {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				n += dp.Value
			}
		}
	}
	return n
}

// checkOnce fails t unless every snapshot row of dst (from its newest
// snapshot or chunked backfill of the instance, _operation 0) has a key of
// its own, and every change row's (_start_lsn, _seqval, _operation) is
// its own: nothing read twice. It returns the rows it looked at.
func checkOnce(t *testing.T, w *testworld.World, dst *fake.MemSink, what string) int {
	t.Helper()
	rows, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	key := w.Instance(t).Key
	snap, change := map[string]int{}, map[string]int{}
	for _, row := range rows {
		if row[sink.ColOperation] == int64(sink.OperationSnapshot) {
			var k []any
			for _, c := range key {
				k = append(k, row[c])
			}
			snap[fmt.Sprintf("%v %v %v", row[sink.ColStartLSN], row[sink.ColChunk], w.CollationKey(t, k))]++
			continue
		}
		change[fmt.Sprintf("%v %v %v", row[sink.ColStartLSN], row[sink.ColSeqval], row[sink.ColOperation])]++
	}
	for k, n := range snap {
		if n > 1 {
			t.Errorf("%s: snapshot row %s written %d times", what, k, n)
		}
	}
	for k, n := range change {
		if n > 1 {
			t.Errorf("%s: change row %s written %d times", what, k, n)
		}
	}
	return len(rows)
}

// TestRetriesLoseNoRowOverTheWire: tdsserver cuts range reads, seeks and
// change reads (from the change table, or through the change function one
// case in three) at random points with every transient error number and with
// dropped connections, while changes commit between the server's pages; the
// source retries (resuming ranges after their last key, changes after their
// last row) and a whole snapshot, a chunked backfill and the polls after
// them converge to the source, with no snapshot or change row written
// twice.
func TestRetriesLoseNoRowOverTheWire(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 33))
	ctx := context.Background()
	cases := 12
	if testing.Short() {
		cases = 4
	}
	var faults, retried, compared int64
	var res resumes
	in := &injector{r: rand.New(rand.NewPCG(r.Uint64(), 1)), rate: 3, maxRows: 60, armed: map[int32]int{}}
	for c := range cases {
		sh := testworld.Shapes(testworld.Tick)[r.IntN(len(testworld.Shapes(testworld.Tick)))]
		w := testworld.New(t, r, sh, 40+r.IntN(150))
		stop := w.ChangeBetweenPages(t, rand.New(rand.NewPCG(r.Uint64(), 3)), r.IntN(3))
		reader := sdkmetric.NewManualReader()
		// One case in three reads changes through the change function,
		// whose resume drops rows by (__$seqval, __$operation) alone.
		function := c%3 == 2
		in.denied.Store(function)
		src, srv, _ := serve(t, w.DB, tdsfake.Options{PageRows: 1 + r.IntN(20), Inject: in.inject, NoRecord: true, DenyChangeTables: function},
			sqlserver.Options{Logger: slog.New(&res), Retry: sqlserver.Retry{Attempts: 30, Initial: time.Millisecond, Max: 4 * time.Millisecond},
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), AllowChangeFunction: function})
		dst := fake.NewMemSink()
		chunked := c%2 == 1
		var from lsn.LSN
		var err error
		if chunked {
			opts := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 5 + r.Int64N(40), WaveChunks: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(15)}}
			if from, _, err = snapshot.BootstrapBackfill(ctx, src, dst, opts); err == nil {
				for {
					res, berr := snapshot.Backfill(ctx, src, dst, opts)
					if err = berr; err != nil || res.Complete {
						break
					}
				}
			}
		} else {
			from, _, err = snapshot.Bootstrap(ctx, src, dst, snapshot.Options{
				CaptureInstance: w.CI, Partitions: 1 + r.IntN(6), MinPartitionRows: -1, Parallelism: 1 + r.IntN(3), ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(15)},
			})
		}
		stop()
		if err != nil {
			t.Fatalf("case %d (%s, chunked %v, change function %v): %v", c, sh.Name, chunked, function, err)
		}
		next := from
		for batch := int64(1); batch <= 3; batch++ {
			for range r.IntN(15) {
				w.Change(t, r)
			}
			next = streamTo(t, ctx, src, w, dst, next, batch)
		}
		what := fmt.Sprintf("case %d (%s, chunked %v, change function %v)", c, sh.Name, chunked, function)
		compared += int64(checkOnce(t, w, dst, what)) // before checkImage, which releases the sink's records
		checkImage(t, ctx, w, dst, what)
		faults += srv.Faults()
		retried += retriesCounted(t, reader)
		dst.Close()
	}
	t.Logf("%d faults injected (by error number, 0 a dropped connection: %v), %d retries (%d range reads and %d change reads resumed after their last row), %d bronze rows compared",
		faults, in.armed, retried, res.ranges.Load(), res.changes.Load(), compared)
	if faults == 0 || retried < faults {
		t.Errorf("%d faults struck, %d retries counted: every fault costs a retry", faults, retried)
	}
}
