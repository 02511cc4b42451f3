package sqlserver

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/source"
)

// appendUTF16 appends to dst the UTF-8 text of b, UTF-16LE as SQL Server
// sends nchar, nvarchar and ntext (MS-TDS 2.2.5.2.3: UCS-2 with surrogate
// pairs, as a _SC collation stores supplementary characters). An unpaired
// surrogate becomes U+FFFD, as go-mssqldb's own decoding does (v1.11.2
// ucs22str.go: utf16.Decode), so the text is the same either way. An odd
// length is an error. Runs of ASCII go four units at a time.
func appendUTF16(dst, b []byte) ([]byte, error) {
	if len(b)%2 != 0 {
		return dst, fmt.Errorf("UTF-16 text of odd length %d", len(b))
	}
	dst = growUTF8(dst, len(b)/2)
	for len(b) > 0 {
		for len(b) >= 8 {
			u := binary.LittleEndian.Uint64(b)
			if u&0xFF80FF80FF80FF80 != 0 {
				break
			}
			dst = append(dst, byte(u), byte(u>>16), byte(u>>32), byte(u>>48))
			b = b[8:]
		}
		if len(b) == 0 {
			break
		}
		c := rune(binary.LittleEndian.Uint16(b))
		b = b[2:]
		switch {
		case c < 0x80:
			dst = append(dst, byte(c))
		case c < 0xD800 || c > 0xDFFF:
			dst = utf8.AppendRune(dst, c)
		case c < 0xDC00 && len(b) >= 2:
			lo := rune(binary.LittleEndian.Uint16(b))
			if lo >= 0xDC00 && lo <= 0xDFFF {
				dst = utf8.AppendRune(dst, 0x10000+(c-0xD800)<<10+(lo-0xDC00))
				b = b[2:]
				continue
			}
			dst = utf8.AppendRune(dst, utf8.RuneError)
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
	}
	return dst, nil
}

// growUTF8 makes room for at least n more bytes in dst.
func growUTF8(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	return append(dst, make([]byte, n)...)[:len(dst)]
}

// unicodeText reports whether column c is read as Unicode text: an nchar
// or nvarchar column, or a char, varchar or text one, which the reads have
// the server convert to nvarchar (internal/mssqlstmt's readAsUnicode,
// FACTS.md F82): as its UTF-16 bytes (the range and change reads cast it to
// varbinary, F90) or, as a key column, as text. go-mssqldb's own UTF-16
// decoding of these types was the largest cost of the read (BENCHMARKS.md,
// "Reading from SQL Server: cdcsnap against Microsoft's drivers"); the bytes
// of a varbinary it hands over as they are.
func unicodeText(c source.Column) bool {
	switch c.Type {
	case "nchar", "nvarchar", "char", "varchar", "text":
		return true
	}
	return false
}

// utf16Appender appends a Unicode character column read as its UTF-16
// bytes ([]byte), or as text (string: a statement without the cast),
// converting into a scratch buffer the appender owns.
func utf16Appender(c source.Column, wrong func(any) error) func(b array.Builder, v any) error {
	var scratch []byte
	return func(b array.Builder, v any) error {
		switch x := v.(type) {
		case []byte:
			var err error
			if scratch, err = appendUTF16(scratch[:0], x); err != nil {
				return fmt.Errorf("column %q: %w", c.Name, err)
			}
			b.(*array.StringBuilder).BinaryBuilder.Append(scratch)
		case string:
			b.(*array.StringBuilder).Append(x)
		default:
			return wrong(v)
		}
		return nil
	}
}
