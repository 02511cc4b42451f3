package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
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

// worker reads a Task from stdin, writes its partition to the shared
// table and prints the Part as JSON on stdout.
func worker(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var task Task
	if err := json.NewDecoder(stdin).Decode(&task); err != nil {
		return fmt.Errorf("worker: reading the task from stdin: %w", err)
	}
	if task.Plan == nil {
		return errors.New("worker: the task has no plan")
	}
	part, err := execute(ctx, task)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(stdout).Encode(part); err != nil {
		return fmt.Errorf("worker: partition %d: writing the result: %w", task.Partition, err)
	}
	return nil
}

// execute builds the source, opens the shared table and runs
// snapshot.Execute for the task's partition.
func execute(ctx context.Context, task Task) (sink.Part, error) {
	db, err := newDemo(task.Source)
	if err != nil {
		return sink.Part{}, fmt.Errorf("worker: partition %d: %w", task.Partition, err)
	}
	table, err := delta.Open(ctx, task.Target, delta.Options{})
	if err != nil {
		return sink.Part{}, fmt.Errorf("worker: partition %d: %w", task.Partition, err)
	}
	defer table.Close()
	if task.Fault == FailRead {
		db.FailReadAfter(1, errors.New("injected read failure (fault fail-read)"))
	}
	part, err := snapshot.Execute(ctx, db, table, task.Plan, task.Partition, nil)
	if err != nil {
		return sink.Part{}, fmt.Errorf("worker: %w", err)
	}
	if task.Fault == CrashAfterWrite {
		return sink.Part{}, fmt.Errorf("worker: partition %d: %w", task.Partition, errCrash)
	}
	return part, nil
}

// workerMain is the worker's process: exit status 0 with the Part on
// stdout, or 1 with the error on stderr.
func workerMain(ctx context.Context) int {
	if err := worker(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
