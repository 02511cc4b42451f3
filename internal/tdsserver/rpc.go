package tdsserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
	"math"
	"math/big"
	"time"
)

// Kind says what a request was.
type Kind uint8

// Request kinds.
const (
	// Batch is a SQL batch (packet type 1, MS-TDS 2.2.6.7): go-mssqldb
	// sends one for a statement without arguments.
	Batch Kind = iota + 1
	// RPC is a remote procedure call (packet type 3, MS-TDS 2.2.6.6):
	// sp_executesql for a statement with arguments, or a procedure by name
	// for query text that is a bare procedure name.
	RPC
)

func (k Kind) String() string {
	switch k {
	case Batch:
		return "batch"
	case RPC:
		return "rpc"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// TypeInfo is a parameter's TYPE_INFO (MS-TDS 2.2.5.6) as sent.
type TypeInfo struct {
	// ID is the TDS type id, e.g. 0x26 INTN, 0xE7 NVARCHAR, 0x2B
	// DATETIMEOFFSETN.
	ID byte
	// Name is the SQL type the TYPE_INFO stands for, written as SQL Server
	// declares it: "bigint", "nvarchar(5)", "nvarchar(max)", "decimal(18,4)",
	// "datetimeoffset(7)", "time(7)"; "null" for the untyped NULL (0x1F).
	Name string
	// MaxLength is the length field: bytes for the byte- and
	// USHORT-length types (nvarchar(5) has 10), -1 for a (max)/PLP type,
	// the fixed size for the fixed-length types.
	MaxLength int
	// Precision and Scale of decimal/numeric; Scale of time, datetime2 and
	// datetimeoffset.
	Precision, Scale uint8
	// Collation of char, varchar, nchar and nvarchar.
	Collation Collation
}

// Param is one RPC parameter.
type Param struct {
	// Name is the parameter name, "@p1" or "@Name"; "" for an unnamed one.
	Name string
	// Decl is the parameter's declaration in sp_executesql's @params
	// ("nvarchar(5)", "bigint"), without OUTPUT; for a parameter not
	// declared there (an RPC by name), Type.Name.
	Decl string
	// Output is the fByRefValue status flag: an OUTPUT parameter.
	Output bool
	// Type is the TYPE_INFO the value came with.
	Type TypeInfo
	// Value is the decoded value: int64 (integers), bool (bit), float64
	// (float, real), string (character types, xml, and decimal, numeric,
	// money and smallmoney as exact text with Scale digits after the point),
	// []byte (binary types, and a uniqueidentifier's 16 wire bytes),
	// time.Time (date, time and datetime types: UTC holding the wall clock,
	// or for datetimeoffset the instant in a zone of its offset), or nil for
	// NULL.
	Value any
}

// ProcIDs of the well-known procedures (MS-TDS 2.2.6.6, ProcID).
func procIDName(id uint16) string {
	names := [...]string{1: "sp_cursor", "sp_cursoropen", "sp_cursorprepare", "sp_cursorexecute", "sp_cursorprepexec",
		"sp_cursorunprepare", "sp_cursorfetch", "sp_cursoroption", "sp_cursorclose", "sp_executesql", "sp_prepare",
		"sp_execute", "sp_prepexec", "sp_prepexecrpc", "sp_unprepare"}
	if int(id) < len(names) && names[id] != "" {
		return names[id]
	}
	return fmt.Sprintf("procid %d", id)
}

// cursor reads a message payload; every read checks bounds and errors are
// sticky, so hostile input cannot panic the server.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

func (c *cursor) left() int { return len(c.b) - c.off }

func (c *cursor) bytes(n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > c.left() {
		c.fail("truncated: %d bytes wanted at offset %d, %d left", n, c.off, c.left())
		return nil
	}
	p := c.b[c.off : c.off+n]
	c.off += n
	return p
}

func (c *cursor) u8() byte {
	if p := c.bytes(1); p != nil {
		return p[0]
	}
	return 0
}

func (c *cursor) u16() uint16 {
	if p := c.bytes(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (c *cursor) u32() uint32 {
	if p := c.bytes(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if p := c.bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// ucs2 reads n UTF-16 units.
func (c *cursor) ucs2(n int) string {
	p := c.bytes(2 * n)
	if c.err != nil {
		return ""
	}
	s, _ := decodeUTF16(p)
	return s
}

// skipAllHeaders skips ALL_HEADERS (MS-TDS 2.2.5.3), which SQLBatch and RPC
// requests carry since TDS 7.2: a DWORD total length including itself, then
// headers of DWORD length (including itself), USHORT type and data.
func skipAllHeaders(c *cursor) {
	total := int(c.u32())
	if c.err != nil {
		return
	}
	if total < 4 || total-4 > c.left() {
		c.fail("ALL_HEADERS length %d outside 4..%d", total, c.left()+4)
		return
	}
	h := cursor{b: c.bytes(total - 4)}
	for h.left() > 0 && h.err == nil {
		n := int(h.u32())
		if h.err == nil && (n < 6 || n-4 > h.left()) {
			h.fail("ALL_HEADERS header length %d outside 6..%d", n, h.left()+4)
		}
		h.bytes(n - 4)
	}
	if h.err != nil {
		c.fail("%v", h.err)
	}
}

// parseBatch reads an SQLBatch payload: ALL_HEADERS, then the text in
// UTF-16LE (MS-TDS 2.2.6.7).
func parseBatch(data []byte) (string, error) {
	c := &cursor{b: data}
	skipAllHeaders(c)
	if c.err != nil {
		return "", fmt.Errorf("tdsserver: SQL batch: %w", c.err)
	}
	s, err := decodeUTF16(c.b[c.off:])
	if err != nil {
		return "", fmt.Errorf("tdsserver: SQL batch text: %w", err)
	}
	return s, nil
}

// rpcCall is one parsed RPCReqBatch.
type rpcCall struct {
	proc   string
	procID uint16
	params []Param
}

// parseRPC reads an RPC request payload (MS-TDS 2.2.6.6): ALL_HEADERS,
// then the procedure (0xFFFF and a ProcID, or a US_VARCHAR name), the
// option flags and the parameters. One procedure per request: go-mssqldb
// never sends a batch of several (rpc.go, sendRpc).
func parseRPC(data []byte) (rpcCall, error) {
	var call rpcCall
	c := &cursor{b: data}
	skipAllHeaders(c)
	if n := c.u16(); n == 0xFFFF {
		call.procID = c.u16()
		call.proc = procIDName(call.procID)
	} else {
		call.proc = c.ucs2(int(n))
	}
	c.u16() // OptionFlags: fWithRecomp, fNoMetaData, fReuseMetaData
	for c.err == nil && c.left() > 0 {
		if c.b[c.off] == 0xFF || c.b[c.off] == 0xFE {
			return call, errors.New("tdsserver: RPC: several procedures in one request (BatchFlag/NoExecFlag) are not supported")
		}
		p, err := readParam(c)
		if err != nil {
			return call, fmt.Errorf("tdsserver: RPC %s, parameter %d: %w", call.proc, len(call.params)+1, err)
		}
		call.params = append(call.params, p)
	}
	if c.err != nil {
		return call, fmt.Errorf("tdsserver: RPC %s: %w", call.proc, c.err)
	}
	return call, nil
}

// readParam reads ParamMetaData and ParamLenData (MS-TDS 2.2.6.6).
func readParam(c *cursor) (Param, error) {
	var p Param
	p.Name = c.ucs2(int(c.u8()))
	status := c.u8()
	p.Output = status&0x01 != 0 // fByRefValue
	if status&0x08 != 0 {       // fEncrypted
		return p, fmt.Errorf("%s: encrypted parameters (Always Encrypted) are not supported", p.Name)
	}
	ti, err := readTypeInfo(c)
	if err != nil {
		return p, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.Type, p.Decl = ti, ti.Name
	if p.Value, err = readValue(c, ti); err != nil {
		return p, fmt.Errorf("%s (%s): %w", p.Name, ti.Name, err)
	}
	return p, c.err
}

// readTypeInfo reads a parameter's TYPE_INFO (MS-TDS 2.2.5.6), the forms
// go-mssqldb's writeTypeInfo produces.
func readTypeInfo(c *cursor) (TypeInfo, error) {
	ti := TypeInfo{ID: c.u8()}
	switch ti.ID {
	case typeNull:
		ti.Name = "null"
	case typeGUID:
		if ti.MaxLength = int(c.u8()); c.err == nil && ti.MaxLength != 16 {
			return ti, fmt.Errorf("type 0x%02X with length %d", ti.ID, ti.MaxLength)
		}
		ti.Name = "uniqueidentifier"
	case typeIntN, typeBitN, typeFltN, typeMoneyN, typeDateTimeN:
		ti.MaxLength = int(c.u8())
		f, ok := fixedByLen(ti.ID, ti.MaxLength)
		if c.err == nil && !ok {
			return ti, fmt.Errorf("type 0x%02X with length %d", ti.ID, ti.MaxLength)
		}
		ti.Name = f.name
	case typeDecimalN, typeNumericN:
		ti.MaxLength, ti.Precision, ti.Scale = int(c.u8()), c.u8(), c.u8()
		if c.err == nil && (ti.Precision < 1 || ti.Precision > 38 || ti.Scale > ti.Precision || ti.MaxLength < 1 || ti.MaxLength > 17) {
			return ti, fmt.Errorf("decimal length %d precision %d scale %d", ti.MaxLength, ti.Precision, ti.Scale)
		}
		base := "decimal"
		if ti.ID == typeNumericN {
			base = "numeric"
		}
		ti.Name = fmt.Sprintf("%s(%d,%d)", base, ti.Precision, ti.Scale)
	case typeDateN:
		ti.MaxLength, ti.Name = 3, "date"
	case typeTimeN, typeDateTime2, typeDTOffset:
		ti.Scale = c.u8()
		if c.err == nil && ti.Scale > 7 {
			return ti, fmt.Errorf("scale %d over 7", ti.Scale)
		}
		base := map[byte]string{typeTimeN: "time", typeDateTime2: "datetime2", typeDTOffset: "datetimeoffset"}[ti.ID]
		ti.MaxLength = TimeLen(int(ti.Scale)) + map[byte]int{typeTimeN: 0, typeDateTime2: 3, typeDTOffset: 5}[ti.ID]
		ti.Name = fmt.Sprintf("%s(%d)", base, ti.Scale)
	case typeBigVarBin, typeBigVarChr, typeBigBinary, typeBigChar, typeNVarChar, typeNChar:
		n := int(c.u16())
		ti.MaxLength = n
		if n == 0xFFFF {
			ti.MaxLength = -1
		}
		if ti.ID == typeBigVarChr || ti.ID == typeBigChar || ti.ID == typeNVarChar || ti.ID == typeNChar {
			if p := c.bytes(5); p != nil {
				ti.Collation = collationFromWire(p)
			}
		}
		ti.Name = varName(ti.ID, ti.MaxLength)
	case typeXML:
		if c.u8() != 0 { // SCHEMA_PRESENT (MS-TDS 2.2.5.5, XML_INFO)
			return ti, errors.New("xml with a schema collection is not supported")
		}
		ti.MaxLength, ti.Name = -1, "xml"
	default:
		f, ok := fixedByID(ti.ID)
		if !ok {
			return ti, fmt.Errorf("parameter type 0x%02X is not supported", ti.ID)
		}
		ti.MaxLength, ti.Name = f.size, f.name
	}
	return ti, c.err
}

func varName(id byte, n int) string {
	base := map[byte]string{typeBigVarBin: "varbinary", typeBigVarChr: "varchar", typeBigBinary: "binary",
		typeBigChar: "char", typeNVarChar: "nvarchar", typeNChar: "nchar"}[id]
	switch {
	case n < 0:
		return base + "(max)"
	case id == typeNVarChar || id == typeNChar:
		return fmt.Sprintf("%s(%d)", base, n/2)
	}
	return fmt.Sprintf("%s(%d)", base, n)
}

// isFixed reports whether id is a fixed-length type (no length on the
// wire).
func isFixed(id byte) bool {
	_, ok := fixedByID(id)
	return ok
}

// readValue reads ParamLenData (TYPE_VARBYTE, MS-TDS 2.2.5.2.3) and
// decodes it as Param.Value documents.
func readValue(c *cursor, ti TypeInfo) (any, error) {
	var raw []byte
	switch {
	case ti.ID == typeNull:
		return nil, nil
	case isFixed(ti.ID):
		raw = c.bytes(ti.MaxLength)
	case ti.MaxLength < 0:
		var null bool
		raw, null = readPLP(c)
		if null {
			return nil, c.err
		}
	case ti.ID == typeBigVarBin || ti.ID == typeBigVarChr || ti.ID == typeBigBinary || ti.ID == typeBigChar || ti.ID == typeNVarChar || ti.ID == typeNChar:
		n := int(c.u16())
		if n == 0xFFFF {
			return nil, c.err
		}
		if c.err == nil && n > ti.MaxLength {
			return nil, fmt.Errorf("value of %d bytes over the declared %d", n, ti.MaxLength)
		}
		raw = c.bytes(n)
	default: // BYTELEN: 0 is NULL; decodeValue checks the exact length
		n := int(c.u8())
		if n == 0 {
			return nil, c.err
		}
		if c.err == nil && n > ti.MaxLength {
			return nil, fmt.Errorf("value of %d bytes over the declared %d", n, ti.MaxLength)
		}
		raw = c.bytes(n)
	}
	if c.err != nil {
		return nil, c.err
	}
	return decodeValue(ti, raw)
}

// readPLP reads a PLP value (MS-TDS 2.2.5.2.3): ULONGLONG total length
// (0xFFFFFFFFFFFFFFFF NULL, 0xFFFFFFFFFFFFFFFE unknown), then chunks of
// ULONG length up to a zero-length terminator.
func readPLP(c *cursor) ([]byte, bool) {
	total := c.u64()
	if c.err != nil {
		return nil, false
	}
	if total == math.MaxUint64 {
		return nil, true
	}
	if total != math.MaxUint64-1 && total > uint64(c.left()) {
		c.fail("PLP length %d over the %d bytes left", total, c.left())
		return nil, false
	}
	var out []byte
	for c.err == nil {
		n := c.u32()
		if n == 0 || c.err != nil {
			break
		}
		out = append(out, c.bytes(int(min(n, math.MaxInt32)))...)
	}
	if c.err == nil && total != math.MaxUint64-1 && uint64(len(out)) != total {
		c.fail("PLP chunks hold %d bytes, total says %d", len(out), total)
	}
	if out == nil {
		out = []byte{}
	}
	return out, false
}

// decodeValue turns the value bytes of ti into a Go value.
func decodeValue(ti TypeInfo, b []byte) (any, error) {
	le := binary.LittleEndian
	id := ti.ID
	if f, ok := fixedByID(id); ok {
		id = f.idN // b holds exactly f.size bytes: decoded as the nullable form
	}
	switch id {
	case typeIntN:
		switch len(b) {
		case 1:
			return int64(b[0]), nil
		case 2:
			return int64(int16(le.Uint16(b))), nil
		case 4:
			return int64(int32(le.Uint32(b))), nil
		case 8:
			return int64(le.Uint64(b)), nil
		}
	case typeBitN:
		if len(b) == 1 {
			return b[0] != 0, nil
		}
	case typeFltN:
		if len(b) == 4 {
			return float64(math.Float32frombits(le.Uint32(b))), nil
		}
		if len(b) == 8 {
			return math.Float64frombits(le.Uint64(b)), nil
		}
	case typeMoneyN:
		if len(b) == 4 {
			return decnum.FormatScaled(big.NewInt(int64(int32(le.Uint32(b)))), 4), nil
		}
		if len(b) == 8 {
			v := int64(uint64(le.Uint32(b))<<32 | uint64(le.Uint32(b[4:])))
			return decnum.FormatScaled(big.NewInt(v), 4), nil
		}
	case typeDateTimeN:
		if len(b) == 4 {
			return time.Date(1900, 1, 1+int(le.Uint16(b)), 0, int(le.Uint16(b[2:])), 0, 0, time.UTC), nil
		}
		if len(b) == 8 {
			return decodeDateTime(b), nil
		}
	case typeDecimalN, typeNumericN:
		if len(b) < 2 {
			break
		}
		mag := make([]byte, len(b)-1)
		for i := range mag { // little-endian on the wire, big.Int wants big-endian
			mag[i] = b[len(b)-1-i]
		}
		n := new(big.Int).SetBytes(mag)
		if b[0] == 0 {
			n.Neg(n)
		}
		return decnum.FormatScaled(n, int(ti.Scale)), nil
	case typeGUID:
		if len(b) == 16 {
			return append([]byte(nil), b...), nil
		}
	case typeDateN:
		if len(b) == 3 {
			return time.Date(1, 1, 1+days3(b), 0, 0, 0, 0, time.UTC), nil
		}
	case typeTimeN:
		if len(b) == TimeLen(int(ti.Scale)) {
			return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(clockOf(b, ti.Scale)), nil
		}
	case typeDateTime2:
		if n := TimeLen(int(ti.Scale)); len(b) == n+3 {
			return time.Date(1, 1, 1+days3(b[n:]), 0, 0, 0, 0, time.UTC).Add(clockOf(b[:n], ti.Scale)), nil
		}
	case typeDTOffset:
		if n := TimeLen(int(ti.Scale)); len(b) == n+5 {
			utc := time.Date(1, 1, 1+days3(b[n:]), 0, 0, 0, 0, time.UTC).Add(clockOf(b[:n], ti.Scale))
			off := int(int16(le.Uint16(b[n+3:])))
			return utc.In(time.FixedZone("", off*60)), nil
		}
	case typeBigVarBin, typeBigBinary:
		return append([]byte(nil), b...), nil
	case typeNVarChar, typeNChar, typeXML:
		return decodeUTF16(b)
	case typeBigVarChr, typeBigChar:
		cs, err := charsetOf(ti.Collation)
		if err != nil {
			return nil, err
		}
		return cs.decode(b), nil
	}
	return nil, fmt.Errorf("value of %d bytes does not fit %s", len(b), ti.Name)
}

func decodeDateTime(b []byte) time.Time {
	days := int(int32(binary.LittleEndian.Uint32(b)))
	ticks := int64(binary.LittleEndian.Uint32(b[4:]))
	// 1/300 s ticks to 100 ns units (1e7/300 = 100000/3 each), rounded
	// to the nearest.
	ns := (ticks*100_000 + 1) / 3 * 100
	return time.Date(1900, 1, 1+days, 0, 0, 0, 0, time.UTC).Add(time.Duration(ns))
}

func days3(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }

// clockOf reads a time of day in units of 10^-scale s.
func clockOf(b []byte, scale uint8) time.Duration {
	var ticks uint64
	for i := len(b) - 1; i >= 0; i-- {
		ticks = ticks<<8 | uint64(b[i])
	}
	return time.Duration(ticks * uint64(math.Pow10(9-int(scale))))
}
