package main

import (
	"context"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// exportSource writes the demo source table's current rows to a Parquet
// file, so readers other than Go (the Spark check in .ci/spark) can compare
// what they build from the Delta table with the source itself.
func (d *demoDB) exportSource(ctx context.Context, path string) error {
	ci, err := d.db.CaptureInstance(ctx, demoInstance)
	if err != nil {
		return err
	}
	rr, err := d.db.ReadRange(ctx, ci, keyrange.Whole()[0], source.ReadOptions{})
	if err != nil {
		return err
	}
	defer rr.Release()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := pqarrow.NewFileWriter(rr.Schema(), f, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithCoerceTimestamps(arrow.Microsecond)))
	if err != nil {
		f.Close()
		return fmt.Errorf("exporting the source to %s: %w", path, err)
	}
	// w owns f from here: w.Close closes it.
	for rr.Next() {
		if err := w.WriteBuffered(rr.RecordBatch()); err != nil {
			w.Close()
			return fmt.Errorf("exporting the source to %s: %w", path, err)
		}
	}
	if err := rr.Err(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
