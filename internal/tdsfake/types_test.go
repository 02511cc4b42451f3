package tdsfake_test

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// everyType is a table with every type of the mapping
// (source.Column.ArrowType) and rows of edge values: NULL, the least and
// greatest, datetime2(7) 100 ns apart, datetimeoffset at several offsets,
// decimal(38,10), money, uniqueidentifiers, varchar in Greek_CI_AS and in a
// _UTF8 collation, nvarchar with surrogate pairs, and varbinary(max) and
// xml longer than one packet.
func everyType(t *testing.T) (*fake.DB, *source.CaptureInstance) {
	t.Helper()
	db := fake.New(fake.Options{})
	cols := []fake.ColumnDef{
		{Name: "id", Type: "bigint"},
		{Name: "b", Type: "bit", Nullable: true}, {Name: "ti", Type: "tinyint", Nullable: true}, {Name: "si", Type: "smallint", Nullable: true},
		{Name: "i", Type: "int", Nullable: true}, {Name: "bi", Type: "bigint", Nullable: true},
		{Name: "dec", Type: "decimal(38,10)", Nullable: true}, {Name: "num", Type: "numeric(5,2)", Nullable: true},
		{Name: "m", Type: "money", Nullable: true}, {Name: "sm", Type: "smallmoney", Nullable: true},
		{Name: "f", Type: "float", Nullable: true}, {Name: "r", Type: "real", Nullable: true},
		{Name: "d", Type: "date", Nullable: true}, {Name: "t0", Type: "time(0)", Nullable: true}, {Name: "t7", Type: "time(7)", Nullable: true},
		{Name: "dt", Type: "datetime", Nullable: true}, {Name: "sdt", Type: "smalldatetime", Nullable: true},
		{Name: "dt2", Type: "datetime2(7)", Nullable: true}, {Name: "dto", Type: "datetimeoffset(7)", Nullable: true},
		{Name: "c", Type: "char(3)", Nullable: true}, {Name: "greek", Type: "varchar(20)", Collation: "Greek_CI_AS", Nullable: true},
		{Name: "utf8", Type: "varchar(40)", Collation: "Latin1_General_100_CI_AS_SC_UTF8", Nullable: true},
		{Name: "vc", Type: "varchar(max)", Nullable: true}, {Name: "tx", Type: "text", Nullable: true},
		{Name: "nc", Type: "nchar(2)", Nullable: true}, {Name: "nv", Type: "nvarchar(max)", Nullable: true}, {Name: "ntx", Type: "ntext", Nullable: true},
		{Name: "bin", Type: "binary(4)", Nullable: true}, {Name: "vb", Type: "varbinary(max)", Nullable: true}, {Name: "img", Type: "image", Nullable: true},
		{Name: "u", Type: "uniqueidentifier", Nullable: true}, {Name: "x", Type: "xml", Nullable: true},
	}
	big := strings.Repeat("0123456789", 1000) // 10 kB: past a 4 kB packet
	bigBytes := []byte(big)
	u1, _ := keyrange.ParseUUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
	u2, _ := keyrange.ParseUUID("ffffffff-ffff-ffff-ffff-ffffffffffff")
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	row := func(id int64, vals ...any) fake.Row { return append(fake.Row{id}, vals...) }
	rows := []fake.Row{
		row(1, true, int64(255), int64(-32768), int64(-2147483648), int64(-9223372036854775808),
			keyrange.Decimal("-1234567890123456789012345678.0123456789"), keyrange.Decimal("123.45"),
			keyrange.Decimal("922337203685477.5807"), keyrange.Decimal("-214748.3648"), 1.7976931348623157e308, float64(float32(3.4028235e38)),
			utc(1, 1, 1, 0, 0, 0, 0), utc(1, 1, 1, 23, 59, 59, 0), utc(1, 1, 1, 0, 0, 0, 100),
			utc(1753, 1, 1, 0, 0, 0, 0), utc(2079, 6, 6, 23, 59, 0, 0),
			utc(9999, 12, 31, 23, 59, 59, 999999900), time.Date(2024, 3, 1, 12, 0, 0, 100, time.FixedZone("", 14*3600)),
			"ab ", "Άλφα Ωμέγα", "Kraków 東京 😀", big, "text", "ü ", "𝄞 surrogate 😀", "ntext ж",
			[]byte{0, 1, 2, 0xff}, bigBytes, []byte{9}, u1, "<a b=\"1\">"+big+"</a>"),
		row(2, false, int64(0), int64(32767), int64(2147483647), int64(9223372036854775807),
			keyrange.Decimal("9999999999999999999999999999.9999999999"), keyrange.Decimal("-999.99"),
			keyrange.Decimal("-922337203685477.5808"), keyrange.Decimal("214748.3647"), -0.1, float64(float32(-1e-30)),
			utc(9999, 12, 31, 0, 0, 0, 0), utc(1, 1, 1, 0, 0, 1, 0), utc(1, 1, 1, 23, 59, 59, 999999900),
			utc(9999, 12, 31, 23, 59, 59, 997000000), utc(1900, 1, 1, 0, 0, 0, 0),
			utc(2024, 3, 1, 12, 0, 0, 200), time.Date(2024, 3, 1, 12, 0, 0, 0, time.FixedZone("", -12*3600-45*60)),
			"", "", "", "", "", "", "", "",
			[]byte{0, 0, 0, 0}, []byte{}, []byte{}, u2, "<a/>"),
		row(3),
	}
	for i := 1; i < len(cols); i++ {
		rows[2] = append(rows[2], nil)
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "kinds", Columns: cols, Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_kinds"}); err != nil {
		t.Fatal(err)
	}
	ci, err := db.CaptureInstance(context.Background(), "dbo_kinds")
	if err != nil {
		t.Fatal(err)
	}
	return db, ci
}

// cells reads every value of rr as fake.ArrowValue gives it, by column.
func cells(t *testing.T, rr array.RecordReader) map[string][]any {
	t.Helper()
	defer rr.Release()
	out := map[string][]any{}
	for rr.Next() {
		rec := rr.RecordBatch()
		for j, f := range rec.Schema().Fields() {
			for i := range int(rec.NumRows()) {
				v, err := fake.ArrowValue(rec.Column(j), i)
				if err != nil {
					t.Fatal(err)
				}
				out[f.Name] = append(out[f.Name], v)
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryTypeOverTheWire: every type, sent by the TDS server as SQL
// Server encodes it and decoded by go-mssqldb and source/sqlserver, reads
// into the same Arrow values as the fake's own read, with the DSN's "guid
// conversion" off and on, and with a small packet size.
func TestEveryTypeOverTheWire(t *testing.T) {
	db, ci := everyType(t)
	ctx := context.Background()
	want := cells(t, must(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{})))
	for _, conv := range []string{"false", "true"} {
		srv, err := tdsfake.Start(ctx, db, tdsfake.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(srv.DSN("cdcsnap"))
		q := u.Query()
		q.Set("guid conversion", conv)
		q.Set("packet size", "512")
		u.RawQuery = q.Encode()
		sdb, err := sqlserver.Open(u.String())
		if err != nil {
			t.Fatal(err)
		}
		src, err := sqlserver.New(sdb, sqlserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		wci, err := src.CaptureInstance(ctx, "dbo_kinds")
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range wci.Columns {
			if c.Declared() != ci.Columns[i].Declared() || c.Collation != ci.Columns[i].Collation {
				t.Errorf("guid conversion %s: column %s described as %s %s, the fake has %s %s", conv, c.Name, c.Declared(), c.Collation, ci.Columns[i].Declared(), ci.Columns[i].Collation)
			}
		}
		got := cells(t, must(src.ReadRange(ctx, wci, keyrange.Range{}, source.ReadOptions{})))
		for name, w := range want {
			if !reflect.DeepEqual(got[name], w) {
				t.Errorf("guid conversion %s: column %s over the wire %s, the fake %s", conv, name, brief(got[name]), brief(w))
			}
		}
		sdb.Close()
		srv.Close()
	}
}

func brief(v []any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
