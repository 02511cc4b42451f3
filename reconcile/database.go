package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cdcsnap/cdcsnap/source"
)

// Instance is one capture instance to verify: where its rows come from and
// where they went.
type Instance struct {
	// Source is the CDC database that holds the capture instance.
	Source source.Source
	// Target is its bronze table; a TileReader is read tile by tile.
	Target RowReader
	// Options configure its reconcile; Options.CaptureInstance names it.
	Options Options
}

// DatabaseOptions configure RunAll. The zero value is ready to use.
type DatabaseOptions struct {
	// Instances is how many capture instances are verified at once; zero
	// means 1. Each also compares Options.Parallel tiles at once.
	Instances int

	// Done, when set, is called as each instance's verification ends,
	// one call at a time, with its index in the instances given.
	Done func(i int, res Result)
}

// Result is one capture instance's verification: its Report, or the error
// that stopped it.
type Result struct {
	// CaptureInstance is the name as its options gave it.
	CaptureInstance string
	// Report is nil when Err is set.
	Report *Report
	Err    error
}

// Clean reports whether the instance was verified and every tile matched.
func (r Result) Clean() bool { return r.Err == nil && r.Report != nil && r.Report.Clean() }

// RunAll reconciles every instance (Run on each), DatabaseOptions.Instances
// at a time, and returns their results in the order given. An instance
// that fails has its error in its Result and the others go on; a canceled
// ctx leaves the instances not yet finished with ctx's error. Every
// instance's options are validated before any is read: the error is then
// the only result.
func RunAll(ctx context.Context, instances []Instance, opts DatabaseOptions) ([]Result, error) {
	if opts.Instances < 0 {
		return nil, fmt.Errorf("%w: Instances (%d) must not be negative", ErrInvalidOptions, opts.Instances)
	}
	var problems []error
	for i, in := range instances {
		err := in.Options.validate()
		if err == nil && (in.Source == nil || in.Target == nil) {
			err = fmt.Errorf("%w: Source and Target must be set", ErrInvalidOptions)
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("instance %d (%q): %w", i, in.Options.CaptureInstance, err))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	out := make([]Result, len(instances))
	ran := make([]bool, len(instances))
	var mu sync.Mutex
	// Instance errors are results, not forEach's errors: only ctx ends it
	// early, and the instances it did not start get ctx's error below.
	_ = forEach(ctx, len(instances), max(opts.Instances, 1), func(ctx context.Context, i int) error {
		in := instances[i]
		rep, err := run(ctx, in.Source, in.Target, in.Options)
		res := Result{CaptureInstance: in.Options.CaptureInstance, Report: rep, Err: err}
		mu.Lock()
		defer mu.Unlock()
		out[i], ran[i] = res, true
		if opts.Done != nil {
			opts.Done(i, res)
		}
		return nil
	})
	for i, in := range instances {
		if !ran[i] {
			out[i] = Result{CaptureInstance: in.Options.CaptureInstance, Err: context.Cause(ctx)}
		}
	}
	return out, nil
}
