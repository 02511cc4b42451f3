package tdsserver

import (
	"fmt"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// Code page bytes as SQL Server stores them.
//
// A char, varchar or text column holds bytes of its collation's code page,
// whatever they are: bytes a code page leaves undefined (0x81, 0x8D, 0x8F,
// 0x90 and 0x9D in 1252) and, in the double-byte code pages 932, 936, 949
// and 950, lead and trail byte pairs that map to no character, get there
// through binary conversions and clients that send raw bytes
// (source/sqlserver/FACTS.md F82). A handler sends such a value as the
// stored bytes themselves: a []byte for a char/varchar/text column is
// written unchanged (only its length is checked), where a string is
// encoded in the code page.
//
// Windows (and so SQL Server's conversions to and from nvarchar) maps each
// of 1252's five undefined bytes to the C1 control with the same number
// (Microsoft's WindowsBestFit table bestfit1252.txt, MBTABLE: 0x81 0x0081,
// 0x8d 0x008d, 0x8f 0x008f, 0x90 0x0090, 0x9d 0x009d; its WCTABLE maps them
// back). golang.org/x/text's Windows1252 leaves them out, so strings holding
// those five runes are encoded here.

// bestFit1252Holes are the bytes 1252 leaves undefined, each mapped to the
// rune of the same value.
func bestFit1252Hole(r rune) bool {
	switch r {
	case 0x81, 0x8D, 0x8F, 0x90, 0x9D:
		return true
	}
	return false
}

// dbcsEncoding is the encoding of a double-byte Windows code page: the
// x/text encodings are the WHATWG ones, which match Windows' for the
// characters they both hold (Shift_JIS as "also known as Code Page 932 and
// Windows-31J", GBK, EUC-KR for 949's KS X 1001 part, Big5).
func dbcsEncoding(cp int) encoding.Encoding {
	switch cp {
	case 932:
		return japanese.ShiftJIS
	case 936:
		return simplifiedchinese.GBK
	case 949:
		return korean.EUCKR
	case 950:
		return traditionalchinese.Big5
	}
	return nil
}

// dbcsCodePage is the double-byte code page of a Windows LCID (the
// Japanese, Chinese_PRC, Korean_Wansung and Chinese_Taiwan_Stroke
// collations), 0 for others.
func dbcsCodePage(lcid uint32) int {
	switch lcid {
	case 0x0411:
		return 932
	case 0x0804:
		return 936
	case 0x0412:
		return 949
	case 0x0404:
		return 950
	}
	return 0
}

// appendStored appends the value of a char/varchar/text column: stored
// bytes ([]byte) as they are, or a string encoded in the code page.
func (cs charset) appendStored(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return append(b, x...), nil
	case string:
		return cs.appendEncoded(b, x)
	}
	return b, typeErr(v, "string, or []byte of stored code page bytes")
}

// appendDBCS encodes s in a double-byte code page.
func (cs charset) appendDBCS(b []byte, s string) ([]byte, error) {
	out, err := cs.enc.NewEncoder().String(s)
	if err != nil {
		return b, fmt.Errorf("%q is not in code page %d: %w", s, cs.codePage, err)
	}
	return append(b, out...), nil
}

// decodeDBCS decodes bytes of a double-byte code page (U+FFFD for a pair
// it does not hold).
func (cs charset) decodeDBCS(b []byte) string {
	out, _ := cs.enc.NewDecoder().Bytes(b)
	return string(out)
}
