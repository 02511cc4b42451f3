package tdsserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/golang-sql/civil"
)

// Value encoding for ROW and NBCROW (MS-TDS 2.2.7.20, 2.2.7.15; the value
// forms are TYPE_VARBYTE, MS-TDS 2.2.5.2.3, and the bytes of each type
// those of MS-TDS 2.2.5.5.1, System Data Type Values). Every encoder was checked
// against the decoder go-mssqldb v1.11.2 uses for the same type id
// (types.go: readFixedType, readByteLenTypeWithEncoding, readShortLenType,
// readLongLenType, readPLPType, readVariantTypeWithEncoding).
//
// The server never rounds: a value the column cannot hold exactly (a
// decimal with more digits, a time with more precision than time(n), a
// string longer than the column or outside its code page) is an error.
// The one exception is datetime, whose 1/300 s ticks no Go value hits
// exactly: it is rounded to the nearest tick, as SQL Server's own
// conversion to datetime does.

// appendValue appends the non-NULL value v of a column of type t.
func (t *colType) appendValue(b []byte, v any) ([]byte, error) {
	switch t.kind {
	case kBit:
		x, ok := v.(bool)
		if !ok {
			return b, typeErr(v, "bool")
		}
		b = t.lenPrefix(b)
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case kTinyint, kSmallint, kInt, kBigint:
		n, err := toInt64(v)
		if err != nil {
			return b, err
		}
		lo, hi := intRange(t.kind)
		if n < lo || n > hi {
			return b, fmt.Errorf("%d outside %d..%d", n, lo, hi)
		}
		b = t.lenPrefix(b)
		switch t.length {
		case 1:
			return append(b, byte(n)), nil
		case 2:
			return appendU16(b, uint16(n)), nil
		case 4:
			return appendU32(b, uint32(n)), nil
		}
		return appendU64(b, uint64(n)), nil
	case kDecimal:
		s, err := decimalText(v)
		if err != nil {
			return b, err
		}
		neg, hi, lo, err := parseDecimal(s, int(t.prec), int(t.scale))
		if err != nil {
			return b, err
		}
		b = append(b, byte(t.length))
		if neg {
			b = append(b, 0) // sign: 0 negative, 1 positive (MS-TDS 2.2.5.5.1, Decimal/Numeric)
		} else {
			b = append(b, 1)
		}
		var mag [16]byte
		for i := range 8 {
			mag[i], mag[8+i] = byte(lo>>(8*i)), byte(hi>>(8*i))
		}
		return append(b, mag[:t.length-1]...), nil
	case kMoney, kSmallmoney:
		s, err := decimalText(v)
		if err != nil {
			return b, err
		}
		n, err := parseMoney(s, t.kind == kSmallmoney)
		if err != nil {
			return b, err
		}
		b = t.lenPrefix(b)
		if t.kind == kSmallmoney {
			return appendU32(b, uint32(n)), nil
		}
		// money: the high 4 bytes first, each half little-endian
		// (MS-TDS 2.2.5.5.1, Fixed-Point Numbers; go-mssqldb decodeMoney).
		return appendU32(appendU32(b, uint32(uint64(n)>>32)), uint32(n)), nil
	case kFloat:
		x, ok := v.(float64)
		if !ok {
			if f, ok32 := v.(float32); ok32 {
				x, ok = float64(f), true
			}
		}
		if !ok {
			return b, typeErr(v, "float64")
		}
		return appendU64(t.lenPrefix(b), math.Float64bits(x)), nil
	case kReal:
		var x float32
		switch f := v.(type) {
		case float32:
			x = f
		case float64:
			x = float32(f)
			if float64(x) != f && !math.IsNaN(f) {
				return b, fmt.Errorf("%v is not exactly a real (float32)", f)
			}
		default:
			return b, typeErr(v, "float64 or float32")
		}
		return appendU32(t.lenPrefix(b), math.Float32bits(x)), nil
	case kDate:
		w, err := wallOf(v, true, false)
		if err != nil {
			return b, err
		}
		if w.hasClock && (w.h|w.mi|w.s|w.ns) != 0 {
			return b, fmt.Errorf("%v has a time of day; a date holds none", v)
		}
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		return append(b, 3, byte(d), byte(d>>8), byte(d>>16)), nil
	case kTime:
		w, err := wallOf(v, false, true)
		if err != nil {
			return b, err
		}
		b = append(b, byte(t.length))
		return w.appendClock(b, int(t.scale))
	case kDatetime2:
		w, err := wallOf(v, true, true)
		if err != nil {
			return b, err
		}
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		b = append(b, byte(t.length))
		if b, err = w.appendClock(b, int(t.scale)); err != nil {
			return b, err
		}
		return append(b, byte(d), byte(d>>8), byte(d>>16)), nil
	case kDatetimeoffset:
		tm, ok := v.(time.Time)
		if !ok {
			return b, typeErr(v, "time.Time")
		}
		_, off := tm.Zone()
		if off%60 != 0 || off < -14*3600 || off > 14*3600 {
			return b, fmt.Errorf("offset %ds of %v is not whole minutes within ±14:00", off, tm)
		}
		// Date and time are UTC, then the offset in minutes, within
		// ±840 (MS-TDS 2.2.5.5.1, Date/Times; go-mssqldb decodeDateTimeOffset).
		w := wallOfTime(tm.UTC())
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		b = append(b, byte(t.length))
		if b, err = w.appendClock(b, int(t.scale)); err != nil {
			return b, err
		}
		return appendU16(append(b, byte(d), byte(d>>8), byte(d>>16)), uint16(int16(off/60))), nil
	case kDatetime:
		w, err := wallOf(v, true, true)
		if err != nil {
			return b, err
		}
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		d -= days0001To1900
		// Days since 1900 and 1/300 s ticks, nearest, half up (MS-TDS
		// 2.2.5.5.1, Date/Times).
		ticks := int64(w.h*3600+w.mi*60+w.s)*300 + (int64(w.ns)*3+5_000_000)/10_000_000
		if ticks == 300*86400 {
			d, ticks = d+1, 0
		}
		if d < -53690 || d > 2958463 { // 1753-01-01 .. 9999-12-31
			return b, fmt.Errorf("%v outside datetime's 1753-01-01..9999-12-31", v)
		}
		return appendU32(appendU32(t.lenPrefix(b), uint32(int32(d))), uint32(ticks)), nil
	case kSmalldatetime:
		w, err := wallOf(v, true, true)
		if err != nil {
			return b, err
		}
		if w.s != 0 || w.ns != 0 {
			return b, fmt.Errorf("%v is not a whole minute; smalldatetime holds minutes", v)
		}
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		d -= days0001To1900
		if d < 0 || d > 65535 {
			return b, fmt.Errorf("%v outside smalldatetime's 1900-01-01..2079-06-06", v)
		}
		return appendU16(appendU16(t.lenPrefix(b), uint16(d)), uint16(w.h*60+w.mi)), nil
	case kChar, kText:
		h, b := len(b), t.reserveHeader(b)
		start := len(b)
		b, err := t.cs.appendStored(b, v)
		if err != nil {
			return b[:h], err
		}
		n := len(b) - start
		if t.kind == kChar && t.length > 0 && n > t.length {
			return b[:h], fmt.Errorf("%d bytes in code page %d, longer than %s", n, t.cs.codePage, t.decl)
		}
		for ; t.fixedLen && n < t.length; n++ {
			b = append(b, ' ') // char(n) is padded with spaces
		}
		return t.finishHeader(b, h)
	case kNChar, kNText, kXML:
		s, ok := v.(string)
		if !ok {
			return b, typeErr(v, "string")
		}
		h, b := len(b), t.reserveHeader(b)
		start := len(b)
		b, err := appendUTF16(b, s)
		if err != nil {
			return b[:h], err
		}
		n := len(b) - start
		if t.kind == kNChar && t.length > 0 && n > t.length {
			return b[:h], fmt.Errorf("%d UTF-16 units, longer than %s", n/2, t.decl)
		}
		for ; t.fixedLen && n < t.length; n += 2 {
			b = append(b, ' ', 0)
		}
		return t.finishHeader(b, h)
	case kBinary, kImage, kUDT:
		p, ok := v.([]byte)
		if !ok {
			return b, typeErr(v, "[]byte")
		}
		if t.kind == kBinary && t.length > 0 && len(p) > t.length {
			return b, fmt.Errorf("%d bytes, longer than %s", len(p), t.decl)
		}
		h, b := len(b), t.reserveHeader(b)
		b = append(b, p...)
		for i := len(p); t.fixedLen && i < t.length; i++ {
			b = append(b, 0) // binary(n) is padded with zeros
		}
		return t.finishHeader(b, h)
	case kGUID:
		var g []byte
		switch x := v.(type) {
		case []byte:
			g = x
		case [16]byte:
			g = x[:]
		default:
			return b, typeErr(v, "[]byte of 16 wire bytes")
		}
		if len(g) != 16 {
			return b, fmt.Errorf("uniqueidentifier needs 16 bytes, got %d", len(g))
		}
		return append(append(b, 16), g...), nil
	case kVariant:
		return t.appendVariant(b, v)
	}
	return b, fmt.Errorf("type %s cannot be encoded", t.decl)
}

// lenPrefix writes the BYTELEN length of an N type; fixed-length ids have
// none (MS-TDS 2.2.5.2.3).
func (t *colType) lenPrefix(b []byte) []byte {
	switch t.id {
	case typeIntN, typeBitN, typeFltN, typeMoneyN, typeDateTimeN:
		return append(b, byte(t.length))
	}
	return b
}

// Header sizes of the length-prefixed value forms (MS-TDS 2.2.5.2.3): a
// USHORT length; a PLP stream's ULONGLONG total and first chunk length;
// text/ntext/image's TEXTPTR (length byte and 16 bytes), 8-byte timestamp
// and LONG length (MS-TDS 2.2.7.20; go-mssqldb readLongLenType).
const (
	shortHeader = 2
	plpHeader   = 8 + 4
	textHeader  = 1 + 16 + 8 + 4
)

func (t *colType) headerSize() int {
	switch {
	case t.kind == kText || t.kind == kNText || t.kind == kImage:
		return textHeader
	case t.plp():
		return plpHeader
	}
	return shortHeader
}

// reserveHeader appends room for the value's length header.
func (t *colType) reserveHeader(b []byte) []byte {
	var zero [textHeader]byte
	return append(b, zero[:t.headerSize()]...)
}

// finishHeader fills the header reserved at b[h:] for the data after it.
// A PLP value goes as one chunk and the terminator; an empty one is the
// total 0 and the terminator alone.
func (t *colType) finishHeader(b []byte, h int) ([]byte, error) {
	hs := t.headerSize()
	n := len(b) - h - hs
	if n > math.MaxInt32 {
		return b[:h], fmt.Errorf("%d bytes, longer than a %s value may be", n, t.decl)
	}
	hdr := b[h : h+hs]
	switch hs {
	case textHeader:
		hdr[0] = 16 // a 16-byte text pointer (left zero), then a zero timestamp
		binary.LittleEndian.PutUint32(hdr[25:], uint32(n))
	case plpHeader:
		binary.LittleEndian.PutUint64(hdr, uint64(n))
		binary.LittleEndian.PutUint32(hdr[8:], uint32(n))
		if n > 0 {
			b = appendU32(b, 0)
		}
	default:
		binary.LittleEndian.PutUint16(hdr, uint16(n))
	}
	return b, nil
}

// appendVariant encodes a sql_variant (MS-TDS 2.2.5.5, sql_variant
// values): LONG length,
// base type, property byte count, properties, data.
func (t *colType) appendVariant(b []byte, v any) ([]byte, error) {
	var base byte
	var props, data []byte
	var scratch [16]byte
	switch x := v.(type) {
	case bool:
		base, data = typeBit, append(scratch[:0], 0)
		if x {
			data[0] = 1
		}
	case float64:
		base, data = typeFlt8, appendU64(scratch[:0], math.Float64bits(x))
	case float32:
		base, data = typeFlt4, appendU32(scratch[:0], math.Float32bits(x))
	case string:
		u, err := appendUTF16(nil, x)
		if err != nil {
			return b, err
		}
		if len(u) > 8000 {
			return b, fmt.Errorf("%d bytes of nvarchar, over sql_variant's 8000", len(u))
		}
		base, data = typeNVarChar, u
		props = appendU16(t.coll.appendWire(nil), uint16(len(u)))
	case []byte:
		if len(x) > 8000 {
			return b, fmt.Errorf("%d bytes of varbinary, over sql_variant's 8000", len(x))
		}
		base, data, props = typeBigVarBin, x, appendU16(nil, uint16(len(x)))
	case time.Time:
		w := wallOfTime(x)
		d, err := w.days0001()
		if err != nil {
			return b, err
		}
		c, err := w.appendClock(scratch[:0], 7)
		if err != nil {
			return b, err
		}
		base, props, data = typeDateTime2, []byte{7}, append(c, byte(d), byte(d>>8), byte(d>>16))
	default:
		n, err := toInt64(v)
		if err != nil {
			return b, typeErr(v, "bool, float64, string, []byte, time.Time or an integer")
		}
		base, data = typeInt8, appendU64(scratch[:0], uint64(n))
	}
	b = appendU32(b, uint32(2+len(props)+len(data)))
	b = append(b, base, byte(len(props)))
	return append(append(b, props...), data...), nil
}

func typeErr(v any, want string) error {
	return fmt.Errorf("got %T, want %s", v, want)
}

func intRange(k kind) (int64, int64) {
	switch k {
	case kTinyint:
		return 0, 255
	case kSmallint:
		return math.MinInt16, math.MaxInt16
	case kInt:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// toInt64 accepts every Go integer type.
func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, fmt.Errorf("%d overflows int64", x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d overflows int64", x)
		}
		return int64(x), nil
	}
	return 0, typeErr(v, "an integer")
}

// decimalText accepts decimal text (string or []byte, as go-mssqldb
// returns decimals) or an integer.
func decimalText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	}
	n, err := toInt64(v)
	if err != nil {
		return "", typeErr(v, "decimal text (string) or an integer")
	}
	return strconv.FormatInt(n, 10), nil
}

// parseDecimal reads exact decimal text ("-12.3400": a sign, digits, an
// optional point and digits) as a 128-bit magnitude scaled by 10^scale.
// Digits past the scale must be zeros, and at most prec-scale digits may
// precede the point.
func parseDecimal(s string, prec, scale int) (neg bool, hi, lo uint64, err error) {
	in := s
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			break
		}
	}
	if intPart == "" && frac == "" {
		return false, 0, 0, fmt.Errorf("%q is not decimal text", in)
	}
	for len(intPart) > 1 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	if intPart == "0" {
		intPart = ""
	}
	for len(frac) > scale && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) > scale {
		return false, 0, 0, fmt.Errorf("%q has more than %d digits after the point", in, scale)
	}
	if len(intPart) > prec-scale {
		return false, 0, 0, fmt.Errorf("%q has more than %d digits before the point", in, prec-scale)
	}
	add := func(c byte) bool {
		if c < '0' || c > '9' {
			return false
		}
		h, l := bits.Mul64(lo, 10)
		var carry uint64
		lo, carry = bits.Add64(l, uint64(c-'0'), 0)
		hi = hi*10 + h + carry
		return true
	}
	for i := 0; i < len(intPart); i++ {
		if !add(intPart[i]) {
			return false, 0, 0, fmt.Errorf("%q is not decimal text", in)
		}
	}
	for i := 0; i < scale; i++ {
		c := byte('0')
		if i < len(frac) {
			c = frac[i]
		}
		if !add(c) {
			return false, 0, 0, fmt.Errorf("%q is not decimal text", in)
		}
	}
	if hi == 0 && lo == 0 {
		neg = false // SQL Server has no negative zero
	}
	return neg, hi, lo, nil
}

// parseMoney reads money (or smallmoney) text as its count of 1/10000
// units (MS-TDS 2.2.5.5.1, Fixed-Point Numbers).
func parseMoney(s string, small bool) (int64, error) {
	neg, hi, lo, err := parseDecimal(s, 19, 4)
	if err != nil {
		return 0, err
	}
	limit := uint64(math.MaxInt64)
	name := "money"
	if small {
		limit, name = math.MaxInt32, "smallmoney"
	}
	if neg {
		limit++
	}
	if hi != 0 || lo > limit {
		return 0, fmt.Errorf("%q outside the range of %s", s, name)
	}
	if neg {
		return int64(-lo), nil
	}
	return int64(lo), nil
}

// Days from 0001-01-01 to 1970-01-01 and to 1900-01-01.
const (
	days0001To1970 = 719162
	days0001To1900 = 693595
)

// wall is a wall-clock date and time, from a time.Time (its own zone) or
// a civil value.
type wall struct {
	y                 int
	m                 time.Month
	d                 int
	h, mi, s, ns      int
	hasDate, hasClock bool
}

func wallOfTime(t time.Time) wall {
	y, m, d := t.Date()
	h, mi, s := t.Clock()
	return wall{y: y, m: m, d: d, h: h, mi: mi, s: s, ns: t.Nanosecond(), hasDate: true, hasClock: true}
}

// wallOf accepts time.Time and the civil types that carry what the column
// needs: a date (civil.Date, civil.DateTime) and/or a clock (civil.Time,
// civil.DateTime).
func wallOf(v any, needDate, needClock bool) (wall, error) {
	var w wall
	switch x := v.(type) {
	case time.Time:
		return wallOfTime(x), nil
	case civil.DateTime:
		w = wall{y: x.Date.Year, m: x.Date.Month, d: x.Date.Day, h: x.Time.Hour, mi: x.Time.Minute, s: x.Time.Second, ns: x.Time.Nanosecond, hasDate: true, hasClock: true}
	case civil.Date:
		w = wall{y: x.Year, m: x.Month, d: x.Day, hasDate: true}
	case civil.Time:
		w = wall{y: 1, m: 1, d: 1, h: x.Hour, mi: x.Minute, s: x.Second, ns: x.Nanosecond, hasClock: true}
	default:
		return w, typeErr(v, "time.Time or a civil date/time")
	}
	if needDate && !w.hasDate {
		return w, fmt.Errorf("%T has no date", v)
	}
	if needClock && !w.hasClock && !needDate {
		return w, fmt.Errorf("%T has no time of day", v)
	}
	if w.h < 0 || w.h > 23 || w.mi < 0 || w.mi > 59 || w.s < 0 || w.s > 59 || w.ns < 0 || w.ns > 999_999_999 {
		return w, fmt.Errorf("%v is not a valid time of day", v)
	}
	if w.hasDate && !(civil.Date{Year: w.y, Month: w.m, Day: w.d}).IsValid() {
		return w, fmt.Errorf("%v is not a valid date", v)
	}
	return w, nil
}

// days0001 counts days since 0001-01-01: a date is three bytes of that
// count (MS-TDS 2.2.5.5.1, Date/Times).
func (w wall) days0001() (int64, error) {
	if w.y < 1 || w.y > 9999 {
		return 0, fmt.Errorf("year %d outside 1..9999", w.y)
	}
	return daysFromCivil(w.y, int(w.m), w.d) + days0001To1970, nil
}

// daysFromCivil counts days from 1970-01-01 to a proleptic Gregorian date
// (the era arithmetic of H. Hinnant's "chrono-Compatible Low-Level Date
// Algorithms"), without the cost of time.Date in the row loop.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// appendClock appends the time of day in units of 10^-scale s, in
// TimeLen(scale) bytes (MS-TDS 2.2.5.5.1, Date/Times).
func (w wall) appendClock(b []byte, scale int) ([]byte, error) {
	unit := int(math.Pow10(9 - scale))
	if w.ns%unit != 0 {
		return b, fmt.Errorf("%02d:%02d:%02d.%09d has more precision than scale %d", w.h, w.mi, w.s, w.ns, scale)
	}
	ticks := uint64(w.h*3600+w.mi*60+w.s)*uint64(math.Pow10(scale)) + uint64(w.ns/unit)
	for i := range TimeLen(scale) {
		b = append(b, byte(ticks>>(8*i)))
	}
	return b, nil
}

// appendUTF16 appends s as UTF-16LE; invalid UTF-8 is an error rather than
// a silent U+FFFD.
func appendUTF16(b []byte, s string) ([]byte, error) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return b, errors.New("invalid UTF-8")
			}
			b = append(b, 0xFD, 0xFF)
		case r < 0x10000:
			b = append(b, byte(r), byte(r>>8))
		default:
			r1, r2 := utf16.EncodeRune(r)
			b = append(b, byte(r1), byte(r1>>8), byte(r2), byte(r2>>8))
		}
	}
	return b, nil
}

// decodeUTF16 reads UTF-16LE; unpaired surrogates become U+FFFD.
func decodeUTF16(b []byte) (string, error) {
	if len(b)%2 != 0 {
		return "", fmt.Errorf("odd UTF-16 byte count %d", len(b))
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u)), nil
}

func appendU16(b []byte, v uint16) []byte { return append(b, byte(v), byte(v>>8)) }

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func appendU64(b []byte, v uint64) []byte {
	return appendU32(appendU32(b, uint32(v)), uint32(v>>32))
}
