package sqlserver

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/cdcsnap/cdcsnap/source"
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

// fuzzValue draws one driver value from data: one of the Go types
// go-mssqldb returns (FACTS.md F43), or nil, or a wrong type.
func fuzzValue(data []byte, i *int) any {
	next := func() byte {
		if *i >= len(data) {
			return 0
		}
		b := data[*i]
		*i++
		return b
	}
	n := int(next())
	switch next() % 9 {
	case 0:
		return nil
	case 1:
		return int64(n) - 3
	case 2:
		return n%2 == 0
	case 3:
		return []string{"varchar", "binary", "varbinary", "nvarchar", "decimal", "datetime2", "int", "uniqueidentifier", "Greek_CI_AS", "x]y", ""}[n%11]
	case 4:
		b := make([]byte, n%20)
		for j := range b {
			b[j] = next()
		}
		return b
	case 5:
		return float64(n) / 3
	case 6:
		return time.Date(2026, 1, 1, 0, 0, n, 0, time.FixedZone("", (n%5-2)*3600))
	case 7:
		return "[" + strings.Repeat("k", n%4) + "]"
	}
	return struct{}{}
}

// FuzzResultSets: the parsers of what the server answers never panic on
// any result set (columns renamed, missing, extra; values of any type or
// NULL), and what parseCapturedColumns and applyColumnInfo accept are
// columns whose declared type parses back to the same fields.
func FuzzResultSets(f *testing.F) {
	f.Add([]byte{0, 3, 7, 1, 200, 4, 9, 2}, uint8(12), uint8(3))
	f.Add([]byte("column_ordinal ordinal_position"), uint8(6), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, ncols, nrows uint8) {
		names := append(append(append([]string(nil), docCapturedColumns...), docHelpColumns...), docSysColumns...)
		names = append(names, "ordinal_position", "rows", "type", "")
		i := 0
		var rs resultSet
		for c := 0; c < int(ncols%24); c++ {
			k := 0
			if i < len(data) {
				k = int(data[i])
				i++
			}
			rs.Columns = append(rs.Columns, names[k%len(names)])
		}
		for r := 0; r < int(nrows%6); r++ {
			row := make([]any, len(rs.Columns))
			for c := range row {
				row[c] = fuzzValue(data, &i)
			}
			rs.Rows = append(rs.Rows, row)
		}
		_, _ = parseCaptureInstances(rs)
		_, _, _ = parseMinLSN("ci", rs)
		_, _ = parseGUIDProbe(rs)
		_, _ = parseServerNow(rs)
		_, _, _ = parseKeyIndex(rs)
		_, _ = parseSpaceUsed(rs)
		_, _ = parseLSNTime(rs, nil)
		_, _, _, _ = parseIntKeyBounds(rs)
		_, _, _ = parseSeekKey(ciComposite, rs, false)
		cols, err := parseCapturedColumns(rs)
		if err != nil {
			return
		}
		if cols, err = applyColumnInfo(cols, rs); err != nil {
			return
		}
		for _, c := range cols {
			if c.Length == 0 || c.Type == "" {
				continue // unknown length or type: never inlined (InlineType refuses it)
			}
			if decl, err := InlineType(c); err == nil {
				back, err := source.ParseType(decl)
				if err != nil || back.Declared() != decl {
					t.Fatalf("column %+v: inlined as %q, which parses back as %q (%v)", c, decl, back.Declared(), err)
				}
			}
		}
	})
}
