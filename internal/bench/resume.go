package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// errBenchCrash is the failure -resume injects into the first attempt.
var errBenchCrash = errors.New("bench: crash injected by -resume")

// countingSource is a Gen that counts the rows its readers return and,
// when failAt > 0, fails every read past failAt rows: the connection lost
// (or the process killed) right after that point of the snapshot.
type countingSource struct {
	*Gen
	read   atomic.Int64
	failAt int64
}

func (s *countingSource) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	rr, err := s.Gen.ReadRange(ctx, ci, r, opts)
	if err != nil {
		return nil, err
	}
	return &countingReader{RecordReader: rr, s: s}, nil
}

type countingReader struct {
	array.RecordReader
	s   *countingSource
	err error
}

func (r *countingReader) Next() bool {
	if r.err != nil || !r.RecordReader.Next() {
		return false
	}
	n := r.s.read.Add(r.RecordBatch().NumRows())
	if r.s.failAt > 0 && n > r.s.failAt {
		r.err = errBenchCrash
		return false
	}
	return true
}

func (r *countingReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.RecordReader.Err()
}

// resumeRow is one -resume measurement.
type resumeRow struct {
	Rows, CrashAt           int64
	Partitions, Parallelism int
	Clean, First, Resume    time.Duration
	Recorded                int
	ResumeRead              int64
}

// runResume measures a snapshot that fails at 90 % of its rows and is
// resumed, beside a clean one, for each size and partition count.
func runResume(ctx context.Context, cfg config, w io.Writer) error {
	work := cfg.work
	if work == "" {
		d, err := os.MkdirTemp("", "cdcsnap-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	fmt.Fprintf(w, "machine: %s\n", machine())
	fmt.Fprintln(w, "\n| rows | partitions | parallelism | clean snapshot | first attempt, failed at | partitions recorded | resume reads | resume time |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, n := range cfg.rows {
		for _, p := range cfg.partitions {
			r, err := resumeOnce(ctx, n, p, cfg.tune.Parallelism, work)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "| %d | %d | %d | %.1f s | %.1f s, %d rows read | %d of %d | %d rows (%.1f %%) | %.1f s (%.0f %% of clean) |\n",
				r.Rows, r.Partitions, r.Parallelism, r.Clean.Seconds(), r.First.Seconds(), r.CrashAt, r.Recorded, r.Partitions,
				r.ResumeRead, 100*float64(r.ResumeRead)/float64(r.Rows), r.Resume.Seconds(), 100*r.Resume.Seconds()/r.Clean.Seconds())
		}
	}
	return nil
}

func resumeOnce(ctx context.Context, rows int64, partitions, parallelism int, work string) (resumeRow, error) {
	if parallelism <= 0 {
		parallelism = 2
	}
	row := resumeRow{Rows: rows, Partitions: partitions, Parallelism: parallelism, CrashAt: rows * 9 / 10}
	opts := snapshot.Options{CaptureInstance: genCI, Partitions: partitions, MinPartitionRows: -1, Parallelism: parallelism}
	take := func(dir string, src source.Source) (snapshot.Result, time.Duration, error) {
		tb, err := delta.Open(ctx, dir, delta.Options{})
		if err != nil {
			return snapshot.Result{}, 0, err
		}
		defer tb.Close()
		start := time.Now()
		res, err := snapshot.Take(ctx, src, tb, opts)
		return res, time.Since(start), err
	}
	for _, d := range []string{"clean", "resumed"} {
		if err := os.RemoveAll(filepath.Join(work, d)); err != nil {
			return row, err
		}
	}
	res, d, err := take(filepath.Join(work, "clean"), NewGen(rows, 0))
	if err != nil || res.Rows != rows {
		return row, fmt.Errorf("clean snapshot: %d rows, %w", res.Rows, err)
	}
	row.Clean = d
	dir := filepath.Join(work, "resumed")
	first := &countingSource{Gen: NewGen(rows, 0), failAt: row.CrashAt}
	if _, d, err = take(dir, first); !errors.Is(err, errBenchCrash) {
		return row, fmt.Errorf("first attempt: %v, want the injected crash", err)
	}
	row.First = d
	again := &countingSource{Gen: NewGen(rows, 0)}
	res, d, err = take(dir, again)
	if err != nil || res.Rows != rows || !res.Resumed {
		return row, fmt.Errorf("resume: %+v, %w", res, err)
	}
	row.Resume, row.Recorded, row.ResumeRead = d, res.PartitionsResumed, again.read.Load()
	if row.ResumeRead != rows-res.RowsResumed {
		return row, fmt.Errorf("resume read %d rows, but %d were not recorded", row.ResumeRead, rows-res.RowsResumed)
	}
	return row, nil
}
