package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

const (
	demoTable    = "sales.orders"
	demoInstance = "sales_orders"
)

// demoColumns are sales.orders' columns.
var demoColumns = []fake.ColumnDef{
	{Name: "region", Type: "varchar(16)", Collation: "SQL_Latin1_General_CP1_CI_AS"},
	{Name: "order_id", Type: "bigint"},
	{Name: "customer", Type: "nvarchar(100)", Nullable: true},
	{Name: "amount", Type: "decimal(18,4)", Nullable: true},
	{Name: "placed_at", Type: "datetime2(7)"},
	{Name: "ship_date", Type: "date", Nullable: true},
	{Name: "express", Type: "bit"},
	{Name: "ref", Type: "uniqueidentifier"},
}

var demoRegions = []string{"AMER-East", "AMER-West", "APAC", "EMEA-North", "EMEA-South", "LATAM"}

// demoDB is the embedded fake CDC database the main job reads by default:
// sales.orders keyed by (region varchar CI, order_id bigint), with
// nvarchar, decimal, datetime2, date, bit, uniqueidentifier and NULLs.
type demoDB struct {
	db       *fake.DB
	mu       sync.Mutex
	rng      *rand.Rand
	next     int64
	regionOf []uint8 // region index of order id i+1, so changes hit live keys
	// keyUpdates moves some updated orders to another region.
	keyUpdates bool
	updates    int // updates committed
	moved      int // orders moved to another region
}

// newDemo builds the demo database with rows orders. With keyUpdates,
// every other update (the first included) moves its order to another
// region (a key update), logged as SQL Server logs one under trace flag
// 8207: an update-before of the old key and an update-after of the new one.
func newDemo(rows int, keyUpdates bool) (*demoDB, error) {
	db := fake.New(fake.Options{Start: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Tick: 250 * time.Millisecond, SingletonKeyUpdates: keyUpdates})
	err := db.CreateTable(fake.TableDef{Schema: "sales", Name: "orders", Key: []string{"region", "order_id"}, Columns: demoColumns})
	if err != nil {
		return nil, err
	}
	d := &demoDB{db: db, rng: rand.New(rand.NewPCG(42, 2026)), keyUpdates: keyUpdates}
	batch := make([]fake.Row, 0, 10_000)
	for range rows {
		batch = append(batch, d.row())
		if len(batch) == cap(batch) {
			if _, err := db.Load("sales", "orders", batch...); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if _, err := db.Load("sales", "orders", batch...); err != nil {
			return nil, err
		}
	}
	if _, err := db.EnableCDC("sales", "orders", demoInstance); err != nil {
		return nil, err
	}
	// A live table: changes are captured before the snapshot starts too.
	if err := d.commitChanges(); err != nil {
		return nil, err
	}
	return d, nil
}

// row returns a new order; callers hold d.mu or run before any reader.
func (d *demoDB) row() fake.Row {
	r := d.rng
	d.next++
	var customer, amount, ship any
	if r.IntN(20) > 0 {
		customer = fmt.Sprintf("Customer %05d — %s", r.IntN(50_000), []string{"Zoë", "Jürgen", "Łukasz", "Ana", "李"}[r.IntN(5)])
	}
	if r.IntN(10) > 0 {
		amount = keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(100_000), r.IntN(10_000)))
	}
	placed := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(700*24*time.Hour/100))) * 100)
	if r.IntN(3) > 0 {
		ship = time.Date(placed.Year(), placed.Month(), placed.Day()+1+r.IntN(9), 0, 0, 0, 0, time.UTC)
	}
	var ref keyrange.UUID
	for i := range ref {
		ref[i] = byte(r.Uint32())
	}
	region := r.IntN(len(demoRegions))
	d.regionOf = append(d.regionOf, uint8(region))
	return fake.Row{demoRegions[region], d.next, customer, amount, placed, ship, r.IntN(4) == 0, ref}
}

// changeDuringRead commits a transaction (an insert, an update, a delete)
// after every 4th page the snapshot reads: the stream must carry them.
func (d *demoDB) changeDuringRead() {
	pages := 0
	d.db.SetPageHook(func(ctx context.Context, p fake.Page) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		pages++
		if pages%4 != 0 {
			return nil
		}
		return d.commitChanges()
	})
}

func (d *demoDB) stopChanges() { d.db.SetPageHook(nil) }

func (d *demoDB) commitChanges() error {
	tx := d.db.Begin()
	ins := d.row()
	if err := tx.Insert("sales", "orders", ins); err != nil {
		return err
	}
	// Update and delete existing orders (one already deleted is skipped).
	for _, op := range []string{"update", "delete"} {
		id := 1 + d.rng.Int64N(d.next-1)
		region := demoRegions[d.regionOf[id-1]]
		row, ok, err := d.db.Get("sales", "orders", []any{region, id})
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if op == "delete" {
			err = tx.Delete("sales", "orders", []any{region, id})
		} else {
			row = append(fake.Row(nil), row...)
			row[3] = keyrange.Decimal(fmt.Sprintf("%d.5000", d.rng.IntN(1000)))
			d.updates++
			if d.keyUpdates && d.updates%2 == 1 {
				to := (int(d.regionOf[id-1]) + 1 + d.rng.IntN(len(demoRegions)-1)) % len(demoRegions)
				row[0] = demoRegions[to]
				d.regionOf[id-1] = uint8(to)
				d.moved++
			}
			err = tx.Update("sales", "orders", []any{region, id}, row)
		}
		if err != nil {
			return err
		}
	}
	_, err := tx.Commit()
	return err
}

// verify reads the Delta table back and compares its latest image per key
// with the fake's current table. It returns the number of keys and the
// differences.
func (d *demoDB) verify(ctx context.Context, table *delta.Table) (int, []string, error) {
	return verifyImage(ctx, d.db, demoInstance, table)
}

// verifyImage compares the latest image per key of table with the current
// source table of instance in db: the number of keys and the differences.
func verifyImage(ctx context.Context, db *fake.DB, instance string, table *delta.Table) (int, []string, error) {
	ci, err := db.CaptureInstance(ctx, instance)
	if err != nil {
		return 0, nil, err
	}
	want, err := snapshot.SourceImage(ctx, db, ci)
	if err != nil {
		return 0, nil, err
	}
	key, err := ci.KeyColumns()
	if err != nil {
		return 0, nil, err
	}
	got := snapshot.NewImage(ci.Columns, key)
	rr, err := table.ReadAll(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer rr.Release()
	// A bronze table may hold other capture instances' rows (another
	// table's, or the same table's older instance): only this instance's
	// rows are its image, as reconcile compares them.
	for rr.Next() {
		if err := addInstanceRows(ctx, got, rr.RecordBatch(), instance); err != nil {
			return 0, nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return 0, nil, err
	}
	return want.Len(), want.Diff(got, 10), nil
}

// addInstanceRows adds the rows of rec whose _capture_instance is
// instance (sink.SameInstance) to im, each run of them as one slice.
func addInstanceRows(ctx context.Context, im *snapshot.Image, rec arrow.RecordBatch, instance string) error {
	j := rec.Schema().FieldIndices(sink.ColCaptureInstance)
	if len(j) != 1 {
		return fmt.Errorf("the table has no column %s: not a bronze table", sink.ColCaptureInstance)
	}
	col, ok := rec.Column(j[0]).(*array.String)
	if !ok {
		return fmt.Errorf("column %s is %s, not a string", sink.ColCaptureInstance, rec.Column(j[0]).DataType())
	}
	var runs []arrow.RecordBatch
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	n := int(rec.NumRows())
	for i := 0; i < n; {
		if col.IsNull(i) || !sink.SameInstance(col.Value(i), instance) {
			i++
			continue
		}
		k := i + 1
		for k < n && col.IsValid(k) && sink.SameInstance(col.Value(k), instance) {
			k++
		}
		runs = append(runs, rec.NewSlice(int64(i), int64(k)))
		i = k
	}
	if len(runs) == 0 {
		return nil
	}
	rr, err := array.NewRecordReader(rec.Schema(), runs)
	if err != nil {
		return err
	}
	return snapshot.ReadImage(ctx, im, rr, true)
}

// countingReader counts the rows that pass through it.
type countingReader struct {
	array.RecordReader
	rows int64
}

func (c *countingReader) Next() bool {
	if !c.RecordReader.Next() {
		return false
	}
	c.rows += c.RecordBatch().NumRows()
	return true
}
