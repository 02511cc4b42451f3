package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// Task is what a worker reads on stdin: everything it needs to write one
// partition, as JSON.
type Task struct {
	// Plan is the coordinator's plan, shared by every worker.
	Plan *snapshot.Plan `json:"plan"`
	// Partition is the index of the range to read.
	Partition int `json:"partition"`
	// Attempt counts this partition's tries, from 0.
	Attempt int `json:"attempt"`
	// Target is the Delta table's URL: the shared bucket.
	Target string `json:"target"`
	// Source says which demo database to build (a real deployment would
	// carry a DSN reference instead, never a password).
	Source SourceSpec `json:"source"`
	// Fault, when set, makes the worker fail on purpose (see the Fault
	// constants); it is how the tests and -crash-worker show a retry.
	Fault Fault `json:"fault,omitempty"`
}

// Fault is a failure a worker injects into itself.
type Fault string

// The faults a worker can inject.
const (
	// CrashAfterWrite writes the partition's data files, records its
	// Part with the table (snapshot.Execute does), and exits without
	// reporting it, as a worker killed at that moment: the retry finds
	// the recorded Part and reports that one, and the files the retry
	// wrote are orphans, never committed.
	CrashAfterWrite Fault = "crash-after-write"
	// FailRead fails the read halfway through the partition.
	FailRead Fault = "fail-read"
)

// workerEnv, set to "1" in a process's environment, makes the program a
// worker whatever its arguments (the coordinator starts its workers so,
// which also works for a test binary).
const workerEnv = "CDCSNAP_FANOUT_WORKER"

// errCrash is the exit of a worker that crashes on purpose.
var errCrash = errors.New("worker crashed on purpose after writing its files (fault crash-after-write)")

// worker reads Tasks from stdin, JSON values one after another (one per
// line, as Spark's RDD.pipe writes the elements of a partition), writes
// each one's partition to the shared table and prints its Part as one line
// of JSON on stdout as soon as it is done. The first task that fails ends
// the worker with its error (the process exits non-zero): the parts
// printed before it stand, and a retry of the rest reads only what was not
// recorded. Each task's timings go to stderr as one line (an executor's
// log under Spark).
func worker(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	enc := json.NewEncoder(stdout)
	srcs := sources{}
	defer srcs.close()
	for n := 0; ; n++ {
		var task Task
		if err := dec.Decode(&task); err == io.EOF && n > 0 {
			return nil
		} else if err == io.EOF {
			return errors.New("worker: no task on stdin")
		} else if err != nil {
			return fmt.Errorf("worker: reading task %d from stdin: %w", n+1, err)
		}
		if task.Plan == nil {
			return fmt.Errorf("worker: task %d has no plan", n+1)
		}
		start := time.Now()
		part, opened, err := execute(ctx, srcs, task)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "fanout worker: partition %d (attempt %d): %d rows, %d bytes; source opened in %.3fs, partition read and written in %.3fs\n",
			task.Partition, task.Attempt, part.Rows, part.Bytes, opened.Seconds(), (time.Since(start) - opened).Seconds())
		if err := enc.Encode(part); err != nil {
			return fmt.Errorf("worker: partition %d: writing the result: %w", task.Partition, err)
		}
	}
}

// sources holds the sources a worker process opened, one per spec: the
// demo database is built once, a SQL Server's pool serves every task.
type sources map[SourceSpec]openedSource

type openedSource struct {
	src   source.Source
	demo  *fake.DB
	close func()
}

// get returns the source spec names, opening it on first use; opened is
// the time that took.
func (s sources) get(ctx context.Context, spec SourceSpec) (o openedSource, opened time.Duration, err error) {
	if o, ok := s[spec]; ok {
		return o, 0, nil
	}
	start := time.Now()
	if o.src, o.demo, o.close, err = openSource(ctx, spec, slog.New(slog.DiscardHandler)); err != nil {
		return o, 0, err
	}
	s[spec] = o
	return o, time.Since(start), nil
}

func (s sources) close() {
	for _, o := range s {
		o.close()
	}
}

// execute runs snapshot.Execute for the task's partition on the shared
// table; opened is the time opening the source took (building the demo
// database, or connecting), 0 when an earlier task of this process had.
func execute(ctx context.Context, srcs sources, task Task) (part sink.Part, opened time.Duration, err error) {
	o, opened, err := srcs.get(ctx, task.Source)
	if err != nil {
		return sink.Part{}, 0, fmt.Errorf("worker: partition %d: %w", task.Partition, err)
	}
	src, demo := o.src, o.demo
	table, err := blobstore.Open(ctx, task.Target, delta.Options{})
	if err != nil {
		return sink.Part{}, 0, fmt.Errorf("worker: partition %d: %w", task.Partition, err)
	}
	defer table.Close()
	switch task.Fault {
	case "", CrashAfterWrite, FailRead:
	default:
		return sink.Part{}, 0, fmt.Errorf("worker: partition %d: unknown fault %q", task.Partition, task.Fault)
	}
	if task.Fault != "" && demo == nil {
		return sink.Part{}, 0, fmt.Errorf("worker: partition %d: fault %q is for the demo database only", task.Partition, task.Fault)
	}
	if task.Fault == FailRead {
		// The source serves this process's later tasks too: the fault
		// must not outlive this one (an empty partition never fires it).
		defer demo.ClearFaults()
		demo.FailReadAfter(1, errors.New("injected read failure (fault fail-read)"))
	}
	part, err = snapshot.Execute(ctx, src, table, task.Plan, task.Partition, nil)
	if err != nil {
		return sink.Part{}, 0, fmt.Errorf("worker: %w", err)
	}
	if task.Fault == CrashAfterWrite {
		return sink.Part{}, 0, fmt.Errorf("worker: partition %d: %w", task.Partition, errCrash)
	}
	return part, opened, nil
}

// workerMain is the worker's process: exit status 0 with the Part on
// stdout, or 1 with the error on stderr.
func workerMain(ctx context.Context) int {
	if err := worker(ctx, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
