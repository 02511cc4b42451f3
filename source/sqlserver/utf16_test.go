package sqlserver

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf16"
)

// utf16Oracle decodes UTF-16LE as go-mssqldb's slow path does
// (utf16.Decode, then string of the runes).
func utf16Oracle(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

func utf16le(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return b
}

func TestAppendUTF16(t *testing.T) {
	for _, s := range []string{"", "a", "abcd", "abcdefgh", "abcdefghi", "ascii then é", "é then ascii text", "Kraków 東京 😀 and more ascii", "𝄞", strings.Repeat("x", 33) + "ж"} {
		got, err := appendUTF16([]byte("prefix:"), utf16le(s))
		if err != nil || string(got) != "prefix:"+s {
			t.Errorf("appendUTF16(%q) = %q, %v", s, got, err)
		}
	}
	// Unpaired surrogates, as go-mssqldb decodes them: U+FFFD.
	for _, units := range [][]uint16{{0xD800}, {0xDC00}, {'a', 0xD800, 'b'}, {0xD800, 0xD800, 0xDC00}, {0xDC00, 0xD800}} {
		var b []byte
		for _, u := range units {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
		got, err := appendUTF16(nil, b)
		if err != nil || string(got) != utf16Oracle(b) {
			t.Errorf("appendUTF16(%04X) = %q, %v, want %q", units, got, err, utf16Oracle(b))
		}
	}
	if _, err := appendUTF16(nil, []byte{1, 2, 3}); err == nil {
		t.Error("odd length accepted")
	}
}

// FuzzAppendUTF16: any even-length input decodes as go-mssqldb's UTF-16
// decoding does.
func FuzzAppendUTF16(f *testing.F) {
	f.Add(utf16le("Kraków 東京 😀"))
	f.Add([]byte{0x00, 0xD8, 0x41, 0x00})
	f.Add(bytes.Repeat([]byte{'a', 0}, 20))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := appendUTF16(nil, b)
		if len(b)%2 != 0 {
			if err == nil {
				t.Fatal("odd length accepted")
			}
			return
		}
		if err != nil || string(got) != utf16Oracle(b) {
			t.Fatalf("appendUTF16(%x) = %q, %v, want %q", b, got, err, utf16Oracle(b))
		}
	})
}
