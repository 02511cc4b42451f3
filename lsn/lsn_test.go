package lsn_test

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/lsn"
)

func mustParse(t *testing.T, s string) lsn.LSN {
	t.Helper()
	l, err := lsn.Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return l
}

func TestParseAccepts(t *testing.T) {
	want := lsn.LSN{0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x0f, 0x38, 0x00, 0x03}
	for _, in := range []string{
		"0x0000002A00000F380003",
		"0x0000002a00000f380003",
		"0X0000002A00000F380003",
		"0X0000002a00000F380003",
		"0000002A00000F380003",
		"0000002a00000f380003",
		"0000002a:00000f38:0003",
		"0000002A:00000F38:0003",
	} {
		got, err := lsn.Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("Parse(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]lsn.LSN{
		"0x00000000000000000000": {},
		"FFFFFFFFFFFFFFFFFFFF":   {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"0x0123456789abcdefABCD": {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xab, 0xcd},
		"ffffffff:00000000:0001": {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1},
	} {
		if got := mustParse(t, in); got != want {
			t.Errorf("Parse(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"0x",
		"0X",
		"x0000002A00000F380003",
		"0x0000002A00000F38000",    // 19 digits
		"0x0000002A00000F3800030",  // 21 digits
		"0000002A00000F38000",      // 19 bare
		"0000002A00000F3800030",    // 21 bare
		"0x0000002A00000F38000G",   // not hex
		"0x0000002A00000F38000 ",   // trailing space
		" 0x0000002A00000F380003",  // leading space
		"0x0000002A00000F380003\n", // newline
		"0x-000002A00000F380003",
		"0x+000002A00000F380003",
		"00x000002A00000F380003",
		"0x0x00002A00000F380003",
		"0000002a:00000f38:003",     // 8:8:3
		"0000002a:0000f38:00003",    // 8:7:5
		"000002a:00000f38:00003",    // 7:8:5
		"0000002a:00000f38",         // two parts
		"0000002a:00000f38:0003:00", // four parts
		"0x0000002a:00000f38:0003",
		"0000002a:00000f38:000g",
		"0000002a-00000f38-0003",
		"0000002a::00000f380003",
		"０x0000002A00000F380003",      // fullwidth zero
		"0x0000002A00000F38000\u00e9", // non-ASCII
	} {
		_, err := lsn.Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", in)
			continue
		}
		var se *lsn.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error %T is not a *SyntaxError: %v", in, err, err)
			continue
		}
		if se.Input != in {
			t.Errorf("Parse(%q): SyntaxError.Input = %q", in, se.Input)
		}
		if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("Parse(%q): error %q does not quote the input", in, err)
		}
		if se.Reason == "" {
			t.Errorf("Parse(%q): empty Reason", in)
		}
	}
}

func TestStringIsCanonical(t *testing.T) {
	l := lsn.LSN{0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x0f, 0x38, 0x00, 0x03}
	if got, want := l.String(), "0x0000002A00000F380003"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (lsn.LSN{}).String(), "0x00000000000000000000"; got != want {
		t.Errorf("zero String() = %q, want %q", got, want)
	}
	if got, want := lsn.Max.String(), "0xFFFFFFFFFFFFFFFFFFFF"; got != want {
		t.Errorf("Max.String() = %q, want %q", got, want)
	}
	b, err := l.AppendText([]byte("lsn="))
	if err != nil || string(b) != "lsn=0x0000002A00000F380003" {
		t.Errorf("AppendText = %q, %v", b, err)
	}
}

func TestCompare(t *testing.T) {
	a := mustParse(t, "0x0000002A00000F380003")
	b := mustParse(t, "0x0000002A00000F380004")
	c := mustParse(t, "0x0000002B000000000000")
	for _, tc := range []struct {
		x, y lsn.LSN
		want int
	}{
		{a, a, 0}, {a, b, -1}, {b, a, 1}, {b, c, -1}, {c, a, 1},
		{lsn.LSN{}, a, -1}, {lsn.Max, c, 1},
		{lsn.LSN{0x01}, lsn.LSN{0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1},
	} {
		if got := tc.x.Compare(tc.y); got != tc.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
		if got := tc.x.Less(tc.y); got != (tc.want < 0) {
			t.Errorf("%s.Less(%s) = %v", tc.x, tc.y, got)
		}
	}
	if !(lsn.LSN{}).IsZero() || a.IsZero() {
		t.Error("IsZero is wrong")
	}
	bs := a.Bytes()
	bs[0] = 0xee
	if a[0] != 0 {
		t.Error("Bytes() shares memory with the LSN")
	}
}

func TestNextPrev(t *testing.T) {
	for _, tc := range []struct{ from, next string }{
		{"0x00000000000000000000", "0x00000000000000000001"},
		{"0x0000002A00000F380003", "0x0000002A00000F380004"},
		{"0x0000002A00000F3800FF", "0x0000002A00000F380100"}, // carry one byte
		{"0x0000002A00000F38FFFF", "0x0000002A00000F390000"}, // across the slot
		{"0x0000002AFFFFFFFFFFFF", "0x0000002B000000000000"}, // across block and slot
		{"0x00FFFFFFFFFFFFFFFFFF", "0x01000000000000000000"}, // all but the first byte
		{"0xFFFFFFFFFFFFFFFFFFFE", "0xFFFFFFFFFFFFFFFFFFFF"}, // up to Max
		{"0x7FFFFFFFFFFFFFFFFFFF", "0x80000000000000000000"}, // sign bit means nothing
		{"0x000000000000000000FF", "0x00000000000000000100"}, // one carry
		{"0x0000000000000000FFFF", "0x00000000000000010000"}, // two carries
	} {
		from, next := mustParse(t, tc.from), mustParse(t, tc.next)
		got, err := from.Next()
		if err != nil || got != next {
			t.Errorf("%s.Next() = %s, %v; want %s", from, got, err, next)
		}
		got, err = next.Prev()
		if err != nil || got != from {
			t.Errorf("%s.Prev() = %s, %v; want %s", next, got, err, from)
		}
	}
	if got, err := lsn.Max.Next(); !errors.Is(err, lsn.ErrOutOfRange) || got != (lsn.LSN{}) {
		t.Errorf("Max.Next() = %s, %v; want ErrOutOfRange", got, err)
	}
	if got, err := (lsn.LSN{}).Prev(); !errors.Is(err, lsn.ErrOutOfRange) || got != (lsn.LSN{}) {
		t.Errorf("zero.Prev() = %s, %v; want ErrOutOfRange", got, err)
	}
	// Next must not change its receiver's copy (value semantics).
	a := mustParse(t, "0x000000000000000000FF")
	if _, err := a.Next(); err != nil || a.String() != "0x000000000000000000FF" {
		t.Errorf("Next changed its receiver: %s", a)
	}
}

func TestFromBytes(t *testing.T) {
	b := []byte{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}
	l, err := lsn.FromBytes(b)
	if err != nil || l.String() != "0x0000002A00000F380003" {
		t.Fatalf("FromBytes = %s, %v", l, err)
	}
	b[9] = 9
	if l[9] != 3 {
		t.Error("FromBytes shares memory with its input")
	}
	for _, n := range []int{0, 9, 11, 16} {
		if _, err := lsn.FromBytes(make([]byte, n)); err == nil {
			t.Errorf("FromBytes(%d bytes) succeeded", n)
		}
	}
}

func TestScan(t *testing.T) {
	want := lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}
	for _, src := range []any{
		[]byte{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3},
		"0x0000002A00000F380003",
		"0000002a:00000f38:0003",
		"0000002a00000f380003",
	} {
		var l lsn.LSN
		if err := l.Scan(src); err != nil || l != want {
			t.Errorf("Scan(%#v) = %s, %v; want %s", src, l, err, want)
		}
	}
	for _, src := range []any{
		nil,
		[]byte{},
		[]byte{1, 2, 3},
		make([]byte, 11),
		"0x12",
		"not an lsn",
		int64(42),
		3.5,
		true,
	} {
		l := want
		if err := l.Scan(src); err == nil {
			t.Errorf("Scan(%#v) succeeded with %s", src, l)
		} else if l != want {
			t.Errorf("failed Scan(%#v) changed the LSN to %s", src, l)
		}
	}
	var l lsn.LSN
	var _ sql.Scanner = &l
	var _ driver.Valuer = l
}

func TestValue(t *testing.T) {
	l := lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}
	v, err := l.Value()
	if err != nil {
		t.Fatal(err)
	}
	b, ok := v.([]byte)
	if !ok || !bytes.Equal(b, l[:]) {
		t.Fatalf("Value() = %#v", v)
	}
	if !driver.IsValue(v) {
		t.Errorf("Value() %T is not a driver.Value", v)
	}
	// And it scans back.
	var back lsn.LSN
	if err := back.Scan(v); err != nil || back != l {
		t.Errorf("Scan(Value()) = %s, %v", back, err)
	}
}

func TestNullLSN(t *testing.T) {
	l := lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}
	for _, tc := range []struct {
		src   any
		want  lsn.NullLSN
		isErr bool
	}{
		{nil, lsn.NullLSN{}, false},
		{l[:], lsn.NullLSN{LSN: l, Valid: true}, false},
		{l.String(), lsn.NullLSN{LSN: l, Valid: true}, false},
		{make([]byte, 10), lsn.NullLSN{}, false},         // all-zero: no valid LSN
		{"0x00000000000000000000", lsn.NullLSN{}, false}, // same as text
		{[]byte{1}, lsn.NullLSN{}, true},
		{"junk", lsn.NullLSN{}, true},
		{int64(1), lsn.NullLSN{}, true},
	} {
		n := lsn.NullLSN{LSN: lsn.Max, Valid: true}
		err := n.Scan(tc.src)
		if (err != nil) != tc.isErr {
			t.Errorf("NullLSN.Scan(%#v) error = %v, want error %v", tc.src, err, tc.isErr)
		}
		if n != tc.want {
			t.Errorf("NullLSN.Scan(%#v) = %+v, want %+v", tc.src, n, tc.want)
		}
	}
	if v, err := (lsn.NullLSN{}).Value(); v != nil || err != nil {
		t.Errorf("invalid NullLSN.Value() = %#v, %v", v, err)
	}
	v, err := lsn.NullLSN{LSN: l, Valid: true}.Value()
	if b, ok := v.([]byte); err != nil || !ok || !bytes.Equal(b, l[:]) {
		t.Errorf("valid NullLSN.Value() = %#v, %v", v, err)
	}
}

func TestTextAndJSON(t *testing.T) {
	l := lsn.LSN{0, 0, 0, 0x2a, 0, 0, 0x0f, 0x38, 0, 3}
	txt, err := l.MarshalText()
	if err != nil || string(txt) != "0x0000002A00000F380003" {
		t.Fatalf("MarshalText = %q, %v", txt, err)
	}
	var back lsn.LSN
	if err := back.UnmarshalText(txt); err != nil || back != l {
		t.Fatalf("UnmarshalText = %s, %v", back, err)
	}
	if err := back.UnmarshalText([]byte("0000002a:00000f38:0004")); err != nil || back.String() != "0x0000002A00000F380004" {
		t.Errorf("UnmarshalText(colon form) = %s, %v", back, err)
	}
	keep := back
	if err := back.UnmarshalText([]byte("nope")); err == nil || back != keep {
		t.Errorf("UnmarshalText(nope) = %s, %v", back, err)
	}

	type doc struct {
		At   lsn.LSN            `json:"at"`
		Seen []lsn.LSN          `json:"seen"`
		ByID map[string]lsn.LSN `json:"by_id"`
	}
	in := doc{At: l, Seen: []lsn.LSN{{}, lsn.Max}, ByID: map[string]lsn.LSN{"x": l}}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	wantJS := `{"at":"0x0000002A00000F380003","seen":["0x00000000000000000000","0xFFFFFFFFFFFFFFFFFFFF"],"by_id":{"x":"0x0000002A00000F380003"}}`
	if string(js) != wantJS {
		t.Errorf("json = %s\nwant   %s", js, wantJS)
	}
	var out doc
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	if out.At != in.At || len(out.Seen) != 2 || out.Seen[1] != lsn.Max || out.ByID["x"] != l {
		t.Errorf("json round trip = %+v", out)
	}
	var bad doc
	err = json.Unmarshal([]byte(`{"at":"0x12"}`), &bad)
	var se *lsn.SyntaxError
	if !errors.As(err, &se) || se.Input != "0x12" {
		t.Errorf("json with a bad LSN: %v", err)
	}
	// As a map key, LSNs are text too.
	m := map[lsn.LSN]int{l: 1}
	js, err = json.Marshal(m)
	if err != nil || string(js) != `{"0x0000002A00000F380003":1}` {
		t.Errorf("map key json = %s, %v", js, err)
	}
}
