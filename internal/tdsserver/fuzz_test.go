package tdsserver

import (
	"bytes"
	"github.com/cdcsnap/cdcsnap/internal/decnum"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"
)

// The parsers of untrusted input must never panic and never loop without
// consuming input: packet framing, PRELOGIN, LOGIN7, SQL batches and RPCs.

func FuzzReadMessage(f *testing.F) {
	var buf bytes.Buffer
	pw := newPacketWriter(&buf, 512, 0)
	pw.begin(pktSQLBatch)
	_, _ = pw.Write(buildBatch(strings.Repeat("select 1;", 100)))
	_ = pw.end()
	f.Add(buf.Bytes(), uint16(512))
	f.Add([]byte{pktAttention, statusEOM, 0, 8, 0, 0, 1, 0}, uint16(4096))
	f.Add([]byte{pktSQLBatch, 0, 0, 9, 0, 0, 1, 0, 'a', pktRPC, statusEOM, 0, 8, 0, 0, 2, 0}, uint16(4096))
	f.Add([]byte{pktSQLBatch, statusEOM, 0, 4, 0, 0, 1, 0}, uint16(4096))
	f.Fuzz(func(t *testing.T, data []byte, maxPacket uint16) {
		r := bytes.NewReader(data)
		hdr := make([]byte, headerLen)
		total := 0
		for {
			m, err := readMessage(r, int(maxPacket), hdr)
			if err != nil {
				return
			}
			total += len(m.data) + headerLen
			if total > len(data) {
				t.Fatalf("read %d payload bytes from %d bytes of input", total, len(data))
			}
		}
	})
}

func FuzzPrelogin(f *testing.F) {
	f.Add(buildPrelogin())
	f.Add(appendPreloginResponse(nil, serverVersion{16, 0, 1000, 6}, encryptNotSup))
	f.Add([]byte{0xFF})
	f.Add([]byte{0, 0xFF, 0xFF, 0, 1, 0xFF})
	f.Fuzz(func(t *testing.T, data []byte) {
		opts, err := parsePrelogin(data)
		if err != nil {
			return
		}
		for tok, v := range opts {
			if len(v) > len(data) {
				t.Fatalf("option %d of %d bytes from %d", tok, len(v), len(data))
			}
		}
	})
}

func FuzzLogin7(f *testing.F) {
	f.Add(buildLogin7(testUser, testPassword, "shop", 4096, 0))
	f.Add(buildLogin7("", "", "", 0, 0x80))
	f.Add(buildLogin7("ü😀", "p\x00w", strings.Repeat("d", 128), 32767, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseLogin7(data)
		if err != nil {
			return
		}
		for _, s := range []string{l.userName, l.password, l.database, l.appName, l.hostName, l.serverName, l.language} {
			if !utf8.ValidString(s) || len(s) > 3*len(data) {
				t.Fatalf("string %q from %d bytes", s, len(data))
			}
		}
	})
}

// rpcSeeds are RPCs in go-mssqldb's forms (rpc.go sendRpc; types.go
// writeTypeInfo/writeVarLen).
func rpcSeeds() [][]byte {
	plpNVarChar := func(name, s string) rawParam {
		u, _ := appendUTF16(nil, s)
		b := appendU16([]byte{typeNVarChar}, 0xFFFF)
		b = append(b, 0, 0, 0, 0, 0)
		b = appendU64(b, 0xFFFFFFFFFFFFFFFE)
		b = appendU32(b, uint32(len(u)))
		b = append(b, u...)
		return rawParam{name, appendU32(b, 0)}
	}
	// 10,000,000 units of 100 ns (1 s) on day 0x0B4BA4 (2027-10-07) UTC, offset 330 minutes.
	dto := rawParam{"@p3", []byte{typeDTOffset, 7, 10, 0x80, 0x96, 0x98, 0, 0, 0xA4, 0x4B, 0x0B, 0x4A, 0x01}}
	guid := rawParam{"@p4", append([]byte{typeGUID, 16, 16}, bytes.Repeat([]byte{0xAB}, 16)...)}
	dec := rawParam{"@p5", []byte{typeDecimalN, 17, 38, 10, 17, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}
	varchar := rawParam{"@p6", []byte{typeBigVarChr, 2, 0, 0x09, 0x04, 0xD0, 0x00, 0x34, 2, 0, 0xE9, 'x'}}
	null := rawParam{"@p7", []byte{typeNull}}
	return [][]byte{
		buildRPC(10, "", nvarcharParam("", "select @p1, @p2"), nvarcharParam("", "@p1 bigint,@p2 nvarchar(max)"),
			bigintParam("@p1", -1), plpNVarChar("@p2", "héllo😀")),
		buildRPC(10, "", nvarcharParam("", "select 1"), nvarcharParam("", "@p3 datetimeoffset(7),@p4 uniqueidentifier,@p5 decimal(38, 10),@p6 varchar(2),@p7 nvarchar(1)"),
			dto, guid, dec, varchar, null),
		buildRPC(0, "sys.sp_cdc_help_change_data_capture"),
		buildRPC(0, "[sys].[sp_cdc_get_captured_columns]", nvarcharParam("@capture_instance", "dbo_orders")),
	}
}

func FuzzRPC(f *testing.F) {
	for _, s := range rpcSeeds() {
		f.Add(s)
	}
	f.Add(buildBatch("select 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &Request{}
		if err := fillRPC(req, data); err == nil {
			c := req.clone()
			if len(c.Params) != len(req.Params) {
				t.Fatal("clone lost parameters")
			}
		}
		_, _ = parseBatch(data)
	})
}

// FuzzDecimalText: text parseDecimal accepts is encoded without loss: the
// magnitude it returns, formatted back, is the same number.
func FuzzDecimalText(f *testing.F) {
	for _, s := range []string{"0", "-0.05", "123.4500", "99999999999999999999999999999999999999", ".5", "1.", "+7", "00012.3000"} {
		f.Add(s, uint8(4))
	}
	f.Fuzz(func(t *testing.T, s string, scale uint8) {
		sc := int(scale % 39)
		neg, hi, lo, err := parseDecimal(s, 38, sc)
		if err != nil {
			return
		}
		mag := new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64)
		mag.Or(mag, new(big.Int).SetUint64(lo))
		if neg {
			mag.Neg(mag)
		}
		want, ok := new(big.Rat).SetString(strings.TrimPrefix(s, "+"))
		if !ok {
			t.Fatalf("%q accepted but not a number", s)
		}
		got, _ := new(big.Rat).SetString(decnum.FormatScaled(mag, sc))
		if got.Cmp(want) != 0 {
			t.Fatalf("%q scale %d: encoded as %s", s, sc, decnum.FormatScaled(mag, sc))
		}
	})
}

// TestRPCSeeds: the fuzz seeds are valid requests, decoded as go-mssqldb
// meant them.
func TestRPCSeeds(t *testing.T) {
	seeds := rpcSeeds()
	var got []string
	for _, s := range seeds {
		req := &Request{}
		if err := fillRPC(req, s); err != nil {
			t.Fatal(err)
		}
		for _, p := range req.Params {
			got = append(got, p.Name+" "+p.Decl+" "+short(p.Value))
		}
		got = append(got, "|"+req.Proc+"|"+req.SQL)
	}
	want := []string{
		"@p1 bigint -1", "@p2 nvarchar(max) héllo😀", "|sp_executesql|select @p1, @p2",
		"@p3 datetimeoffset(7) 2027-10-07 05:30:01 +0530 +0530", `@p4 uniqueidentifier "\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab"`,
		"@p5 decimal(38, 10) 0.0000000001", "@p6 varchar(2) éx", "@p7 nvarchar(1) <nil>", "|sp_executesql|select 1",
		"|sys.sp_cdc_help_change_data_capture|",
		"@capture_instance nvarchar(10) dbo_orders", "|[sys].[sp_cdc_get_captured_columns]|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
