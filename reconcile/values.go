package reconcile

import (
	"encoding/hex"
	"fmt"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// canonical renders value r of a as one text whatever the Arrow width it
// was read back with: "N" for NULL, else "v" and the value (integers and
// floats in decimal, decimals at their scale, binary in hex, timestamps in
// UTC RFC 3339 with nanoseconds, dates as yyyy-mm-dd).
func canonical(a arrow.Array, r int) (string, error) {
	if a.IsNull(r) {
		return "N", nil
	}
	var s string
	switch c := a.(type) {
	case *array.Boolean:
		s = strconv.FormatBool(c.Value(r))
	case *array.Int8:
		s = strconv.FormatInt(int64(c.Value(r)), 10)
	case *array.Int16:
		s = strconv.FormatInt(int64(c.Value(r)), 10)
	case *array.Int32:
		s = strconv.FormatInt(int64(c.Value(r)), 10)
	case *array.Int64:
		s = strconv.FormatInt(c.Value(r), 10)
	case *array.Uint8:
		s = strconv.FormatUint(uint64(c.Value(r)), 10)
	case *array.Uint16:
		s = strconv.FormatUint(uint64(c.Value(r)), 10)
	case *array.Uint32:
		s = strconv.FormatUint(uint64(c.Value(r)), 10)
	case *array.Uint64:
		s = strconv.FormatUint(c.Value(r), 10)
	case *array.Float32:
		s = strconv.FormatFloat(float64(c.Value(r)), 'g', -1, 32)
	case *array.Float64:
		s = strconv.FormatFloat(c.Value(r), 'g', -1, 64)
	case *array.String:
		s = c.Value(r)
	case *array.LargeString:
		s = c.Value(r)
	case *array.Binary:
		s = hex.EncodeToString(c.Value(r))
	case *array.LargeBinary:
		s = hex.EncodeToString(c.Value(r))
	case *array.Decimal128:
		s = decnum.FormatScaled(c.Value(r).BigInt(), int(c.DataType().(*arrow.Decimal128Type).Scale))
	case *array.Timestamp:
		s = c.Value(r).ToTime(c.DataType().(*arrow.TimestampType).Unit).UTC().Format(time.RFC3339Nano)
	case *array.Date32:
		s = c.Value(r).ToTime().UTC().Format(time.DateOnly)
	case *array.Date64:
		s = c.Value(r).ToTime().UTC().Format(time.DateOnly)
	default:
		return "", fmt.Errorf("no canonical form for Arrow type %s", a.DataType())
	}
	return "v" + s, nil
}

// keyValue converts value r of a key column's Arrow array to the Go value
// keyrange orders (the Go type its Kind names).
func keyValue(c keyrange.Column, a arrow.Array, r int) (any, error) {
	if a.IsNull(r) {
		return nil, nil
	}
	bad := func() error {
		return fmt.Errorf("key column %q (%s) read back as Arrow %s", c.Name, c.Kind, a.DataType())
	}
	switch c.Kind {
	case keyrange.KindInt:
		switch v := a.(type) {
		case *array.Int8:
			return int64(v.Value(r)), nil
		case *array.Int16:
			return int64(v.Value(r)), nil
		case *array.Int32:
			return int64(v.Value(r)), nil
		case *array.Int64:
			return v.Value(r), nil
		case *array.Uint8:
			return int64(v.Value(r)), nil
		}
	case keyrange.KindBool:
		if v, ok := a.(*array.Boolean); ok {
			return v.Value(r), nil
		}
	case keyrange.KindDecimal:
		if v, ok := a.(*array.Decimal128); ok {
			return keyrange.Decimal(decnum.FormatScaled(v.Value(r).BigInt(), int(v.DataType().(*arrow.Decimal128Type).Scale))), nil
		}
	case keyrange.KindFloat:
		switch v := a.(type) {
		case *array.Float32:
			return float64(v.Value(r)), nil
		case *array.Float64:
			return v.Value(r), nil
		}
	case keyrange.KindString:
		switch v := a.(type) {
		case *array.String:
			return v.Value(r), nil
		case *array.LargeString:
			return v.Value(r), nil
		}
	case keyrange.KindBytes:
		switch v := a.(type) {
		case *array.Binary:
			return append([]byte(nil), v.Value(r)...), nil
		case *array.LargeBinary:
			return append([]byte(nil), v.Value(r)...), nil
		}
	case keyrange.KindDate:
		switch v := a.(type) {
		case *array.Date32:
			return v.Value(r).ToTime().UTC(), nil
		case *array.Date64:
			return v.Value(r).ToTime().UTC(), nil
		}
	case keyrange.KindDateTime, keyrange.KindDateTimeOffset:
		if v, ok := a.(*array.Timestamp); ok {
			return v.Value(r).ToTime(v.DataType().(*arrow.TimestampType).Unit).UTC(), nil
		}
	case keyrange.KindTime:
		if v, ok := a.(*array.String); ok {
			t, err := time.Parse("15:04:05.999999999", v.Value(r))
			if err != nil {
				return nil, fmt.Errorf("key column %q: time %q: %w", c.Name, v.Value(r), err)
			}
			return time.Date(1, 1, 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
		}
	case keyrange.KindUUID:
		if v, ok := a.(*array.String); ok {
			u, err := keyrange.ParseUUID(v.Value(r))
			if err != nil {
				return nil, fmt.Errorf("key column %q: %w", c.Name, err)
			}
			return u, nil
		}
	default:
		return nil, fmt.Errorf("key column %q has kind %s, which reconcile cannot compare", c.Name, c.Kind)
	}
	return nil, bad()
}
