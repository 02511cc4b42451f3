package keyrange

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cdcsnap/cdcsnap/internal/collate"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
)

// Kind is how a key column's values are represented and ordered.
type Kind uint8

// The kinds of key column. Each names the Go type its values have in a Tuple.
const (
	KindUnsupported    Kind = iota // a type keys cannot be bound on (sql_variant, xml, CLR types): one partition
	KindInt                        // int64: tinyint, smallint, int, bigint
	KindBool                       // bool: bit
	KindDecimal                    // Decimal: decimal, numeric, money, smallmoney
	KindFloat                      // float64: float, real
	KindString                     // string: char, varchar, nchar, nvarchar, ordered by the column's Collation
	KindBytes                      // []byte: binary, varbinary, ordered bytewise
	KindDate                       // time.Time at UTC midnight: date
	KindTime                       // time.Time on 0001-01-01 UTC: time(n)
	KindDateTime                   // time.Time in UTC: datetime, smalldatetime, datetime2(n)
	KindDateTimeOffset             // time.Time with its offset: datetimeoffset(n), ordered by instant
	KindUUID                       // UUID: uniqueidentifier, ordered as SQL Server orders it
)

// String returns the kind's lowercase name ("int", "datetimeoffset").
func (k Kind) String() string {
	switch k {
	case KindUnsupported:
		return "unsupported"
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	case KindDecimal:
		return "decimal"
	case KindFloat:
		return "float"
	case KindString:
		return "string"
	case KindBytes:
		return "bytes"
	case KindDate:
		return "date"
	case KindTime:
		return "time"
	case KindDateTime:
		return "datetime"
	case KindDateTimeOffset:
		return "datetimeoffset"
	case KindUUID:
		return "uuid"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// known reports whether k is one of the kinds above other than
// KindUnsupported: a kind Compare can order.
func (k Kind) known() bool { return k > KindUnsupported && k <= KindUUID }

// Decimal is an exact decimal number in its text form ("-12.3400"), as SQL
// Server returns decimal and money values: an optional sign, digits, and an
// optional fraction ("12", "-0.5", ".5", "7."); no exponent. It is compared
// numerically, so "1.0" and "1.00" are equal.
type Decimal string

// UUID is a uniqueidentifier in RFC 4122 byte order (the order of its
// canonical string form). Compare orders it as SQL Server does: bytes 10-15
// first, then 8-9, 6-7, 4-5, 0-3 of the SQL Server layout.
type UUID [16]byte

// String returns the canonical lowercase form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// ParseUUID reads the canonical 36-character form (either case).
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("keyrange: %q is not a uniqueidentifier", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("keyrange: %q is not a uniqueidentifier: %w", s, err)
	}
	return u, nil
}

// UUIDFromSQLServer converts the 16 bytes a driver returns for a
// uniqueidentifier (SQL Server's mixed-endian layout: the first three groups
// little-endian) to RFC order.
func UUIDFromSQLServer(b []byte) (UUID, error) {
	var u UUID
	if len(b) != 16 {
		return u, fmt.Errorf("keyrange: uniqueidentifier needs 16 bytes, have %d", len(b))
	}
	u = UUID{b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]}
	return u, nil
}

// SQLServerBytes returns the 16 bytes in SQL Server's layout (the inverse of
// UUIDFromSQLServer).
func (u UUID) SQLServerBytes() []byte {
	return []byte{u[3], u[2], u[1], u[0], u[5], u[4], u[7], u[6], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]}
}

// SortKey returns the bytes in the order SQL Server compares uniqueidentifier
// values (source/sqlserver/FACTS.md F25): the last six bytes first, then 8-9, then the groups SQL Server
// stores byte-swapped, each in its stored order. Keys compare as their
// SortKeys compare bytewise.
func (u UUID) SortKey() [16]byte {
	b := u.SQLServerBytes()
	var k [16]byte
	n := 0
	for _, g := range [][2]int{{10, 16}, {8, 10}, {6, 8}, {4, 6}, {0, 4}} {
		n += copy(k[n:], b[g[0]:g[1]])
	}
	return k
}

// Collation is how a string key column compares, reduced to what changes
// the order of keys. SQL Server pads with spaces for equality and order in
// every collation, binary ones included.
type Collation struct {
	// Name is the SQL Server collation name ("Latin1_General_CI_AS"); empty
	// when it is not visible, which keeps a char/varchar key in one partition.
	Name string `json:"name,omitempty"`
	// CaseInsensitive makes 'n' equal 'N'.
	CaseInsensitive bool `json:"ci,omitempty"`
	// Turkic marks the Turkish and Azeri collations (and the Turkish code
	// page 1254), whose case rules pair I with ı and İ with i: under them
	// 'I' and 'i' are different keys. Compare models them with Turkish case
	// mappings; Pieces never lets two bounds share an equality on the
	// strength of their case rules.
	Turkic bool `json:"turkic,omitempty"`
}

// ParseCollation derives the comparison rules from a SQL Server collation
// name: a "CI" part ("Latin1_General_CI_AS") makes it case-insensitive; "CS",
// "BIN" and "BIN2" do not. The name is split at underscores, so only a
// whole part counts. A name starting "Turkish_" or "Azeri_", or with the
// Turkish code page ("SQL_Latin1_General_CP1254_CI_AS"), is Turkic.
// Accent, kana and width sensitivity and the linguistic order of a Windows
// collation are not modelled: the source applies them, and Pieces stays
// correct whatever they are (see Pieces).
func ParseCollation(name string) Collation {
	ci, bin, turkic := false, false, false
	for i, part := range strings.Split(strings.ToUpper(name), "_") {
		switch {
		case part == "CI":
			ci = true
		case part == "BIN" || part == "BIN2":
			bin = true
		case i == 0 && (part == "TURKISH" || part == "AZERI"), part == "CP1254":
			turkic = true
		}
	}
	return Collation{Name: name, CaseInsensitive: ci && !bin, Turkic: turkic}
}

// fold returns s as the collation's equality sees it, trailing spaces
// aside: case folded when the collation is case-insensitive.
func (c Collation) fold(s string) string {
	switch {
	case !c.CaseInsensitive:
		return s
	case c.Turkic:
		return collate.FoldTurkic(s)
	}
	return collate.Fold(s)
}

// CertainlyEqual reports whether SQL Server compares x and y equal under
// the collation whatever else its rules say: they differ only in trailing
// spaces (every collation pads: source/sqlserver/FACTS.md F22), or, under a
// case-insensitive collation of a family known to fold ASCII letters
// one by one, only in the case of ASCII letters as well, 'I' and 'i'
// excepted under Turkish and Azeri ones (F23, F53). Other families tie
// letters into one (Danish "aa", Hungarian "cs", Croatian "lj", Welsh
// "ll"), and a mixed-case "aA" or "cS" is then another string, unequal even
// case-insensitively. Compare's model of case folding goes further (it
// folds every letter) and is not the server's rule for every letter of
// every collation, so Pieces shares an equality between bounds only when
// this holds.
func (c Collation) CertainlyEqual(x, y string) bool {
	if collate.ComparePadded(x, y) == 0 {
		return true
	}
	return c.CaseInsensitive && c.foldsASCII() && collate.EqualASCIIFold(x, y, c.Turkic)
}

// foldsASCII reports whether the collation's family folds the case of
// ASCII letters one letter at a time, with no contraction of two letters
// into one: Latin1_General, the SQL collation of code page 1252, Turkish
// and Azeri (F53).
func (c Collation) foldsASCII() bool {
	n := strings.ToUpper(c.Name)
	for _, p := range []string{"LATIN1_GENERAL_", "SQL_LATIN1_GENERAL_CP1_", "TURKISH_", "AZERI_"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// Column is one key column as planning needs it.
type Column struct {
	// Name is the column's name as the source spells it.
	Name string `json:"name"`
	// Kind is how its values are held and ordered.
	Kind Kind `json:"kind"`
	// SQLType is the declared type ("varchar(20)", "datetime2(7)"), for
	// messages and for sources that bind bounds; planning does not parse it.
	SQLType   string    `json:"sql_type,omitempty"`
	Collation Collation `json:"collation,omitzero"`
	// Unicode is true for nchar/nvarchar: their bounds need no collation to
	// convert without loss.
	Unicode bool `json:"unicode,omitempty"`
}

// Tuple is a key: one value per key column, in key order, each of the Go
// type its column's Kind names, or nil for NULL.
type Tuple []any

// Compare orders two values of column c as SQL Server's ORDER BY does:
// NULL first, strings by c's collation with trailing spaces ignored,
// uniqueidentifiers by SQL Server's byte groups. It returns an error for a
// value of the wrong Go type.
func Compare(c Column, a, b any) (int, error) {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0, nil
		case a == nil:
			return -1, nil
		default:
			return 1, nil
		}
	}
	bad := func(v any) error {
		return fmt.Errorf("keyrange: column %q (%s) cannot hold %T %v", c.Name, c.Kind, v, v)
	}
	switch c.Kind {
	case KindInt:
		x, ok1 := a.(int64)
		y, ok2 := b.(int64)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return cmp.Compare(x, y), nil
	case KindBool:
		x, ok1 := a.(bool)
		y, ok2 := b.(bool)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		switch {
		case x == y:
			return 0, nil
		case !x:
			return -1, nil
		default:
			return 1, nil
		}
	case KindFloat:
		x, ok1 := a.(float64)
		y, ok2 := b.(float64)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return cmp.Compare(x, y), nil
	case KindDecimal:
		x, ok1 := a.(Decimal)
		y, ok2 := b.(Decimal)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		dx, okx := decnum.Parse(string(x))
		dy, oky := decnum.Parse(string(y))
		if !okx {
			return 0, fmt.Errorf("keyrange: column %q: %q is not a decimal", c.Name, x)
		}
		if !oky {
			return 0, fmt.Errorf("keyrange: column %q: %q is not a decimal", c.Name, y)
		}
		return dx.Compare(dy), nil
	case KindString:
		x, ok1 := a.(string)
		y, ok2 := b.(string)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return compareStrings(c.Collation, x, y), nil
	case KindBytes:
		x, ok1 := a.([]byte)
		y, ok2 := b.([]byte)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return bytes.Compare(x, y), nil
	case KindDate, KindTime, KindDateTime, KindDateTimeOffset:
		x, ok1 := a.(time.Time)
		y, ok2 := b.(time.Time)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return x.Compare(y), nil
	case KindUUID:
		x, ok1 := a.(UUID)
		y, ok2 := b.(UUID)
		if !ok1 {
			return 0, bad(a)
		}
		if !ok2 {
			return 0, bad(b)
		}
		return compareUUID(x, y), nil
	default:
		return 0, fmt.Errorf("keyrange: column %q has kind %s, which has no order here", c.Name, c.Kind)
	}
}

// compareUUID follows SQL Server's order (UUID.SortKey).
func compareUUID(x, y UUID) int {
	kx, ky := x.SortKey(), y.SortKey()
	return bytes.Compare(kx[:], ky[:])
}

// compareStrings folds case when the collation is case-insensitive (with
// Turkish rules when it is Turkic), then compares with SQL Server's space
// padding (collate.ComparePadded).
func compareStrings(c Collation, x, y string) int {
	return collate.ComparePadded(c.fold(x), c.fold(y))
}

// RowKey returns a string that is equal for two values exactly when they
// are one stored value, trailing spaces aside (SQL Server pads them in
// every collation, source/sqlserver/FACTS.md F22): the key to group the
// images of one row by in a latest-image merge. A unique index holds one
// row among the values its collation takes for equal, and every image of
// that row carries its stored value, so the stored value names the row
// whatever the collation's equality is: accent, kana and width
// insensitivity, expansions (ß and ss), letters a language ties into one
// (Danish "aa"), which CollationKey's case folding does not model and would
// merge two rows or split one by. A key whose stored value changes to
// another the collation takes for equal is an update of the key: its
// before image (delete 1, or update-before 3 under trace flag 8207, F14)
// removes the old value and its after image adds the new one.
func RowKey(c Column, v any) (string, error) {
	if s, ok := v.(string); ok && c.Kind == KindString {
		return "s" + strings.TrimRight(s, " "), nil
	}
	return CollationKey(c, v)
}

// CertainKey returns a string that is equal for two values when SQL
// Server certainly takes them for one value (Collation.CertainlyEqual):
// they differ only in trailing spaces or, under a case-insensitive
// collation of a family known to fold ASCII letters one by one, in the
// case of ASCII letters ('I' and 'i' apart under Turkish and Azeri ones).
// Values with different keys may still be equal under the collation
// (accents, width, expansions, the case of other letters). Values of other
// kinds are equal exactly as under RowKey.
func CertainKey(c Column, v any) (string, error) {
	s, ok := v.(string)
	if !ok || c.Kind != KindString {
		return RowKey(c, v)
	}
	s = strings.TrimRight(s, " ")
	if !c.Collation.CaseInsensitive || !c.Collation.foldsASCII() {
		return "s" + s, nil
	}
	b := []byte(s)
	for i, x := range b {
		if 'A' <= x && x <= 'Z' && !(c.Collation.Turkic && x == 'I') {
			b[i] = x + 'a' - 'A'
		}
	}
	return "s" + string(b), nil
}

// CollationKey returns a string that is equal for two values exactly when
// Compare says they are equal, for grouping rows by key (a latest-image
// merge, a reconcile). NULL has its own key.
func CollationKey(c Column, v any) (string, error) {
	if v == nil {
		return "\x00null", nil
	}
	switch c.Kind {
	case KindString:
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("keyrange: column %q (%s) cannot hold %T", c.Name, c.Kind, v)
		}
		return "s" + c.Collation.fold(strings.TrimRight(s, " ")), nil
	case KindDecimal:
		d, ok := v.(Decimal)
		if !ok {
			return "", fmt.Errorf("keyrange: column %q (%s) cannot hold %T", c.Name, c.Kind, v)
		}
		x, ok := decnum.Parse(string(d))
		if !ok {
			return "", fmt.Errorf("keyrange: column %q: %q is not a decimal", c.Name, d)
		}
		return "d" + x.String(), nil
	case KindDate, KindTime, KindDateTime, KindDateTimeOffset:
		t, ok := v.(time.Time)
		if !ok {
			return "", fmt.Errorf("keyrange: column %q (%s) cannot hold %T", c.Name, c.Kind, v)
		}
		return "t" + t.UTC().Format(time.RFC3339Nano), nil
	case KindFloat:
		f, ok := v.(float64)
		if !ok {
			return "", fmt.Errorf("keyrange: column %q (%s) cannot hold %T", c.Name, c.Kind, v)
		}
		if f == 0 {
			f = 0 // -0 equals 0
		}
		return "f" + strconv.FormatFloat(f, 'g', -1, 64), nil
	default:
		if _, err := Compare(c, v, v); err != nil {
			return "", err
		}
		return fmt.Sprintf("%T:%v", v, v), nil
	}
}

// CompareTuples compares two keys column by column; both must have one
// value per column.
func CompareTuples(cols []Column, a, b Tuple) (int, error) {
	if len(a) != len(cols) || len(b) != len(cols) {
		return 0, fmt.Errorf("keyrange: key has %d and %d values for %d columns", len(a), len(b), len(cols))
	}
	for i, c := range cols {
		r, err := Compare(c, a[i], b[i])
		if err != nil || r != 0 {
			return r, err
		}
	}
	return 0, nil
}

// jsonValue is one key value on the wire: exactly one field set, so that a
// Tuple decodes to the same Go types it was encoded from.
type jsonValue struct {
	Int     *string `json:"int,omitempty"`
	Bool    *bool   `json:"bool,omitempty"`
	Decimal *string `json:"dec,omitempty"`
	Float   *string `json:"float,omitempty"`
	String  *string `json:"str,omitempty"`
	// StrHex holds a string that is not valid UTF-8 (JSON would replace
	// its bad bytes with U+FFFD), as hex of its bytes.
	StrHex *string `json:"strhex,omitempty"`
	Bytes  *string `json:"hex,omitempty"`
	Time   *string `json:"time,omitempty"`
	UUID   *string `json:"uuid,omitempty"`
}

// MarshalJSON encodes each value tagged with its Go type; NULL is null.
func (t Tuple) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	out := make([]*jsonValue, len(t))
	for i, v := range t {
		s := func(x string) *string { return &x }
		switch x := v.(type) {
		case nil:
		case int64:
			out[i] = &jsonValue{Int: s(strconv.FormatInt(x, 10))}
		case bool:
			out[i] = &jsonValue{Bool: &x}
		case Decimal:
			out[i] = &jsonValue{Decimal: s(string(x))}
		case float64:
			out[i] = &jsonValue{Float: s(strconv.FormatFloat(x, 'g', -1, 64))}
		case string:
			if utf8.ValidString(x) {
				out[i] = &jsonValue{String: s(x)}
			} else {
				out[i] = &jsonValue{StrHex: s(hex.EncodeToString([]byte(x)))}
			}
		case []byte:
			out[i] = &jsonValue{Bytes: s(hex.EncodeToString(x))}
		case time.Time:
			if _, off := x.Zone(); off%60 != 0 {
				return nil, fmt.Errorf("keyrange: key value %d: %v has an offset of %d seconds, not whole minutes", i, x, off)
			}
			b, err := x.MarshalText()
			if err != nil {
				return nil, fmt.Errorf("keyrange: key value %d: %w", i, err)
			}
			out[i] = &jsonValue{Time: s(string(b))}
		case UUID:
			out[i] = &jsonValue{UUID: s(x.String())}
		default:
			return nil, fmt.Errorf("keyrange: key value %d has unsupported type %T", i, v)
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (t *Tuple) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = nil
		return nil
	}
	var in []*jsonValue
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("keyrange: key tuple: %w", err)
	}
	out := make(Tuple, len(in))
	for i, j := range in {
		if j == nil {
			continue
		}
		var err error
		set := 0
		if j.Int != nil {
			set++
			out[i], err = strconv.ParseInt(*j.Int, 10, 64)
		}
		if j.Bool != nil {
			set++
			out[i] = *j.Bool
		}
		if j.Decimal != nil {
			set++
			if _, ok := decnum.Parse(*j.Decimal); !ok {
				err = fmt.Errorf("%q is not a decimal", *j.Decimal)
			}
			out[i] = Decimal(*j.Decimal)
		}
		if j.Float != nil {
			set++
			out[i], err = strconv.ParseFloat(*j.Float, 64)
		}
		if j.String != nil {
			set++
			out[i] = *j.String
		}
		if j.StrHex != nil {
			set++
			var raw []byte
			raw, err = hex.DecodeString(*j.StrHex)
			out[i] = string(raw)
		}
		if j.Bytes != nil {
			set++
			var raw []byte
			raw, err = hex.DecodeString(*j.Bytes)
			if raw == nil {
				raw = []byte{}
			}
			out[i] = raw
		}
		if j.Time != nil {
			set++
			var tm time.Time
			err = tm.UnmarshalText([]byte(*j.Time))
			out[i] = tm
		}
		if j.UUID != nil {
			set++
			out[i], err = ParseUUID(*j.UUID)
		}
		if err != nil {
			return fmt.Errorf("keyrange: key value %d: %w", i, err)
		}
		if set != 1 {
			return fmt.Errorf("keyrange: key value %d: want exactly one typed field, have %d", i, set)
		}
	}
	*t = out
	return nil
}
