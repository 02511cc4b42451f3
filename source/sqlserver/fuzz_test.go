package sqlserver

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/source"
)

// decimalOracle is decimalToNum by math/big, the brute-force way: the
// unscaled value at scale, or an error where a digit would be lost or the
// value does not fit the precision.
func decimalOracle(s string, prec, scale int32) (*big.Int, error) {
	n, sc, err := parseDecimalText(s)
	if err != nil {
		return nil, err
	}
	pow := func(e int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil) }
	switch {
	case int32(sc) < scale:
		n.Mul(n, pow(int(scale)-sc))
	case int32(sc) > scale:
		q, r := new(big.Int).QuoRem(n, pow(sc-int(scale)), new(big.Int))
		if r.Sign() != 0 {
			return nil, fmt.Errorf("digits lost")
		}
		n = q
	}
	if new(big.Int).Abs(n).Cmp(pow(int(prec))) >= 0 {
		return nil, fmt.Errorf("does not fit")
	}
	return n, nil
}

// FuzzDecimalText: decimalToNum, the allocation-free decoder of decimal
// values, never panics and agrees with the math/big oracle on every text,
// precision and scale, both on the value and on refusing.
func FuzzDecimalText(f *testing.F) {
	for _, s := range []string{"0", "-12.3400", "922337203685477.5807", ".5", "5.", "+1", "-0.0001", "99999999999999999999999999999999999999", "0000000000000000000001.10", "123456789012345678.9"} {
		f.Add(s, uint8(38), uint8(4))
	}
	f.Fuzz(func(t *testing.T, s string, p, sc uint8) {
		prec := (int32(p)+37)%38 + 1 // 38 stays 38, as the seeds mean
		scale := int32(sc) % (prec + 1)
		want, werr := decimalOracle(s, prec, scale)
		got, err := decimalToNum(s, prec, scale)
		if (err != nil) != (werr != nil) {
			t.Fatalf("decimalToNum(%q, %d, %d): %v, the oracle %v", s, prec, scale, err, werr)
		}
		if err == nil && got.BigInt().Cmp(want) != 0 {
			t.Fatalf("decimalToNum(%q, %d, %d) = %v, the oracle %v", s, prec, scale, got.BigInt(), want)
		}
		if b, err := decimalToNum([]byte(s), prec, scale); (err == nil) != (werr == nil) || err == nil && b != got {
			t.Fatalf("decimalToNum of %q as []byte differs from as string", s)
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

// FuzzQuotedList: parseQuotedList never panics and reads back any list of
// names quoted with QuoteName.
func FuzzQuotedList(f *testing.F) {
	f.Add("[id], [a]]b]", "x]y", "ü, v")
	f.Add("", "a", "b")
	f.Fuzz(func(t *testing.T, raw, a, b string) {
		_, _ = parseQuotedList(raw)
		qa, err1 := mssqlstmt.QuoteName(a)
		qb, err2 := mssqlstmt.QuoteName(b)
		if err1 != nil || err2 != nil {
			return
		}
		got, err := parseQuotedList(qa + ", " + qb)
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

// helpSeed is FuzzResultSets's input for a result set of
// sys.sp_cdc_help_change_data_capture's documented columns with rows rows
// that parseCaptureInstances accepts: names are strings, source_object_id
// an integer, index_column_list a quoted name, the rest NULL.
func helpSeed(rows int) []byte {
	var seed []byte
	for i := range docHelpColumns {
		seed = append(seed, byte(len(docCapturedColumns)+i)) // the names' order in FuzzResultSets
	}
	for r := range rows {
		for _, c := range docHelpColumns {
			switch c {
			case "source_schema", "source_table", "capture_instance", "index_name":
				seed = append(seed, byte(r+8), 3) // "Greek_CI_AS", "x]y": strings
			case "source_object_id":
				seed = append(seed, byte(r+7), 1)
			case "index_column_list":
				seed = append(seed, 1, 7) // "[k]"
			default:
				seed = append(seed, 0, 0) // NULL
			}
		}
	}
	return seed
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
	f.Add(helpSeed(2), uint8(len(docHelpColumns)), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, ncols, nrows uint8) {
		names := append(append(append([]string(nil), docCapturedColumns...), docHelpColumns...), docSysColumns...)
		names = append(names, "ordinal_position", "rows", "type", "")
		names = append(names, docSysIndexes...)
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
		if listed, err := parseListedInstances(rs); err == nil {
			rows, err := parseCaptureInstances(rs)
			if err != nil || len(rows) != len(listed) {
				t.Fatalf("parseListedInstances kept %d instances, parseCaptureInstances %d (%v)", len(listed), len(rows), err)
			}
			for i, ci := range listed {
				if ci.Name != rows[i].Instance.Name || len(ci.Columns) != 0 {
					t.Fatalf("instance %d: listed %+v, parsed %+v", i, ci, rows[i].Instance)
				}
			}
		}
		_, _, _ = parseMinLSN("ci", rs)
		_, _ = parseGUIDProbe(rs)
		_, _ = parseServerNow(rs)
		if ixs, heap, ok, err := parseIndexes(rs); err == nil && ok {
			clustered := 0
			for _, ix := range ixs {
				if ix.Name == "" {
					t.Fatalf("an index without a name: %+v", ixs)
				}
				if ix.Clustered {
					clustered++
				}
			}
			if clustered > 1 || clustered == 1 && heap {
				t.Fatalf("accepted %d clustered indexes with heap %v", clustered, heap)
			}
		}
		_, _ = parseSpaceUsed(rs)
		_, _, _ = parseLSNTime(rs)
		_, _ = parseServerVersion(rs)
		_, _ = parseTimeZoneID(rs)
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
			if decl, err := mssqlstmt.InlineType(c); err == nil {
				back, err := source.ParseType(decl)
				if err != nil || back.Declared() != decl {
					t.Fatalf("column %+v: inlined as %q, which parses back as %q (%v)", c, decl, back.Declared(), err)
				}
			}
		}
	})
}
