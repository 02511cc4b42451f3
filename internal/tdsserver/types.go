package tdsserver

import (
	"fmt"
	"strconv"
	"strings"
)

// TDS data type ids (MS-TDS 2.2.5.4, Fixed-Length and 2.2.5.4.3
// Variable-Length Data Types); the same values as go-mssqldb's types.go.
const (
	typeNull      = 0x1F
	typeInt1      = 0x30
	typeBit       = 0x32
	typeInt2      = 0x34
	typeInt4      = 0x38
	typeDateTim4  = 0x3A
	typeFlt4      = 0x3B
	typeMoney     = 0x3C
	typeDateTime  = 0x3D
	typeFlt8      = 0x3E
	typeMoney4    = 0x7A
	typeInt8      = 0x7F
	typeGUID      = 0x24
	typeIntN      = 0x26
	typeBitN      = 0x68
	typeDecimalN  = 0x6A
	typeNumericN  = 0x6C
	typeFltN      = 0x6D
	typeMoneyN    = 0x6E
	typeDateTimeN = 0x6F
	typeDateN     = 0x28
	typeTimeN     = 0x29
	typeDateTime2 = 0x2A
	typeDTOffset  = 0x2B
	typeBigVarBin = 0xA5
	typeBigVarChr = 0xA7
	typeBigBinary = 0xAD
	typeBigChar   = 0xAF
	typeNVarChar  = 0xE7
	typeNChar     = 0xEF
	typeXML       = 0xF1
	typeUDT       = 0xF0
	typeTVP       = 0xF3
	typeText      = 0x23
	typeImage     = 0x22
	typeNText     = 0x63
	typeVariant   = 0x62
)

// UserType of a timestamp/rowversion column, as SQL Server sends it in
// COLMETADATA (the system type id of timestamp, sys.types).
const userTypeTimestamp = 80

// Column describes one column of a result set.
type Column struct {
	// Name is the column name (at most 255 UTF-16 units, B_VARCHAR).
	Name string
	// Type is the SQL type as SQL Server declares it: "int", "bigint",
	// "decimal(18,4)", "nvarchar(40)", "nvarchar(max)", "varchar(20)",
	// "datetime2(7)", "time(3)", "uniqueidentifier", "xml", "binary(10)",
	// "varbinary(max)", "text", "ntext", "image", "rowversion",
	// "timestamp", "sysname", "hierarchyid", "geometry", "geography",
	// "sql_variant", ... matched ignoring case and spaces. Lengths and
	// precisions left out take SQL Server's defaults: char(1),
	// decimal(18,0), datetime2(7), float(53).
	Type string
	// Collation names the collation of char, varchar, text, nchar, nvarchar
	// and ntext columns (see ParseCollation); "" means the server's
	// (Options.Collation). It decides the code page of char/varchar/text.
	Collation string
	// Nullable marks a column that may hold NULL. SQL Server sends a
	// NOT NULL int as INT4 and a nullable one as INTN (MS-TDS 2.2.5.4):
	// so does this package, and a nil value in a NOT NULL column is an
	// error.
	Nullable bool
}

type kind uint8

const (
	kBit kind = iota + 1
	kTinyint
	kSmallint
	kInt
	kBigint
	kDecimal
	kMoney
	kSmallmoney
	kFloat
	kReal
	kDate
	kTime
	kDatetime
	kSmalldatetime
	kDatetime2
	kDatetimeoffset
	kChar    // char, varchar (bytes in a code page)
	kNChar   // nchar, nvarchar (UTF-16)
	kBinary  // binary, varbinary, rowversion
	kText    // text
	kNText   // ntext
	kImage   // image
	kGUID    // uniqueidentifier
	kXML     // xml
	kUDT     // hierarchyid, geometry, geography
	kVariant // sql_variant
)

// colType is a column type resolved to its wire form.
type colType struct {
	decl     string // as given, for messages
	kind     kind
	id       byte // TDS type id sent
	length   int  // max length in bytes of the TYPE_INFO; -1 for (max)
	fixedLen bool // char(n)/nchar(n)/binary(n): values are padded to length
	prec     uint8
	scale    uint8
	nullable bool
	coll     Collation
	cs       charset
	userType uint32
	udtName  string
}

// plp reports whether values travel as PLP, partially length-prefixed
// (MS-TDS 2.2.5.2.3): the (max) types, xml and UDTs.
func (t *colType) plp() bool {
	return t.length == -1 && (t.kind == kChar || t.kind == kNChar || t.kind == kBinary) || t.kind == kXML || t.kind == kUDT
}

// parseType resolves a Column against the server's default collation.
func parseType(c Column, defColl Collation) (*colType, error) {
	base, args, err := splitType(c.Type)
	if err != nil {
		return nil, err
	}
	t := &colType{decl: c.Type, nullable: c.Nullable}
	argN := func(def, lo, hi int, maxOK bool) (int, error) {
		switch len(args) {
		case 0:
			return def, nil
		case 1:
			if maxOK && args[0] == "max" {
				return -1, nil
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < lo || n > hi {
				return 0, fmt.Errorf("length %q outside %d..%d", args[0], lo, hi)
			}
			return n, nil
		}
		return 0, fmt.Errorf("%d arguments", len(args))
	}
	noArgs := func() error {
		if len(args) != 0 {
			return fmt.Errorf("%s takes no length", base)
		}
		return nil
	}
	// fixed picks the fixed-length id for NOT NULL columns and the
	// nullable one otherwise (MS-TDS 2.2.5.4).
	fixed := func(f fixedType) error {
		t.kind, t.length = f.k, f.size
		t.id = f.idN
		if !c.Nullable {
			t.id = f.id
		}
		return noArgs()
	}
	switch base {
	case "float":
		var n int
		if n, err = argN(53, 1, 53, false); err == nil {
			args = nil
			if n <= 24 { // float(1..24) is real
				err = fixed(mustFixed("real"))
			} else {
				err = fixed(mustFixed("float"))
			}
		}
	case "decimal", "numeric":
		t.kind, t.id = kDecimal, typeDecimalN
		if base == "numeric" {
			t.id = typeNumericN
		}
		p, s := 18, 0
		if len(args) >= 1 {
			if p, err = strconv.Atoi(args[0]); err != nil || p < 1 || p > 38 {
				return nil, fmt.Errorf("tdsserver: column %q: type %q: precision outside 1..38", c.Name, c.Type)
			}
		}
		if len(args) == 2 {
			if s, err = strconv.Atoi(args[1]); err != nil || s < 0 || s > p {
				return nil, fmt.Errorf("tdsserver: column %q: type %q: scale outside 0..%d", c.Name, c.Type, p)
			}
		}
		if len(args) > 2 {
			err = fmt.Errorf("%d arguments", len(args))
		}
		t.prec, t.scale, t.length = uint8(p), uint8(s), DecimalLen(p)
	case "date":
		t.kind, t.id, t.length = kDate, typeDateN, 3
		err = noArgs()
	case "time", "datetime2", "datetimeoffset":
		var s int
		if s, err = argN(7, 0, 7, false); err == nil {
			t.scale = uint8(s)
			switch base {
			case "time":
				t.kind, t.id, t.length = kTime, typeTimeN, TimeLen(s)
			case "datetime2":
				t.kind, t.id, t.length = kDatetime2, typeDateTime2, TimeLen(s)+3
			default:
				t.kind, t.id, t.length = kDatetimeoffset, typeDTOffset, TimeLen(s)+5
			}
		}
	case "char", "varchar":
		t.kind, t.id, t.fixedLen = kChar, typeBigVarChr, base == "char"
		if t.fixedLen {
			t.id = typeBigChar
		}
		t.length, err = argN(1, 1, 8000, !t.fixedLen)
	case "nchar", "nvarchar", "sysname":
		t.kind, t.id, t.fixedLen = kNChar, typeNVarChar, base == "nchar"
		if t.fixedLen {
			t.id = typeNChar
		}
		n := 128 // sysname is nvarchar(128)
		if base == "sysname" {
			err = noArgs()
		} else {
			n, err = argN(1, 1, 4000, !t.fixedLen)
		}
		t.length = n
		if n > 0 {
			t.length = 2 * n
		}
	case "binary", "varbinary":
		t.kind, t.id, t.fixedLen = kBinary, typeBigVarBin, base == "binary"
		if t.fixedLen {
			t.id = typeBigBinary
		}
		t.length, err = argN(1, 1, 8000, !t.fixedLen)
	case "rowversion", "timestamp":
		t.kind, t.id, t.fixedLen, t.length, t.userType = kBinary, typeBigBinary, true, 8, userTypeTimestamp
		err = noArgs()
	case "text":
		t.kind, t.id, t.length = kText, typeText, 0x7FFFFFFF
		err = noArgs()
	case "ntext":
		t.kind, t.id, t.length = kNText, typeNText, 0x7FFFFFFE
		err = noArgs()
	case "image":
		t.kind, t.id, t.length = kImage, typeImage, 0x7FFFFFFF
		err = noArgs()
	case "uniqueidentifier":
		t.kind, t.id, t.length = kGUID, typeGUID, 16
		err = noArgs()
	case "xml":
		t.kind, t.id, t.length = kXML, typeXML, -1
		err = noArgs()
	case "hierarchyid":
		// hierarchyid values are at most 892 bytes (hierarchyid data type
		// method reference); geometry and geography are unbounded.
		t.kind, t.id, t.length, t.udtName = kUDT, typeUDT, 892, base
		err = noArgs()
	case "geometry", "geography":
		t.kind, t.id, t.length, t.udtName = kUDT, typeUDT, 0xFFFF, base
		err = noArgs()
	case "sql_variant":
		t.kind, t.id, t.length = kVariant, typeVariant, 8016
		err = noArgs()
	default:
		f, ok := fixedByName(base)
		if !ok {
			return nil, fmt.Errorf("tdsserver: column %q: unknown type %q", c.Name, c.Type)
		}
		err = fixed(f)
	}
	if err != nil {
		return nil, fmt.Errorf("tdsserver: column %q: type %q: %w", c.Name, c.Type, err)
	}
	switch t.kind {
	case kChar, kNChar, kText, kNText, kVariant:
		t.coll = defColl
		if c.Collation != "" {
			if t.coll, err = ParseCollation(c.Collation); err != nil {
				return nil, fmt.Errorf("tdsserver: column %q: %w", c.Name, err)
			}
		}
		if t.kind == kChar || t.kind == kText {
			if t.cs, err = charsetOf(t.coll); err != nil {
				return nil, fmt.Errorf("tdsserver: column %q (%s collate %s): %w", c.Name, c.Type, c.Collation, err)
			}
		}
	default:
		if c.Collation != "" {
			return nil, fmt.Errorf("tdsserver: column %q: type %q takes no collation", c.Name, c.Type)
		}
	}
	return t, nil
}

// splitType splits "decimal(18, 4)" into "decimal" and ["18", "4"], lower
// case and without spaces.
func splitType(s string) (string, []string, error) {
	s = strings.ToLower(strings.Join(strings.Fields(s), ""))
	i := strings.IndexByte(s, '(')
	if i < 0 {
		if s == "" {
			return "", nil, fmt.Errorf("tdsserver: empty column type")
		}
		return s, nil, nil
	}
	if !strings.HasSuffix(s, ")") || i == 0 {
		return "", nil, fmt.Errorf("tdsserver: malformed column type %q", s)
	}
	return s[:i], strings.Split(s[i+1:len(s)-1], ","), nil
}

// fixedType is a fixed-length type and its nullable, byte-length form
// (MS-TDS 2.2.5.4.1 FIXEDLENTYPE, 2.2.5.4.2 BYTELEN_TYPE).
type fixedType struct {
	name    string
	k       kind
	id, idN byte
	size    int
}

// fixedTypes are the fixed-length types: every place that reads, writes
// or names one looks it up here.
var fixedTypes = []fixedType{
	{"bit", kBit, typeBit, typeBitN, 1},
	{"tinyint", kTinyint, typeInt1, typeIntN, 1},
	{"smallint", kSmallint, typeInt2, typeIntN, 2},
	{"int", kInt, typeInt4, typeIntN, 4},
	{"bigint", kBigint, typeInt8, typeIntN, 8},
	{"smallmoney", kSmallmoney, typeMoney4, typeMoneyN, 4},
	{"money", kMoney, typeMoney, typeMoneyN, 8},
	{"real", kReal, typeFlt4, typeFltN, 4},
	{"float", kFloat, typeFlt8, typeFltN, 8},
	{"smalldatetime", kSmalldatetime, typeDateTim4, typeDateTimeN, 4},
	{"datetime", kDatetime, typeDateTime, typeDateTimeN, 8},
}

func fixedByName(name string) (fixedType, bool) {
	for _, f := range fixedTypes {
		if f.name == name {
			return f, true
		}
	}
	return fixedType{}, false
}

func mustFixed(name string) fixedType {
	f, _ := fixedByName(name)
	return f
}

// fixedByID finds a type by its fixed-length id.
func fixedByID(id byte) (fixedType, bool) {
	for _, f := range fixedTypes {
		if f.id == id {
			return f, true
		}
	}
	return fixedType{}, false
}

// fixedByLen finds a type by its nullable id and value length.
func fixedByLen(idN byte, n int) (fixedType, bool) {
	for _, f := range fixedTypes {
		if f.idN == idN && f.size == n {
			return f, true
		}
	}
	return fixedType{}, false
}

// DecimalLen is the value length of decimal(p,s): a sign byte and 4, 8,
// 12 or 16 bytes of magnitude (MS-TDS 2.2.5.5.1, Decimal/Numeric).
func DecimalLen(p int) int {
	switch {
	case p <= 9:
		return 5
	case p <= 19:
		return 9
	case p <= 28:
		return 13
	}
	return 17
}

// TimeLen is the length of the time part of time(n), datetime2(n) and
// datetimeoffset(n): 3, 4 or 5 bytes by scale (MS-TDS 2.2.5.5.1, Date/Times).
func TimeLen(scale int) int {
	switch {
	case scale <= 2:
		return 3
	case scale <= 4:
		return 4
	}
	return 5
}

// appendTypeInfo appends the TYPE_INFO of a COLMETADATA column
// (MS-TDS 2.2.5.6), checked against go-mssqldb's readTypeInfo/readVarLen.
func (t *colType) appendTypeInfo(b []byte) []byte {
	b = append(b, t.id)
	switch t.id {
	case typeInt1, typeBit, typeInt2, typeInt4, typeInt8, typeDateTim4, typeFlt4, typeMoney, typeDateTime, typeFlt8, typeMoney4:
		// FIXEDLENTYPE: the id says it all.
	case typeIntN, typeBitN, typeFltN, typeMoneyN, typeDateTimeN, typeGUID:
		b = append(b, byte(t.length))
	case typeDecimalN, typeNumericN:
		b = append(b, byte(t.length), t.prec, t.scale)
	case typeDateN:
	case typeTimeN, typeDateTime2, typeDTOffset:
		b = append(b, t.scale)
	case typeBigChar, typeBigVarChr, typeNChar, typeNVarChar:
		b = appendU16(b, t.ushortLen())
		b = t.coll.appendWire(b)
	case typeBigBinary, typeBigVarBin:
		b = appendU16(b, t.ushortLen())
	case typeText, typeNText, typeImage:
		b = appendU32(b, uint32(t.length))
		if t.id != typeImage {
			b = t.coll.appendWire(b)
		}
		// TableName: no parts. go-mssqldb reads NumParts and skips that
		// many US_VARCHARs (types.go, readVarLen).
		b = append(b, 0)
	case typeXML:
		b = append(b, 0) // SCHEMA_PRESENT = 0 (MS-TDS 2.2.5.5, XML_INFO)
	case typeUDT:
		// UDT_INFO in COLMETADATA (MS-TDS 2.2.5.5): max byte size,
		// database, schema, type name, assembly qualified name.
		b = appendU16(b, uint16(t.length))
		b = appendBVarChar(b, "")
		b = appendBVarChar(b, "sys")
		b = appendBVarChar(b, t.udtName)
		b = appendUSVarChar(b, udtAssembly(t.udtName))
	case typeVariant:
		b = appendU32(b, uint32(t.length))
	}
	return b
}

// ushortLen is the USHORT max length of a short-length type: 0xFFFF for
// (max), which makes its values PLP (MS-TDS 2.2.5.4.3).
func (t *colType) ushortLen() uint16 {
	if t.length < 0 {
		return 0xFFFF
	}
	return uint16(t.length)
}

// udtAssembly is the CLR type SQL Server names for its built-in UDTs.
func udtAssembly(name string) string {
	class := map[string]string{"hierarchyid": "SqlHierarchyId", "geometry": "SqlGeometry", "geography": "SqlGeography"}[name]
	return "Microsoft.SqlServer.Types." + class + ", Microsoft.SqlServer.Types, Version=11.0.0.0, Culture=neutral, PublicKeyToken=89845dcd8080cc91"
}
