package tdsserver

import (
	"encoding/binary"
	"unicode/utf16"
)

// Token types, MS-TDS 2.2.7 (the ids go-mssqldb's token.go switches on).
const (
	tokReturnStatus = 0x79
	tokReturnValue  = 0xAC
	tokColMetadata  = 0x81
	tokError        = 0xAA
	tokInfo         = 0xAB
	tokLoginAck     = 0xAD
	tokRow          = 0xD1
	tokNBCRow       = 0xD2
	tokEnvChange    = 0xE3
	tokDone         = 0xFD
	tokDoneProc     = 0xFE
	tokDoneInProc   = 0xFF
)

// DONE status bits, MS-TDS 2.2.7.6.
const (
	doneMore  = 0x01
	doneError = 0x02
	doneCount = 0x10
	doneAttn  = 0x20
)

// CurCmd of a SELECT (0xC1). MS-TDS leaves CurCmd to the application;
// go-mssqldb compares it with 0xC1 only to decide whether to report rows
// affected on its message queue (token.go, cmdSelect).
const curCmdSelect = 0xC1

// ENVCHANGE types, MS-TDS 2.2.7.9.
const (
	envDatabase    = 1
	envLanguage    = 2
	envPacketSize  = 4
	envCollation   = 7
	envBeginTran   = 8
	envCommitTran  = 9
	envRollbackTr  = 10
	envResetConnAk = 18
)

// TDS 7.4, as LOGINACK announces it (MS-TDS 2.2.7.14). go-mssqldb sends
// time.Time parameters as datetimeoffset only when this is >= 0x730A0003
// (mssql.go, makeParam).
const tdsVersion74 = 0x74000004

// appendDone appends a DONE, DONEPROC or DONEINPROC token (MS-TDS 2.2.7.6
// to 2.2.7.8; DoneRowCount is a ULONGLONG since TDS 7.2).
func appendDone(b []byte, tok byte, status, curCmd uint16, rows uint64) []byte {
	return appendU64(appendU16(appendU16(append(b, tok), status), curCmd), rows)
}

// appendMessage appends an ERROR or INFO token (MS-TDS 2.2.7.10, 2.2.7.13).
// The message is cut to the 65535 UTF-16 units a US_VARCHAR holds, the
// server and procedure names to the 255 of a B_VARCHAR.
func appendMessage(b []byte, tok byte, number int32, state, class uint8, msg, server, proc string, line int32) []byte {
	return appendSized(b, tok, func(b []byte) []byte {
		b = append(appendU32(b, uint32(number)), state, class)
		b = appendBVarChar(appendBVarChar(appendUSVarChar(b, msg), server), proc)
		return appendU32(b, uint32(line))
	})
}

// appendSized appends a token whose data is preceded by its USHORT length
// (MS-TDS 2.2.4.2.1.3, variable-length tokens): tok, the length, then what
// data appends.
func appendSized(b []byte, tok byte, data func([]byte) []byte) []byte {
	b = append(b, tok, 0, 0)
	start := len(b)
	b = data(b)
	binary.LittleEndian.PutUint16(b[start-2:], uint16(len(b)-start))
	return b
}

// appendBVarChar appends a B_VARCHAR: a byte count of UTF-16 units, then
// the units, cut to the 255 a byte counts.
func appendBVarChar(b []byte, s string) []byte {
	u := utf16Units(s, 0xFF)
	return append(append(b, byte(len(u)/2)), u...)
}

// appendUSVarChar appends a US_VARCHAR: a USHORT count of UTF-16 units,
// then the units, cut to 65535.
func appendUSVarChar(b []byte, s string) []byte {
	u := utf16Units(s, 0xFFFF)
	return append(appendU16(b, uint16(len(u)/2)), u...)
}

// utf16Units encodes s as UTF-16LE, cut to at most max units without
// splitting a surrogate pair. Invalid UTF-8 becomes U+FFFD here: these are
// diagnostic texts.
func utf16Units(s string, max int) []byte {
	u := make([]byte, 0, 2*len(s))
	for _, r := range s {
		if r < 0x10000 {
			if len(u)/2+1 > max {
				break
			}
			u = append(u, byte(r), byte(r>>8))
			continue
		}
		if len(u)/2+2 > max {
			break
		}
		r1, r2 := utf16.EncodeRune(r)
		u = append(u, byte(r1), byte(r1>>8), byte(r2), byte(r2>>8))
	}
	return u
}

// appendEnvChange appends an ENVCHANGE token with B_VARCHAR values.
func appendEnvChange(b []byte, typ byte, newV, oldV string) []byte {
	return appendSized(b, tokEnvChange, func(b []byte) []byte {
		return appendBVarChar(appendBVarChar(append(b, typ), newV), oldV)
	})
}

// appendEnvChangeBytes appends an ENVCHANGE token with B_VARBYTE values
// (collation, transactions, reset acknowledgement).
func appendEnvChangeBytes(b []byte, typ byte, newV, oldV []byte) []byte {
	b = appendU16(append(b, tokEnvChange), uint16(1+1+len(newV)+1+len(oldV)))
	b = append(append(b, typ, byte(len(newV))), newV...)
	return append(append(b, byte(len(oldV))), oldV...)
}

// appendLoginAck appends LOGINACK (MS-TDS 2.2.7.14): interface 1 (T-SQL),
// the TDS version in network byte order (go-mssqldb parseLoginAck reads
// it big-endian), the program name and its version bytes.
func appendLoginAck(b []byte, progName string, ver [4]byte) []byte {
	return appendSized(b, tokLoginAck, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(append(b, 1), tdsVersion74)
		return append(appendBVarChar(b, progName), ver[:]...)
	})
}

// appendReturnStatus appends RETURNSTATUS (MS-TDS 2.2.7.18).
func appendReturnStatus(b []byte, v int32) []byte {
	return appendU32(append(b, tokReturnStatus), uint32(v))
}
