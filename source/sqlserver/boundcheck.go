package sqlserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// ErrBoundNotExact is wrapped by the error of a range read whose char or
// varchar key bound does not convert to its column's code page and back
// unchanged (FACTS.md F96): bound back, it would be another key, and the
// ranges that share it could overlap or leave a gap, so nothing is read.
var ErrBoundNotExact = errors.New("a char/varchar key bound does not convert to its column's code page and back unchanged")

// checkBounds runs mssqlstmt.BoundCheckStatement for r, under iso, when r
// has char or varchar bounds.
func (s *Source) checkBounds(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, iso source.Isolation) error {
	st, vals, err := mssqlstmt.BoundCheckStatement(ci, r)
	if err != nil || len(vals) == 0 {
		return err
	}
	rs, err := s.queryRetrying(ctx, iso, OpReadRange, ci.Name, "checking the key bounds of "+ci.Name, st)
	if err != nil {
		return err
	}
	return parseBoundCheck(ci.Name, r, vals, rs)
}

// parseBoundCheck reads BoundCheckStatement's row: every value must come
// back as its own UTF-16 bytes.
func parseBoundCheck(ci string, r keyrange.Range, vals []mssqlstmt.BoundValue, rs resultSet) error {
	if len(rs.Rows) != 1 || len(rs.Rows[0]) != len(vals) {
		return fmt.Errorf("sqlserver: checking the key bounds of %q: want one row of %d columns, got %d rows", ci, len(vals), len(rs.Rows))
	}
	for i, v := range rs.Rows[0] {
		b, ok := v.([]byte)
		if !ok {
			return fmt.Errorf("sqlserver: checking the key bounds of %q: column %d is %T, want varbinary", ci, i+1, v)
		}
		if !bytes.Equal(b, utf16LE(vals[i].Value)) {
			return fmt.Errorf("sqlserver: reading %s of %q: %w: column %q, bound %q; plan this table with one range (Partitions: 1), or key it by a column that holds no such value",
				r, ci, ErrBoundNotExact, vals[i].Column, vals[i].Value)
		}
	}
	return nil
}

// utf16LE is s as UTF-16 little-endian bytes, as nvarchar holds it.
func utf16LE(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = binary.LittleEndian.AppendUint16(out, u)
	}
	return out
}
