package sqlserver

import (
	"bytes"
	"cmp"
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
	if !rt.retryable(err) || rt.done >= rt.policy.attempts() || ctx.Err() != nil {
		if rt.retryable(err) && ctx.Err() == nil {
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

// changeID is where a change row sits within its LSN: the change table's
// unique clustered index is (__$start_lsn, __$command_id, __$seqval,
// __$operation) on servers with __$command_id (FACTS.md F10), the order
// ChangeTableStatement reads in; the change function has no __$command_id,
// and nothing documents (__$start_lsn, __$seqval, __$operation), its order,
// as unique (F54).
type changeID struct {
	cmd    any // __$command_id (int64), nil through the change function
	seqval []byte
	op     any
}

// changeIDOf reads the identity of a change row's driver values (the
// select list of changeSelect: __$start_lsn, __$seqval, __$operation, then
// __$command_id when read).
func changeIDOf(vals []any, commandID bool) changeID {
	id := changeID{op: vals[2]}
	id.seqval, _ = vals[1].([]byte)
	if commandID {
		id.cmd = vals[3]
	}
	return id
}

// compare orders two identities as the read's ORDER BY does.
func (a changeID) compare(b changeID) int {
	x, _ := a.cmd.(int64)
	y, _ := b.cmd.(int64)
	if c := cmp.Compare(x, y); c != 0 {
		return c
	}
	if c := bytes.Compare(a.seqval, b.seqval); c != 0 {
		return c
	}
	x, _ = a.op.(int64)
	y, _ = b.op.(int64)
	return cmp.Compare(x, y)
}

// changePosition follows a change read: the LSN and the identity of the
// last row decoded, and whether two rows of that LSN shared an identity
// (rows come ordered, so such rows are adjacent).
type changePosition struct {
	commandID bool
	lsn       []byte
	last      changeID
	tied      bool
}

func (p *changePosition) observe(vals []any) {
	l, _ := vals[0].([]byte)
	id := changeIDOf(vals, p.commandID)
	if p.lsn != nil && bytes.Equal(l, p.lsn) {
		p.tied = p.tied || id.compare(p.last) == 0
	} else {
		p.lsn, p.tied = append(p.lsn[:0], l...), false
	}
	id.seqval = append([]byte(nil), id.seqval...) // the driver reuses its buffer
	p.last = id
}

// errTiedChanges refuses a resume that cannot tell the rows of an LSN
// apart: two of them share an identity (changeID), so which of them the
// first read returned is not known.
func errTiedChanges(ci string, at []byte, commandID bool) error {
	id := "__$seqval and __$operation (the change function has no __$command_id)"
	if commandID {
		id = "__$command_id, __$seqval and __$operation"
	}
	return fmt.Errorf("%w: sqlserver: changes of %q: two change rows at LSN 0x%X share %s, so a read cut among them cannot resume exactly; read again from the start", source.ErrTransient, ci, at, id)
}

// afterChange returns the drop function of a change read resumed at the
// LSN of pos (its first rows): it drops that LSN's rows at or before the
// last one decoded, and fails when two rows of that LSN up to the first
// one kept share an identity (the order among them, and so which were
// read, is not known).
func afterChange(ci string, pos *changePosition) func(vals []any) (bool, error) {
	at, last, commandID := pos.lsn, pos.last, pos.commandID
	var prev *changeID
	return func(vals []any) (bool, error) {
		l, _ := vals[0].([]byte)
		if !bytes.Equal(l, at) {
			return false, nil
		}
		id := changeIDOf(vals, commandID)
		if prev != nil && id.compare(*prev) == 0 {
			return false, errTiedChanges(ci, at, commandID)
		}
		id.seqval = append([]byte(nil), id.seqval...)
		prev = &id
		return id.compare(last) <= 0, nil
	}
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

// dropLeading is a rowSource over a read resumed before its last row: it
// drops the rows at its start that drop says were read already, until the
// first it keeps; an error from drop ends the read with it.
type dropLeading struct {
	rowSource
	drop    func(vals []any) (bool, error)
	started bool
	buf     []driverValue
	ptrs    []any
	vals    []any
	held    bool
	err     error
}

func (a *dropLeading) Next() bool {
	if a.started {
		a.held = false
		return a.err == nil && a.rowSource.Next()
	}
	a.started = true
	cols, err := a.rowSource.Columns()
	if err != nil {
		a.err = err
		return false
	}
	a.buf = make([]driverValue, len(cols))
	a.ptrs = make([]any, len(cols))
	a.vals = make([]any, len(cols))
	for i := range a.buf {
		a.ptrs[i] = &a.buf[i]
	}
	for a.rowSource.Next() {
		if err := a.rowSource.Scan(a.ptrs...); err != nil {
			a.err = err
			return false
		}
		for i := range a.buf {
			a.vals[i] = a.buf[i].v
		}
		drop, err := a.drop(a.vals)
		if err != nil {
			a.err = err
			return false
		}
		if !drop {
			a.held = true
			return true
		}
	}
	return false
}

func (a *dropLeading) Scan(dest ...any) error {
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

func (a *dropLeading) Err() error {
	if a.err != nil {
		return a.err
	}
	return a.rowSource.Err()
}

// afterKey returns the drop function of a range read resumed at the last
// key returned (its lower bound inclusive): the first row, when its key is
// that key, was read already.
func afterKey(pos *rangePosition) func(vals []any) (bool, error) {
	last := append([]any(nil), pos.last...)
	first := true
	return func(vals []any) (bool, error) {
		if !first {
			return false, nil
		}
		first = false
		same := true
		for i, j := range pos.at {
			same = same && sameDriverValue(vals[j], last[i])
		}
		return same, nil
	}
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
