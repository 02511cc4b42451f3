package main

import (
	"context"
	"fmt"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// planCost is the planning cost of one keyset plan on the fake.
type planCost struct {
	Rows, Companies int64
	Partitions      int
	Ranges          int
	Seeks           int64
	KeysKeyset      int64 // keys read by the keyset seeks (fake KeysExamined)
	KeysFullPass    int64 // keys an NTILE plan reads: every key
	RowsInRanges    int64 // rows returned by reading every range
	RowsExamined    int64 // rows the reads examined
	WorstRangeExtra int64 // max over ranges of examined - returned
}

// measurePlanning loads rows of (company, id) into the fake, plans with
// snapshot.NewPlan (keyset seeks, counted by fake.DB.Stats), then reads each
// range and compares the rows it examined with the rows in it.
func measurePlanning(ctx context.Context, rows, companies int64, partitions []int) ([]planCost, error) {
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "lines",
		Columns: []fake.ColumnDef{{Name: "company", Type: "int"}, {Name: "id", Type: "bigint"}, {Name: "qty", Type: "int"}},
		Key:     []string{"company", "id"}}); err != nil {
		return nil, err
	}
	if _, err := db.EnableCDC("dbo", "lines", ""); err != nil {
		return nil, err
	}
	data := make([]fake.Row, rows)
	for i := range rows {
		data[i] = fake.Row{i*companies/rows + 1, i + 1, i % 7}
	}
	if _, err := db.Load("dbo", "lines", data...); err != nil {
		return nil, err
	}
	data = nil
	var out []planCost
	for _, n := range partitions {
		db.ResetStats()
		plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_lines", Partitions: n, MinPartitionRows: -1})
		if err != nil {
			return nil, err
		}
		if plan.Strategy != "keyset" {
			return nil, fmt.Errorf("planning: strategy %s, want keyset", plan.Strategy)
		}
		st, err := db.Stats("dbo", "lines")
		if err != nil {
			return nil, err
		}
		pc := planCost{Rows: rows, Companies: companies, Partitions: n, Ranges: len(plan.Ranges), Seeks: st.Seeks, KeysKeyset: st.KeysExamined, KeysFullPass: rows}
		for _, r := range plan.Ranges {
			db.ResetStats()
			rr, err := db.ReadRange(ctx, &plan.Instance, r, sourceOpts())
			if err != nil {
				return nil, err
			}
			for rr.Next() {
			}
			err = rr.Err()
			rr.Release()
			if err != nil {
				return nil, err
			}
			st, err := db.Stats("dbo", "lines")
			if err != nil {
				return nil, err
			}
			pc.RowsInRanges += st.RowsReturned
			pc.RowsExamined += st.RowsExamined
			pc.WorstRangeExtra = max(pc.WorstRangeExtra, st.RowsExamined-st.RowsReturned)
		}
		if pc.RowsInRanges != rows {
			return nil, fmt.Errorf("planning: the ranges returned %d rows of %d", pc.RowsInRanges, rows)
		}
		out = append(out, pc)
	}
	return out, nil
}
