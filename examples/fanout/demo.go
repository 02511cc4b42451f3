package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
)

// SourceSpec says which source every step reads: a SQL Server, or the demo
// database. Every process that builds the demo from the same spec gets the
// same rows, LSNs and commit times: the embedded fake's stand-in for "every
// worker connects to the same SQL Server".
type SourceSpec struct {
	// SQLServer says the source is the SQL Server whose DSN each process
	// finds in its environment (CDCSNAP_SOURCE_DSN, or a file named by
	// CDCSNAP_SOURCE_DSN_FILE); the DSN never travels in a task.
	SQLServer bool `json:"sqlserver,omitempty"`
	// ServerTimeZone is the SQL Server machine's IANA time zone; empty
	// lets the source read the server's current UTC offset.
	ServerTimeZone string `json:"server_time_zone,omitempty"`
	// Seed drives every random choice of the demo's rows.
	Seed uint64 `json:"seed,omitempty"`
	// Rows is the number of rows in the demo table.
	Rows int `json:"rows,omitempty"`
}

const (
	demoSchema   = "sales"
	demoTable    = "orders"
	demoInstance = "sales_orders"
)

var demoRegions = []string{"AMER-East", "amer-west", "APAC", "EMEA-North ", "EMEA-South", "LATAM"}

// newDemo builds the demo database: sales.orders keyed by (region
// varchar, case-insensitive, order_id bigint), so NewPlan cuts it by keyset
// seeks and the ranges' bounds are strings and integers. It loads the rows
// in transactions of 5,000, enables CDC, and commits a few changes after
// that, all deterministic in spec.
func newDemo(spec SourceSpec) (*fake.DB, error) {
	if spec.Rows < 0 {
		return nil, fmt.Errorf("demo source: %d rows", spec.Rows)
	}
	db := fake.New(fake.Options{Start: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Tick: 250 * time.Millisecond})
	err := db.CreateTable(fake.TableDef{Schema: demoSchema, Name: demoTable, Key: []string{"region", "order_id"}, Columns: []fake.ColumnDef{
		{Name: "region", Type: "varchar(16)", Collation: "SQL_Latin1_General_CP1_CI_AS"},
		{Name: "order_id", Type: "bigint"},
		{Name: "customer", Type: "nvarchar(100)", Nullable: true},
		{Name: "amount", Type: "decimal(18,4)", Nullable: true},
		{Name: "placed_at", Type: "datetime2(7)"},
		{Name: "express", Type: "bit"},
	}})
	if err != nil {
		return nil, fmt.Errorf("demo source: %w", err)
	}
	r := rand.New(rand.NewPCG(spec.Seed, 2026))
	var batch []fake.Row
	for id := range int64(spec.Rows) {
		batch = append(batch, demoRow(r, id+1))
		if len(batch) == 5000 || int(id) == spec.Rows-1 {
			if _, err := db.Load(demoSchema, demoTable, batch...); err != nil {
				return nil, fmt.Errorf("demo source: loading rows: %w", err)
			}
			batch = batch[:0]
		}
	}
	if _, err := db.EnableCDC(demoSchema, demoTable, demoInstance); err != nil {
		return nil, fmt.Errorf("demo source: %w", err)
	}
	// A few changes after CDC was enabled, so the snapshot's LSN is a
	// captured commit's, not start_lsn - 1.
	for id := int64(spec.Rows + 1); id <= int64(spec.Rows+3); id++ {
		if _, err := db.Load(demoSchema, demoTable, demoRow(r, id)); err != nil {
			return nil, fmt.Errorf("demo source: committing changes: %w", err)
		}
	}
	return db, nil
}

func demoRow(r *rand.Rand, id int64) fake.Row {
	var customer, amount any
	if r.IntN(20) > 0 {
		customer = fmt.Sprintf("Customer %05d — %s", r.IntN(50_000), []string{"Zoë", "Jürgen", "Łukasz", "Ana", "李"}[r.IntN(5)])
	}
	if r.IntN(10) > 0 {
		amount = keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(100_000), r.IntN(10_000)))
	}
	placed := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(700*24*time.Hour/100))) * 100)
	return fake.Row{demoRegions[r.IntN(len(demoRegions))], id, customer, amount, placed, r.IntN(4) == 0}
}
