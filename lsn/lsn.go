// Package lsn is SQL Server's 10-byte log sequence number as CDC exposes it
// (binary(10) in __$start_lsn, sys.fn_cdc_get_max_lsn() and friends).
//
// An LSN formats canonically as "0x" followed by 20 uppercase hex digits, so
// that string order equals LSN order: that is the form cdcsnap writes into
// bronze tables, logs and JSON. Parse also accepts 20 bare hex digits in any
// case and the "0000002a:00000f38:0003" form of the transaction log.
package lsn

import (
	"bytes"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Size is the length of an LSN in bytes.
const Size = 10

// LSN is a SQL Server log sequence number: ten bytes compared as a big-endian
// unsigned number. The zero value is the all-zero LSN, which SQL Server never
// assigns to a commit (fn_cdc_get_min_lsn returns it for "no valid LSN").
type LSN [Size]byte

// ErrOutOfRange is returned by Next and Prev at the ends of the LSN space,
// where SQL Server's increment and decrement functions have no answer.
var ErrOutOfRange = errors.New("lsn: out of range")

// Max is the largest LSN, 0xFFFFFFFFFFFFFFFFFFFF. It is a variable only
// because Go has no array constants: never assign to it (this package does
// not read it).
var Max = LSN{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// SyntaxError reports text that is not an LSN. It quotes the input.
type SyntaxError struct {
	// Input is the text as given.
	Input string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "lsn: cannot parse <quoted input>: <reason>".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("lsn: cannot parse %q: %s", e.Input, e.Reason)
}

// Parse reads an LSN from "0x" + 20 hex digits (either case of x and digits),
// 20 bare hex digits, or the "vlf:block:slot" form with 8, 8 and 4 hex
// digits ("0000002a:00000f38:0003"). Anything else is a *SyntaxError.
func Parse(s string) (LSN, error) {
	var l LSN
	t := s
	if strings.Count(t, ":") == 2 {
		parts := strings.Split(t, ":")
		if len(parts[0]) != 8 || len(parts[1]) != 8 || len(parts[2]) != 4 {
			return l, &SyntaxError{Input: s, Reason: "want 8:8:4 hex digits in the colon form"}
		}
		t = parts[0] + parts[1] + parts[2]
	} else if len(t) >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		t = t[2:]
	}
	if len(t) != 2*Size {
		return l, &SyntaxError{Input: s, Reason: fmt.Sprintf("want %d hex digits, have %d bytes", 2*Size, len(t))}
	}
	for i := 0; i < len(t); i++ {
		if !isHex(t[i]) {
			return l, &SyntaxError{Input: s, Reason: fmt.Sprintf("%q is not a hex digit", t[i])}
		}
	}
	if _, err := hex.Decode(l[:], []byte(t)); err != nil {
		return l, &SyntaxError{Input: s, Reason: err.Error()}
	}
	return l, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// FromBytes returns the LSN held in b, which must be exactly 10 bytes (a
// binary(10) column as the driver returns it).
func FromBytes(b []byte) (LSN, error) {
	var l LSN
	if len(b) != Size {
		return l, fmt.Errorf("lsn: want %d bytes, have %d (0x%X)", Size, len(b), b)
	}
	copy(l[:], b)
	return l, nil
}

// String returns "0x" and 20 uppercase hex digits.
func (l LSN) String() string {
	var buf [2 + 2*Size]byte
	l.appendTo(buf[:0])
	return string(buf[:])
}

// AppendText appends the canonical form to b; it implements encoding.TextAppender.
func (l LSN) AppendText(b []byte) ([]byte, error) { return l.appendTo(b), nil }

func (l LSN) appendTo(b []byte) []byte {
	const digits = "0123456789ABCDEF"
	b = append(b, '0', 'x')
	for _, c := range l {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// Compare returns -1, 0 or +1 as l is below, equal to or above o.
func (l LSN) Compare(o LSN) int { return bytes.Compare(l[:], o[:]) }

// Less reports whether l is below o.
func (l LSN) Less(o LSN) bool { return l.Compare(o) < 0 }

// IsZero reports whether l is the all-zero LSN.
func (l LSN) IsZero() bool { return l == LSN{} }

// Bytes returns a copy of the ten bytes.
func (l LSN) Bytes() []byte { return append([]byte(nil), l[:]...) }

// Next returns the LSN after l, as sys.fn_cdc_increment_lsn does: the ten
// bytes incremented as one number, carrying across bytes. At Max it returns
// ErrOutOfRange.
func (l LSN) Next() (LSN, error) {
	for i := Size - 1; i >= 0; i-- {
		l[i]++
		if l[i] != 0 {
			return l, nil
		}
	}
	return LSN{}, fmt.Errorf("%w: no LSN after 0xFFFFFFFFFFFFFFFFFFFF", ErrOutOfRange)
}

// Prev returns the LSN before l, as sys.fn_cdc_decrement_lsn does, borrowing
// across bytes. At the zero LSN it returns ErrOutOfRange.
func (l LSN) Prev() (LSN, error) {
	if l.IsZero() {
		return LSN{}, fmt.Errorf("%w: no LSN before %s", ErrOutOfRange, l)
	}
	for i := Size - 1; i >= 0; i-- {
		l[i]--
		if l[i] != 0xff {
			break
		}
	}
	return l, nil
}

// MarshalText returns the canonical form.
func (l LSN) MarshalText() ([]byte, error) { return l.appendTo(nil), nil }

// UnmarshalText parses any form Parse accepts.
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Scan implements sql.Scanner for a binary(10) column ([]byte) or a string
// in any form Parse accepts. A NULL is an error: scan into NullLSN instead.
func (l *LSN) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		x, err := FromBytes(v)
		if err != nil {
			return err
		}
		*l = x
		return nil
	case string:
		return l.UnmarshalText([]byte(v))
	case nil:
		return errors.New("lsn: cannot scan NULL into LSN (use NullLSN)")
	default:
		return fmt.Errorf("lsn: cannot scan %T into LSN", src)
	}
}

// Value implements driver.Valuer: the ten bytes, for a binary(10) parameter.
func (l LSN) Value() (driver.Value, error) { return l.Bytes(), nil }

// NullLSN is an LSN that may be NULL, as fn_cdc_get_min_lsn returns for a
// capture instance the capture job has not reached yet.
type NullLSN struct {
	// LSN is the value when Valid.
	LSN LSN
	// Valid is false for NULL (and for the all-zero LSN when scanned).
	Valid bool
}

// Scan implements sql.Scanner. NULL and the all-zero LSN both scan as not
// Valid: SQL Server uses either for "no valid LSN".
func (n *NullLSN) Scan(src any) error {
	if src == nil {
		*n = NullLSN{}
		return nil
	}
	if err := n.LSN.Scan(src); err != nil {
		*n = NullLSN{}
		return err
	}
	n.Valid = !n.LSN.IsZero()
	return nil
}

// Value implements driver.Valuer.
func (n NullLSN) Value() (driver.Value, error) {
	if !n.Valid {
		return nil, nil
	}
	return n.LSN.Value()
}
