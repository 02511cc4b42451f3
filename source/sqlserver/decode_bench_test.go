package sqlserver

import (
	"strconv"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/source"
)

// benchShape is the benchmark's bronze shape (internal/bench's Gen): the
// captured columns, and rows of the driver values go-mssqldb returns for
// them (FACTS.md F43).
func benchShape() ([]source.Column, [][]any) {
	cols := []source.Column{
		{Name: "id", Type: "bigint"},
		{Name: "customer", Type: "varchar", Length: 100, Collation: "SQL_Latin1_General_CP1_CI_AS", CodePage: 1252},
		{Name: "status", Type: "varchar", Length: 20, Collation: "SQL_Latin1_General_CP1_CI_AS", CodePage: 1252},
		{Name: "note", Type: "nvarchar", Length: 400, Nullable: true},
		{Name: "amount", Type: "decimal", Precision: 18, Scale: 4},
		{Name: "created", Type: "datetime2", Scale: 7},
		{Name: "shipped", Type: "datetime2", Scale: 7, Nullable: true},
		{Name: "remark", Type: "nvarchar", Length: 400, Nullable: true},
	}
	rows := make([][]any, 1024)
	for i := range rows {
		var shipped, remark any
		if i%3 == 0 {
			shipped = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
		}
		if i%10 == 3 {
			remark = "a short remark of some words"
		}
		rows[i] = []any{int64(i), "Customer " + strconv.Itoa(100000+i), "shipped", "the order was placed by customer via web shop and paid with card",
			[]byte(strconv.Itoa(1000000+i*37) + ".1234"), time.Date(2025, 12, 1, 8, 0, i%60, 123456700, time.UTC), shipped, remark}
	}
	return cols, rows
}

// BenchmarkDecodeRows measures this package's decode alone: driver values
// of the benchmark shape into Arrow record batches of 8192 rows. One op is
// one row; allocs/op counts the allocations of every value of a row.
func BenchmarkDecodeRows(b *testing.B) {
	cols, rows := benchShape()
	benchDecode(b, cols, rows)
}

// BenchmarkDecodeRowsCast is BenchmarkDecodeRows with the values the
// range read's casts make go-mssqldb return (FACTS.md F90, F91): nvarchar
// as UTF-16 bytes, decimal(18,4) as its unscaled int64.
func BenchmarkDecodeRowsCast(b *testing.B) {
	cols, rows := benchShape()
	for _, r := range rows {
		for _, j := range []int{3, 7} {
			if s, ok := r[j].(string); ok {
				r[j] = utf16le(s)
			}
		}
		n, _ := decimalToNum(r[4].([]byte), 18, 4)
		r[4] = int64(n.LowBits())
	}
	benchDecode(b, cols, rows)
}

// benchDecode appends rows round and round, in record batches of 8192.
func benchDecode(b *testing.B, cols []source.Column, rows [][]any) {
	d, err := newTableDecoder(cols, decodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Release()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := d.Append(rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
		if d.Rows() == 8192 {
			d.Flush().Release()
		}
	}
}
