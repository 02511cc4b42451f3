package sqlserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// The retry metric, through Options.MeterProvider (OpenTelemetry's API
// only, named as package snapshot names its instruments).
const (
	meterName = "github.com/cdcsnap/cdcsnap/source/sqlserver"
	// MetricRetries counts reads run again after a transient error
	// ({retry}), with AttrCaptureInstance, AttrOperation and
	// AttrErrorNumber.
	MetricRetries = "cdcsnap.sqlserver.retries"
	// AttrCaptureInstance is the capture instance read.
	AttrCaptureInstance = "cdcsnap.capture_instance"
	// AttrOperation is what was read: OpReadRange, OpSeekKey or
	// OpReadChanges.
	AttrOperation = "cdcsnap.sqlserver.operation"
	// AttrErrorNumber is the SQL Server error number (ServerErrorNumber),
	// 0 for a broken connection.
	AttrErrorNumber = "cdcsnap.sqlserver.error_number"
)

// The values of AttrOperation.
const (
	OpReadRange   = "read_range"
	OpSeekKey     = "seek_key"
	OpReadChanges = "read_changes"
)

// retries is the retry counter; nil records nothing.
type retries struct{ c metric.Int64Counter }

func newRetries(mp metric.MeterProvider) (retries, error) {
	if mp == nil {
		return retries{}, nil
	}
	c, err := mp.Meter(meterName).Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Reads run again after a transient SQL Server error or a broken connection."))
	if err != nil {
		return retries{}, fmt.Errorf("sqlserver: New: %s: %w", MetricRetries, err)
	}
	return retries{c: c}, nil
}

// again decides, for a read of op on capture instance ci that failed with
// err, whether to run it again: for a transient error within rt's budget
// it logs the retry, counts it, waits the pause, and returns true.
func (s *Source) again(ctx context.Context, rt *retrier, op, ci string, err error) bool {
	if !Transient(err) || rt.done >= rt.policy.attempts() || ctx.Err() != nil {
		if Transient(err) && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sqlserver: transient error, retries used up", "operation", op, "capture_instance", ci, "retries", rt.done, "error_number", ServerErrorNumber(err), "error", err)
		}
		return false
	}
	n := ServerErrorNumber(err)
	s.log.WarnContext(ctx, "sqlserver: transient error; running the read again on a new connection", "operation", op, "capture_instance", ci, "retry", rt.done+1, "of", rt.policy.attempts(), "error_number", n, "error", err)
	if s.retries.c != nil {
		s.retries.c.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrCaptureInstance, ci), attribute.String(AttrOperation, op), attribute.Int(AttrErrorNumber, int(n))))
	}
	ok, _ := rt.again(ctx, err)
	return ok
}

// markTransient marks a transient error (Transient) the read could not get
// past in place with source.ErrTransient, so a caller can read again from
// the start (package snapshot does, per partition).
func markTransient(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !Transient(err) || errors.Is(err, source.ErrTransient) {
		return err
	}
	return fmt.Errorf("%w: %w", source.ErrTransient, err)
}

// retrying runs f until it succeeds, fails with an error that is not
// transient, or rt's budget is spent.
func (s *Source) retrying(ctx context.Context, rt *retrier, op, ci string, f func() error) error {
	for {
		err := f()
		if err == nil || !s.again(ctx, rt, op, ci, err) {
			return err
		}
	}
}

// skipRows is a rowSource that drops the first n rows of another: a change
// read resumed at an LSN whose first rows were already decoded.
type skipRows struct {
	rowSource
	n int64
}

func (s *skipRows) Next() bool {
	for ; s.n > 0; s.n-- {
		if !s.rowSource.Next() {
			return false
		}
	}
	return s.rowSource.Next()
}

// lsnPosition follows a change read: the LSN of the last row decoded and
// how many rows of that LSN were decoded. The rows within an LSN come in
// a fixed order (the change table's unique key __$start_lsn, __$seqval,
// __$operation ends changeOrder), so a read again from that LSN can drop
// that many rows and go on exactly after the last.
type lsnPosition struct {
	lsn  []byte
	same int64
}

func (p *lsnPosition) observe(vals []any) {
	l, _ := vals[0].([]byte)
	if p.lsn != nil && bytes.Equal(l, p.lsn) {
		p.same++
		return
	}
	p.lsn = append(p.lsn[:0], l...)
	p.same = 1
}

// rangePosition follows a range read: the driver values of the key
// columns of the last row decoded (copies: the driver's []byte is reused).
type rangePosition struct {
	at   []int // each key column's position in the select list
	last []any
}

func (p *rangePosition) observe(vals []any) {
	if p.last == nil {
		p.last = make([]any, len(p.at))
	}
	for i, j := range p.at {
		if b, ok := vals[j].([]byte); ok {
			p.last[i] = append([]byte(nil), b...)
			continue
		}
		p.last[i] = vals[j]
	}
}

// sameDriverValue reports whether two driver values are the same value.
func sameDriverValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	return a == b
}

// afterKey is a rowSource over a range read resumed at the last key
// returned (its lower bound inclusive): it drops the first row when its
// key is that key, the row already read.
type afterKey struct {
	rowSource
	pos     *rangePosition
	last    []any
	started bool
	buf     []driverValue
	ptrs    []any
	held    bool
}

func (a *afterKey) Next() bool {
	if a.started {
		a.held = false
		return a.rowSource.Next()
	}
	a.started = true
	if !a.rowSource.Next() {
		return false
	}
	cols, err := a.rowSource.Columns()
	if err != nil {
		return true // Scan reports it
	}
	a.buf = make([]driverValue, len(cols))
	a.ptrs = make([]any, len(cols))
	for i := range a.buf {
		a.ptrs[i] = &a.buf[i]
	}
	if err := a.rowSource.Scan(a.ptrs...); err != nil {
		return true
	}
	same := true
	for i, j := range a.pos.at {
		same = same && sameDriverValue(a.buf[j].v, a.last[i])
	}
	if !same {
		a.held = true
		return true
	}
	return a.rowSource.Next()
}

func (a *afterKey) Scan(dest ...any) error {
	if !a.held {
		return a.rowSource.Scan(dest...)
	}
	for i := range dest {
		dv, ok := dest[i].(*driverValue)
		if !ok {
			return fmt.Errorf("sqlserver: resumed read: scan into %T", dest[i])
		}
		dv.v = a.buf[i].v
	}
	return nil
}

// lastKeyBound turns the key values of the last row read into a bound, or
// false when they cannot be bound exactly: a string the driver decoded
// with U+FFFD (a byte its code page table lacks, FACTS.md F45) would be
// converted back to another key.
func lastKeyBound(ci *source.CaptureInstance, last []any, guidConversion bool) (keyrange.Tuple, bool) {
	if len(last) != len(ci.Key) {
		return nil, false
	}
	out := make(keyrange.Tuple, len(last))
	for i, name := range ci.Key {
		c, ok := ci.Column(name)
		if !ok {
			return nil, false
		}
		v, err := keyValue(c, last[i], guidConversion)
		if err != nil {
			return nil, false
		}
		if s, ok := v.(string); ok && strings.ContainsRune(s, utf8.RuneError) {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}
