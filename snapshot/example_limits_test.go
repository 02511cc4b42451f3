package snapshot_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"golang.org/x/time/rate"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// ExampleLimiter bootstraps two tables at once under one budget of rows
// per second shared by both, and one of them under its own limit too.
func ExampleLimiter() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	for _, name := range []string{"orders", "items"} {
		rows := []fake.Row{{int64(1), "tea"}, {int64(2), "cake"}, {int64(3), "jam"}}
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: name, Key: []string{"id"},
			Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}},
			Rows:    rows, CaptureInstance: "dbo_" + name}); err != nil {
			fmt.Println(err)
			return
		}
	}
	shared := rate.NewLimiter(100_000, 10_000) // rows per second, burst
	done := make(chan string)
	for _, ci := range []string{"dbo_orders", "dbo_items"} {
		go func() {
			dst := fake.NewMemSink()
			defer dst.Close()
			res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: ci, RunOptions: snapshot.RunOptions{Limiter: shared, RowsPerSecond: 50_000}})
			if err != nil {
				done <- err.Error()
				return
			}
			done <- fmt.Sprintf("%d rows", res.Rows)
		}()
	}
	fmt.Println(<-done, "and", <-done)
	// Output: 3 rows and 3 rows
}

// ExampleOptions_meterProvider records a snapshot's metrics with an
// OpenTelemetry MeterProvider (here the SDK's, with a reader collected by
// hand; in a service, the one its exporter is set up with).
func ExampleOptions_meterProvider() {
	ctx := context.Background()
	db, err := exampleDB()
	if err != nil {
		fmt.Println(err)
		return
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	dst := fake.NewMemSink()
	defer dst.Close()
	if _, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_orders", Partitions: 2, MinPartitionRows: 2, RunOptions: snapshot.RunOptions{MeterProvider: mp}}); err != nil {
		fmt.Println(err)
		return
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && (m.Name == snapshot.MetricReadRows || m.Name == snapshot.MetricPartitions) {
			p := sum.DataPoints[0]
			ci, _ := p.Attributes.Value(snapshot.AttrCaptureInstance)
			fmt.Printf("%s %d %s (%s=%s)\n", m.Name, p.Value, m.Unit, snapshot.AttrCaptureInstance, ci.AsString())
		}
	}
	// Unordered output:
	// cdcsnap.snapshot.read.rows 5 {row} (cdcsnap.capture_instance=dbo_orders)
	// cdcsnap.snapshot.partitions 2 {partition} (cdcsnap.capture_instance=dbo_orders)
}

// ExampleOptions_splitColumn snapshots a table whose capture instance has
// no unique index: alone it is one range (the plan says why); split on an
// indexed column whose values repeat, it reads in ranges, every row once.
func ExampleOptions_splitColumn() {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	var rows []fake.Row
	for i := range 12 {
		rows = append(rows, fake.Row{int64(i), []string{"north", "south", "east"}[i%3], int64(i * 10)})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "events", Key: []string{"id"}, Keyless: true,
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "region", Type: "nvarchar(10)"}, {Name: "amount", Type: "bigint"}},
		Indexes: []fake.IndexDef{{Name: "IX_events_region", Columns: []string{"region"}, Clustered: true}},
		Rows:    rows, CaptureInstance: "dbo_events"}); err != nil {
		fmt.Println(err)
		return
	}
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_events", Partitions: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(plan.Ranges), "range:", plan.Reason)

	dst := fake.NewMemSink()
	defer dst.Close()
	res, err := snapshot.Take(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_events", Partitions: 3, MinPartitionRows: 4, SplitColumn: "region"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Rows, "rows in", res.Partitions, "ranges")
	// Output:
	// 1 range: the capture instance has no unique index, so it has no key to cut into ranges: set Options.SplitColumn to the leading column of one of the table's indexes (region) to read it in ranges
	// 12 rows in 3 ranges
}
