package sqlserver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/source"
)

// transientNumbers are the SQL Server error numbers after which the same
// read, run again on a new connection after a pause, can succeed
// (FACTS.md F80): 1205 deadlock victim, 1222 lock request time-out
// (Options.LockTimeout), 1204 no lock resource, 3961 a SNAPSHOT read of an
// object DDL changed since the transaction's snapshot (a new statement
// takes a new one; 3960, an update conflict, strikes only writes), 4221 a
// secondary's login waiting for row versions; Azure SQL's reconfiguration
// and throttling errors 40197, 40501, 40613, 40143, 40540, 49918, 49919,
// 49920, 10928, 10929, and 926 and 615 of its list of transient faults;
// 4060 a database not open yet during a failover.
var transientNumbers = []int32{615, 926, 1204, 1205, 1222, 3961, 4060, 4221, 10928, 10929, 40143, 40197, 40501, 40540, 40613, 49918, 49919, 49920}

// TransientNumbers returns the SQL Server error numbers a read retries
// (see Transient), in ascending order.
func TransientNumbers() []int32 { return slices.Clone(transientNumbers) }

// Transient reports whether err is one a read can get past by running
// again on a new connection: a SQL Server error whose number (any of
// mssql.Error.All, FACTS.md F21) is among TransientNumbers, or a broken
// connection as go-mssqldb reports one (driver.ErrBadConn and its
// mssql.RetryableError, mssql.StreamError for a stream cut mid-token,
// mssql.ServerError for a fatal error that severed the connection, a
// net.Error, io.EOF or io.ErrUnexpectedEOF; FACTS.md F81). A cancelled
// context, a deadline, and every other error are not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var me mssql.Error
	if errors.As(err, &me) {
		if slices.Contains(transientNumbers, me.Number) {
			return true
		}
		for _, e := range me.All {
			if slices.Contains(transientNumbers, e.Number) {
				return true
			}
		}
	}
	var se mssql.StreamError
	var fe mssql.ServerError
	var ne net.Error
	return errors.As(err, &se) || errors.As(err, &fe) || errors.As(err, &ne) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ServerErrorNumber returns the number of the first transient SQL Server
// error in err (see Transient), else of its last error, and 0 when err
// carries none: the value of the retry metric's error attribute.
func ServerErrorNumber(err error) int32 {
	var me mssql.Error
	if !errors.As(err, &me) {
		return 0
	}
	for _, e := range me.All {
		if slices.Contains(transientNumbers, e.Number) {
			return e.Number
		}
	}
	return me.Number
}

// Retry says how reads that fail with a transient error are run again.
// The zero value is DefaultRetry's policy.
type Retry struct {
	// Attempts is how many times one read may be retried; 0 means
	// DefaultRetryAttempts, a negative value none (every transient error
	// fails the read at once).
	Attempts int
	// Initial is the pause before the first retry; 0 means
	// DefaultRetryInitial. Each next pause doubles, up to Max.
	Initial time.Duration
	// Max caps one pause; 0 means DefaultRetryMax.
	Max time.Duration
}

// The defaults of Retry: 8 retries, pauses from 250 ms doubling up to 30 s,
// each drawn between half and all of its nominal length: about 1 to 2
// minutes in all, longer than the under-60-second reconfigurations Azure
// SQL documents (FACTS.md F80).
const (
	DefaultRetryAttempts = 8
	DefaultRetryInitial  = 250 * time.Millisecond
	DefaultRetryMax      = 30 * time.Second
)

func (r Retry) validate() error {
	if r.Initial < 0 || r.Max < 0 {
		return fmt.Errorf("sqlserver: New: Retry pauses must not be negative (Initial %s, Max %s)", r.Initial, r.Max)
	}
	if r.Initial > 0 && r.Max > 0 && r.Max < r.Initial {
		return fmt.Errorf("sqlserver: New: Retry.Max %s is below Retry.Initial %s", r.Max, r.Initial)
	}
	return nil
}

// attempts is the number of retries allowed per read.
func (r Retry) attempts() int {
	switch {
	case r.Attempts < 0:
		return 0
	case r.Attempts == 0:
		return DefaultRetryAttempts
	}
	return r.Attempts
}

// Pause returns how long to wait before retry number n (1 for the first):
// Initial doubled n-1 times, capped at Max, then scaled by a factor from
// jitter in [0, 1) to between half and all of it (so readers that failed
// together do not retry together).
func (r Retry) Pause(n int, jitter float64) time.Duration {
	initial, max := r.Initial, r.Max
	if initial == 0 {
		initial = DefaultRetryInitial
	}
	if max == 0 {
		max = DefaultRetryMax
	}
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	jitter = min(max0(jitter), 1)
	return d/2 + time.Duration(float64(d/2)*jitter)
}

func max0(f float64) float64 {
	if f < 0 || f != f {
		return 0
	}
	return f
}

// retrier runs one read's attempts: after a transient error it waits the
// policy's pause (or until ctx ends) and says whether to try again.
type retrier struct {
	policy Retry
	done   int
	// behind makes a *source.ReplicaBehindError retryable too: a resumed
	// change read on a connection whose replica lags the first one's
	// (another connection, or the same replica later, can reach it).
	behind bool
	// sleep waits d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

func newRetrier(p Retry) *retrier { return &retrier{policy: p, sleep: sleepCtx} }

// again reports whether the read that failed with err may run again, after
// waiting; it returns the error to give up with otherwise (err itself, or
// the context's error when ctx ended during the pause).
func (r *retrier) again(ctx context.Context, err error) (bool, error) {
	if !r.retryable(err) || ctx.Err() != nil || r.done >= r.policy.attempts() {
		return false, err
	}
	r.done++
	if serr := r.sleep(ctx, r.policy.Pause(r.done, rand.Float64())); serr != nil {
		return false, err
	}
	return true, nil
}

// retryable reports whether err is one this read runs again after.
func (r *retrier) retryable(err error) bool {
	return Transient(err) || r.behind && errors.Is(err, source.ErrReplicaBehind)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
