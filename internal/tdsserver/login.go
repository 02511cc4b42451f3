package tdsserver

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// PRELOGIN option tokens (MS-TDS 2.2.6.5).
const (
	preVersion    = 0x00
	preEncryption = 0x01
	preInstOpt    = 0x02
	preThreadID   = 0x03
	preMARS       = 0x04
	preTerminator = 0xFF
)

// parsePrelogin reads a PRELOGIN payload (MS-TDS 2.2.6.5): option headers
// (token, USHORT offset, USHORT length, big-endian) up to the 0xFF
// terminator, the offsets counted from the payload start.
func parsePrelogin(data []byte) (map[byte][]byte, error) {
	opts := map[byte][]byte{}
	for i := 0; ; i += 5 {
		if i >= len(data) {
			return nil, fmt.Errorf("tdsserver: PRELOGIN: no terminator in %d bytes", len(data))
		}
		tok := data[i]
		if tok == preTerminator {
			return opts, nil
		}
		if i+5 > len(data) {
			return nil, fmt.Errorf("tdsserver: PRELOGIN: option header 0x%02X truncated", tok)
		}
		off := int(binary.BigEndian.Uint16(data[i+1:]))
		n := int(binary.BigEndian.Uint16(data[i+3:]))
		if off+n > len(data) {
			return nil, fmt.Errorf("tdsserver: PRELOGIN: option 0x%02X at %d+%d beyond %d bytes", tok, off, n, len(data))
		}
		if _, dup := opts[tok]; dup {
			return nil, fmt.Errorf("tdsserver: PRELOGIN: option 0x%02X twice", tok)
		}
		opts[tok] = data[off : off+n]
	}
}

// appendPreloginResponse appends the server's PRELOGIN answer: VERSION,
// ENCRYPTION (negotiateEncryption's answer), INSTOPT 0 (the instance
// matched), an empty THREADID and MARS off.
func appendPreloginResponse(b []byte, ver serverVersion, encrypt byte) []byte {
	type opt struct {
		tok byte
		val []byte
	}
	opts := []opt{
		// UL_VERSION big-endian major, minor, build; then US_SUBBUILD.
		{preVersion, []byte{ver.major, ver.minor, byte(ver.build >> 8), byte(ver.build), byte(ver.revision >> 8), byte(ver.revision)}},
		{preEncryption, []byte{encrypt}},
		{preInstOpt, []byte{0}},
		{preThreadID, nil},
		{preMARS, []byte{0}},
	}
	off := len(opts)*5 + 1
	for _, o := range opts {
		b = append(b, o.tok)
		b = binary.BigEndian.AppendUint16(b, uint16(off))
		b = binary.BigEndian.AppendUint16(b, uint16(len(o.val)))
		off += len(o.val)
	}
	b = append(b, preTerminator)
	for _, o := range opts {
		b = append(b, o.val...)
	}
	return b
}

// login7 is what the server reads from LOGIN7 (MS-TDS 2.2.6.4).
type login7 struct {
	tdsVersion uint32
	packetSize uint32
	hostName   string
	userName   string
	password   string
	appName    string
	serverName string
	language   string
	database   string
	sspi       bool
	// readOnlyIntent is TypeFlags (byte 26) bit fReadOnlyIntent.
	readOnlyIntent bool
}

// login7FixedLen is the fixed part of LOGIN7 up to cbSSPILong.
const login7FixedLen = 94

// parseLogin7 reads LOGIN7: a fixed header of DWORD/BYTE fields, then
// (offset, length in characters) pairs into the variable part, all
// little-endian (MS-TDS 2.2.6.4; go-mssqldb sendLogin writes the same
// loginHeader).
func parseLogin7(data []byte) (login7, error) {
	var l login7
	if len(data) < login7FixedLen {
		return l, fmt.Errorf("tdsserver: LOGIN7 of %d bytes, shorter than its %d-byte header", len(data), login7FixedLen)
	}
	le := binary.LittleEndian
	if n := le.Uint32(data); n < login7FixedLen || int64(n) > int64(len(data)) {
		return l, fmt.Errorf("tdsserver: LOGIN7 length %d outside %d..%d", n, login7FixedLen, len(data))
	}
	l.tdsVersion = le.Uint32(data[4:])
	l.packetSize = le.Uint32(data[8:])
	str := func(at int, what string, mangled bool) (string, error) {
		off, n := int(le.Uint16(data[at:])), 2*int(le.Uint16(data[at+2:]))
		if n == 0 {
			return "", nil
		}
		if off+n > len(data) {
			return "", fmt.Errorf("tdsserver: LOGIN7 %s at %d+%d beyond %d bytes", what, off, n, len(data))
		}
		p := data[off : off+n]
		if mangled {
			// The password's bytes had their nibbles swapped and were XORed
			// with 0xA5 (MS-TDS 2.2.6.4, Password): undo both.
			q := make([]byte, len(p))
			for i, c := range p {
				c ^= 0xA5
				q[i] = c<<4 | c>>4
			}
			p = q
		}
		s, err := decodeUTF16(p)
		if err != nil {
			return "", fmt.Errorf("tdsserver: LOGIN7 %s: %w", what, err)
		}
		return s, nil
	}
	var err error
	for _, f := range []struct {
		at      int
		what    string
		dst     *string
		mangled bool
	}{
		{36, "HostName", &l.hostName, false},
		{40, "UserName", &l.userName, false},
		{44, "Password", &l.password, true},
		{48, "AppName", &l.appName, false},
		{52, "ServerName", &l.serverName, false},
		{64, "Language", &l.language, false},
		{68, "Database", &l.database, false},
	} {
		if *f.dst, err = str(f.at, f.what, f.mangled); err != nil {
			return l, err
		}
	}
	// TypeFlags: fSQLType (4 bits), fOLEDB, then fReadOnlyIntent (MS-TDS
	// 2.2.6.4), the bit go-mssqldb sets as fReadOnlyIntent = 32.
	l.readOnlyIntent = data[26]&0x20 != 0
	// Integrated security (OptionFlags2 fIntSecurity) or SSPI bytes.
	l.sspi = data[25]&0x80 != 0 || le.Uint16(data[80:]) != 0
	return l, nil
}

// serverVersion is Options.ServerVersion parsed.
type serverVersion struct {
	major, minor    uint8
	build, revision uint16
}

// parseServerVersion reads "major.minor.build[.revision]".
func parseServerVersion(s string) (serverVersion, error) {
	var v serverVersion
	parts := strings.Split(s, ".")
	if len(parts) < 3 || len(parts) > 4 {
		return v, fmt.Errorf("tdsserver: server version %q is not major.minor.build[.revision]", s)
	}
	var n [4]uint64
	for i, p := range parts {
		bitSize := 16
		if i < 2 {
			bitSize = 8
		}
		x, err := strconv.ParseUint(p, 10, bitSize)
		if err != nil {
			return v, fmt.Errorf("tdsserver: server version %q: part %q: %w", s, p, err)
		}
		n[i] = x
	}
	return serverVersion{uint8(n[0]), uint8(n[1]), uint16(n[2]), uint16(n[3])}, nil
}

// progVersion is LOGINACK's ProgVersion: major, minor, build high, build low.
func (v serverVersion) progVersion() [4]byte {
	return [4]byte{v.major, v.minor, byte(v.build >> 8), byte(v.build)}
}

// appendLoginResponse appends the tokens SQL Server answers a good login
// with (MS-TDS 2.2.2.2 Login Response): ENVCHANGE database with INFO 5701,
// ENVCHANGE collation, ENVCHANGE language with INFO 5703, LOGINACK,
// ENVCHANGE packet size, DONE.
func appendLoginResponse(b []byte, db, server string, coll Collation, ver serverVersion, packetSize, asked int) []byte {
	b = appendEnvChange(b, envDatabase, db, "master")
	b = appendMessage(b, tokInfo, 5701, 2, 0, "Changed database context to '"+db+"'.", server, "", 1)
	b = appendEnvChangeBytes(b, envCollation, coll.appendWire(nil), nil)
	b = appendEnvChange(b, envLanguage, "us_english", "")
	b = appendMessage(b, tokInfo, 5703, 1, 0, "Changed language setting to us_english.", server, "", 1)
	b = appendLoginAck(b, "cdcsnap tdsserver", ver.progVersion())
	b = appendEnvChange(b, envPacketSize, strconv.Itoa(packetSize), strconv.Itoa(asked))
	return appendDone(b, tokDone, 0, 0, 0)
}

// appendLoginFailed appends ERROR 18456 (class 14, as SQL Server reports a
// failed login) and a DONE with DONE_ERROR; the connection then closes.
func appendLoginFailed(b []byte, user, server string) []byte {
	b = appendMessage(b, tokError, 18456, 1, 14, "Login failed for user '"+user+"'.", server, "", 1)
	return appendDone(b, tokDone, doneError, 0, 0)
}
