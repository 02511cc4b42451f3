package lsn_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// FuzzParseRoundTrip: whatever Parse accepts formats canonically and parses
// back to the same LSN, in every accepted form; whatever it rejects is a
// SyntaxError quoting the input.
func FuzzParseRoundTrip(f *testing.F) {
	for _, s := range []string{
		"0x0000002A00000F380003", "0000002a00000f380003", "0000002a:00000f38:0003",
		"0XFFFFFFFFFFFFFFFFFFFF", "", "0x", "zz", "0000002a:00000f38:003",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := lsn.Parse(s)
		if err != nil {
			se, ok := err.(*lsn.SyntaxError)
			if !ok || se.Input != s {
				t.Fatalf("Parse(%q): %v (%T)", s, err, err)
			}
			return
		}
		c := l.String()
		if len(c) != 22 || c[:2] != "0x" || strings.ToUpper(c[2:]) != c[2:] {
			t.Fatalf("String() = %q is not canonical", c)
		}
		// The input, with its prefix dropped and colons removed, is the
		// same digits in some case.
		digits := strings.ReplaceAll(s, ":", "")
		if len(digits) == 22 {
			digits = digits[2:]
		}
		if !strings.EqualFold(digits, c[2:]) {
			t.Fatalf("Parse(%q) = %s: digits differ", s, c)
		}
		for _, form := range []string{c, c[2:], strings.ToLower(c), c[2:10] + ":" + c[10:18] + ":" + c[18:]} {
			back, err := lsn.Parse(form)
			if err != nil || back != l {
				t.Fatalf("Parse(%q) = %s, %v; want %s", form, back, err, l)
			}
		}
		txt, _ := l.MarshalText()
		var u lsn.LSN
		if err := u.UnmarshalText(txt); err != nil || u != l {
			t.Fatalf("text round trip of %s: %s, %v", l, u, err)
		}
		var sc lsn.LSN
		if err := sc.Scan(l.Bytes()); err != nil || sc != l {
			t.Fatalf("Scan(Bytes()) of %s: %s, %v", l, sc, err)
		}
	})
}

// FuzzOrder: the order of the bytes is the order of the canonical strings,
// and Next/Prev step by one in both.
func FuzzOrder(f *testing.F) {
	f.Add(make([]byte, 10), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}, []byte{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0xff}, 10), bytes.Repeat([]byte{0x9f}, 10))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		x, errx := lsn.FromBytes(a)
		y, erry := lsn.FromBytes(b)
		if (errx == nil) != (len(a) == lsn.Size) || (erry == nil) != (len(b) == lsn.Size) {
			t.Fatalf("FromBytes: %v, %v for lengths %d, %d", errx, erry, len(a), len(b))
		}
		if errx != nil || erry != nil {
			return
		}
		byBytes := bytes.Compare(a, b)
		if got := strings.Compare(x.String(), y.String()); got != byBytes {
			t.Fatalf("%s vs %s: string order %d, byte order %d", x, y, got, byBytes)
		}
		if got := x.Compare(y); got != byBytes {
			t.Fatalf("%s.Compare(%s) = %d, byte order %d", x, y, got, byBytes)
		}
		if n, err := x.Next(); err == nil {
			if x.Compare(n) >= 0 || x.String() >= n.String() {
				t.Fatalf("%s.Next() = %s is not above it", x, n)
			}
			// Nothing lies strictly between x and x.Next(): y is either
			// at most x or at least n.
			if x.Compare(y) < 0 && y.Compare(n) < 0 {
				t.Fatalf("%s lies between %s and its Next %s", y, x, n)
			}
			if p, err := n.Prev(); err != nil || p != x {
				t.Fatalf("%s.Next().Prev() = %s, %v", x, p, err)
			}
		} else if x != lsn.Max {
			t.Fatalf("%s.Next(): %v", x, err)
		}
		if p, err := x.Prev(); err == nil {
			if n, err := p.Next(); err != nil || n != x {
				t.Fatalf("%s.Prev().Next() = %s, %v", x, n, err)
			}
		} else if !x.IsZero() {
			t.Fatalf("%s.Prev(): %v", x, err)
		}
	})
}
