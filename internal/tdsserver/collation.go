package tdsserver

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
)

// Collation is a COLLATION as TDS carries it (MS-TDS 2.2.5.1.2): a 20-bit
// LCID, the ColFlags byte, a 4-bit version and a SortId, five bytes on the
// wire. SortId is non-zero only for the SQL_* collations.
type Collation struct {
	LCID    uint32 // the Windows locale id, 20 bits
	Flags   uint8  // ColFlags, least significant bit first: IgnoreCase, IgnoreAccent, IgnoreKana, IgnoreWidth, Binary, Binary2, UTF8
	Version uint8  // 0 for the original collations, 1 for _90_, 2 for _100_, 3 for _140_ (COLLATIONPROPERTY 'Version')
	SortID  uint8
}

// ColFlags bits (MS-TDS 2.2.5.1.2: "ColFlags is represented in least
// significant bit order").
const (
	flagIgnoreCase   = 1 << 0
	flagIgnoreAccent = 1 << 1
	flagIgnoreKana   = 1 << 2
	flagIgnoreWidth  = 1 << 3
	flagBinary       = 1 << 4
	flagBinary2      = 1 << 5
	flagUTF8         = 1 << 6
)

// UTF8 reports whether the collation's fUTF8 flag is set: its char and
// varchar data are UTF-8 (a _UTF8 collation, SQL Server 2019 and later).
func (c Collation) UTF8() bool { return c.Flags&flagUTF8 != 0 }

// appendWire appends the five bytes of the collation.
func (c Collation) appendWire(b []byte) []byte {
	v := c.LCID&0xFFFFF | uint32(c.Flags)<<20 | uint32(c.Version&0xF)<<28
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), c.SortID)
}

// collationFromWire reads the five bytes of a COLLATION.
func collationFromWire(b []byte) Collation {
	v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	return Collation{LCID: v & 0xFFFFF, Flags: uint8(v >> 20), Version: uint8(v >> 28), SortID: b[4]}
}

// ParseCollation maps a collation name to its TDS form. Windows collations
// are read part by part (designator, optional version, then CI/CS, AI/AS,
// KS, WS, VSS, SC, UTF8, BIN, BIN2) for the designators Latin1_General,
// French, Greek, Turkish, Cyrillic_General, Polish, Czech, Hebrew, Arabic
// Lithuanian, Japanese, Chinese_PRC, Korean_Wansung and
// Chinese_Taiwan_Stroke; the SQL collations known are SQL_Latin1_General_CP1_CS_AS,
// _CI_AS and _CI_AI (sort ids 51, 52, 54 in the SQL collation name table).
// The name is matched ignoring case. SC (supplementary characters) has no
// bit in COLLATION, so it is accepted and changes nothing on the wire.
// Anything else is an error naming the collation.
func ParseCollation(name string) (Collation, error) {
	u := strings.ToUpper(name)
	if strings.HasPrefix(u, "SQL_") {
		var c Collation
		switch u {
		case "SQL_LATIN1_GENERAL_CP1_CS_AS":
			c = Collation{SortID: 51, Flags: flagIgnoreKana | flagIgnoreWidth}
		case "SQL_LATIN1_GENERAL_CP1_CI_AS":
			c = Collation{SortID: 52, Flags: flagIgnoreCase | flagIgnoreKana | flagIgnoreWidth}
		case "SQL_LATIN1_GENERAL_CP1_CI_AI":
			c = Collation{SortID: 54, Flags: flagIgnoreCase | flagIgnoreAccent | flagIgnoreKana | flagIgnoreWidth}
		default:
			return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: the SQL collations known are SQL_Latin1_General_CP1_CS_AS, _CI_AS and _CI_AI", name)
		}
		c.LCID = 0x0409
		return c, nil
	}
	var c Collation
	rest := ""
	for _, d := range []string{"LATIN1_GENERAL", "CYRILLIC_GENERAL", "FRENCH", "GREEK", "TURKISH", "POLISH", "CZECH", "HEBREW", "ARABIC", "LITHUANIAN", "JAPANESE", "CHINESE_PRC", "KOREAN_WANSUNG", "CHINESE_TAIWAN_STROKE"} {
		if strings.HasPrefix(u, d+"_") {
			c.LCID, _ = designatorLCID(d)
			rest = u[len(d)+1:]
			break
		}
	}
	if c.LCID == 0 {
		return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: known designators are Latin1_General, Cyrillic_General, French, Greek, Turkish, Polish, Czech, Hebrew, Arabic, Lithuanian, Japanese, Chinese_PRC, Korean_Wansung, Chinese_Taiwan_Stroke", name)
	}
	parts := strings.Split(rest, "_")
	switch parts[0] {
	case "90":
		c.Version, parts = 1, parts[1:]
	case "100":
		c.Version, parts = 2, parts[1:]
	case "140":
		c.Version, parts = 3, parts[1:]
	}
	var ci, cs, ai, as, ks, ws, bin bool
	for _, p := range parts {
		switch p {
		case "CI":
			ci = true
		case "CS":
			cs = true
		case "AI":
			ai = true
		case "AS":
			as = true
		case "KS":
			ks = true
		case "WS":
			ws = true
		case "VSS", "SC":
		case "UTF8":
			c.Flags |= flagUTF8
		case "BIN":
			c.Flags |= flagBinary
			bin = true
		case "BIN2":
			c.Flags |= flagBinary2
			bin = true
		default:
			return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: part %q", name, p)
		}
	}
	switch {
	case bin && (ci || cs || ai || as || ks || ws):
		return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: a binary collation has no sensitivity parts", name)
	case !bin && ci == cs:
		return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: it needs exactly one of CI and CS", name)
	case !bin && ai == as:
		return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: it needs exactly one of AI and AS", name)
	case c.UTF8() && c.Version < 2:
		return Collation{}, fmt.Errorf("tdsserver: unknown collation %q: UTF-8 collations are version 100 or later", name)
	}
	if !bin {
		// A Windows comparison style ignores kana type and width unless
		// KS or WS says otherwise.
		if ci {
			c.Flags |= flagIgnoreCase
		}
		if ai {
			c.Flags |= flagIgnoreAccent
		}
		if !ks {
			c.Flags |= flagIgnoreKana
		}
		if !ws {
			c.Flags |= flagIgnoreWidth
		}
	}
	return c, nil
}

// designatorLCID is the LCID of a Windows collation designator (upper case).
func designatorLCID(d string) (uint32, bool) {
	switch d {
	case "LATIN1_GENERAL":
		return 0x0409, true
	case "FRENCH":
		return 0x040C, true
	case "GREEK":
		return 0x0408, true
	case "TURKISH":
		return 0x041F, true
	case "CYRILLIC_GENERAL":
		return 0x0419, true
	case "POLISH":
		return 0x0415, true
	case "CZECH":
		return 0x0405, true
	case "HEBREW":
		return 0x040D, true
	case "ARABIC":
		return 0x0401, true
	case "LITHUANIAN":
		return 0x0427, true
	case "JAPANESE":
		return 0x0411, true
	case "CHINESE_PRC":
		return 0x0804, true
	case "KOREAN_WANSUNG":
		return 0x0412, true
	case "CHINESE_TAIWAN_STROKE":
		return 0x0404, true
	}
	return 0, false
}

// charset is how char/varchar/text bytes of a collation are encoded: UTF-8
// (fUTF8), a single-byte Windows code page, or raw bytes (the all-zero
// "raw collation" of MS-TDS 2.2.5.1.2, which go-mssqldb puts on
// mssql.VarChar parameters).
type charset struct {
	codePage int
	cm       *charmap.Charmap  // nil for UTF-8, raw and double-byte code pages
	enc      encoding.Encoding // a double-byte code page (codepage.go)
	utf8     bool
	raw      bool
}

// charsetOf returns the encoding of a collation's non-Unicode data, or an
// error for a code page this package does not encode.
func charsetOf(c Collation) (charset, error) {
	if c.UTF8() {
		return charset{codePage: 65001, utf8: true}, nil
	}
	if c.LCID == 0 && c.SortID == 0 {
		return charset{raw: true}, nil
	}
	cp := 0
	switch c.SortID {
	case 0:
		switch c.LCID {
		case 0x0409, 0x040C:
			cp = 1252
		case 0x0408:
			cp = 1253
		case 0x041F:
			cp = 1254
		case 0x0419:
			cp = 1251
		case 0x0415, 0x0405:
			cp = 1250
		case 0x040D:
			cp = 1255
		case 0x0401:
			cp = 1256
		case 0x0427:
			cp = 1257
		}
	case 51, 52, 54:
		cp = 1252
	}
	if cp == 0 && c.SortID == 0 {
		if d := dbcsCodePage(c.LCID); d != 0 {
			return charset{codePage: d, enc: dbcsEncoding(d)}, nil
		}
	}
	cm := codePageMap(cp)
	if cm == nil {
		return charset{}, fmt.Errorf("tdsserver: no code page known for collation LCID 0x%04X sort id %d", c.LCID, c.SortID)
	}
	return charset{codePage: cp, cm: cm}, nil
}

func codePageMap(cp int) *charmap.Charmap {
	switch cp {
	case 1250:
		return charmap.Windows1250
	case 1251:
		return charmap.Windows1251
	case 1252:
		return charmap.Windows1252
	case 1253:
		return charmap.Windows1253
	case 1254:
		return charmap.Windows1254
	case 1255:
		return charmap.Windows1255
	case 1256:
		return charmap.Windows1256
	case 1257:
		return charmap.Windows1257
	}
	return nil
}

// appendEncoded appends s in the charset. A character the code page
// cannot hold is an error naming it: the server never substitutes '?'.
func (cs charset) appendEncoded(b []byte, s string) ([]byte, error) {
	if cs.utf8 || cs.raw {
		if !utf8.ValidString(s) {
			return b, fmt.Errorf("invalid UTF-8 in %q", s)
		}
		return append(b, s...), nil
	}
	if cs.enc != nil {
		return cs.appendDBCS(b, s)
	}
	for i, r := range s {
		if r < 0x80 {
			b = append(b, byte(r))
			continue
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return b, fmt.Errorf("invalid UTF-8 in %q", s)
			}
		}
		c, ok := cs.cm.EncodeRune(r)
		if !ok && cs.codePage == 1252 && bestFit1252Hole(r) {
			c, ok = byte(r), true
		}
		if !ok {
			return b, fmt.Errorf("%q (U+%04X) is not in code page %d", r, r, cs.codePage)
		}
		b = append(b, c)
	}
	return b, nil
}

// decode turns bytes of the charset into a string.
func (cs charset) decode(b []byte) string {
	if cs.utf8 || cs.raw {
		return string(b)
	}
	if cs.enc != nil {
		return cs.decodeDBCS(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		if c < 0x80 {
			sb.WriteByte(c)
		} else if cs.codePage == 1252 && bestFit1252Hole(rune(c)) {
			sb.WriteRune(rune(c))
		} else {
			sb.WriteRune(cs.cm.DecodeByte(c))
		}
	}
	return sb.String()
}
