package sqlserver

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// driverRow holds, per SQL type, a value of exactly the Go type go-mssqldb
// v1.11.2 returns for it (types.go: readFixedType, readByteLenType,
// readPLPType, decodeMoney, decodeDecimal, decodeGuid, decodeDateTime2,
// decodeDateTimeOffset, decodeTime, decodeChar, decodeNChar, decodeXml,
// decodeUdt), and the Arrow value it must become.
type driverCase struct {
	decl string
	in   any    // driver value
	want string // Arrow value as array.ValueStr renders it
}

var sqlServerGUID = []byte{0xff, 0x19, 0x96, 0x6f, 0x86, 0x8b, 0x11, 0xd0, 0xb4, 0x2d, 0x00, 0xc0, 0x4f, 0xc9, 0x64, 0xff}

func driverCases() []driverCase {
	athens := time.FixedZone("", 2*3600)
	return []driverCase{
		{"tinyint", int64(255), "255"},
		{"smallint", int64(-32768), "-32768"},
		{"int", int64(2147483647), "2147483647"},
		{"bigint", int64(-9223372036854775808), "-9223372036854775808"},
		{"bit", true, "true"},
		{"decimal(38,10)", []byte("-1234567890123456789012345678.0123456789"), "-1234567890123456789012345678.0123456789"},
		{"decimal(18,4)", []byte("0.0001"), "0.0001"},
		{"numeric(5,0)", []byte("-99999"), "-99999"},
		{"money", []byte("922337203685477.5807"), "922337203685477.5807"},
		{"money", []byte("-0.0001"), "-0.0001"},
		{"smallmoney", []byte("-214748.3648"), "-214748.3648"},
		{"float", 0.1, "0.1"},
		{"real", float64(float32(0.1)), "0.1"},
		{"date", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01"},
		{"date", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "2024-02-29"},
		{"time(0)", time.Date(1, 1, 1, 23, 59, 59, 0, time.UTC), "23:59:59"},
		{"time(3)", time.Date(1, 1, 1, 13, 4, 5, 123000000, time.UTC), "13:04:05.123"},
		{"time(7)", time.Date(1, 1, 1, 0, 0, 0, 100, time.UTC), "00:00:00.0000001"},
		{"datetime", time.Date(2024, 1, 2, 3, 4, 5, 997000000, time.UTC), "2024-01-02 03:04:05.997Z"},
		{"smalldatetime", time.Date(2079, 6, 6, 23, 59, 0, 0, time.UTC), "2079-06-06 23:59:00Z"},
		{"datetime2(7)", time.Date(2024, 3, 1, 12, 0, 0, 123456789/100*100, time.UTC), "2024-03-01 12:00:00.123456Z"},
		{"datetime2(7)", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01 00:00:00Z"},
		{"datetime2(7)", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC), "9999-12-31 23:59:59.999999Z"},
		// The DSN's "timezone" setting makes the driver return the stored wall
		// clock in another location: the wall clock is what counts.
		{"datetime2(3)", time.Date(2024, 3, 1, 12, 0, 0, 5000000, athens), "2024-03-01 12:00:00.005Z"},
		{"datetimeoffset(7)", time.Date(2024, 3, 1, 12, 0, 0, 100, athens), "2024-03-01 10:00:00Z"},
		{"char(3)", "ab ", "ab "},
		{"varchar(20)", "Δέλτα", "Δέλτα"},
		{"nvarchar(max)", "ключ ]] 'x'", "ключ ]] 'x'"},
		{"nchar(2)", "ü ", "ü "},
		{"text", "old", "old"},
		{"ntext", "óld", "óld"},
		{"xml", "<a b=\"1\"/>", "<a b=\"1\"/>"},
		{"binary(4)", []byte{0, 1, 2, 255}, "000102ff"},
		{"varbinary(max)", []byte{}, ""},
		{"image", []byte{0xca, 0xfe}, "cafe"},
		{"timestamp", []byte{0, 0, 0, 0, 0, 0, 7, 0xd1}, "00000000000007d1"},
		{"uniqueidentifier", sqlServerGUID, "6f9619ff-8b86-d011-b42d-00c04fc964ff"},
		{"hierarchyid", []byte{0x58}, "58"},
		{"geography", []byte{0xe6, 0x10, 0, 0, 1, 0x0c}, "e6100000010c"},
	}
}

func TestRowPathEveryType(t *testing.T) {
	for _, tc := range driverCases() {
		c, err := source.ParseType(tc.decl)
		if err != nil {
			t.Fatal(err)
		}
		c.Name, c.Nullable = "c", true
		d, err := newTableDecoder([]source.Column{c}, decodeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.decl, err)
		}
		if err := d.Append([]any{tc.in}); err != nil {
			t.Fatalf("%s: %v", tc.decl, err)
		}
		if err := d.Append([]any{nil}); err != nil {
			t.Fatalf("%s NULL: %v", tc.decl, err)
		}
		rec := d.Flush()
		col := rec.Column(0)
		got := col.ValueStr(0)
		if b, ok := col.(*array.Binary); ok {
			got = hex.EncodeToString(b.Value(0))
		}
		if ts, ok := col.(*array.Timestamp); ok {
			got = ts.Value(0).ToTime(arrow.Microsecond).Format("2006-01-02 15:04:05.999999Z")
		}
		if got != tc.want {
			t.Errorf("%s: %T %v became %q, want %q", tc.decl, tc.in, tc.in, got, tc.want)
		}
		if !col.IsNull(1) {
			t.Errorf("%s: NULL not kept", tc.decl)
		}
		rec.Release()
		d.Release()
	}
}

func TestRowPathRejectsWrongDriverTypes(t *testing.T) {
	for _, tc := range []struct {
		decl string
		in   any
	}{
		{"decimal(18,4)", 1.5},               // never via float64
		{"decimal(18,4)", []byte("1.23456")}, // more digits than the scale
		{"decimal(4,0)", []byte("12345")},    // beyond the precision
		{"money", []byte("1e5")},
		{"uniqueidentifier", "6f9619ff-8b86-d011-b42d-00c04fc964ff"},
		{"uniqueidentifier", []byte{1, 2, 3}},
		{"tinyint", int64(1 << 20)},
		{"int", "1"},
		{"datetime2(7)", "2024-01-01"},
		{"nvarchar(10)", []byte("x")},
	} {
		c, _ := source.ParseType(tc.decl)
		c.Name = "c"
		d, err := newTableDecoder([]source.Column{c}, decodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Append([]any{tc.in}); err == nil {
			t.Errorf("%s: %T %v accepted", tc.decl, tc.in, tc.in)
		} else if !strings.Contains(err.Error(), `"c"`) {
			t.Errorf("%s: error does not name the column: %v", tc.decl, err)
		}
		d.Release()
	}
}

func TestSQLVariantIsAClearError(t *testing.T) {
	_, err := newTableDecoder([]source.Column{{Name: "v", Type: "sql_variant"}}, decodeOptions{})
	if err == nil || !strings.Contains(err.Error(), "sql_variant") {
		t.Fatalf("sql_variant: %v", err)
	}
}

func TestUUIDFromDriverEitherByteOrder(t *testing.T) {
	u, _ := keyrange.ParseUUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
	got, err := uuidFromDriver(u[:], true)
	if err != nil || got != u {
		t.Fatalf("guid conversion=true: %v %v", got, err)
	}
	got, err = uuidFromDriver(sqlServerGUID, false)
	if err != nil || got != u {
		t.Fatalf("default: %v %v", got, err)
	}
}

func TestDecimalExact(t *testing.T) {
	n, err := decimalToNum("-1234567890123456789012345678.0123456789", 38, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := decimal128.FromString("-12345678901234567890123456780123456789", 38, 0)
	if n != want {
		t.Fatalf("got %v want %v", n, want)
	}
	if _, err := decimalToNum("99999999999999999999999999999999999999", 38, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := decimalToNum("100000000000000000000000000000000000000", 38, 0); err == nil {
		t.Fatal("39 digits fit decimal(38,0)")
	}
	for _, bad := range []string{"", "-", ".", "1.2.3", "1e3", " 1", "0x10", "+-1", "１"} {
		if _, _, err := parseDecimalText(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// driverDecimalText formats the unscaled value n at scale as go-mssqldb
// v1.11.2 returns a decimal or money value (internal/decimal ScaleBytes):
// an optional sign, the integer digits or "0", then "." and exactly scale
// digits when scale > 0.
func driverDecimalText(n *big.Int, scale int) string {
	digits := new(big.Int).Abs(n).String()
	sign := ""
	if n.Sign() < 0 {
		sign = "-"
	}
	if scale == 0 {
		return sign + digits
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}

// TestDecimalTextRoundTrip: every value a decimal(p,s) column can hold,
// as the driver writes it, decodes to exactly its unscaled value; one
// more digit than p is refused. Values are drawn at every magnitude, so
// both the 64-bit and the 128-bit paths and the limits are reached.
func TestDecimalTextRoundTrip(t *testing.T) {
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	for i := 0; i < 20000; i++ {
		prec := 1 + r.IntN(38)
		scale := r.IntN(prec + 1)
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil) // 10^prec
		var n *big.Int
		switch r.IntN(4) {
		case 0: // the largest magnitude
			n = new(big.Int).Sub(limit, big.NewInt(1))
		case 1: // one digit, zero included
			n = big.NewInt(int64(r.IntN(10)))
		default: // random digits at a random magnitude
			digits := make([]byte, 1+r.IntN(prec))
			for j := range digits {
				digits[j] = byte('0' + r.IntN(10))
			}
			n, _ = new(big.Int).SetString(string(digits), 10)
		}
		if r.IntN(2) == 0 {
			n.Neg(n)
		}
		text := driverDecimalText(n, scale)
		got, err := decimalToNum(text, int32(prec), int32(scale))
		if err != nil || got.BigInt().Cmp(n) != 0 {
			t.Fatalf("decimalToNum(%q, %d, %d) = %v, %v; want %v", text, prec, scale, got.BigInt(), err, n)
		}
		over := new(big.Int).Add(new(big.Int).Abs(n), limit)
		if n.Sign() < 0 {
			over.Neg(over)
		}
		if _, err := decimalToNum(driverDecimalText(over, scale), int32(prec), int32(scale)); err == nil {
			t.Fatalf("decimalToNum(%q, %d, %d) accepted a value of more than %d digits", driverDecimalText(over, scale), prec, scale, prec)
		}
	}
}

func TestTimeText(t *testing.T) {
	tm := time.Date(1, 1, 1, 9, 8, 7, 123456700, time.UTC)
	for scale, want := range []string{"09:08:07", "09:08:07.1", "09:08:07.12", "09:08:07.123", "09:08:07.1234", "09:08:07.12345", "09:08:07.123456", "09:08:07.1234567"} {
		if got := formatTimeText(tm, scale); got != want {
			t.Errorf("scale %d: %q want %q", scale, got, want)
		}
		back, err := parseTimeText(want)
		if err != nil {
			t.Fatal(err)
		}
		if formatTimeText(back, scale) != want {
			t.Errorf("round trip of %q", want)
		}
	}
}

func TestKeyValues(t *testing.T) {
	cases := []struct {
		decl string
		in   any
		want any
	}{
		{"int", int64(5), int64(5)},
		{"decimal(10,2)", []byte("-1.50"), keyrange.Decimal("-1.50")},
		{"money", []byte("1.0000"), keyrange.Decimal("1.0000")},
		{"varchar(5)", "Ab", "Ab"},
		{"uniqueidentifier", sqlServerGUID, func() any { u, _ := keyrange.ParseUUID("6f9619ff-8b86-d011-b42d-00c04fc964ff"); return u }()},
		{"datetime2(7)", time.Date(2024, 1, 1, 0, 0, 0, 100, time.FixedZone("", 3600)), time.Date(2024, 1, 1, 0, 0, 0, 100, time.UTC)},
		{"date", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"time(7)", time.Date(1, 1, 1, 1, 2, 3, 400, time.UTC), time.Date(1, 1, 1, 1, 2, 3, 400, time.UTC)},
		{"bit", false, false},
		{"binary(2)", []byte{1, 2}, []byte{1, 2}},
		{"float", 2.5, 2.5},
	}
	for _, tc := range cases {
		c, _ := source.ParseType(tc.decl)
		c.Name = "k"
		got, err := keyValue(c, tc.in, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.decl, err)
		}
		cmp, err := keyrange.Compare(c.KeyColumn(), got, tc.want)
		if err != nil || cmp != 0 {
			t.Errorf("%s: got %#v want %#v (%v)", tc.decl, got, tc.want, err)
		}
		// Every key value binds back as a bound.
		ci := &source.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Key: []string{"k"}, Columns: []source.Column{withCollation(c)}}
		if _, err := mssqlstmt.ReadRangeStatement(ci, keyrange.Range{Lower: keyrange.Tuple{got}}); err != nil {
			t.Errorf("%s: bound: %v", tc.decl, err)
		}
	}
}

func withCollation(c source.Column) source.Column {
	if c.Type == "varchar" || c.Type == "char" {
		c.Collation = "Latin1_General_CI_AS"
	}
	return c
}

// TestChangeRows decodes change rows as both change reads return them:
// from the change table with __$command_id, and from the change function
// without it. The commit time comes on the first row of each LSN only
// (changeSelect); the decoder fills the rest of that LSN from it and
// leaves a NULL on a new LSN alone.
func TestChangeRows(t *testing.T) {
	cols := []source.Column{{Name: "id", Type: "int"}, {Name: "amount", Type: "money", Nullable: true}, {Name: "total", Type: "int", Computed: true}}
	l1 := mustLSN("0x0000002A00000F380003")
	l2 := mustLSN("0x0000002A00000F380009")
	s1 := mustLSN("0x0000002A00000F380002")
	commit := time.Date(2024, 5, 1, 9, 0, 0, 3000000, time.UTC) // server local (BRT) wall clock
	for _, commandID := range []bool{true, false} {
		d, err := newChangeDecoder(cols, decodeOptions{clock: fixedClock(time.FixedZone("BRT", -3*3600))}, commandID)
		if err != nil {
			t.Fatal(err)
		}
		row := func(l lsn.LSN, op, cmd int64, ts any) []any {
			r := []any{l.Bytes(), s1.Bytes(), op}
			if commandID {
				r = append(r, cmd)
			}
			return append(r, int64(7), []byte("1.5000"), ts) // total is computed: not read
		}
		for _, r := range [][]any{row(l1, 3, 2, commit), row(l1, 4, 2, nil), row(l2, 2, 1, nil)} {
			if err := d.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		rec := d.Flush()
		want, _ := source.ChangeSchema(cols)
		if !rec.Schema().Equal(want) {
			t.Fatalf("schema %v want %v", rec.Schema(), want)
		}
		if got := rec.Column(4).ValueStr(0); got != l1.String() {
			t.Errorf("_start_lsn %q", got)
		}
		if got := rec.Column(5).ValueStr(1); got != s1.String() {
			t.Errorf("_seqval %q", got)
		}
		if got := rec.Column(3).(*array.Int32).Value(1); got != 4 {
			t.Errorf("_operation %d", got)
		}
		if !rec.Column(2).IsNull(0) {
			t.Errorf("computed column total read as %s, want NULL", rec.Column(2).ValueStr(0))
		}
		if commandID {
			if rec.Column(6).IsNull(0) || rec.Column(6).(*array.Int32).Value(0) != 2 {
				t.Errorf("_command_id %s, want 2", rec.Column(6).ValueStr(0))
			}
		} else if !rec.Column(6).IsNull(0) {
			t.Errorf("_command_id not NULL without __$command_id")
		}
		ts := rec.Column(7).(*array.Timestamp)
		for r := range 2 {
			if ts.IsNull(r) || !ts.Value(r).ToTime(arrow.Microsecond).Equal(time.Date(2024, 5, 1, 12, 0, 0, 3000000, time.UTC)) {
				t.Errorf("row %d (LSN %s): _commit_ts %s, want the LSN's commit time", r, l1, ts.ValueStr(r))
			}
		}
		if !ts.IsNull(2) {
			t.Errorf("row 2 (a new LSN whose time is NULL): _commit_ts %s, want NULL", ts.ValueStr(2))
		}
		rec.Release()
		if err := d.Append(row(l1, 9, 1, commit)); err == nil {
			t.Errorf("operation 9 accepted")
		}
		var zero lsn.LSN
		bad := row(l1, 1, 1, commit)
		bad[0] = zero.Bytes()[:4]
		if err := d.Append(bad); err == nil {
			t.Errorf("short LSN accepted")
		}
		d.Release()
	}
}

// TestReservedBatchesDecodeAlike: from its second batch on, a decoder
// reserves room the size of the batch before (rowDecoder.reserve); every
// batch must still equal the one a fresh decoder makes of the same rows,
// whether it is smaller or larger than the one before, in rows or bytes.
func TestReservedBatchesDecodeAlike(t *testing.T) {
	cases := driverCases()
	var cols []source.Column
	for i, tc := range cases {
		c, err := source.ParseType(tc.decl)
		if err != nil {
			t.Fatal(err)
		}
		c.Name, c.Nullable = "c"+strconv.Itoa(i), true
		cols = append(cols, c)
	}
	r := rand.New(rand.NewPCG(34, 2))
	row := func() []any {
		vals := make([]any, len(cases))
		for i, tc := range cases {
			switch x := tc.in.(type) {
			case string:
				vals[i] = strings.Repeat(x, r.IntN(30))
			case []byte:
				vals[i] = x
				if strings.HasPrefix(tc.decl, "varbinary") || tc.decl == "image" {
					vals[i] = bytes.Repeat(x, r.IntN(30))
				}
			default:
				vals[i] = x
			}
			if r.IntN(4) == 0 {
				vals[i] = nil
			}
		}
		return vals
	}
	d, err := newTableDecoder(cols, decodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	for _, n := range []int{3, 1, 64, 7, 300, 2, 300} {
		fresh, err := newTableDecoder(cols, decodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			vals := row()
			if err := d.Append(vals); err != nil {
				t.Fatal(err)
			}
			if err := fresh.Append(vals); err != nil {
				t.Fatal(err)
			}
		}
		got, want := d.Flush(), fresh.Flush()
		if !array.RecordEqual(got, want) {
			t.Fatalf("batch of %d rows after reserving:\n%v\nfresh decoder:\n%v", n, got, want)
		}
		got.Release()
		want.Release()
		fresh.Release()
	}
}
