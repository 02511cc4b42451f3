package sqlserver

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// maxDecimalText bounds the decimal text accepted: 38 digits, a sign and a
// point, with room for leading zeros.
const maxDecimalText = 128

// parseDecimalText reads the exact decimal text go-mssqldb returns for
// decimal, numeric, money and smallmoney ("-12.3400", "0.5", "42"): an
// optional sign, digits, an optional point and digits. It returns the
// unscaled integer and the number of digits after the point. No exponent,
// no spaces, never through float64.
func parseDecimalText(s string) (*big.Int, int, error) {
	if len(s) == 0 || len(s) > maxDecimalText {
		return nil, 0, fmt.Errorf("decimal text %q: want 1-%d characters", s, maxDecimalText)
	}
	t := s
	neg := false
	if t[0] == '-' || t[0] == '+' {
		neg = t[0] == '-'
		t = t[1:]
	}
	intPart, frac, hasPoint := strings.Cut(t, ".")
	if intPart == "" && frac == "" {
		return nil, 0, fmt.Errorf("decimal text %q: no digits", s)
	}
	if hasPoint && frac == "" && intPart == "" {
		return nil, 0, fmt.Errorf("decimal text %q: no digits", s)
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return nil, 0, fmt.Errorf("decimal text %q: %q is not a digit", s, part[i])
			}
		}
	}
	digits := intPart + frac
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, 0, fmt.Errorf("decimal text %q: not a number", s)
	}
	if neg {
		n.Neg(n)
	}
	return n, len(frac), nil
}

// decimalText is the text of a decimal: go-mssqldb returns it as []byte.
type decimalText interface{ ~string | ~[]byte }

// ten is 10 as a decimal128.
var ten = decimal128.FromU64(10)

// decimalToNum converts decimal text to an Arrow decimal128 of the given
// precision and scale, exactly: more fractional digits than scale are
// allowed only when they are zeros, and the value must fit the precision.
// It accepts what parseDecimalText accepts (FuzzDecimalText holds the two
// together) and allocates nothing: it runs once per decimal value read.
func decimalToNum[T decimalText](s T, prec, scale int32) (decimal128.Num, error) {
	bad := func(why string) (decimal128.Num, error) {
		return decimal128.Num{}, fmt.Errorf("decimal text %q: %s", string(s), why)
	}
	if len(s) == 0 || len(s) > maxDecimalText {
		return bad(fmt.Sprintf("want 1-%d characters", maxDecimalText))
	}
	i, neg := 0, false
	if s[0] == '-' || s[0] == '+' {
		neg, i = s[0] == '-', 1
	}
	var n decimal128.Num
	var small uint64 // the value while it has at most 18 digits
	digits, frac, sigDigits := 0, -1, 0
	var dropped bool // a non-zero digit beyond scale
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if frac >= 0 {
				return bad("two points")
			}
			frac = 0
			continue
		}
		if c < '0' || c > '9' {
			return bad(fmt.Sprintf("%q is not a digit", c))
		}
		digits++
		if frac >= 0 {
			if int32(frac) >= scale {
				dropped = dropped || c != '0'
				continue
			}
			frac++
		}
		if sigDigits == 0 && c == '0' {
			continue // leading zeros
		}
		sigDigits++
		switch {
		case sigDigits <= 18:
			small = small*10 + uint64(c-'0')
		case sigDigits == 19:
			n = decimal128.FromU64(small).Mul(ten).Add(decimal128.FromU64(uint64(c - '0')))
		case sigDigits > 38:
			return bad(fmt.Sprintf("does not fit decimal(%d,%d)", prec, scale))
		default:
			n = n.Mul(ten).Add(decimal128.FromU64(uint64(c - '0')))
		}
	}
	if digits == 0 {
		return bad("no digits")
	}
	if dropped {
		return bad(fmt.Sprintf("has more than %d fractional digits", scale))
	}
	if sigDigits <= 18 {
		n = decimal128.FromU64(small)
	}
	if frac < 0 {
		frac = 0
	}
	for k := int32(frac); k < scale; k++ {
		if sigDigits++; sigDigits > 38 {
			return bad(fmt.Sprintf("does not fit decimal(%d,%d)", prec, scale))
		}
		n = n.Mul(ten)
	}
	if !n.FitsInPrecision(prec) {
		return bad(fmt.Sprintf("does not fit decimal(%d,%d)", prec, scale))
	}
	if neg {
		n = n.Negate()
	}
	return n, nil
}

// formatTimeText renders a time(n) value as "hh:mm:ss" followed, when
// scale > 0, by a point and scale digits of the fraction (truncated, as
// SQL Server's own time(n) already holds at most n digits).
func formatTimeText(t time.Time, scale int) string {
	s := fmt.Sprintf("%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
	if scale <= 0 {
		return s
	}
	if scale > 7 {
		scale = 7
	}
	frac := fmt.Sprintf("%07d", t.Nanosecond()/100)
	return s + "." + frac[:scale]
}

// parseTimeText reads what formatTimeText writes: "hh:mm:ss" and an
// optional fraction of 1-7 digits. It returns the time of day on
// 0001-01-01 UTC, as go-mssqldb returns a time(n) value.
func parseTimeText(s string) (time.Time, error) {
	bad := func(why string) (time.Time, error) {
		return time.Time{}, fmt.Errorf("time text %q: %s", s, why)
	}
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return bad("want hh:mm:ss[.fffffff]")
	}
	num := func(a string) (int, bool) {
		v := 0
		for i := 0; i < len(a); i++ {
			if a[i] < '0' || a[i] > '9' {
				return 0, false
			}
			v = v*10 + int(a[i]-'0')
		}
		return v, true
	}
	h, ok1 := num(s[0:2])
	m, ok2 := num(s[3:5])
	sec, ok3 := num(s[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 59 {
		return bad("hours, minutes or seconds out of range")
	}
	ns := 0
	if len(s) > 8 {
		if s[8] != '.' || len(s) == 9 || len(s) > 16 {
			return bad("want 1-7 fractional digits after '.'")
		}
		f, ok := num(s[9:])
		if !ok {
			return bad("fraction is not digits")
		}
		for i := len(s) - 9; i < 9; i++ {
			f *= 10
		}
		ns = f
	}
	return time.Date(1, 1, 1, h, m, sec, ns, time.UTC), nil
}

// wallUTC keeps t's wall clock and reads it as UTC (FACTS.md F43, F51). go-mssqldb returns
// date, time, datetime, smalldatetime and datetime2 values in the
// connection's "timezone" setting (UTC by default) with the stored wall
// clock; SQL Server attaches no zone to them.
func wallUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// uuidFromDriver converts the 16 bytes go-mssqldb returns for a
// uniqueidentifier. By default they are in SQL Server's mixed-endian
// order; with the DSN setting "guid conversion=true" the driver has already
// swapped them to RFC order.
func uuidFromDriver(b []byte, guidConversion bool) (keyrange.UUID, error) {
	if guidConversion {
		var u keyrange.UUID
		if len(b) != 16 {
			return u, fmt.Errorf("uniqueidentifier needs 16 bytes, have %d", len(b))
		}
		copy(u[:], b)
		return u, nil
	}
	return keyrange.UUIDFromSQLServer(b)
}

// keyValue converts a value as go-mssqldb returns it for column c into the
// Go type c's keyrange.Kind names (int64, bool, keyrange.Decimal, float64,
// string, []byte, time.Time, keyrange.UUID); nil stays nil.
func keyValue(c source.Column, v any, guidConversion bool) (any, error) {
	if v == nil {
		return nil, nil
	}
	kc := c.KeyColumn()
	bad := func() (any, error) {
		return nil, fmt.Errorf("sqlserver: key column %q (%s): unexpected driver value %T", c.Name, c.Declared(), v)
	}
	switch kc.Kind {
	case keyrange.KindInt:
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		return x, nil
	case keyrange.KindBool:
		x, ok := v.(bool)
		if !ok {
			return bad()
		}
		return x, nil
	case keyrange.KindDecimal:
		var s string
		switch x := v.(type) {
		case []byte:
			s = string(x)
		case string:
			s = x
		default:
			return bad()
		}
		if _, _, err := parseDecimalText(s); err != nil {
			return nil, fmt.Errorf("sqlserver: key column %q: %w", c.Name, err)
		}
		return keyrange.Decimal(s), nil
	case keyrange.KindFloat:
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		return x, nil
	case keyrange.KindString:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		return x, nil
	case keyrange.KindBytes:
		x, ok := v.([]byte)
		if !ok {
			return bad()
		}
		return append([]byte{}, x...), nil
	case keyrange.KindDate:
		x, ok := v.(time.Time)
		if !ok {
			return bad()
		}
		return time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC), nil
	case keyrange.KindTime:
		x, ok := v.(time.Time)
		if !ok {
			return bad()
		}
		return time.Date(1, 1, 1, x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC), nil
	case keyrange.KindDateTime:
		x, ok := v.(time.Time)
		if !ok {
			return bad()
		}
		return wallUTC(x), nil
	case keyrange.KindDateTimeOffset:
		x, ok := v.(time.Time)
		if !ok {
			return bad()
		}
		return x, nil
	case keyrange.KindUUID:
		x, ok := v.([]byte)
		if !ok {
			return bad()
		}
		u, err := uuidFromDriver(x, guidConversion)
		if err != nil {
			return nil, fmt.Errorf("sqlserver: key column %q: %w", c.Name, err)
		}
		return u, nil
	}
	return nil, fmt.Errorf("sqlserver: key column %q has type %s, which has no key value", c.Name, c.Declared())
}

// appender appends one driver value (nil for NULL) to an Arrow builder.
type appender func(b array.Builder, v any) error

// decodeOptions are the connection settings that change driver values.
type decodeOptions struct {
	guidConversion bool
	// clock converts commit times (change reads); nil reads them as UTC.
	clock *serverClock
	// ctx and upTo are the change read's, for clock's look-ups.
	ctx  context.Context
	upTo lsn.LSN
}

// columnAppender returns the appender for captured column c: it converts
// the value go-mssqldb returns for c's SQL type to c's Arrow type
// (source.Column.ArrowType) exactly, and rejects any other Go type.
func columnAppender(c source.Column, o decodeOptions) (appender, error) {
	dt, err := c.ArrowType()
	if err != nil {
		return nil, err
	}
	wrong := func(v any) error {
		return fmt.Errorf("column %q (%s): unexpected driver value %T", c.Name, c.Declared(), v)
	}
	nullable := func(f func(b array.Builder, v any) error) appender {
		return func(b array.Builder, v any) error {
			if v == nil {
				b.AppendNull()
				return nil
			}
			return f(b, v)
		}
	}
	switch dt.ID() {
	case arrow.BOOL:
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(bool)
			if !ok {
				return wrong(v)
			}
			b.(*array.BooleanBuilder).Append(x)
			return nil
		}), nil
	case arrow.INT16, arrow.INT32, arrow.INT64:
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(int64)
			if !ok {
				return wrong(v)
			}
			switch bb := b.(type) {
			case *array.Int16Builder:
				if x < math.MinInt16 || x > math.MaxInt16 {
					return fmt.Errorf("column %q: %d out of int16 range", c.Name, x)
				}
				bb.Append(int16(x))
			case *array.Int32Builder:
				if x < math.MinInt32 || x > math.MaxInt32 {
					return fmt.Errorf("column %q: %d out of int32 range", c.Name, x)
				}
				bb.Append(int32(x))
			case *array.Int64Builder:
				bb.Append(x)
			}
			return nil
		}), nil
	case arrow.DECIMAL128:
		t := dt.(*arrow.Decimal128Type)
		return nullable(func(b array.Builder, v any) error {
			var n decimal128.Num
			var err error
			switch x := v.(type) {
			case int64: // scaledDecimal: the unscaled integer
				n = decimal128.FromI64(x)
				if !n.FitsInPrecision(t.Precision) {
					return fmt.Errorf("column %q: %d does not fit decimal(%d,%d)", c.Name, x, t.Precision, t.Scale)
				}
			case []byte:
				n, err = decimalToNum(x, t.Precision, t.Scale)
			case string:
				n, err = decimalToNum(x, t.Precision, t.Scale)
			default:
				return wrong(v)
			}
			if err != nil {
				return fmt.Errorf("column %q: %w", c.Name, err)
			}
			b.(*array.Decimal128Builder).Append(n)
			return nil
		}), nil
	case arrow.FLOAT64, arrow.FLOAT32:
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(float64)
			if !ok {
				return wrong(v)
			}
			switch bb := b.(type) {
			case *array.Float64Builder:
				bb.Append(x)
			case *array.Float32Builder:
				bb.Append(float32(x))
			}
			return nil
		}), nil
	case arrow.DATE32:
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(time.Time)
			if !ok {
				return wrong(v)
			}
			b.(*array.Date32Builder).Append(arrow.Date32FromTime(time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC)))
			return nil
		}), nil
	case arrow.TIMESTAMP:
		offset := c.Type == "datetimeoffset"
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(time.Time)
			if !ok {
				return wrong(v)
			}
			if !offset && x.Location() != time.UTC {
				x = wallUTC(x) // go-mssqldb's default zone is UTC: already so
			}
			// UnixMicro floors: datetime2(7) loses its last digit, as
			// the Delta column's µs resolution requires.
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(x.UnixMicro()))
			return nil
		}), nil
	case arrow.STRING:
		switch c.Type {
		case "uniqueidentifier":
			return nullable(func(b array.Builder, v any) error {
				x, ok := v.([]byte)
				if !ok {
					return wrong(v)
				}
				u, err := uuidFromDriver(x, o.guidConversion)
				if err != nil {
					return fmt.Errorf("column %q: %w", c.Name, err)
				}
				b.(*array.StringBuilder).Append(u.String())
				return nil
			}), nil
		case "time":
			return nullable(func(b array.Builder, v any) error {
				x, ok := v.(time.Time)
				if !ok {
					return wrong(v)
				}
				b.(*array.StringBuilder).Append(formatTimeText(x, c.Scale))
				return nil
			}), nil
		}
		if unicodeText(c) {
			return nullable(utf16Appender(c, wrong)), nil
		}
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.(string)
			if !ok {
				return wrong(v)
			}
			b.(*array.StringBuilder).Append(x)
			return nil
		}), nil
	case arrow.BINARY:
		return nullable(func(b array.Builder, v any) error {
			x, ok := v.([]byte)
			if !ok {
				return wrong(v)
			}
			b.(*array.BinaryBuilder).Append(x)
			return nil
		}), nil
	}
	return nil, fmt.Errorf("column %q: Arrow type %s has no decoder", c.Name, dt)
}

// lsnAppender appends a binary(10) LSN as its "0x…" string.
func lsnAppender(name string) appender {
	return func(b array.Builder, v any) error {
		if v == nil {
			b.AppendNull()
			return nil
		}
		x, ok := v.([]byte)
		if !ok {
			return fmt.Errorf("%s: unexpected driver value %T", name, v)
		}
		l, err := lsn.FromBytes(x)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.(*array.StringBuilder).Append(l.String())
		return nil
	}
}

// commitInstant is a change row's commit time once the decoder has read
// the server's wall clock as an instant.
type commitInstant time.Time

// rowDecoder turns result rows into Arrow record batches.
type rowDecoder struct {
	schema *arrow.Schema
	b      *array.RecordBuilder
	// apps[i] fills field i from row[src[i]]; src[i] < 0 means NULL.
	apps []appender
	src  []int
	rows int
	// fill, when set, completes a row before it is decoded.
	fill func(row []any) error
	// last is the size of the last batch flushed, which the next one
	// reserves at its first row (see reserve).
	last batchSize
}

// batchSize is a record batch's rows and the bytes of each variable-width
// field's values (0 for the others).
type batchSize struct {
	rows int
	data []int
}

// reserve makes room in the builders for a batch the size of the last one,
// with an eighth more for the values' bytes: filling a batch by doubling
// from empty buffers copied and cleared each buffer about twice over
// (BENCHMARKS.md, "Reading from SQL Server: cdcsnap against Microsoft's
// drivers").
func (d *rowDecoder) reserve() {
	if d.last.rows == 0 {
		return
	}
	for i, f := range d.b.Fields() {
		f.Reserve(d.last.rows)
		if n := d.last.data[i]; n > 0 {
			if bb, ok := f.(interface{ ReserveData(int) }); ok {
				bb.ReserveData(n + n/8)
			}
		}
	}
}

// Append decodes one row of driver values.
func (d *rowDecoder) Append(row []any) error {
	if d.rows == 0 {
		d.reserve()
	}
	if d.fill != nil {
		if err := d.fill(row); err != nil {
			return fmt.Errorf("sqlserver: %w", err)
		}
	}
	for i, a := range d.apps {
		var v any
		if j := d.src[i]; j >= 0 {
			if j >= len(row) {
				return fmt.Errorf("sqlserver: row has %d values, want at least %d", len(row), j+1)
			}
			v = row[j]
		}
		if err := a(d.b.Field(i), v); err != nil {
			return fmt.Errorf("sqlserver: %w", err)
		}
	}
	d.rows++
	return nil
}

// Rows is the number of rows appended since the last Flush.
func (d *rowDecoder) Rows() int { return d.rows }

// Flush returns the rows appended so far as a record batch (the caller
// releases it) and starts a new one.
func (d *rowDecoder) Flush() arrow.RecordBatch {
	if d.rows > 0 {
		fields := d.b.Fields()
		d.last.rows = d.rows
		d.last.data = slices.Grow(d.last.data[:0], len(fields))[:len(fields)]
		for i, f := range fields {
			d.last.data[i] = 0
			if bb, ok := f.(interface{ DataLen() int }); ok {
				d.last.data[i] = bb.DataLen()
			}
		}
	}
	d.rows = 0
	return d.b.NewRecordBatch()
}

// Release frees the builders.
func (d *rowDecoder) Release() { d.b.Release() }

// capturedDecoder starts a decoder of schema whose first fields are cols,
// each read from the result column readList assigns it, offset by lead
// columns before them (a computed column is not read: NULL).
func capturedDecoder(schema *arrow.Schema, cols []source.Column, o decodeOptions, lead int) (*rowDecoder, int, error) {
	d := &rowDecoder{schema: schema}
	n := 0
	for _, c := range cols {
		a, err := columnAppender(c, o)
		if err != nil {
			return nil, 0, err
		}
		d.apps = append(d.apps, a)
		if !mssqlstmt.IsRead(c) {
			d.src = append(d.src, -1)
			continue
		}
		d.src = append(d.src, lead+n)
		n++
	}
	return d, n, nil
}

// newTableDecoder decodes rows of ReadRange: the captured columns in order.
func newTableDecoder(cols []source.Column, o decodeOptions) (*rowDecoder, error) {
	schema, err := source.ArrowSchema(cols)
	if err != nil {
		return nil, err
	}
	d, _, err := capturedDecoder(schema, cols, o, 0)
	if err != nil {
		return nil, err
	}
	d.b = array.NewRecordBuilder(memoryAllocator(), schema)
	return d, nil
}

// newChangeDecoder decodes rows of mssqlstmt.ChangeTableStatement
// (commandID) or mssqlstmt.ChangesStatement into ChangeSchema:
// __$start_lsn, __$seqval, __$operation, __$command_id when read, the
// captured columns that are read, then the commit time in the server's
// local wall clock, which o.clock reads as an instant; the change
// function's rows carry it on the first row of an LSN only (see
// mssqlstmt.ChangesStatement), and the decoder fills the others from it.
func newChangeDecoder(cols []source.Column, o decodeOptions, commandID bool) (*rowDecoder, error) {
	schema, err := source.ChangeSchema(cols)
	if err != nil {
		return nil, err
	}
	lead := 3
	if commandID {
		lead = 4
	}
	d, n, err := capturedDecoder(schema, cols, o, lead)
	if err != nil {
		return nil, err
	}
	tsAt := lead + n
	op := func(b array.Builder, v any) error {
		x, ok := v.(int64)
		if !ok {
			return fmt.Errorf("__$operation: unexpected driver value %T", v)
		}
		if x < 1 || x > 4 {
			return fmt.Errorf("__$operation: %d is not 1-4", x)
		}
		b.(*array.Int32Builder).Append(int32(x))
		return nil
	}
	cmdID := func(b array.Builder, v any) error {
		if v == nil {
			b.AppendNull()
			return nil
		}
		x, ok := v.(int64)
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return fmt.Errorf("__$command_id: unexpected driver value %T %v", v, v)
		}
		b.(*array.Int32Builder).Append(int32(x))
		return nil
	}
	commitTS := func(b array.Builder, v any) error {
		if v == nil {
			b.AppendNull()
			return nil
		}
		x, ok := v.(commitInstant)
		if !ok {
			return fmt.Errorf("commit time: unexpected driver value %T", v)
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(time.Time(x).UnixMicro()))
		return nil
	}
	cmdSrc := -1
	if commandID {
		cmdSrc = 3
	}
	d.apps = append(d.apps, op, lsnAppender("__$start_lsn"), lsnAppender("__$seqval"), cmdID, commitTS)
	d.src = append(d.src, 2, 0, 1, cmdSrc, tsAt)
	var lastLSN []byte
	var lastTS any
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	seen := map[time.Time]drop{}
	d.fill = func(row []any) error {
		if len(row) <= tsAt {
			return nil
		}
		l, _ := row[0].([]byte)
		if lastLSN != nil && bytes.Equal(l, lastLSN) {
			// One commit, one time: the change function's statement sends
			// it on the first row of an LSN only.
			row[tsAt] = lastTS
			return nil
		}
		lastLSN = append(lastLSN[:0], l...)
		lastTS = nil
		if row[tsAt] != nil {
			w, ok := row[tsAt].(time.Time)
			if !ok {
				return fmt.Errorf("commit time: unexpected driver value %T", row[tsAt])
			}
			at, err := lsn.FromBytes(l)
			if err != nil {
				return fmt.Errorf("__$start_lsn: %w", err)
			}
			t, err := o.clock.instant(ctx, w, at, o.upTo, seen)
			if err != nil {
				return fmt.Errorf("commit time of %s: %w", at, err)
			}
			lastTS = commitInstant(t)
		}
		row[tsAt] = lastTS
		return nil
	}
	d.b = array.NewRecordBuilder(memoryAllocator(), schema)
	return d, nil
}
