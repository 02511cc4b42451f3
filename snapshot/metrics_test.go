package snapshot_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// collected is what a ManualReader collected, by metric name.
type collected map[string]metricdata.Metrics

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/cdcsnap/cdcsnap/snapshot" {
			t.Fatalf("instrumentation scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum is the value of an integer or float counter for the data points
// whose attributes include every one of want.
func (c collected) sum(t *testing.T, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	var total float64
	matches := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	switch d := c[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes) {
				total += float64(p.Value)
			}
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes) {
				total += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes) {
				total += float64(p.Count) // a histogram's sum here is its count
			}
		}
	case nil:
	default:
		t.Fatalf("%s: unexpected data %T", name, d)
	}
	return total
}

// TestMetrics: two snapshots (one throttled), a rerun that finds its
// snapshot, and a snapshot that fails mid-read and then resumes record,
// per capture instance, exactly the rows read and written, the partitions
// and commits made, and each call's outcome, under the documented names
// and units.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		if err := mp.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	db := fake.New(fake.Options{})
	a, b, c, d := ordersTable(t, db, "a", 700), ordersTable(t, db, "b", 333), ordersTable(t, db, "c", 400), ordersTable(t, db, "d", 90)
	ci := func(name string) attribute.KeyValue { return attribute.String(snapshot.AttrCaptureInstance, name) }
	outcome := func(o string) attribute.KeyValue { return attribute.String(snapshot.AttrOutcome, o) }

	dstA := fake.NewMemSink()
	defer dstA.Close()
	resA, err := snapshot.Take(ctx, db, dstA, snapshot.Options{CaptureInstance: a, Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 64}, RunOptions: snapshot.RunOptions{MeterProvider: mp}})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := snapshot.Take(ctx, db, dstA, snapshot.Options{CaptureInstance: a, Partitions: 3, MinPartitionRows: -1, RunOptions: snapshot.RunOptions{MeterProvider: mp}}); err != nil || !again.Existing {
		t.Fatalf("rerun: %+v, %v; want the existing snapshot", again, err)
	}
	resB, err := snapshot.Take(ctx, db, fake.NewMemSink(), snapshot.Options{CaptureInstance: b, Partitions: 5, MinPartitionRows: -1, RunOptions: snapshot.RunOptions{MeterProvider: mp, Limiter: &tokenCounter{burst: 50}}})
	if err != nil {
		t.Fatal(err)
	}
	// c: four partitions of 100 rows read one at a time; the read fails
	// after 250 rows (two partitions written, the third half read), and
	// the rerun resumes at the third.
	dstC := fake.NewMemSink()
	defer dstC.Close()
	optsC := snapshot.Options{CaptureInstance: c, Partitions: 4, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 10}, RunOptions: snapshot.RunOptions{MeterProvider: mp}}
	db.FailReadAfter(250, fake.ErrInjected)
	if _, err := snapshot.Take(ctx, db, dstC, optsC); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("c: %v, want the injected fault", err)
	}
	resC, err := snapshot.Take(ctx, db, dstC, optsC)
	if err != nil || resC.PartitionsResumed != 2 || resC.Rows != 400 {
		t.Fatalf("c resumed: %+v, %v; want 400 rows, 2 partitions resumed", resC, err)
	}

	// d: a chunked snapshot, its chunks counted as partitions, its waves'
	// commits as commits.
	dstD := fake.NewMemSink()
	defer dstD.Close()
	resD, err := snapshot.Backfill(ctx, db, dstD, snapshot.BackfillOptions{CaptureInstance: d, Chunks: 3, WaveChunks: 2, RunOptions: snapshot.RunOptions{MeterProvider: mp}})
	if err != nil || !resD.Complete || resD.Rows != 90 || resD.Waves != 2 {
		t.Fatalf("d: %+v, %v; want 90 rows complete in 2 waves", resD, err)
	}

	got := collect(t, reader)
	for name, unit := range map[string]string{
		snapshot.MetricReadRows: "{row}", snapshot.MetricReadSize: "By", snapshot.MetricWrittenRows: "{row}", snapshot.MetricWrittenSize: "By",
		snapshot.MetricPartitions: "{partition}", snapshot.MetricTables: "{table}", snapshot.MetricPartitionDuration: "s",
		snapshot.MetricCommitDuration: "s", snapshot.MetricThrottleTime: "s",
	} {
		if m, ok := got[name]; !ok || m.Unit != unit || m.Description == "" {
			t.Errorf("%s: collected %v, unit %q, want unit %q and a description", name, ok, m.Unit, unit)
		}
	}
	for _, w := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  float64
	}{
		{snapshot.MetricReadRows, []attribute.KeyValue{ci(a)}, 700},
		{snapshot.MetricReadRows, []attribute.KeyValue{ci(b)}, 333},
		{snapshot.MetricReadRows, []attribute.KeyValue{ci(c)}, 250 + 200}, // the failed run's rows too
		{snapshot.MetricWrittenRows, []attribute.KeyValue{ci(a)}, 700},
		{snapshot.MetricWrittenRows, []attribute.KeyValue{ci(b)}, 333},
		{snapshot.MetricWrittenRows, []attribute.KeyValue{ci(c)}, 400},
		{snapshot.MetricPartitions, []attribute.KeyValue{ci(a)}, float64(resA.Partitions)},
		{snapshot.MetricPartitions, []attribute.KeyValue{ci(b)}, float64(resB.Partitions)},
		{snapshot.MetricPartitions, []attribute.KeyValue{ci(c)}, 4},
		{snapshot.MetricPartitionDuration, []attribute.KeyValue{ci(a)}, float64(resA.Partitions)},
		{snapshot.MetricPartitionDuration, []attribute.KeyValue{ci(c)}, 4},
		{snapshot.MetricCommitDuration, []attribute.KeyValue{ci(a)}, 1},
		{snapshot.MetricCommitDuration, []attribute.KeyValue{ci(c)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(a), outcome(snapshot.OutcomeCommitted)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(a), outcome(snapshot.OutcomeExisting)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(b), outcome(snapshot.OutcomeCommitted)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(c), outcome(snapshot.OutcomeFailed)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(c), outcome(snapshot.OutcomeCommitted)}, 1},
		{snapshot.MetricTables, []attribute.KeyValue{ci(c)}, 2},
		{snapshot.MetricThrottleTime, []attribute.KeyValue{ci(a)}, 0}, // no limit, no measurement
		{snapshot.MetricReadRows, []attribute.KeyValue{ci(d)}, 90},
		{snapshot.MetricWrittenRows, []attribute.KeyValue{ci(d)}, 90},
		{snapshot.MetricPartitions, []attribute.KeyValue{ci(d)}, float64(resD.Chunks)},
		{snapshot.MetricCommitDuration, []attribute.KeyValue{ci(d)}, 2},
		{snapshot.MetricTables, []attribute.KeyValue{ci(d), outcome(snapshot.OutcomeCommitted)}, 1},
	} {
		if v := got.sum(t, w.name, w.attrs...); v != w.want {
			t.Errorf("%s %v = %v, want %v", w.name, w.attrs, v, w.want)
		}
	}
	if resA.Partitions < 2 || resB.Partitions < 2 {
		t.Fatalf("partitions %d and %d: the test needs several", resA.Partitions, resB.Partitions)
	}
	// Arrow holds at least the 8 bytes of each bigint id read.
	for name, rows := range map[string]float64{a: 700, b: 333, c: 450} {
		if v := got.sum(t, snapshot.MetricReadSize, ci(name)); v < 8*rows {
			t.Errorf("%s: %v bytes read for %v rows", snapshot.MetricReadSize, v, rows)
		}
		if v := got.sum(t, snapshot.MetricWrittenSize, ci(name)); v <= 0 {
			t.Errorf("%s: %v bytes written", snapshot.MetricWrittenSize, v)
		}
	}
	if _, ok := got[snapshot.MetricThrottleTime].Data.(metricdata.Sum[float64]); !ok {
		t.Errorf("%s: no data for the throttled snapshot", snapshot.MetricThrottleTime)
	}
}
