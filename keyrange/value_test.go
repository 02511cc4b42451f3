package keyrange_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// SQL Server's uniqueidentifier order, as measured on SQL Server (and as
// .NET's SqlGuid compares): a single byte set in each position of the
// string form, ascending.
func TestUUIDOrderIsSQLServers(t *testing.T) {
	ascending := []string{
		"00000000-0000-0000-0000-000000000000",
		"01000000-0000-0000-0000-000000000000",
		"10000000-0000-0000-0000-000000000000",
		"00010000-0000-0000-0000-000000000000",
		"00100000-0000-0000-0000-000000000000",
		"00000100-0000-0000-0000-000000000000",
		"00001000-0000-0000-0000-000000000000",
		"00000001-0000-0000-0000-000000000000",
		"00000010-0000-0000-0000-000000000000",
		"00000000-0100-0000-0000-000000000000",
		"00000000-1000-0000-0000-000000000000",
		"00000000-0001-0000-0000-000000000000",
		"00000000-0010-0000-0000-000000000000",
		"00000000-0000-0100-0000-000000000000",
		"00000000-0000-1000-0000-000000000000",
		"00000000-0000-0001-0000-000000000000",
		"00000000-0000-0010-0000-000000000000",
		"00000000-0000-0000-0001-000000000000",
		"00000000-0000-0000-0010-000000000000",
		"00000000-0000-0000-0100-000000000000",
		"00000000-0000-0000-1000-000000000000",
		"00000000-0000-0000-0000-000000000001",
		"00000000-0000-0000-0000-000000000010",
		"00000000-0000-0000-0000-000000000100",
		"00000000-0000-0000-0000-000000001000",
		"00000000-0000-0000-0000-000000010000",
		"00000000-0000-0000-0000-000000100000",
		"00000000-0000-0000-0000-000001000000",
		"00000000-0000-0000-0000-000010000000",
		"00000000-0000-0000-0000-000100000000",
		"00000000-0000-0000-0000-001000000000",
		"00000000-0000-0000-0000-010000000000",
		"00000000-0000-0000-0000-100000000000",
	}
	col := keyrange.Column{Name: "u", Kind: keyrange.KindUUID}
	var us []keyrange.UUID
	for _, s := range ascending {
		u, err := keyrange.ParseUUID(strings.ToUpper(s))
		if err != nil {
			t.Fatal(err)
		}
		if u.String() != s {
			t.Fatalf("ParseUUID(%q).String() = %q", s, u)
		}
		us = append(us, u)
	}
	for i := range us {
		for j := range us {
			c, err := keyrange.Compare(col, us[i], us[j])
			if err != nil {
				t.Fatal(err)
			}
			if want := cmpInt(i, j); c != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", us[i], us[j], c, want)
			}
		}
	}
	// The driver's 16 bytes: SQL Server's mixed-endian layout.
	u, _ := keyrange.ParseUUID("00112233-4455-6677-8899-aabbccddeeff")
	raw := []byte{0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	if got := u.SQLServerBytes(); !slices.Equal(got, raw) {
		t.Errorf("SQLServerBytes = % x", got)
	}
	if back, err := keyrange.UUIDFromSQLServer(raw); err != nil || back != u {
		t.Errorf("UUIDFromSQLServer = %s, %v", back, err)
	}
	if _, err := keyrange.UUIDFromSQLServer(raw[:15]); err == nil {
		t.Error("UUIDFromSQLServer(15 bytes) succeeded")
	}
	for _, bad := range []string{"", "00112233445566778899aabbccddeeff", "00112233-4455-6677-8899-aabbccddeefg", "{00112233-4455-6677-8899-aabbccddeeff}", "00112233-4455-6677-8899_aabbccddeeff"} {
		if _, err := keyrange.ParseUUID(bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseUUID(%q): %v", bad, err)
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCompareStrings(t *testing.T) {
	ci := keyrange.Column{Name: "s", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("SQL_Latin1_General_CP1_CI_AS")}
	cs := keyrange.Column{Name: "s", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_100_CS_AS")}
	bin := keyrange.Column{Name: "s", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_BIN2")}
	for _, tc := range []struct {
		col  keyrange.Column
		a, b any
		want int
	}{
		{ci, "n", "N", 0},
		{cs, "n", "N", 1},
		{bin, "n", "N", 1},
		{ci, "a", "B", -1},
		{cs, "a", "B", 1},
		{ci, "a", "a  ", 0},
		{cs, "a", "a  ", 0},
		{bin, "a", "a ", 0},
		{cs, "", "   ", 0},
		{cs, "a ", "a", 0},
		// Padding, not trimming: a character below the space sorts the
		// longer string first.
		{cs, "a\t", "a", -1},
		{cs, "a", "a\x01", 1},
		{cs, "a \t", "a", -1},
		{cs, "a  b", "a", 1},
		{cs, "a", "ab", -1},
		{ci, "É", "é", 0},
		{ci, "ÉTÉ ", "été", 0},
		{keyrange.Column{}, nil, nil, 0},
		{cs, nil, "", -1},
		{cs, "", nil, 1},
	} {
		col := tc.col
		if tc.col.Kind == 0 {
			col = cs
		}
		got, err := keyrange.Compare(col, tc.a, tc.b)
		if err != nil || got != tc.want {
			t.Errorf("Compare(%s, %q, %q) = %d, %v; want %d", col.Collation.Name, tc.a, tc.b, got, err, tc.want)
		}
		back, _ := keyrange.Compare(col, tc.b, tc.a)
		if back != -got {
			t.Errorf("Compare is not antisymmetric on %q, %q", tc.a, tc.b)
		}
	}
	if ci := keyrange.ParseCollation("Latin1_General_CI_AS"); !ci.CaseInsensitive || ci.Name != "Latin1_General_CI_AS" {
		t.Errorf("ParseCollation CI = %+v", ci)
	}
	for _, name := range []string{"SQL_Latin1_General_CP1_CI_AS", "latin1_general_ci_ai", "Latin1_General_100_CI_AS_SC_UTF8", "Japanese_XJIS_140_CI_AS_KS_WS"} {
		if !keyrange.ParseCollation(name).CaseInsensitive {
			t.Errorf("ParseCollation(%q) is case-sensitive", name)
		}
	}
	for _, name := range []string{"Latin1_General_CS_AS", "Latin1_General_BIN", "Latin1_General_BIN2", "", "Latin1_General_100_BIN2_UTF8", "X_CIRCLE_CS", "SQL_Latin1_General_CP1_CS_AS"} {
		if keyrange.ParseCollation(name).CaseInsensitive {
			t.Errorf("ParseCollation(%q) is case-insensitive", name)
		}
	}
}

func TestCompareOtherKinds(t *testing.T) {
	dec := keyrange.Column{Name: "d", Kind: keyrange.KindDecimal}
	for _, tc := range []struct {
		a, b keyrange.Decimal
		want int
	}{
		{"1.0", "1.00", 0}, {"1", "1.", 0}, {"0.5", ".5", 0}, {"-0", "0", 0}, {"-0.000", "0", 0}, {"+1", "1", 0},
		{"007", "7", 0}, {"9.99", "10", -1}, {"-10", "-9.99", -1}, {"-1", "1", -1}, {"0.49", "0.5", -1},
		{"12345678901234567890123456789012.345678", "12345678901234567890123456789012.345679", -1},
		{"-0.5", "0", -1}, {"100", "99.999", 1},
	} {
		got, err := keyrange.Compare(dec, tc.a, tc.b)
		if err != nil || got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d", tc.a, tc.b, got, err, tc.want)
		}
		if back, _ := keyrange.Compare(dec, tc.b, tc.a); back != -tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.b, tc.a, back, -tc.want)
		}
		ka, _ := keyrange.CollationKey(dec, tc.a)
		kb, _ := keyrange.CollationKey(dec, tc.b)
		if (ka == kb) != (tc.want == 0) {
			t.Errorf("CollationKey(%q) = %q, CollationKey(%q) = %q", tc.a, ka, tc.b, kb)
		}
	}
	for _, bad := range []keyrange.Decimal{"", ".", "-", "1e5", "1e999999999", "0x10", "1/2", "1.2.3", " 1", "1 ", "Inf", "NaN", "--1", "١"} {
		if _, err := keyrange.Compare(dec, bad, keyrange.Decimal("1")); err == nil {
			t.Errorf("Compare(%q) succeeded", bad)
		}
		if _, err := keyrange.CollationKey(dec, bad); err == nil {
			t.Errorf("CollationKey(%q) succeeded", bad)
		}
	}

	f := keyrange.Column{Name: "f", Kind: keyrange.KindFloat}
	if c, _ := keyrange.Compare(f, math.Copysign(0, -1), 0.0); c != 0 {
		t.Errorf("-0 vs 0 = %d", c)
	}
	k1, _ := keyrange.CollationKey(f, math.Copysign(0, -1))
	k2, _ := keyrange.CollationKey(f, 0.0)
	if k1 != k2 {
		t.Errorf("CollationKey(-0) = %q, CollationKey(0) = %q", k1, k2)
	}

	b := keyrange.Column{Name: "b", Kind: keyrange.KindBool}
	if c, _ := keyrange.Compare(b, false, true); c != -1 {
		t.Errorf("false vs true = %d", c)
	}
	dto := keyrange.Column{Name: "t", Kind: keyrange.KindDateTimeOffset}
	t1 := time.Date(2026, 1, 1, 12, 0, 0, 100, time.UTC)
	t2 := t1.In(time.FixedZone("", -3*3600))
	if c, _ := keyrange.Compare(dto, t1, t2); c != 0 {
		t.Errorf("same instant, other offset = %d", c)
	}
	if c, _ := keyrange.Compare(dto, t1, t1.Add(100)); c != -1 {
		t.Errorf("100 ns later = %d", c)
	}
	bs := keyrange.Column{Name: "b", Kind: keyrange.KindBytes}
	if c, _ := keyrange.Compare(bs, []byte{0}, []byte{0, 0}); c != -1 {
		t.Errorf("binary is not padded: 0x00 vs 0x0000 = %d", c)
	}

	// Wrong Go types, unknown kinds.
	for _, tc := range []struct {
		col  keyrange.Column
		a, b any
	}{
		{keyrange.Column{Kind: keyrange.KindInt}, 1, int64(1)},
		{keyrange.Column{Kind: keyrange.KindInt}, int64(1), "1"},
		{keyrange.Column{Kind: keyrange.KindString}, []byte("a"), "a"},
		{keyrange.Column{Kind: keyrange.KindDecimal}, "1", keyrange.Decimal("1")},
		{keyrange.Column{Kind: keyrange.KindUUID}, [16]byte{}, keyrange.UUID{}},
		{keyrange.Column{Kind: keyrange.KindDate}, "2026-01-01", time.Time{}},
		{keyrange.Column{Kind: keyrange.KindUnsupported}, 1, 1},
		{keyrange.Column{Kind: 77}, 1, 1},
	} {
		if _, err := keyrange.Compare(tc.col, tc.a, tc.b); err == nil {
			t.Errorf("Compare(%s, %#v, %#v) succeeded", tc.col.Kind, tc.a, tc.b)
		}
		if _, err := keyrange.CompareTuples([]keyrange.Column{tc.col}, keyrange.Tuple{tc.a}, keyrange.Tuple{tc.b}); err == nil {
			t.Errorf("CompareTuples(%s, %#v, %#v) succeeded", tc.col.Kind, tc.a, tc.b)
		}
	}
	if _, err := keyrange.CompareTuples([]keyrange.Column{{Kind: keyrange.KindInt}}, keyrange.Tuple{}, keyrange.Tuple{int64(1)}); err == nil {
		t.Error("CompareTuples with a short key succeeded")
	}
	if keyrange.KindDateTimeOffset.String() != "datetimeoffset" || keyrange.Kind(99).String() != "kind(99)" {
		t.Error("Kind.String")
	}
}

// CollationKey is equal exactly when Compare says equal, and Compare is a
// total preorder (transitive), on random values of every generated kind.
func TestCollationKeyMatchesCompare(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	g := gen{r}
	for range testCases(t) {
		col := g.cols()[0]
		vals := make([]any, 12)
		for i := range vals {
			vals[i] = g.value(col, 1000)
			if r.IntN(3) == 0 && i > 0 {
				vals[i] = g.twin(col, vals[i-1])
			}
		}
		for _, a := range vals {
			for _, b := range vals {
				c, err := keyrange.Compare(col, a, b)
				if err != nil {
					t.Fatal(err)
				}
				ka, _ := keyrange.CollationKey(col, a)
				kb, _ := keyrange.CollationKey(col, b)
				if (ka == kb) != (c == 0) {
					t.Fatalf("%s: Compare(%s, %s) = %d but CollationKeys %q, %q", col.Kind, fmtValue(a), fmtValue(b), c, ka, kb)
				}
				for _, x := range vals {
					c2, _ := keyrange.Compare(col, b, x)
					c3, _ := keyrange.Compare(col, a, x)
					if c <= 0 && c2 <= 0 && c3 > 0 {
						t.Fatalf("%s: not transitive: %s <= %s <= %s but %s > %s", col.Kind, fmtValue(a), fmtValue(b), fmtValue(x), fmtValue(a), fmtValue(x))
					}
				}
			}
		}
	}
}

func TestTupleJSON(t *testing.T) {
	u, _ := keyrange.ParseUUID("00112233-4455-6677-8899-aabbccddeeff")
	ts := time.Date(2026, 9, 29, 12, 38, 28, 123456700, time.UTC)
	tz := time.Date(2026, 9, 29, 12, 38, 28, 100, time.FixedZone("", -3*3600))
	in := keyrange.Tuple{nil, int64(math.MinInt64), int64(math.MaxInt64), true, false, keyrange.Decimal("-12.3400"), 0.1, math.Inf(-1),
		"", "n  ", "é\x00'\"", []byte{}, []byte{0, 0xff}, ts, tz, u}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out keyrange.Tuple
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	assertSameTuple(t, in, out)
	// Inside a Range, nil bounds stay nil (open).
	rs := []keyrange.Range{{Index: 0, Upper: keyrange.Tuple{int64(5), "a"}}, {Index: 1, Lower: keyrange.Tuple{int64(5), "a"}}}
	js, err = json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"index":0,"lower":null,"upper":[{"int":"5"},{"str":"a"}]},{"index":1,"lower":[{"int":"5"},{"str":"a"}],"upper":null}]`
	if string(js) != want {
		t.Errorf("ranges JSON = %s\nwant %s", js, want)
	}
	var back []keyrange.Range
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back[0].Lower != nil || back[1].Upper != nil || back[0].Upper[0] != int64(5) || back[1].Lower[1] != "a" {
		t.Errorf("ranges round trip = %#v", back)
	}

	for _, bad := range []string{
		`{}`, `[{}]`, `[{"int":"1","str":"a"}]`, `[{"int":"x"}]`, `[{"int":"99999999999999999999"}]`, `[{"dec":"1e9"}]`,
		`[{"float":"one"}]`, `[{"hex":"zz"}]`, `[{"time":"yesterday"}]`, `[{"uuid":"nope"}]`, `[1]`, `"a"`, `[`,
	} {
		var tu keyrange.Tuple
		if err := json.Unmarshal([]byte(bad), &tu); err == nil {
			t.Errorf("Unmarshal(%s) = %#v, want an error", bad, tu)
		}
	}
	for _, v := range []any{int32(1), 1, uint64(1), struct{}{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 30))} {
		if js, err := json.Marshal(keyrange.Tuple{v}); err == nil {
			t.Errorf("Marshal(%#v) = %s, want an error", v, js)
		}
	}
}

// assertSameTuple checks a JSON round trip: same Go types, same values
// (times the same instant and offset, NaN as NaN).
func assertSameTuple(t testing.TB, in, out keyrange.Tuple) {
	t.Helper()
	if len(in) != len(out) || (in == nil) != (out == nil) {
		t.Fatalf("round trip: %#v became %#v", in, out)
	}
	for i := range in {
		a, b := in[i], out[i]
		switch x := a.(type) {
		case time.Time:
			y, ok := b.(time.Time)
			_, ox := x.Zone()
			if ok {
				_, oy := y.Zone()
				ok = x.Equal(y) && ox == oy
			}
			if !ok {
				t.Fatalf("value %d: %#v became %#v", i, a, b)
			}
		case float64:
			y, ok := b.(float64)
			// NaN (no SQL Server value) stays NaN, sign and payload aside.
			if !ok || !(math.IsNaN(x) && math.IsNaN(y) || x == y && math.Signbit(x) == math.Signbit(y)) {
				t.Fatalf("value %d: %#v became %#v", i, a, b)
			}
		case []byte:
			y, ok := b.([]byte)
			if !ok || !slices.Equal(x, y) || y == nil {
				t.Fatalf("value %d: %#v became %#v", i, a, b)
			}
		default:
			if a != b {
				t.Fatalf("value %d: %#v (%T) became %#v (%T)", i, a, a, b, b)
			}
		}
	}
}

func TestPieceJSON(t *testing.T) {
	p := keyrange.Piece{
		Eq:    []any{nil, int64(7), "eu"},
		Lower: &keyrange.Cond{Value: keyrange.Decimal("1.50"), Inclusive: true},
		Upper: &keyrange.Cond{Value: keyrange.Decimal("9")},
		Guard: &keyrange.Guard{From: 1, Above: &keyrange.Cond{Value: int64(3)}},
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"eq":[null,{"int":"7"},{"str":"eu"}],"lower":{"value":[{"dec":"1.50"}],"inclusive":true},"upper":{"value":[{"dec":"9"}],"inclusive":false},"guard":{"from":1,"above":{"value":[{"int":"3"}],"inclusive":false}}}`
	if string(js) != want {
		t.Errorf("Piece JSON = %s\nwant %s", js, want)
	}
	var back keyrange.Piece
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Eq[1] != int64(7) || back.Lower.Value != keyrange.Decimal("1.50") || back.Guard.Above.Value != int64(3) || back.Upper.Inclusive {
		t.Errorf("Piece JSON round trip = %#v", back)
	}
	for _, bad := range []string{`{"lower":{"value":[]}}`, `{"lower":{"value":[{"int":"1"},{"int":"2"}]}}`, `{"lower":{"value":[{"int":"x"}]}}`, `{"eq":3}`} {
		var p keyrange.Piece
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("Unmarshal(%s) = %#v, want an error", bad, p)
		}
	}
}

// TestCertainKeyIsCertainlyEqual: CertainKey groups two strings exactly
// when Collation.CertainlyEqual holds, over random strings of letters
// whose case some collations fold (Turkish 'I' and 'i' among them),
// trailing spaces and non-ASCII letters, under collations that fold ASCII
// case letter by letter, that tie letters, that are case-sensitive or
// binary.
func TestCertainKeyIsCertainlyEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	word := func() string {
		letters := []string{"a", "A", "i", "I", "ı", "İ", "é", "É", " ", "ß"}
		var b strings.Builder
		for range r.IntN(4) {
			b.WriteString(letters[r.IntN(len(letters))])
		}
		return b.String()
	}
	for _, name := range []string{"Latin1_General_CI_AS", "SQL_Latin1_General_CP1_CI_AI", "Turkish_CI_AS", "Danish_Norwegian_CI_AI", "Latin1_General_CS_AS", "Latin1_General_BIN2"} {
		c := keyrange.Column{Name: "k", Kind: keyrange.KindString, Collation: keyrange.ParseCollation(name)}
		for range 2000 {
			x, y := word(), word()
			kx, err := keyrange.CertainKey(c, x)
			if err != nil {
				t.Fatal(err)
			}
			ky, _ := keyrange.CertainKey(c, y)
			if (kx == ky) != c.Collation.CertainlyEqual(x, y) {
				t.Fatalf("%s: %q and %q: CertainKey equal %v, CertainlyEqual %v", name, x, y, kx == ky, !(kx == ky))
			}
		}
	}
}
