// Package sourceparquet writes a source table's current rows to a Parquet
// file, so readers other than Go (the Spark checks in .ci) can compare what
// they build from a bronze Delta table with the source itself.
package sourceparquet

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

// Write reads the whole table of capture instance instance from src (one
// range, read committed) and writes its rows to a new Parquet file at path,
// timestamps in microseconds as Spark reads them.
func Write(ctx context.Context, src source.Source, instance, path string) error {
	ci, err := src.CaptureInstance(ctx, instance)
	if err != nil {
		return err
	}
	rr, err := src.ReadRange(ctx, ci, keyrange.Whole()[0], source.ReadOptions{})
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
