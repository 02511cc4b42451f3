package sqlserver

import (
	"math/big"
	"strings"
	"testing"

	"github.com/microsoft/go-mssqldb/msdsn"
)

// FuzzDecimalText: parseDecimalText never panics, and what it accepts
// round-trips exactly through decimal128 at its own scale.
func FuzzDecimalText(f *testing.F) {
	for _, s := range []string{"0", "-12.3400", "922337203685477.5807", ".5", "5.", "+1", "-0.0001", "99999999999999999999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, scale, err := parseDecimalText(s)
		if err != nil {
			return
		}
		if scale > 38 || new(big.Int).Abs(n).Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil)) >= 0 {
			return
		}
		num, err := decimalToNum(s, 38, int32(scale))
		if err != nil {
			t.Fatalf("%q parsed as %v scale %d but does not convert: %v", s, n, scale, err)
		}
		if num.BigInt().Cmp(n) != 0 {
			t.Fatalf("%q: decimal128 %v != %v", s, num.BigInt(), n)
		}
	})
}

// FuzzTimeText: parseTimeText never panics and formatTimeText inverts it.
func FuzzTimeText(f *testing.F) {
	for _, s := range []string{"00:00:00", "23:59:59.9999999", "12:34:56.1", "1:2:3", "24:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := parseTimeText(s)
		if err != nil {
			return
		}
		scale := 0
		if len(s) > 8 {
			scale = len(s) - 9
		}
		if got := formatTimeText(tm, scale); got != s {
			t.Fatalf("%q -> %v -> %q", s, tm, got)
		}
	})
}

// FuzzQuotedList: ParseQuotedList never panics and reads back any list of
// names quoted with QuoteName.
func FuzzQuotedList(f *testing.F) {
	f.Add("[id], [a]]b]", "x]y", "ü, v")
	f.Add("", "a", "b")
	f.Fuzz(func(t *testing.T, raw, a, b string) {
		_, _ = ParseQuotedList(raw)
		qa, err1 := QuoteName(a)
		qb, err2 := QuoteName(b)
		if err1 != nil || err2 != nil {
			return
		}
		got, err := ParseQuotedList(qa + ", " + qb)
		if err != nil || len(got) != 2 || got[0] != a || got[1] != b {
			t.Fatalf("%q, %q -> %q, %v", a, b, got, err)
		}
	})
}

// FuzzRedactDSN: RedactDSN never panics, and the password go-mssqldb itself
// reads from a DSN never survives it.
func FuzzRedactDSN(f *testing.F) {
	f.Add("server=h;user id=u;password=Secret123;database=d")
	f.Add("sqlserver://u:Secret123@h?database=d")
	f.Add("odbc:server=h;pwd={Sec;ret}}123}")
	f.Add("server=h;password=\"a;b\"\"c\"")
	f.Fuzz(func(t *testing.T, dsn string) {
		got := RedactDSN(dsn)
		cfg, err := msdsn.Parse(dsn)
		if err != nil || len(cfg.Password) < 3 {
			return
		}
		if strings.Contains(got, cfg.Password) {
			t.Fatalf("RedactDSN(%q) = %q keeps the password %q", dsn, got, cfg.Password)
		}
	})
}
